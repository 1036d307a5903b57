"""The injectivity check (docs/theory.md §0): hashed keys resolved exactly, and the decision by parts.

The generic check is compared with a naive twin (a dict from an observation's bytes to
the first state that rendered it) on renderers with planted collisions; the decision by
parts with the exhaustive check, on small gridscenes and on modalities built with
deliberately non-injective parts. gridscene's renderers, now built from their parts,
are compared bit for bit with a frozen copy of the renderers they replaced.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import prhsim.worlds._equal_renders as renders
import prhsim.worlds._injectivity_parts as inj_parts
from prhsim.worlds import InjectivityReport, Modality, Part, Parts, gridscene, injectivity_check

# ------------------------------------------------------------------------------------------------
# the naive twin and helpers


def naive_pairs(render_states, states, decimals=None):
    """Every state paired with the first (smallest) state whose observation has the same bytes."""
    states = np.sort(np.asarray(states, dtype=np.int64))
    obs = np.asarray(render_states(states))
    rows = obs.reshape(len(states), -1)
    if decimals is not None:
        rows = np.round(rows.astype(np.float64), decimals) + 0.0
    first, pairs = {}, []
    for s, row in zip(states, rows):
        key = np.ascontiguousarray(row).tobytes()
        if key in first:
            pairs.append((int(first[key]), int(s)))
        else:
            first[key] = s
    return sorted(pairs)


def as_pairs(report, n_nuisance):
    return [(z * n_nuisance + n, z2 * n_nuisance + n2) for (z, n), (z2, n2) in report.collisions]


def table_modality(table, assign, n_nuisance, name="table"):
    """A modality rendering row ``assign[z·|N| + n]`` of ``table``: collisions planted by the assignment."""
    table, assign = np.asarray(table), np.asarray(assign)

    def render(z, n):
        return table[assign[np.asarray(z) * n_nuisance + np.asarray(n)]]

    return Modality(name, np.full(n_nuisance, 1.0 / n_nuisance), render)


def constant_hash(words):
    return np.zeros(words.shape[0], dtype=np.uint64)


def exact_pairs(m, states, decimals=None):
    f, o = renders.exact_pairs(m.render_states, np.asarray(states, dtype=np.int64), decimals)
    return list(zip(f.tolist(), o.tolist()))


# ------------------------------------------------------------------------------------------------
# the generic check against the naive twin


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.int64, np.float32, np.float64, np.bool_])
@pytest.mark.parametrize("width", [1, 3, 5, 8, 13])
def test_rows_differing_only_in_trailing_bytes_are_distinct(dtype, width):
    """Rows of any byte length (padded to whole words) differ when their last coordinate does."""
    base = np.zeros((6, width), dtype=dtype)
    base[:, 0] = 1  # rows 0, 2 and 5: the plain pattern
    base[1, -1] = base[3, -1] = not base[0, -1]  # rows 1 and 3 differ from it in their last value only
    base[4, 0] = 0  # row 4 differs from it in its first value
    m = table_modality(base, np.arange(6), 2)
    expected = naive_pairs(m.render_states, np.arange(6))
    assert exact_pairs(m, np.arange(6)) == expected
    report = injectivity_check(m, 3, max_report=100)
    assert as_pairs(report, 2) == expected
    assert (0, 1) not in expected and {(0, 2), (0, 5), (1, 3)} <= set(expected)


def test_decimals_round_and_fold_negative_zero():
    table = np.array([[0.0, 1.0], [-0.0, 1.0], [0.0, 1.00004], [0.0, 1.2], [-1e-9, 1.0]])
    m = table_modality(table, np.arange(5), 1)
    assert naive_pairs(m.render_states, np.arange(5)) == []  # byte for byte: all distinct
    assert injectivity_check(m, 5).injective
    rounded = injectivity_check(m, 5, decimals=3, max_report=100)
    assert as_pairs(rounded, 1) == [(0, 1), (0, 2), (0, 4)] == naive_pairs(m.render_states, np.arange(5), 3)
    assert rounded.collisions[0] == ((0, 0), (1, 0))


def test_int_observations_with_decimals_compare_as_rounded_floats():
    table = np.array([[1, 2, 3], [1, 2, 3], [1, 2, 4]], dtype=np.int8)
    m = table_modality(table, np.arange(3), 1)
    assert as_pairs(injectivity_check(m, 3, decimals=2), 1) == [(0, 1)]


def test_a_constant_hash_never_reports_a_false_collision(monkeypatch):
    """Every state shares one key: the exact comparison alone decides, and finds the naive twin's pairs."""
    rng = np.random.default_rng(0)
    table = rng.normal(size=(40, 5))
    injective = table_modality(table, np.arange(40), 4)
    assign = rng.integers(0, 25, size=40)
    lossy = table_modality(table, assign, 4)
    monkeypatch.setattr(renders, "_hash_words", constant_hash)
    report = injectivity_check(injective, 10)
    assert report.injective and report.method == "exhaustive" and report.checked == 40
    expected = naive_pairs(lossy.render_states, np.arange(40))
    assert expected and as_pairs(injectivity_check(lossy, 10, max_report=1000), 4) == expected
    assert as_pairs(injectivity_check(lossy, 10, max_report=3), 4) == expected[:3]
    monkeypatch.setattr(renders, "CHUNK", 7)  # one key group of 40 states > CHUNK: resolved a chunk at a time
    assert injectivity_check(injective, 10).injective
    assert as_pairs(injectivity_check(lossy, 10, max_report=1000), 4) == expected


