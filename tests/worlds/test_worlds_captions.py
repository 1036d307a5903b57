"""Captions as token sequences: sampling, spans, token accounting, and the exact span and next-token laws against naive twins."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

from support import assert_close, dense
from prhsim.worlds import SpanLaw, caption_law, gridscene, next_token_law, span_world
from prhsim.worlds._captions import spans_of


@pytest.fixture(scope="module")
def tiny():
    scene = gridscene(2, objects=1, shapes=2, colours=2)  # 16 states, captions of 9 tokens, 8 wordings
    return scene, caption_law(scene)


def test_caption_law_shapes_and_vocabulary(tiny):
    scene, law = tiny
    assert (law.n_states, law.length, law.vocab_size, law.pad) == (16, 9, 15, 15)
    assert law.decode(law.captions([0], [0])) == ["alpha red square at row zero column zero ;"]


def test_records_count_every_caption_token(tiny):
    _, law = tiny
    records = law.sample(7, 3, rng=0)
    assert records.tokens.shape == (7, 3, law.length)
    assert records.tokens_seen() == 7 * 3 * law.length
    for i, c in itertools.product(range(7), range(3)):  # every caption renders its own (z, n)
        assert np.array_equal(records.tokens[i, c], law.captions([records.states[i]], [records.nuisance[i, c]])[0])


@pytest.mark.parametrize("wording", ["independent", "shared"])
def test_pairs_follow_the_world_and_the_wording(tiny, wording):
    scene, law = tiny
    records = law.sample_pairs(scene.world, 4000, wording=wording, rng=1)
    assert records.paired and records.tokens_seen() == 4000 * 2 * law.length
    shared = records.nuisance[:, 0] == records.nuisance[:, 1]
    assert shared.all() if wording == "shared" else 0.05 < shared.mean() < 0.25  # 1/8 by chance
    Pi = dense(scene.world.to_finite().Pi)
    assert np.all(Pi[records.states[:, 0], records.states[:, 1]] > 0)  # every pair is a positive pair of π
    for i in range(0, 4000, 397):
        assert np.array_equal(records.tokens[i], law.captions(records.states[i], records.nuisance[i]))


def test_span_table_is_a_law():
    start, length, weight = SpanLaw(3, 5).table(9)
    assert_close(weight.sum(), 1.0)
    assert set(length) == {3, 4, 5} and np.all(start + length <= 9)
    for L in (3, 4, 5):  # length uniform, start uniform given the length
        assert_close(weight[length == L].sum(), 1 / 3)


@given(st.lists(st.integers(0, 20), min_size=1, max_size=12), st.data())
def test_spans_keep_their_positions(row, data):
    T = len(row)
    start = data.draw(st.integers(0, T - 1))
    length = data.draw(st.integers(1, T - start))
    out = spans_of(np.array([row]), np.array([start]), np.array([length]), pad=99)[0]
    naive = [row[j] if start <= j < start + length else 99 for j in range(T)]
    assert out.tolist() == naive


def test_cut_draws_every_length_and_start(tiny):
    _, law = tiny
    caption = law.captions(np.zeros(20000, dtype=int), np.zeros(20000, dtype=int))
    spans = SpanLaw(4).cut(caption, law.pad, rng=2)
    kept = spans != law.pad
    lengths = kept.sum(axis=1)
    starts = kept.argmax(axis=1)
    assert set(lengths) == set(range(4, 10))
    for L in range(4, 10):  # the start is uniform on 0..T-L given the length
        counts = np.bincount(starts[lengths == L], minlength=10 - L)
        assert counts.size == 10 - L and counts.min() > 0.6 * counts.mean()
    assert np.all(kept.cumsum(axis=1)[np.arange(20000), starts + lengths - 1] == lengths)  # contiguous
    assert np.array_equal(spans[kept], caption[kept])


def _naive_span_law(law, spans, view, world):
    """p and Π over distinct spans, from loops over (z, n), (z', n') and every pair of spans."""
    start, length, weight = spans.table(law.length)
    n_z, n_n = law.n_states, law.modality.n_nuisance
    Pi_z = np.diag(law.p) if world is None else dense(world.to_finite().Pi)
    index: dict[bytes, int] = {}
    cells: dict[tuple[int, int], float] = {}

    def spans_of_caption(z, n):
        caption = law.captions([z], [n])[0]
        out = []
        for s, L, w in zip(start, length, weight):
            key = spans_of(caption[None], np.array([s]), np.array([L]), law.pad)[0].tobytes()
            out.append((index.setdefault(key, len(index)), w))
        return out

    table = {(z, n): spans_of_caption(z, n) for z in range(n_z) for n in range(n_n)}
    for z, z2 in zip(*np.nonzero(Pi_z)):
        for n, n2 in itertools.product(range(n_n), repeat=2):
            if view == "bad" and n != n2:
                continue
            w_pair = Pi_z[z, z2] * law.q[n] * (law.q[n2] if view == "good" else 1.0)
            for (x, wx), (y, wy) in itertools.product(table[z, n], table[z2, n2]):
                cells[x, y] = cells.get((x, y), 0.0) + w_pair * wx * wy
    Pi = np.zeros((len(index), len(index)))
    for (x, y), v in cells.items():
        Pi[x, y] += v
    keys = list(index)
    return keys, Pi


@pytest.mark.parametrize("view", ["good", "bad"])
@pytest.mark.parametrize("with_world", [False, True])
def test_span_world_matches_a_naive_enumeration(view, with_world):
    scene = gridscene(2, objects=1, shapes=2, colours=2, move=[(0.5, 0.6)], shape_change=[0.3], colour_change=[0.4])
    law = caption_law(scene)
    spans = SpanLaw(7)
    world = scene.world if with_world else None
    sw = span_world(law, spans, view, world)
    keys, Pi = _naive_span_law(law, spans, view, world)
    order = [keys.index(row.astype(np.int32).tobytes()) for row in sw.tokens]
    assert sorted(order) == list(range(len(keys)))
    assert_close(dense(sw.world.Pi), Pi[np.ix_(order, order)])
    assert_close(sw.world.p, Pi.sum(axis=1)[order])


def test_next_token_law_matches_a_naive_enumeration(tiny):
    _, law = tiny
    ntl = next_token_law(law)
    joint: dict[tuple[bytes, int], float] = {}
    T = law.length
    for z, n in itertools.product(range(law.n_states), range(law.modality.n_nuisance)):
        caption = law.captions([z], [n])[0]
        for t in range(1, T):
            prefix = np.where(np.arange(T) < t, caption, law.pad).astype(np.int32).tobytes()
            key = (prefix, int(caption[t]))
            joint[key] = joint.get(key, 0.0) + law.p[z] * law.q[n] / (T - 1)
    rows = {row.tobytes(): i for i, row in enumerate(ntl.contexts)}
    naive = np.zeros_like(ntl.joint)
    for (prefix, y), v in joint.items():
        naive[rows[prefix], y] += v
    assert_close(ntl.joint, naive)
    assert_close(ntl.joint.sum(), 1.0)
    caption = law.captions([3], [5])[0]  # the prefixes of caption z=3, n=5, lengths 1..T-1
    for t in range(1, T):
        assert np.array_equal(ntl.contexts[ntl.captions[3 * 8 + 5, t - 1]][:t], caption[:t])


def test_bad_requests_are_refused(tiny):
    scene, law = tiny
    with pytest.raises(ValueError, match="max_length"):
        SpanLaw(5, 3)
    with pytest.raises(ValueError, match="do not fit"):
        SpanLaw(12).lengths(9)
    with pytest.raises(ValueError, match="'good' or 'bad'"):
        span_world(law, SpanLaw(3), "ugly")
    with pytest.raises(ValueError, match="independent"):
        law.sample_pairs(scene.world, 3, wording="copied")
    with pytest.raises(ValueError, match="positive integer"):
        law.sample(0)
    with pytest.raises(ValueError, match="never shows a whole caption"):
        span_world(law, SpanLaw(3, 5), "good")
