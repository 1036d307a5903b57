"""kNN sample metrics (exact tiled kNN, mutual kNN, cycle kNN, CKNNA) against slow twins (docs/theory.md §10).

Each twin is written from the definition: the full N x N inner-product matrix,
Python loops and sets, the tie rule as an explicit sort by (−similarity, index).
Data come in three kinds: Gaussian (no ties), integer-valued rows for the raw
neighbour search and ±1 rows of dimension 4 or 16 (norm 2 or 4, so normalising
and every inner product are exact) with duplicated rows for the metrics; the
last two are full of exact ties, which every library and tile size must break
the same way.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from array_api_compat import array_namespace
from hypothesis import assume, given, settings, strategies as st

from support import assert_close
from prhsim._budget import ResourceError, memory_limit
from prhsim.metrics import _knn_screen, _knn_search, _knn_ties
from prhsim.metrics._cknna import cknna
from prhsim.metrics._knn import cycle_knn, knn_chance, knn_indices, mutual_knn

LIBS = ("numpy", "torch", "jax")


# --------------------------------------------------------------------------------------
# twins
# --------------------------------------------------------------------------------------
def exact_products(x: np.ndarray) -> np.ndarray:
    """⟨x_i, x_j⟩ as the correctly rounded sum of the rounded products (math.fsum): a function of the two
    rows alone, so copies of a row tie exactly, whatever a BLAS would do with them."""
    x = np.asarray(x, dtype=float)
    return np.array([[math.fsum(p) for p in row * x] for row in x])


def twin_knn(x: np.ndarray, k: int) -> np.ndarray:
    """Row i: the k indices j != i first in the order (−⟨x_i, x_j⟩, j)."""
    s = exact_products(x)
    n = len(s)
    return np.array([[j for _, j in sorted((-s[i, j], j) for j in range(n) if j != i)[:k]] for i in range(n)])


def twin_sets(x: np.ndarray, k: int) -> list[set[int]]:
    x = np.asarray(x, dtype=float)
    return [set(row) for row in twin_knn(x / np.linalg.norm(x, axis=1, keepdims=True), k)]


def twin_mutual(a, b, k):
    sa, sb = twin_sets(a, k), twin_sets(b, k)
    return sum(len(sa[i] & sb[i]) for i in range(len(sa))) / (len(sa) * k)


def twin_cycle(a, b, k):
    sa, sb = twin_sets(a, k), twin_sets(b, k)
    return sum(any(i in sa[j] for j in sb[i]) for i in range(len(sa))) / len(sa)


def twin_cknna(a, b, k):
    n = len(a)
    h = np.eye(n) - 1.0 / n
    A = a / np.linalg.norm(a, axis=1, keepdims=True)
    B = b / np.linalg.norm(b, axis=1, keepdims=True)
    K, L = h @ (A @ A.T) @ h, h @ (B @ B.T) @ h
    sa, sb = twin_sets(a, k), twin_sets(b, k)
    kl = sum(K[i, j] * L[i, j] for i in range(n) for j in sa[i] & sb[i])
    kk = sum(K[i, j] ** 2 for i in range(n) for j in sa[i])
    ll = sum(L[i, j] ** 2 for i in range(n) for j in sb[i])
    return kl / math.sqrt(kk * ll)


# --------------------------------------------------------------------------------------
# data and libraries
# --------------------------------------------------------------------------------------
def to_lib(x: np.ndarray, lib: str):
    if lib == "torch":
        torch = pytest.importorskip("torch")
        return torch.from_numpy(np.ascontiguousarray(x))
    if lib == "jax":
        jnp = pytest.importorskip("jax.numpy")
        return jnp.asarray(x)
    return x


def to_numpy(x) -> np.ndarray:
    return np.asarray(x.cpu() if hasattr(x, "cpu") else x)


def signs(n: int, d: int, rng, duplicates: bool = True) -> np.ndarray:
    """±1 rows (d = 4 or 16: exact normalisation and inner products), a third of them copies of others."""
    x = rng.choice([-1.0, 1.0], size=(n, d))
    if duplicates:
        x[: n // 3] = x[rng.integers(n // 3, n, size=n // 3)]
    return x


def correlated_pair(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two Gaussian views of a shared 3-dimensional latent (no exact ties)."""
    z = rng.normal(size=(n, 3))
    return z @ rng.normal(size=(3, 6)) + 0.3 * rng.normal(size=(n, 6)), z @ rng.normal(size=(3, 5)) + 0.5 * rng.normal(
        size=(n, 5))