def test_hash_keys_depend_on_every_word_and_position():
    words = np.zeros((4, 5), dtype=np.uint64)
    words[1, 4] = 1
    words[2, 0] = 1
    words[3] = words[0]
    keys = renders._hash_words(words)
    assert keys[0] == keys[3] and len(set(keys[:3].tolist())) == 3
    rows = np.arange(12, dtype=np.uint8).reshape(2, 6)
    assert renders.row_words(rows, None).shape == (2, 1)  # 6 bytes padded to one word


@st.composite
def planted_renderers(draw):
    n_z, n_n = draw(st.integers(1, 10)), draw(st.integers(1, 4))
    total = n_z * n_n
    dtype = draw(st.sampled_from([np.uint8, np.int16, np.int64, np.float32, np.float64, np.bool_]))
    width = draw(st.integers(1, 6))
    distinct = draw(st.integers(1, total))
    values = draw(st.lists(st.sampled_from([0.0, -0.0, 1.0, 0.5, 0.5004, 2.0, -3.0]),
                           min_size=distinct * width, max_size=distinct * width))
    table = np.array(values).reshape(distinct, width)
    table = table.astype(dtype) if dtype is not np.bool_ else table > 0.7
    assign = np.array(draw(st.lists(st.integers(0, distinct - 1), min_size=total, max_size=total)))
    decimals = draw(st.sampled_from([None, 2])) if np.issubdtype(table.dtype, np.floating) else None
    return table_modality(table, assign, n_n), n_z, decimals


@settings(max_examples=150)
@given(planted_renderers(), st.booleans(), st.sampled_from([3, 65_536]))
def test_generic_check_finds_the_naive_twins_collisions(case, constant, chunk):
    m, n_z, decimals = case
    expected = naive_pairs(m.render_states, np.arange(n_z * m.n_nuisance), decimals)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(renders, "CHUNK", chunk)
        if constant:
            mp.setattr(renders, "_hash_words", constant_hash)
        report = injectivity_check(m, n_z, decimals=decimals, max_report=10_000)
        first = injectivity_check(m, n_z, decimals=decimals, max_report=2)
    assert as_pairs(report, m.n_nuisance) == expected
    assert as_pairs(first, m.n_nuisance) == expected[:2]
    assert report.exhaustive and report.checked == n_z * m.n_nuisance and report.injective == (not expected)


def test_sampled_mode_checks_the_same_sample_as_before():
    rng = np.random.default_rng(3)
    assign = rng.integers(0, 300, size=1000)
    m = table_modality(rng.normal(size=(300, 3)), assign, 2)
    report = injectivity_check(m, 500, limit=200, rng=7, max_report=10_000)
    assert not report.exhaustive and report.method == "sampled" and report.checked == 200
    sample = np.sort(np.random.default_rng(7).choice(1000, size=200, replace=False))
    assert as_pairs(report, 2) == naive_pairs(m.render_states, sample)