def tied_pair(n: int, d: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two ±1 representations, half their rows equal; never constant (zero variance is refused)."""
    a = signs(n, d, rng)
    b = signs(n, d, rng)
    b[: n // 2] = a[: n // 2]  # half the rows agree
    for x in (a, b):
        if np.all(x == x[0]):
            x[-1] = -x[-1]
    return a, b


def random_orthogonal(d: int, rng) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return q


# --------------------------------------------------------------------------------------
# the neighbour search
# --------------------------------------------------------------------------------------
def test_tie_rule_on_a_small_example():
    """Equal inner products: the smaller index ranks first and wins the last place."""
    x = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert knn_indices(x, 1).tolist() == [[1], [0], [0], [0], [0]]
    assert knn_indices(x, 2).tolist() == [[1, 2], [0, 2], [0, 1], [0, 1], [0, 1]]
    assert knn_indices(x, 4)[3].tolist() == [0, 1, 2, 4]  # all zero: index order


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kind", ["gaussian", "integer", "duplicates"])
def test_knn_indices_match_the_twin(lib, kind):
    rng = np.random.default_rng(1)
    sizes = [(2, 1, 1), (9, 2, 4), (31, 3, 7), (48, 4, 47), (60, 5, 12)]
    # JAX compiles every operation for every new shape: there, the shapes of test_metrics_match_the_twins
    for n, d, k in [(40, 6, 6), (40, 5, 6)] if lib == "jax" else sizes:
        x = rng.normal(size=(n, d)) if kind == "gaussian" else rng.integers(-2, 3, size=(n, d)).astype(float)
        if kind == "duplicates":
            x = x[rng.integers(0, max(1, n // 4), size=n)]
        got = to_numpy(knn_indices(to_lib(x, lib), k))
        np.testing.assert_array_equal(got, twin_knn(x, k), err_msg=f"{lib} {kind} n={n} k={k}")


@pytest.mark.parametrize("lib", LIBS)
def test_blocked_equals_unblocked(lib):
    """Tile sides 1, 7, N (and the default) give the same indices, on tied and on tie-free data."""
    rng = np.random.default_rng(2)
    n = 40
    for x in (rng.normal(size=(n, 6)), rng.integers(-1, 2, size=(n, 6)).astype(float)):
        expected = twin_knn(x, 6)
        for block in (1, 7, n):
            got = to_numpy(knn_indices(to_lib(x, lib), 6, block=block))
            np.testing.assert_array_equal(got, expected, err_msg=f"{lib}, block {block}")


def distinct_search(x, k: int, block: int | None = None) -> np.ndarray:
    """The tiled search itself, without folding copies into one row first: its selection must apply the
    tie rule to products that are exact (integer rows), copies included."""
    xp, lx = _knn_search.as_compute(x, "x")
    return to_numpy(_knn_search._knn_distinct(xp, lx, k, block, None, False, True)[1])


def test_dense_tie_path(monkeypatch):
    """Rows with many entries equal to their k-th value: the chunked rank-by-index path matches the twin."""
    monkeypatch.setattr(_knn_search, "PRUNE_SLACK", 0)
    monkeypatch.setattr(_knn_search, "GATHER_ELEMENTS", 50)
    rng = np.random.default_rng(3)
    x = rng.integers(-1, 2, size=(70, 2)).astype(float)
    for block in (None, 9):
        np.testing.assert_array_equal(knn_indices(x, 6, block=block), twin_knn(x, 6))
        np.testing.assert_array_equal(distinct_search(x, 6, block), twin_knn(x, 6))
    a, b = tied_pair(50, 4, rng)
    assert mutual_knn(a, b, 8, block=16) == twin_mutual(a, b, 8)


@pytest.mark.parametrize("lib", ["torch", "jax"])
def test_more_ties_than_any_candidate_margin(lib):
    """About 150 entries per row equal the k-th value: torch's and JAX's partial selections must defer to the rule."""
    x = np.random.default_rng(14).integers(1, 3, size=(300, 1)).astype(float)
    np.testing.assert_array_equal(to_numpy(knn_indices(to_lib(x, lib), 5)), twin_knn(x, 5))
    np.testing.assert_array_equal(distinct_search(to_lib(x, lib), 5), twin_knn(x, 5))


@given(data=st.data(), rows=st.integers(1, 6), width=st.integers(4, 80), top=st.integers(-3, 3))
def test_numpy_selection_bounds_match_the_sorted_rows(data, rows, width, top):
    """The block-maximum floor lies at or below each row's k-th largest value, and the descent over distinct
    values finds it exactly (or gives up): both against the k-th entry of the sorted row."""
    k = data.draw(st.integers(1, width // _knn_search.BLOCK_MAX_BLOCKS))
    s = np.array(data.draw(st.lists(st.lists(st.integers(-3, top), min_size=width, max_size=width), min_size=rows,
                                    max_size=rows)), dtype=float)
    kth = np.sort(s, axis=1)[:, width - k]
    assert np.all(_knn_search._block_max_floor(s, k) <= kth)
    assert np.sum(s >= _knn_search._block_max_floor(s, k)[:, None], axis=1).min() >= k
    found = _knn_search._kth_by_descent(s.copy(), k)
    distinct_above = np.array([np.unique(r[r >= t]).size for r, t in zip(s, kth)])
    if found is None:
        assert distinct_above.max() > _knn_search.DESCENT_ROUNDS
    else:
        np.testing.assert_array_equal(found, kth)
        assert distinct_above.max() <= _knn_search.DESCENT_ROUNDS + 1


@pytest.mark.parametrize("rounds", [0, 1, 3])
def test_massive_ties_in_wide_tiles_match_the_twin(monkeypatch, rounds):
    """Two directions copied 150 times each: every row's top holds 149 equal products, so the block-maximum
    floor offers too many and the descent over distinct values settles at once; integer values in one
    dimension (no candidate slack) need a few steps down, or the partition when the steps run out."""
    monkeypatch.setattr(_knn_search, "DESCENT_ROUNDS", rounds)
    x = np.repeat(np.array([[1.0, 2.0, 0.0], [2.0, -1.0, 1.0]]), 150, axis=0)
    np.testing.assert_array_equal(distinct_search(x, 5), twin_knn(x, 5))
    np.testing.assert_array_equal(distinct_search(x, 5, 128), twin_knn(x, 5))
    monkeypatch.setattr(_knn_search, "PRUNE_SLACK", 0)
    y = np.random.default_rng(15).integers(-4, 5, size=(300, 1)).astype(float)
    np.testing.assert_array_equal(distinct_search(y, 40), twin_knn(y, 40))
    np.testing.assert_array_equal(distinct_search(y, 40, 160), twin_knn(y, 40))


@given(data=st.data(), n=st.integers(2, 25), d=st.integers(1, 4))
def test_knn_indices_on_arbitrary_integer_rows(data, n, d):
    """Any integer matrix (exact inner products, ties everywhere), any k, any tile side: the twin's indices."""
    x = np.array(data.draw(st.lists(st.lists(st.integers(-3, 3), min_size=d, max_size=d), min_size=n,
                                    max_size=n)), dtype=float)
    k = data.draw(st.integers(1, n - 1))
    block = data.draw(st.one_of(st.none(), st.integers(1, n + 2)))
    np.testing.assert_array_equal(knn_indices(x, k, block=block), twin_knn(x, k))


def test_knn_indices_upcasts_16_bit_floats():
    x = np.random.default_rng(4).integers(-3, 4, size=(20, 3)).astype(np.float16)
    np.testing.assert_array_equal(knn_indices(x, 4), twin_knn(x, 4))


def test_knn_memory_stays_far_below_a_dense_similarity_matrix():
    """N = 20,000, d = 64: the traced peak stays below 200 MB (a dense N x N float64 matrix is 3.2 GB)."""
    x = np.random.default_rng(5).normal(size=(20_000, 64)).astype(np.float32)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        idx = knn_indices(x, 10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert idx.shape == (20_000, 10)
    assert peak < 200e6, f"peak {peak / 1e6:.0f} MB"
    rows = np.array([0, 7_777, 19_999])  # spot check against direct selection
    s = x[rows] @ x.T
    s[np.arange(3), rows] = -np.inf
    np.testing.assert_array_equal(idx[rows], np.argsort(-s, axis=1, kind="stable")[:, :10])


# --------------------------------------------------------------------------------------
# the metrics against their twins
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kind", ["gaussian", "tied"])
def test_metrics_match_the_twins(lib, kind):
    rng = np.random.default_rng(6)
    sizes = [(3, 1), (12, 3), (40, 6), (70, 2), (33, 32)]
    for n, k in sizes[2:3] if lib == "jax" else sizes:  # JAX compiles every operation for every new shape
        a, b = correlated_pair(n, rng) if kind == "gaussian" else tied_pair(n, 4 if n < 40 else 16, rng)
        la, lb = to_lib(a, lib), to_lib(b, lib)
        what = f"{lib} {kind} n={n} k={k}"
        assert mutual_knn(la, lb, k) == twin_mutual(a, b, k), what
        assert cycle_knn(la, lb, k) == twin_cycle(a, b, k), what
        assert cycle_knn(lb, la, k) == twin_cycle(b, a, k), what
        assert_close(cknna(la, lb, k), twin_cknna(a, b, k), atol=1e-12, what=what)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(3, 30), d=st.sampled_from([4, 16]), data=st.data())
def test_metrics_match_the_twins_on_random_sign_rows(seed, n, d, data):
    rng = np.random.default_rng(seed)
    a, b = tied_pair(n, d, rng)
    k = data.draw(st.integers(1, n - 1))
    block = data.draw(st.one_of(st.none(), st.integers(1, n)))
    assert mutual_knn(a, b, k, block=block) == twin_mutual(a, b, k)
    assert cycle_knn(a, b, k, block=block) == twin_cycle(a, b, k)
    try:
        value = cknna(a, b, k, block=block)
    except ValueError as err:
        assert "Align = 0" in str(err)
    else:
        if not vanishing_align(a, b, k):  # there both values are rounding noise over rounding noise
            assert_close(value, twin_cknna(a, b, k), atol=1e-12)


def vanishing_align(a, b, k) -> bool:
    """Whether a side's centred kernel vanishes on its neighbour pairs up to float64 rounding (e.g.
    seed 3147695, n = 5, d = 16, k = 1: Align_bb ≈ 4e-33), where CKNNA is 0/0 in exact arithmetic."""
    n = len(a)
    h = np.eye(n) - 1.0 / n
    for x in (a, b):
        u = x / np.linalg.norm(x, axis=1, keepdims=True)
        c = h @ (u @ u.T) @ h
        if sum(c[i, j] ** 2 for i, row in enumerate(twin_sets(x, k)) for j in row) < 1e-24:
            return True
    return False


def test_cknna_gathers_and_slabs_agree_with_the_twin():
    """Small k (gathered neighbour rows) and large k (slabs of centred inner products) both match."""
    rng = np.random.default_rng(7)
    a, b = correlated_pair(130, rng)
    for k in (1, 4, 5, 60, 129):
        assert_close(cknna(a, b, k), twin_cknna(a, b, k), atol=1e-12, what=f"k={k}")


def test_cknna_default_k_is_resolved_before_the_check():
    """k=None means N − 1 (every pair): CKA of the normalised rows without the diagonal terms, even for N < 10."""
    rng = np.random.default_rng(8)
    a, b = correlated_pair(6, rng)
    A = a / np.linalg.norm(a, axis=1, keepdims=True)
    B = b / np.linalg.norm(b, axis=1, keepdims=True)
    h = np.eye(6) - 1 / 6
    K, L = h @ A @ A.T @ h, h @ B @ B.T @ h
    off = ~np.eye(6, dtype=bool)
    expected = np.sum(K[off] * L[off]) / np.sqrt(np.sum(K[off] ** 2) * np.sum(L[off] ** 2))
    assert_close(cknna(a, b, knn_k=None), expected, atol=1e-12)
    with pytest.raises(ValueError, match="knn_k must be an integer with 1 <= knn_k < N = 6, got 10"):
        cknna(a, b)  # the default k = 10 does not fit N = 6


# --------------------------------------------------------------------------------------
# invariances and self-scores
# --------------------------------------------------------------------------------------
METRICS = {"mutual_knn": mutual_knn, "cycle_knn": cycle_knn, "cknna": cknna}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_invariances(name):
    """Orthogonal maps and positive rescalings of either side, and a common row permutation, change nothing."""
    metric = METRICS[name]
    rng = np.random.default_rng(9)
    a, b = correlated_pair(80, rng)
    base = metric(a, b, 7)
    scale = np.exp(rng.normal(size=(80, 1)))  # a positive factor per row
    perm = rng.permutation(80)
    for what, (x, y) in {
        "orthogonal a": (a @ random_orthogonal(6, rng), b),
        "orthogonal b": (a, b @ random_orthogonal(5, rng)),
        "rescaled a": (3.7 * a * scale, b),
        "rescaled b": (a, 0.02 * b),
        "permuted rows": (a[perm], b[perm]),
    }.items():
        assert_close(metric(x, y, 7), base, atol=1e-12, what=f"{name}: {what}")


@given(data=st.data(), n=st.integers(2, 20), d=st.integers(1, 4))
def test_a_representation_scores_one_with_itself(data, n, d):
    """mutual_knn(a, a) = 1 for every a with nonzero rows (ties included); cknna(a, a) = 1 wherever it is defined."""
    rows = st.lists(st.integers(-4, 4), min_size=d, max_size=d).filter(any)
    a = np.array(data.draw(st.lists(rows, min_size=n, max_size=n)), dtype=float)
    assume(not np.all(a == a[0]))  # every row equal: zero variance, refused (tests/metrics/test_metrics_arguments.py)
    k = data.draw(st.integers(1, n - 1))
    assert mutual_knn(a, a, k) == 1.0
    assert mutual_knn(a, 5.0 * a, k) == 1.0
    try:
        value = cknna(a, a, k)
    except ValueError as err:
        assert "Align = 0" in str(err)
    else:
        assert_close(value, 1.0, atol=1e-12)


def test_identical_neighbourhoods_cycle_back():
    """With a = b and mutual 1-NN pairs (points in close twos), every sample returns to itself."""
    rng = np.random.default_rng(10)
    centres = rng.normal(size=(15, 8))
    x = np.repeat(centres, 2, axis=0) + 1e-3 * rng.normal(size=(30, 8))
    assert cycle_knn(x, x, 1) == 1.0
    assert mutual_knn(x, x, 1) == 1.0


# --------------------------------------------------------------------------------------
# chance level
# --------------------------------------------------------------------------------------
def test_independent_representations_score_near_chance():
    """Independent Gaussian a, b (N = 1000, d = 16).

    mutual kNN: E = k/(N−1) exactly (b's neighbour set of i is exchangeable over
    j != i); per sample the shared count is hypergeometric, variance ≈ k·p(1−p)
    with p = k/(N−1), so the mean's standard deviation is ≈ √(k p (1−p)/N)/k ≈
    0.0010 at k = 50 (0.0013 measured over 30 seeds: samples are weakly
    dependent). Tolerance 0.15·E = 0.0075, about 6 measured deviations.
    cycle kNN (k = 20): ≈ 1 − (1 − p)^k (each of the k steps returns with
    probability p, nearly independently) = 0.333; measured spread 0.019;
    tolerance 0.25 of it, about 4.4 deviations. CKNNA (k = 50): near the
    shared-neighbour fraction k/(N−1) as well (0.0485 ± 0.0014 measured over
    30 seeds); tolerance 0.25·k/(N−1), far below the 1 of aligned representations.
    """
    rng = np.random.default_rng(11)
    n = 1000
    a, b = rng.normal(size=(n, 16)), rng.normal(size=(n, 16))
    chance = knn_chance(n, 50)
    assert abs(mutual_knn(a, b, 50) - chance) < 0.15 * chance
    cycle_chance = 1 - (1 - knn_chance(n, 20)) ** 20
    assert abs(cycle_knn(a, b, 20) - cycle_chance) < 0.25 * cycle_chance
    assert abs(cknna(a, b, 50) - chance) < 0.25 * chance


def test_knn_chance():
    assert knn_chance(11, 5) == 0.5
    assert knn_chance(2, 1) == 1.0
    with pytest.raises(ValueError, match="knn_k must be an integer with 1 <= knn_k < N = 5, got 5"):
        knn_chance(5, 5)
    with pytest.raises(ValueError, match="at least 2"):
        knn_chance(1, 1)


# --------------------------------------------------------------------------------------
# the screen: the same neighbours as the exact search (docs/theory.md §10)
# --------------------------------------------------------------------------------------
#: The screen's widths: bf16 rows and products; float32 products truncated to bf16 keys.
WIDTHS = ["bf16", "float32"]


@pytest.fixture(params=WIDTHS)
def screen_width(request, monkeypatch):
    """A screen test at each width, whatever this CPU would choose."""
    monkeypatch.setattr(_knn_screen, "WIDTH", request.param)
    return request.param


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def near_ties(n: int, d: int, rng) -> np.ndarray:
    """Rows on a narrow cone: all cosines lie in about [0.995, 0.999], so every row's neighbours are
    closer to one another than the screen's error bound, yet about 3e-5 apart (far above float64 rounding)."""
    return rng.normal(size=d) + 0.05 * rng.normal(size=(n, d))


def screen_data(kind: str, n: int, d: int, rng) -> np.ndarray:
    if kind == "gaussian":
        return rng.normal(size=(n, d))
    if kind == "integer":  # exact inner products, ties everywhere
        return rng.integers(-2, 3, size=(n, d)).astype(float)
    if kind == "duplicates":
        return rng.normal(size=(n, d))[rng.integers(0, n // 4, size=n)]
    return near_ties(n, d, rng)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("kind", ["gaussian", "integer", "duplicates", "near ties"])
def test_screen_matches_the_exact_search_and_the_twin(lib, kind, screen_width):
    """k = 1, 10, N − 1; one tile and tiles of 16 rows: screened indices = exact indices = the twin's."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(20)
    n, d = 120, 16
    x = screen_data(kind, n, d, rng)
    for k in (1, 10, n - 1):
        expected = twin_knn(x, k)
        for block in (None, 16):
            what = f"{lib} {kind} k={k} block={block}"
            got = to_numpy(knn_indices(to_lib(x, lib), k, block=block, screen=True))
            np.testing.assert_array_equal(got, expected, err_msg=what)
            np.testing.assert_array_equal(to_numpy(knn_indices(to_lib(x, lib), k, block=block, screen=False)),
                                          expected, err_msg=what)
            if kind != "integer":  # cosine neighbours, the sets only (the metrics' path)
                lx = to_lib(x, lib)
                xp = array_namespace(lx)
                scale = _knn_search.row_scale(xp, lx, "x")
                _, sets = _knn_search.knn_search(xp, lx, k, block, scale, screen=True, ordered=False)
                twin = twin_knn(unit(x), k)
                assert [set(r) for r in to_numpy(sets).tolist()] == [set(r) for r in twin.tolist()], what


def test_screen_near_ties_lie_within_its_error_bound():
    """The near-tie data really defeat the screen alone: each row's 11 nearest cosines span less than E."""
    pytest.importorskip("torch")
    x = unit(near_ties(120, 16, np.random.default_rng(20)))
    s = x @ x.T
    np.fill_diagonal(s, -np.inf)
    top = -np.sort(-s, axis=1)[:, :11]
    e = _knn_screen.screen_error(np, 16, 64, np.ones(1), np.full(1, 2.0**-8 * 0.43))[0]
    assert np.all(top[:, 0] - top[:, 10] < e)
    assert np.min(-np.diff(top, axis=1)) > 1e-12  # ... but no float64 ties


@pytest.mark.parametrize("kind", ["gaussian", "tied", "near ties"])
def test_screened_metrics_match_the_twins(kind, screen_width):
    pytest.importorskip("torch")
    rng = np.random.default_rng(21)
    for n, k in [(12, 3), (70, 2), (130, 10), (130, 129)]:
        if kind == "gaussian":
            a, b = correlated_pair(n, rng)
        elif kind == "tied":
            a, b = tied_pair(n, 16, rng)
        else:
            a, b = near_ties(n, 16, rng), near_ties(n, 8, rng)
        for block in (None, 32):
            what = f"{kind} n={n} k={k} block={block}"
            assert mutual_knn(a, b, k, block=block, screen=True) == twin_mutual(a, b, k), what
            assert cycle_knn(a, b, k, block=block, screen=True) == twin_cycle(a, b, k), what


def test_screen_sends_rows_with_masses_of_ties_to_the_exact_search(screen_width):
    """200 near-copies of one row: each has 199 neighbours closer together than the screen's error bound,
    more than a pool holds (4k + 128 at k = 5), yet apart far above float64 rounding (cosines too)."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(22)
    x = rng.normal(size=(400, 24))
    x[rng.permutation(400)[:200]] = x[0] + 1e-5 * rng.normal(size=(200, 24))
    for k in (1, 5):
        for block in (None, 64):
            _, idx, exact = _knn_search._screened(np, x, k, block, None, True)
            assert exact >= 199, exact
            np.testing.assert_array_equal(idx, twin_knn(x, k))
            _, sets, exact = _knn_search._screened(np, x, k, block, _knn_search.row_scale(np, x, "x"), ordered=False)
            assert exact >= 199
            assert [set(r) for r in sets.tolist()] == [set(r) for r in twin_knn(unit(x), k).tolist()]


def test_screen_fallback_with_tiny_pools(monkeypatch, screen_width):
    """Pools of at most k entries: nearly every row overflows and takes the exact search, same answer."""
    pytest.importorskip("torch")
    monkeypatch.setattr(_knn_screen, "POOL_SLACK", -3 * 4)
    rng = np.random.default_rng(23)
    for x in (rng.normal(size=(90, 6)), rng.integers(-1, 2, size=(90, 4)).astype(float)):
        _, idx, exact = _knn_search._screened(np, x, 4, 20, None, True)
        assert exact > 0
        np.testing.assert_array_equal(idx, twin_knn(x, 4))


@pytest.mark.parametrize("width", WIDTHS)
@settings(max_examples=max(1, settings().max_examples // 2))  # per width: the profile's count in all
@given(data=st.data(), n=st.integers(2, 40), d=st.integers(1, 5))
def test_screen_on_arbitrary_integer_rows(width, data, n, d):
    """Any integer matrix (exact inner products, ties everywhere), any k, any tile side: the twin's indices."""
    pytest.importorskip("torch")
    x = np.array(data.draw(st.lists(st.lists(st.integers(-3, 3), min_size=d, max_size=d), min_size=n,
                                    max_size=n)), dtype=float)
    k = data.draw(st.integers(1, n - 1))
    block = data.draw(st.one_of(st.none(), st.integers(1, n + 2)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_knn_screen, "WIDTH", width)
        np.testing.assert_array_equal(knn_indices(x, k, block=block, screen=True), twin_knn(x, k))


@pytest.mark.parametrize("width", WIDTHS)
@settings(max_examples=max(1, settings().max_examples // 2))  # per width: the profile's count in all
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(3, 40), d=st.sampled_from([4, 16]), data=st.data())
def test_screened_metrics_on_random_sign_rows(width, seed, n, d, data):
    pytest.importorskip("torch")
    a, b = tied_pair(n, d, np.random.default_rng(seed))
    k = data.draw(st.integers(1, n - 1))
    block = data.draw(st.one_of(st.none(), st.integers(1, n)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_knn_screen, "WIDTH", width)
        assert mutual_knn(a, b, k, block=block, screen=True) == twin_mutual(a, b, k)
        assert cycle_knn(a, b, k, block=block, screen=True) == twin_cycle(a, b, k)


def assert_equal_up_to_float32_rounding(got: np.ndarray, expected: np.ndarray, x: np.ndarray) -> int:
    """Equal lists, except where two entries' exact inner products lie within float32's rounding of each other
    (γ_d·‖x_i‖‖x_j‖ each: the two searches form them by different kernels). Returns how many rows differ."""
    x64 = x.astype(np.float64)
    norms = np.linalg.norm(x64, axis=1)
    d = x.shape[1]
    eps = d * 2.0**-24 / (1 - d * 2.0**-24)
    rows = np.nonzero((got != expected).any(axis=1))[0]
    for i in rows:
        for j, l in zip(got[i], expected[i]):
            if j != l:
                gap = abs(x64[i] @ x64[j] - x64[i] @ x64[l])
                assert gap <= 2 * eps * norms[i] * max(norms[j], norms[l]), (i, j, l, gap)
    return len(rows)


def test_screen_at_a_larger_size(screen_width):
    """N = 3000, d = 96, tiles of 512: the screen and the exact search agree, in float32 up to its rounding."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(24)
    z = rng.normal(size=(3000, 8))
    x = z @ rng.normal(size=(8, 96)) + rng.normal(size=(3000, 96))
    x32 = x.astype(np.float32)
    for k in (1, 10):
        np.testing.assert_array_equal(knn_indices(x, k, block=512, screen=True),
                                      knn_indices(x, k, block=512, screen=False))
        differ = assert_equal_up_to_float32_rounding(knn_indices(x32, k, block=512, screen=True),
                                                     knn_indices(x32, k, block=512, screen=False), x32)
        assert differ <= 2
        a, b = x[:, :48], x[:, 48:]
        assert mutual_knn(a, b, k, block=512, screen=True) == mutual_knn(a, b, k, block=512, screen=False)


def test_screen_scale_and_range(screen_width):
    """Powers of two change no neighbour; far outside the bound's range (|e| > 60) every row takes the exact search."""
    pytest.importorskip("torch")
    x = np.random.default_rng(25).normal(size=(80, 5))
    expected = twin_knn(x, 3)
    for factor in (2.0**40, 2.0**-40, 3e10):
        np.testing.assert_array_equal(knn_indices(factor * x, 3, screen=True), expected)
    _, idx, exact = _knn_search._screened(np, 2.0**-100 * x, 3, None, None, True)
    assert exact == 80
    np.testing.assert_array_equal(idx, expected)


def test_screen_unit_rows_are_the_exact_paths():
    """The screen's normalised rows (torch division) are bit for bit those of the exact path (numpy)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(26)
    for dtype in (np.float32, np.float64):
        x = (rng.normal(size=(300, 37)) * np.exp(rng.normal(size=(300, 1)) * 5)).astype(dtype)
        scale = _knn_search.row_scale(np, x, "x")
        y = _knn_screen._prepare(np, x, scale, torch)[0]
        np.testing.assert_array_equal(y, _knn_ties.unit_rows(x, scale))


def bound_rows(d: int, rng) -> np.ndarray:
    """Rows for the screen's bound: random, constant (every entry rounds the same way: the a-priori worst case of
    the input rounding) and a few large entries among small ones."""
    return np.concatenate([rng.normal(size=(300, d)), np.full((2, d), 1.0), np.full((2, d), 1.0 / 3.0),
                           np.where(rng.random((40, d)) < 0.05, rng.normal(size=(40, d)) * 30,
                                    rng.normal(size=(40, d)))])


@pytest.mark.parametrize("d", [1, 7, 64, 768])
def test_screen_error_bound_holds(d):
    """|ŝ_ij − v_ij| <= u_b|ŝ_ij| + E_i on unit rows, on the actual bf16 products (v in float64).

    Random rows, constant rows (every entry rounds the same way: the a-priori worst case
    of the input rounding) and rows with a few large entries; the measured ρ_i never
    exceeds the a-priori bound (2^-8 + 2^-23)·‖w_i‖.
    """
    torch = pytest.importorskip("torch")
    rows = bound_rows(d, np.random.default_rng(27))
    for dtype in (np.float32, np.float64):
        x = rows.astype(dtype)
        y, z, norms, rho, e = _knn_screen._prepare(np, x, _knn_search.row_scale(np, x, "x"), torch)
        assert e == 0
        assert np.all(rho <= (2.0**-8 + 2.0**-23) * norms)
        bound = _knn_screen.screen_error(np, d, np.finfo(dtype).bits, norms, rho)
        s_hat = _knn_screen.bf16_products(z, z).float().numpy().astype(np.float64)
        v = y.astype(np.float64) @ y.astype(np.float64).T
        excess = np.abs(s_hat - v) - (2.0**-8 * np.abs(s_hat) + bound[:, None])
        assert excess.max() <= 0, excess.max()


def test_screen_error_bound_at_a_realistic_size():
    """N = 2048 unit rows of d = 768 in one tile (the screen's tile, on this machine's bf16 kernels)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(28)
    x = (rng.normal(size=(2048, 16)) @ rng.normal(size=(16, 768)) + rng.normal(size=(2048, 768))).astype(np.float32)
    y, z, norms, rho, _ = _knn_screen._prepare(np, x, _knn_search.row_scale(np, x, "x"), torch)
    bound = _knn_screen.screen_error(np, 768, 32, norms, rho)
    assert bound.max() < 0.005  # the measured ρ: about half the a-priori margin
    s_hat = _knn_screen.bf16_products(z, z).float().numpy().astype(np.float64)
    v = y.astype(np.float64) @ y.astype(np.float64).T
    assert (np.abs(s_hat - v) - (2.0**-8 * np.abs(s_hat) + bound[:, None])).max() <= 0


@pytest.mark.parametrize("d", [1, 7, 64, 768])
def test_truncated_products_error_bound_holds(d):
    """The float32 width: |ŝ_ij − v_ij| <= 2^-7|ŝ_ij| + E_i with ŝ the float32 products truncated to bf16 (their
    keys' values), v in float64; float32 unit rows are screened as they are (ρ = 0), float64 ones rounded once
    to float32 (ρ_i <= 2^-24·‖w_i‖)."""
    torch = pytest.importorskip("torch")
    rows = bound_rows(d, np.random.default_rng(32))
    for dtype in (np.float32, np.float64):
        x = rows.astype(dtype)
        y, z, norms, rho, e = _knn_screen._prepare(np, x, _knn_search.row_scale(np, x, "x"), torch, "float32")
        assert e == 0 and z.dtype == torch.float32
        if dtype == np.float32:
            assert np.all(rho <= d * 2.0**-59) and np.shares_memory(z.numpy(), y)  # the rows themselves: ρ = 0 (+ the bound's d·2^-60)
        assert np.all(rho <= 2.0**-24 * norms)
        bound = _knn_screen.screen_error(np, d, np.finfo(dtype).bits, norms, rho)
        keys = _knn_screen._keys(np, _knn_screen.truncated_products(z.numpy(), z.numpy())).astype(np.int64)
        s_hat = _knn_screen._bf16_values()[keys - _knn_screen.KEY_NEG_INF]
        v = y.astype(np.float64) @ y.astype(np.float64).T
        excess = np.abs(s_hat - v) - (_knn_screen.U_TRUNCATE * np.abs(s_hat) + bound[:, None])
        assert excess.max() <= 0, excess.max()
        assert np.all(np.abs(s_hat) <= np.abs(z.numpy().astype(np.float64) @ z.numpy().astype(np.float64).T)
                      + 1e-6)  # truncation: toward zero


def test_screen_keys_are_monotone():
    """int16 keys of all bf16 bit patterns order like the values; the table inverts them."""
    raw = np.arange(-32768, 32768, dtype=np.int32).astype(np.int16)
    values = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    finite = ~np.isnan(values)
    values = values[finite].astype(np.float64)  # ±inf included, NaN patterns left out
    keys = _knn_screen._keys(np, raw)[finite].astype(np.int64)
    order = np.argsort(keys, kind="stable")
    assert np.all(np.diff(values[order]) >= 0)
    assert keys.min() == _knn_screen.KEY_NEG_INF and keys.max() == _knn_screen.KEY_POS_INF
    table = _knn_screen._bf16_values()
    np.testing.assert_array_equal(table[keys - _knn_screen.KEY_NEG_INF], values)


def test_screen_in_torch_code(monkeypatch, screen_width):
    """The code path of GPU tensors (pools kept in torch), run on CPU tensors."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_knn_screen, "WORK_IN_TORCH", True)
    rng = np.random.default_rng(29)
    for kind in ("gaussian", "integer", "near ties"):
        x = screen_data(kind, 100, 8, rng)
        for k in (1, 7, 99):
            got = knn_indices(torch.from_numpy(x), k, block=30, screen=True)
            np.testing.assert_array_equal(got.numpy(), twin_knn(x, k), err_msg=f"{kind} k={k}")
    a, b = tied_pair(90, 16, rng)
    assert mutual_knn(torch.from_numpy(a), torch.from_numpy(b), 6, block=25, screen=True) == twin_mutual(a, b, 6)
    x = rng.normal(size=(300, 24))
    x[:200] = x[0] + 1e-5 * rng.normal(size=(200, 24))  # near-copies: more near-ties than a pool holds
    _, idx, exact = _knn_search._screened(array_namespace(torch.zeros(1)), torch.from_numpy(x), 5, 64, None, True)
    assert exact >= 199
    np.testing.assert_array_equal(idx.numpy(), twin_knn(x, 5))


def test_screen_on_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(30)
    x = rng.normal(size=(500, 64))
    for dtype in (torch.float32, torch.float64):
        got = knn_indices(torch.from_numpy(x).to("cuda", dtype), 10, block=128, screen=True)
        np.testing.assert_array_equal(got.cpu().numpy(), twin_knn(x, 10))
    a, b = correlated_pair(400, rng)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    assert mutual_knn(ta, tb, 10, block=128, screen=True) == twin_mutual(a, b, 10)
    y = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(2048, 768))).float().cuda(), dim=1)
    _, z, norms, rho, _ = _knn_screen._prepare(torch, y, None, torch)
    bound = _knn_screen.screen_error(torch, 768, 32, norms, rho)
    s_hat = _knn_screen.bf16_products(z, z).double()
    assert float((torch.abs(s_hat - y.double() @ y.double().T) - 2.0**-8 * s_hat.abs() - bound[:, None]).max()) <= 0


def test_screen_is_chosen_only_where_it_pays(monkeypatch):
    """Automatic: large N and k ≪ N on numpy/CPU torch data (bf16 width with bf16 matrix units, float32 without);
    never JAX or CUDA; screen=False always exact."""
    pytest.importorskip("torch")
    x = np.random.default_rng(31).normal(size=(300, 8))
    assert not _knn_screen.wanted(x, 3)  # too small
    calls = []
    real = _knn_screen.screened_knn
    monkeypatch.setattr(_knn_screen, "screened_knn", lambda *args, **kw: calls.append(1) or real(*args, **kw))
    monkeypatch.setattr(_knn_screen, "MIN_ROWS", 100)
    monkeypatch.setattr(_knn_screen, "MIN_RATIO", 8)
    expected = twin_knn(x, 3)
    np.testing.assert_array_equal(knn_indices(x, 3), expected)
    assert len(calls) == 1
    np.testing.assert_array_equal(knn_indices(x, 3, screen=False), expected)
    assert len(calls) == 1
    for fast, width in ((True, "bf16"), (False, "float32")):
        monkeypatch.setattr(_knn_screen, "_cpu_bf16_fast", lambda fast=fast: fast)
        assert _knn_screen.wanted(x, 3) and _knn_screen.width(x) == width
    monkeypatch.setattr(_knn_screen, "WIDTH", "bf16")
    assert _knn_screen.width(x) == "bf16"
    assert not _knn_screen.wanted(x, 100)  # k > N / MIN_RATIO
    import torch

    assert not _knn_screen.wanted(torch.empty((300, 8), device="meta"), 3)  # not automatic off the CPU (CUDA: slower)
    jnp = pytest.importorskip("jax.numpy")
    assert not _knn_screen.wanted(jnp.asarray(x), 3)


def test_import_stays_light():
    """import prhsim.metrics loads neither torch nor the screen's dependencies."""
    import subprocess
    import sys

    code = "import sys, prhsim.metrics; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


# --------------------------------------------------------------------------------------
# errors: one line each
# --------------------------------------------------------------------------------------
def _one_line(excinfo) -> None:
    assert "\n" not in str(excinfo.value)


@pytest.fixture
def pair():
    rng = np.random.default_rng(12)
    return rng.normal(size=(12, 3)), rng.normal(size=(12, 4))


@pytest.mark.parametrize("name", sorted(METRICS))
@pytest.mark.parametrize("k, message", [(0, r"knn_k must be an integer with 1 <= knn_k < N = 12, got 0"),
                                        (-3, r"knn_k must be an integer with 1 <= knn_k < N = 12, got -3"),
                                        (12, r"knn_k must be an integer with 1 <= knn_k < N = 12, got 12"),
                                        (40, r"knn_k must be an integer with 1 <= knn_k < N = 12, got 40")])
def test_error_k_out_of_range(pair, name, k, message):
    with pytest.raises(ValueError, match=message) as excinfo:
        METRICS[name](*pair, k)
    _one_line(excinfo)


def test_error_k_out_of_range_in_knn_indices(pair):
    for k, message in [(0, r"1 <= knn_k < N = 12, got 0"), (12, r"1 <= knn_k < N = 12, got 12")]:
        with pytest.raises(ValueError, match=message) as excinfo:
            knn_indices(pair[0], k)
        _one_line(excinfo)
    with pytest.raises(ValueError, match=r"knn_k must be an integer with 1 <= knn_k < N = 12, got 2\.0"):
        knn_indices(pair[0], 2.0)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_error_not_two_dimensional(pair, name):
    a, b = pair
    with pytest.raises(ValueError, match=r"a must be a 2-D array of shape \(N, d\), got shape \(12,\)") as excinfo:
        METRICS[name](a[:, 0], b, 3)
    _one_line(excinfo)
    with pytest.raises(ValueError, match="b must be a 2-D array"):
        METRICS[name](a, b[None], 3)
    with pytest.raises(ValueError, match="x must be a 2-D array"):
        knn_indices(a[:, 0], 3)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_error_different_number_of_rows(pair, name):
    a, b = pair
    with pytest.raises(ValueError, match="a and b must have the same number of rows N, got 12 and 11") as excinfo:
        METRICS[name](a, b[:11], 3)
    _one_line(excinfo)


@pytest.mark.parametrize("name", sorted(METRICS))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_error_nan_or_inf(pair, name, bad):
    a, b = pair
    b = b.copy()
    b[4, 1] = bad
    with pytest.raises(ValueError, match="b contains NaN or inf") as excinfo:
        METRICS[name](a, b, 3)
    _one_line(excinfo)
    x = a.copy()
    x[0, 0] = bad
    with pytest.raises(ValueError, match="x contains NaN or inf"):
        knn_indices(x, 3)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_error_zero_row(pair, name):
    a, b = pair
    a = a.copy()
    a[5] = 0.0
    with pytest.raises(ValueError, match="row 5 of a is zero: it cannot be L2-normalised") as excinfo:
        METRICS[name](a, b, 3)
    _one_line(excinfo)


def test_error_cknna_vanishing_normaliser():
    """All rows of a parallel: its centred kernel is exactly zero, so CKNNA is undefined (no epsilon)."""
    a = np.tile([[0.0, 2.0]], (8, 1)) * np.arange(1, 9)[:, None]
    b = np.random.default_rng(13).normal(size=(8, 3))
    with pytest.raises(ValueError, match="cknna is undefined: the centred kernel of a is zero") as excinfo:
        cknna(a, b, 3)
    _one_line(excinfo)
    with pytest.raises(ValueError, match="centred kernel of b is zero"):
        cknna(b, a, 3)


def test_error_overflowing_rows_in_knn_indices():
    big = np.array([[1e30, 0.0], [0.0, 1e30], [1e30, 1e30], [-1e30, 0.0]], dtype=np.float32)
    with pytest.raises(ValueError, match="x is too large: entries above") as excinfo:
        knn_indices(big, 1)
    _one_line(excinfo)
    # the metrics scale each row by its largest entry before normalising: no overflow there
    assert mutual_knn(big, big, 1) == 1.0


def test_error_bad_screen(pair):
    with pytest.raises(TypeError, match="screen must be True, False or None, got 'yes'") as excinfo:
        mutual_knn(*pair, 3, screen="yes")
    _one_line(excinfo)
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(ValueError, match="screen=True needs numpy arrays or CPU/CUDA torch tensors") as excinfo:
        knn_indices(jnp.asarray(pair[0]), 3, screen=True)
    _one_line(excinfo)


def test_error_bad_block(pair):
    with pytest.raises(ValueError, match="block must be at least 1"):
        mutual_knn(*pair, 3, block=0)


def test_error_mixed_libraries(pair):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        mutual_knn(pair[0], torch.from_numpy(pair[1]), 3)


def test_neighbour_lists_respect_the_memory_limit(pair):
    with memory_limit(1_000), pytest.raises(ResourceError, match="lower k or N"):
        mutual_knn(*pair, 3)


# --------------------------------------------------------------------------------------
# the tie rule on every backend, tile size and CPU (docs/theory.md §10, prhsim.metrics._knn_ties)
# --------------------------------------------------------------------------------------
def twin_groups(x: np.ndarray) -> np.ndarray:
    """label[i] = the smallest j with row j equal to row i, entry by entry (so −0.0 equals 0.0)."""
    seen: dict[tuple[float, ...], int] = {}
    return np.array([seen.setdefault(tuple(float(v) + 0.0 for v in row), i) for i, row in enumerate(x)])


def one_ulp_up_every_other_tile(monkeypatch, lib: str) -> None:
    """Make tiles round differently on purpose: every second tile's products move up by one ulp, as
    another BLAS kernel's rounding could (a copy in such a tile would beat an earlier copy)."""
    real = _knn_search.tile_products
    calls = []

    def rounded(xp, xi, xj):
        s = real(xp, xi, xj)
        calls.append(1)
        if len(calls) % 2:
            return s
        if lib == "torch":
            import torch

            return torch.nextafter(s, torch.full_like(s, math.inf))
        return np.nextafter(s, np.inf)

    monkeypatch.setattr(_knn_search, "tile_products", rounded)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_copies_tie_exactly_when_tiles_round_differently(monkeypatch, lib):
    """The failing case of an AMD CPU, made to happen on every CPU: with copies of rows and tiles that round
    one ulp apart, the lists are still the twin's; without folding copies into one row they are not."""
    rng = np.random.default_rng(20)
    x = screen_data("duplicates", 120, 16, rng)
    a, b = x, screen_data("duplicates", 120, 16, rng)
    one_ulp_up_every_other_tile(monkeypatch, lib)
    for k in (1, 10):
        expected = twin_knn(x, k)
        for block in (16, 7):
            got = to_numpy(knn_indices(to_lib(x, lib), k, block=block, screen=False))
            np.testing.assert_array_equal(got, expected, err_msg=f"{lib} k={k} block={block}")
        assert mutual_knn(to_lib(a, lib), to_lib(b, lib), k, block=16, screen=False) == twin_mutual(a, b, k)
        assert cycle_knn(to_lib(a, lib), to_lib(b, lib), k, block=16, screen=False) == twin_cycle(a, b, k)
    # the perturbation bites: the search that does not fold copies lets a later copy win
    monkeypatch.setattr(_knn_search, "duplicate_groups", lambda *args: None)
    got = to_numpy(knn_indices(to_lib(x, lib), 1, block=16, screen=False))
    assert (got != twin_knn(x, 1)).any()


@pytest.mark.parametrize("kind", ["duplicates", "near ties", "integer", "signed zeros"])
def test_neighbour_lists_are_identical_across_libraries_and_tiles(kind):
    """numpy, torch and JAX, tile sides from 1 to N: one list per row, the twin's; the metrics agree too.

    JAX compiles its fused tile steps for every new tile shape and k, so it takes a ragged tiling (9) and
    one tile; test_blocked_equals_unblocked runs its tiles of 1 and 7 rows."""
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    rng = np.random.default_rng(41)
    n, d = 26, 6
    if kind == "signed zeros":  # copies that differ only in the sign of zero entries
        x = rng.integers(-1, 2, size=(n, d)).astype(float)
        x[::3] = x[1::3] * 1.0
        x[::3][x[::3] == 0] = -0.0
    else:
        x = screen_data(kind, n, d, rng)
    y = screen_data("duplicates", n, 4, rng)
    for k in (1, 5, n - 1):
        expected = twin_knn(x, k)
        for lib in LIBS:
            for block in (9, None) if lib == "jax" else (1, 5, 9, None):
                got = to_numpy(knn_indices(to_lib(x, lib), k, block=block))
                np.testing.assert_array_equal(got, expected, err_msg=f"{kind} {lib} k={k} block={block}")
        # the metrics compare cosines: exact for ±1 rows of width 16 (with copies), untied for the Gaussian
        # kinds; integer rows of other norms have cosines that tie in exact arithmetic only, which rounding decides
        a = x if kind in ("duplicates", "near ties") else signs(n, 16, rng)
        scores = {lib: (mutual_knn(to_lib(a, lib), to_lib(y, lib), k, block=9),
                        cycle_knn(to_lib(a, lib), to_lib(y, lib), k, block=9)) for lib in LIBS}
        assert scores["numpy"] == scores["torch"] == scores["jax"] == (twin_mutual(a, y, k),
                                                                       twin_cycle(a, y, k)), scores


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_copies_are_found_as_the_twin_finds_them(monkeypatch, lib):
    """duplicate_groups against a dictionary of rows: ±0.0 agree, unit rows of x and 2x agree, and hash
    collisions between unequal rows (forced: every multiplier 0) are told apart entry by entry."""
    rng = np.random.default_rng(42)
    x = rng.integers(-2, 3, size=(60, 3)).astype(float)
    x[7] = 0.0
    x[8] = -0.0
    x[9] = np.where(x[10] == 0, -0.0, x[10])

    def groups(data, scale=None):
        lx = to_lib(data, lib)
        xp = array_namespace(lx)
        got = _knn_ties.duplicate_groups(xp, lx, None if scale is None else _knn_search.row_scale(xp, lx, "x"))
        if got is None:
            return np.arange(len(data))
        first, group = (to_numpy(v) for v in got)
        return first[group]

    np.testing.assert_array_equal(groups(x), twin_groups(x))
    assert groups(x)[8] == groups(x)[7] == 7
    assert groups(x)[10] == groups(x)[9]
    base = x[20:][np.abs(x[20:]).sum(axis=1) > 0]
    doubled = np.concatenate([base, 2.0 * base])  # normalised, x and 2x are equal bit for bit
    m = len(base)
    y = doubled / np.abs(doubled).max(axis=1, keepdims=True)
    y = y / np.linalg.norm(y, axis=1, keepdims=True)
    np.testing.assert_array_equal(groups(doubled, scale=True), twin_groups(y))
    assert (twin_groups(y)[m:] == twin_groups(y)[:m]).all()
    np.testing.assert_array_equal(groups(doubled), twin_groups(doubled))  # as given, x and 2x are not copies
    distinct = rng.normal(size=(30, 4))
    assert (groups(distinct) == np.arange(30)).all()
    monkeypatch.setattr(_knn_ties, "_multipliers", lambda words: np.zeros((2, words), dtype=np.uint32))
    np.testing.assert_array_equal(groups(x), twin_groups(x))
    assert (groups(distinct) == np.arange(30)).all()


@pytest.mark.parametrize("name", ["mutual_knn", "cycle_knn", "cknna", "knn_indices", "knn_chance"])
def test_neighbours_are_knn_k_and_k_is_no_keyword(name):
    """k is a number of features everywhere; the k-NN functions take their neighbours as knn_k (k= is refused)."""
    import prhsim.metrics as metrics

    fn = getattr(metrics, name)
    x = np.random.default_rng(0).normal(size=(12, 3))
    args = (12,) if name == "knn_chance" else (x,) if name == "knn_indices" else (x, 2 * x + 0.1)
    assert np.asarray(fn(*args, knn_k=3)).size
    with pytest.raises(TypeError, match="'k'"):
        fn(*args, k=3)


@settings(max_examples=30, deadline=None)
@given(st.integers(12, 40), st.integers(1, 5), st.integers(0, 10_000))
def test_shared_neighbours_of_the_two_lists_is_mutual_knn(n, k, seed):
    """One side's lists found once and reused give mutual k-NN exactly (ties included: integer-valued rows)."""
    from prhsim.metrics import shared_neighbours

    rng = np.random.default_rng(seed)
    a, b = rng.integers(-2, 3, size=(n, 3)).astype(float), rng.normal(size=(n, 2))
    a[np.all(a == 0, axis=1)] = 1.0
    lists = [knn_indices(x, k, normalise=True, screen=False) for x in (a, b)]
    assert shared_neighbours(*lists) == mutual_knn(a, b, k, screen=False)