def test_report_method_defaults_follow_exhaustive_and_are_validated():
    assert InjectivityReport("x", 4, True, ()).method == "exhaustive"
    assert InjectivityReport("x", 4, False, ()).method == "sampled"
    assert InjectivityReport("x", 4, True, (), method="parts").method == "parts"
    with pytest.raises(ValueError, match="method must be one of"):
        InjectivityReport("x", 4, True, (), method="guessed")
    with pytest.raises(ValueError, match="contradicts exhaustive=False"):
        InjectivityReport("x", 4, False, (), method="parts")
    assert injectivity_check(Modality("free", [0.5, 0.5]), 3).method == "renderer-free"
    with pytest.raises(ValueError, match="max_report must be an integer >= 1"):
        injectivity_check(table_modality(np.eye(2), [0, 1], 1), 2, max_report=0)


# ------------------------------------------------------------------------------------------------
# the decision by parts


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("objects", [1, 2])
def test_gridscene_by_parts_agrees_with_the_exhaustive_check(size, objects):
    scene = gridscene(size, objects, 2, 2)
    for m in scene.modalities(rng=1):
        fast = injectivity_check(m, scene.n)
        slow = injectivity_check(m, scene.n, by_parts=False)
        assert slow.method == "exhaustive" and slow.injective and slow.checked == scene.n * m.n_nuisance
        assert fast.injective and fast.exhaustive and fast.checked == slow.checked
        assert fast.method == ("exhaustive" if m.name == "symbolic" else "parts")
        if m.parts is not None:  # rounding commutes with the assembly: decided by parts with decimals too
            assert injectivity_check(m, scene.n, decimals=3).method == "parts"


def test_gridscene_by_parts_decides_scenes_too_large_to_render():
    scene = gridscene(8, 4, 6, 7)  # (64 · 42)^4 ≈ 5e13 states
    for m in scene.modalities(rng=0)[:2]:
        report = injectivity_check(m, scene.n)
        assert report.method == "parts" and report.exhaustive and report.injective
        assert report.checked == scene.n * m.n_nuisance


def _toy(parts, sizes, n_nuisance, **kw):
    return Modality("toy", np.full(n_nuisance, 1.0 / n_nuisance), factor_sizes=sizes, parts=Parts(**kw, parts=parts))


def _column(j, scale=1):
    return lambda values, n: (scale * values[:, j:j + 1]).astype(np.int16)


def _agrees_with_exhaustive(m):
    n_states = m.n_states
    by_parts = injectivity_check(m, n_states, max_report=50)
    expected = naive_pairs(m.render_states, np.arange(n_states * m.n_nuisance))
    assert by_parts.injective == (not expected)
    for a, b in as_pairs(by_parts, m.n_nuisance):  # every witness is a real collision
        obs = m.render_states(np.array([a, b]))
        assert a != b and np.array_equal(obs[0], obs[1])
    if by_parts.method != "parts":  # undecided: the generic check ran
        assert as_pairs(by_parts, m.n_nuisance) == expected[:50]
    return by_parts


def test_parts_of_an_injective_toy_decide():
    nuisance = Part((), lambda values, n: n[:, None].astype(np.int16), "n")
    m = _toy((Part((0,), _column(0)), Part((1, 2), lambda v, n: (v[:, 0] * 2 + v[:, 1])[:, None].astype(np.int16)),
              nuisance), (3, 2, 2), 3, shape=(3,))
    report = _agrees_with_exhaustive(m)
    assert report.method == "parts" and report.injective


def test_a_part_ignoring_a_factor_is_a_collision_within_one_nuisance_value():
    m = _toy((Part((0, 1), _column(0)), Part((), lambda v, n: n[:, None].astype(np.int16))), (3, 2), 2, shape=(2,))
    report = _agrees_with_exhaustive(m)
    assert report.method == "parts" and not report.injective
    (z, n), (z2, n2) = report.collisions[0]
    assert n == n2 and z != z2 and z // 2 == z2 // 2  # same factor 0, another factor 1


def test_two_nuisance_values_rendering_alike_collide_across_nuisance():
    lossy_n = Part((), lambda v, n: (n // 2)[:, None].astype(np.int16), "n // 2")
    m = _toy((Part((0,), _column(0)), lossy_n), (3,), 4, shape=(2,))
    report = _agrees_with_exhaustive(m)
    assert report.method == "parts" and not report.injective
    assert report.collisions[0] == ((0, 0), (0, 1))
    # separated by another part that reads n: injective again
    tagged = Part((0,), lambda v, n: (v[:, :1] + 10 * (n[:, None] % 2)).astype(np.int16))
    m2 = _toy((tagged, lossy_n), (3,), 4, shape=(2,))
    assert _agrees_with_exhaustive(m2).injective


def test_images_meeting_in_one_part_only_are_no_collision():
    """n and n' collide only if every part's images meet; one disjoint part separates them."""
    shared = Part((0,), lambda v, n: (v[:, :1] + n[:, None]).astype(np.int16))  # images under n, n+1 overlap
    tag = Part((1,), lambda v, n: (v[:, :1] + 5 * n[:, None]).astype(np.int16))  # images disjoint across n
    m = _toy((shared, tag), (3, 2), 3, shape=(2,))
    assert _agrees_with_exhaustive(m).injective
    tag_overlapping = Part((1,), lambda v, n: (v[:, :1] + n[:, None]).astype(np.int16))
    report = _agrees_with_exhaustive(_toy((shared, tag_overlapping), (3, 2), 3, shape=(2,)))
    assert report.method == "parts" and not report.injective
    assert all(n != n2 for (_, n), (_, n2) in report.collisions)


def test_two_equal_parts_swapped_by_the_layout_fall_back_to_the_generic_check():
    """Layouts that differ are only separated by a coordinate's range; two equal parts swapped are not."""
    same = (Part((0,), _column(0)), Part((1,), _column(0)))
    swap = dict(shape=(2,), layouts=np.array([[0, 1], [1, 0]]), layout_of=lambda n: n % 2)
    m = _toy(same, (3, 3), 2, **swap)
    report = _agrees_with_exhaustive(m)
    assert report.method == "exhaustive" and not report.injective
    assert ((0, 0), (0, 1)) in report.collisions  # (a, a) reads the same both ways
    assert ((1, 0), (3, 1)) in report.collisions  # (0, 1) forward is (1, 0) reversed
    # a constant name token per part makes the layouts distinguishable at coordinate 0: decided by parts
    named = (Part((0,), lambda v, n: np.c_[np.zeros(len(n)), v[:, 0]].astype(np.int16)),
             Part((1,), lambda v, n: np.c_[np.ones(len(n)), v[:, 0]].astype(np.int16)))
    m2 = _toy(named, (3, 3), 2, shape=(4,), layouts=np.array([[0, 1, 2, 3], [2, 3, 0, 1]]), layout_of=lambda n: n % 2)
    report2 = _agrees_with_exhaustive(m2)
    assert report2.method == "parts" and report2.injective
    # even and odd tokens never meet, but their ranges overlap at every coordinate: undecided, hence generic
    parity = (Part((0,), _column(0, 2)), Part((1,), lambda v, n: (2 * v[:, :1] + 1).astype(np.int16)))
    report3 = _agrees_with_exhaustive(_toy(parity, (3, 3), 2, **swap))
    assert report3.method == "exhaustive" and report3.injective


def test_parts_fall_back_when_their_tables_would_be_too_large(monkeypatch):
    nuisance = Part((), lambda v, n: n[:, None].astype(np.int16), "n")
    m = _toy((Part((0,), _column(0)), nuisance), (3,), 3, shape=(2,))  # the first part's renders meet across n
    assert injectivity_check(m, 3).method == "parts"
    monkeypatch.setattr(inj_parts, "PARTS_MAX_JOIN", 8)
    report = injectivity_check(m, 3)
    assert report.method == "exhaustive" and report.injective
    monkeypatch.setattr(inj_parts, "PARTS_MAX_JOIN", 10**6)
    monkeypatch.setattr(inj_parts, "PARTS_MAX_NUISANCE", 2)
    assert injectivity_check(m, 3).method == "exhaustive"


@st.composite
def parts_modalities(draw):
    """Random modalities by parts: random factor groups, small-alphabet tables, random layouts."""
    sizes = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    n_nuisance = draw(st.integers(1, 3))
    n_parts = draw(st.integers(1, len(sizes)))
    owner = [draw(st.integers(0, n_parts - 1)) for _ in sizes]
    groups = [tuple(f for f, o in enumerate(owner) if o == p) for p in range(n_parts)]
    if draw(st.booleans()):
        groups.append(())  # a part of the nuisance alone
    alphabet = draw(st.integers(1, 8))
    parts = []
    for p, group in enumerate(groups):
        count = int(np.prod([sizes[f] for f in group], dtype=np.int64))
        width = draw(st.integers(1, 2))
        reads_n = draw(st.booleans())
        rows = count * (n_nuisance if reads_n else 1)
        table = np.array(draw(st.lists(st.integers(0, alphabet - 1), min_size=rows * width, max_size=rows * width)),
                         dtype=np.int16).reshape(rows, width)
        psizes = tuple(sizes[f] for f in group)

        def render(values, n, table=table, psizes=psizes, reads_n=reads_n):
            a = np.ravel_multi_index(tuple(values.T), psizes) if psizes else np.zeros(len(n), dtype=np.int64)
            return table[a * n_nuisance + n if reads_n else a]

        parts.append(Part(group, render, f"part {p}"))
    width = 0
    for part in parts:  # widths: render one row of each
        width += part.render(np.zeros((1, len(part.factors)), dtype=np.int64), np.zeros(1, dtype=np.int64)).shape[1]
    n_layouts = draw(st.integers(1, 2))
    layouts = np.array([draw(st.permutations(range(width))) for _ in range(n_layouts)])
    of = np.array([draw(st.integers(0, n_layouts - 1)) for _ in range(n_nuisance)])
    kw = dict(shape=(width,), layouts=layouts, layout_of=(lambda n: of[n]) if n_layouts > 1 else None)
    return _toy(tuple(parts), sizes, n_nuisance, **kw)


@settings(max_examples=200)
@given(parts_modalities())
def test_decision_by_parts_agrees_with_the_naive_twin(m):
    _agrees_with_exhaustive(m)


# ------------------------------------------------------------------------------------------------
# declarations are validated; the renderer is built from the parts


def test_parts_declarations_are_validated():
    col = Part((0,), _column(0))
    with pytest.raises(ValueError, match="give a renderer or parts, not both"):
        Modality("x", [1.0], lambda z, n: z, factor_sizes=(2,), parts=Parts((col,), (1,)))
    with pytest.raises(ValueError, match="needs factor_sizes"):
        Modality("x", [1.0], parts=Parts((col,), (1,)))
    with pytest.raises(ValueError, match=r"must partition the factors 0..1 .*got \[\(0,\)\]"):
        Modality("x", [1.0], factor_sizes=(2, 2), parts=Parts((col,), (1,)))
    with pytest.raises(ValueError, match="n_states = 3 but the factors"):
        Modality("x", [1.0], n_states=3, factor_sizes=(2,), parts=Parts((col,), (1,)))
    with pytest.raises(ValueError, match="permutation of 0..1"):
        Parts((col, col), (2,), layouts=np.array([[0, 0]]))
    with pytest.raises(ValueError, match=r"layouts must have shape \(L, 2\)"):
        Parts((col,), (2,), layouts=np.array([[0, 1, 2]]))
    with pytest.raises(ValueError, match="several layouts need layout_of"):
        Parts((col,), (2,), layouts=np.array([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="distinct non-negative"):
        Part((0, 0), _column(0))
    mixed = Modality("x", [1.0], factor_sizes=(2, 2),
                     parts=Parts((col, Part((1,), lambda v, n: v[:, :1].astype(np.float64))), (2,)))
    with pytest.raises(ValueError, match="must render one dtype"):
        mixed.render(np.array([0]), np.array([0]))
    with pytest.raises(ValueError, match="must render one dtype"):
        injectivity_check(mixed, 4)
    wide = Modality("x", [1.0], factor_sizes=(2,), parts=Parts((col,), (2,)))
    with pytest.raises(ValueError, match=r"the parts' rows have 1 values, the observation shape \(2,\) has 2"):
        wide.render(np.array([0]), np.array([0]))
    short = Modality("x", [1.0], factor_sizes=(2,), parts=Parts((Part((0,), lambda v, n: v[:1]),), (1,)))
    with pytest.raises(ValueError, match=r"part '' of modality 'x' returned 1 rows for 2 states"):
        short.render(np.array([0, 1]), np.array([0, 0]))


def test_a_part_must_keep_its_row_shape_and_dtype_across_calls():
    """The proof needs fixed widths and one dtype: a part that changes them between calls is refused."""
    fickle = Part((0,), lambda v, n: np.zeros((len(n), 1 + (len(n) > 1)), dtype=np.int16), "fickle")
    m = Modality("x", [1.0], factor_sizes=(3,), parts=Parts((fickle,), (1,)))
    assert m.render(np.array([0]), np.array([0])).shape == (1, 1)
    with pytest.raises(ValueError, match=r"part 'fickle' of modality 'x' must render rows of one shape"):
        m.render(np.array([0, 1]), np.array([0, 0]))
    drifting = Part((0,), lambda v, n: v.astype(np.int16 if len(n) == 1 else np.int32), "drifting")
    m2 = Modality("y", [1.0], factor_sizes=(3,), parts=Parts((drifting,), (1,)))
    m2.render(np.array([2]), np.array([0]))
    with pytest.raises(ValueError, match=r"must render one dtype: part 'drifting' rendered int32"):
        injectivity_check(m2, 3)


def test_layouts_with_equal_permutations_are_one_layout():
    same = (Part((0,), _column(0)), Part((1,), _column(0)))
    twice = dict(shape=(2,), layouts=np.array([[1, 0], [1, 0]]), layout_of=lambda n: n % 2)
    nuisance_free = _toy(same, (2, 2), 2, **twice)  # n is invisible: (z, 0) and (z, 1) collide
    report = _agrees_with_exhaustive(nuisance_free)
    assert report.method == "parts" and report.collisions[0] == ((0, 0), (0, 1))


def test_parts_renderer_refuses_states_outside_its_world():
    m = gridscene(2, 1, 2, 2).modalities(rng=0)[0]
    assert m.n_states == 16 and m.parts is not None and m.renderer_free is False
    with pytest.raises(ValueError, match=r"modality 'pixels' has 16 states; got z = 16"):
        m.render(np.array([3, 16]), np.array([0, 0]))
    with pytest.raises(ValueError, match=r"modality 'pixels' has 4 nuisance values; got n = 4"):
        m.render(np.array([3]), np.array([4]))


# ------------------------------------------------------------------------------------------------
# gridscene's renderers, built from parts, render what they rendered before, bit for bit

_GLYPHS = np.array(
    [[[1, 1], [1, 1]], [[1, 0], [0, 1]], [[1, 1], [0, 0]], [[0, 1], [1, 0]], [[1, 0], [0, 0]], [[1, 0], [1, 0]]],
    dtype=np.float64,
)
_HUES = np.array(
    [[0.9, 0.1, 0.1], [0.95, 0.55, 0.1], [0.9, 0.9, 0.15], [0.2, 0.8, 0.2], [0.15, 0.8, 0.85], [0.2, 0.3, 0.95],
     [0.65, 0.2, 0.85]]
)
_BACKGROUNDS = np.array([[0.05, 0.05, 0.05], [0.35, 0.35, 0.35]])
_LIGHTING = np.array([1.0, 0.75])


def frozen_pixels(scene):
    """The pixels renderer as it was before it was built from parts (frozen copy)."""
    G, O = scene.size, scene.n_objects
    n_bg = len(_BACKGROUNDS)
    bg_u8 = np.round(255 * _LIGHTING[:, None, None] * _BACKGROUNDS[None]).astype(np.uint8)
    hue_u8 = np.round(255 * _LIGHTING[:, None, None] * _HUES[None]).astype(np.uint8)

    def render(z, n):
        attrs = scene.decode(z)
        light = n // n_bg
        img = np.empty((len(z), 4 * G, 4 * G, 3), dtype=np.uint8)
        img[:] = bg_u8[light, n % n_bg][:, None, None, :]
        rows = np.arange(len(z))
        for o in range(O):
            glyph = _GLYPHS[attrs["shape"][:, o]]
            hue = hue_u8[light, attrs["colour"][:, o]]
            top = 4 * attrs["row"][:, o] + 2 * (o // 2)
            left = 4 * attrs["col"][:, o] + 2 * (o % 2)
            for dy in range(2):
                for dx in range(2):
                    on = glyph[:, dy, dx] > 0
                    img[rows[on], top[on] + dy, left[on] + dx] = hue[on]
        return img

    return render


def frozen_caption(scene):
    """The caption renderer as it was before it was built from parts (frozen copy)."""
    O, C, S = scene.n_objects, scene.n_colours, scene.n_shapes
    AT, ROW, COL, SEP, NAME0 = 0, 1, 2, 3, 4
    COLOUR0 = NAME0 + O
    SHAPE0 = COLOUR0 + 2 * C
    NUM0 = SHAPE0 + 2 * S

    def render(z, n):
        attrs = scene.decode(z)
        synonym, reverse, col_first = n // 4, (n // 2) % 2, n % 2
        s = len(z)
        clauses = []
        for o in range(O):
            row_tok, col_tok = NUM0 + attrs["row"][:, o], NUM0 + attrs["col"][:, o]
            first = np.where(col_first == 1, COL, ROW)
            first_val = np.where(col_first == 1, col_tok, row_tok)
            second = np.where(col_first == 1, ROW, COL)
            second_val = np.where(col_first == 1, row_tok, col_tok)
            clauses.append(np.stack([
                np.full(s, NAME0 + o), COLOUR0 + 2 * attrs["colour"][:, o] + synonym,
                SHAPE0 + 2 * attrs["shape"][:, o] + synonym, np.full(s, AT),
                first, first_val, second, second_val, np.full(s, SEP),
            ], axis=1))
        forward = np.concatenate(clauses, axis=1)
        if O == 1:
            clause = clauses[0]
            backward = np.concatenate([clause[:, 3:8], clause[:, :3], clause[:, 8:]], axis=1)
        else:
            backward = np.concatenate(clauses[::-1], axis=1)
        return np.where(reverse[:, None] == 1, backward, forward).astype(np.int32)

    return render


def frozen_symbolic(scene, rng):
    """The symbolic renderer (unchanged; frozen copy)."""
    gen = np.random.default_rng(rng)
    O, G, S, C = scene.n_objects, scene.size, scene.n_shapes, scene.n_colours
    dim = O * (2 + S + C)
    maps = gen.normal(size=(3, dim, dim)) / np.sqrt(dim)
    offsets = gen.normal(size=(3, dim))

    def render(z, n):
        attrs = scene.decode(z)
        parts = []
        for o in range(O):
            parts += [attrs["col"][:, o:o + 1] / (G - 1), attrs["row"][:, o:o + 1] / (G - 1),
                      np.eye(S)[attrs["shape"][:, o]], np.eye(C)[attrs["colour"][:, o]]]
        v = np.concatenate(parts, axis=1)
        return np.einsum("sij,sj->si", maps[n], v) + offsets[n]

    return render


@settings(max_examples=40)
@given(st.integers(2, 9), st.integers(1, 4), st.integers(2, 6), st.integers(2, 7), st.integers(0, 2**32 - 1))
def test_gridscene_renders_bitwise_as_before(size, objects, shapes, colours, seed):
    scene = gridscene(size, objects, shapes, colours)
    rng = np.random.default_rng(seed)
    pixels, caption, symbolic = scene.modalities(rng=5)
    frozen = (frozen_pixels(scene), frozen_caption(scene), frozen_symbolic(scene, 5))
    for m, old in zip((pixels, caption, symbolic), frozen):
        z = rng.integers(0, scene.n, size=300)
        n = rng.integers(0, m.n_nuisance, size=300)
        new, before = m.render(z, n), old(z, n)
        assert new.dtype == before.dtype and new.shape == before.shape
        assert new.tobytes() == before.tobytes(), m.name


def test_default_gridscene_renders_every_state_as_before():
    scene = gridscene()
    pixels, caption, symbolic = scene.modalities(rng=0)
    for m, old in ((pixels, frozen_pixels(scene)), (caption, frozen_caption(scene)),
                   (symbolic, frozen_symbolic(scene, 0))):
        states = np.arange(scene.n * m.n_nuisance)
        z, n = states // m.n_nuisance, states % m.n_nuisance
        for i in range(0, states.size, 40_000):
            part = slice(i, i + 40_000)
            assert m.render(z[part], n[part]).tobytes() == old(z[part], n[part]).tobytes()
