"""The Kronecker backend's parts (docs/theory.md §6) and the centred operator (§1.1).

Partial factor spectra (one dense tridiagonalisation, or Lanczos) against full eigh; the heap against
enumeration, bit for bit; the heap extending a partial spectrum; the FactorSpectra cache; evaluate against a
naive twin; ``K − 3ssᵀ`` as an operator against the dense matrix; the BLAS thread limit of the solvers.
Thresholds are lowered with :func:`patched` so that every path runs on worlds of a few dozen states.
"""

from __future__ import annotations

import contextlib
import gc
import weakref

import numpy as np
import pytest
import threadpoolctl
from hypothesis import given, settings, strategies as st

import prhsim.optima._basis as basis_module
import prhsim.optima._kronecker as kr
from support import assert_close, negatives_above_positives, projector_distance
from prhsim.optima import top_eigenpairs
from prhsim.optima._basis import centred_operator, solver_threads
from prhsim.worlds import FiniteWorld, ProductWorld, path, random_world, resampling, ring
from prhsim.testing.strategies import dense_kernel, product_worlds, seeds, sinkhorn_worlds, worlds

#: Values from different LAPACK routines (tridiagonal bisection vs divide and conquer) agree to rounding.
EIG_ATOL = 1e-12


@contextlib.contextmanager
def patched(module, **values):
    """Set module constants for a block (hypothesis tests cannot take pytest's function-scoped monkeypatch)."""
    old = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(module, name, value)


def partial_everywhere():
    """Every dense factor with ``top < n_f`` takes the partial (single tridiagonalisation) path."""
    return patched(kr, PARTIAL_FROM=2, PARTIAL_FRACTION=1.0)


def factor_reference(world: FiniteWorld) -> tuple[np.ndarray, np.ndarray]:
    """The non-trivial spectrum of K by numpy's eigh of the kernel built here from Π, and K itself."""
    s = np.sqrt(world.p)
    K = dense_kernel(world)
    vals = np.linalg.eigvalsh(K - 3.0 * np.outer(s, s))[1:]  # s sits at −2: the smallest
    return vals, K


def factors(min_n: int = 6, max_n: int = 24) -> st.SearchStrategy[FiniteWorld]:
    """Indefinite Sinkhorn worlds (dense or sparse), rings (tied pairs; bipartite when not lazy) and paths."""
    return st.one_of(
        sinkhorn_worlds(min_n, max_n),
        st.builds(lambda n, lazy: ring(n, laziness=lazy), st.integers(min_n, max_n), st.sampled_from([0.0, 0.3, 0.7])),
        st.builds(lambda n, m: path(n, move=m), st.integers(min_n, max_n), st.floats(0.1, 1.0)),
    )


# --- partial factor spectra ----------------------------------------------------------------------------------------


@given(world=factors(), fraction=st.floats(0.05, 0.9))
@settings(max_examples=60)
def test_partial_dense_spectrum_holds_the_pairs_of_largest_magnitude(world, fraction):
    top = max(1, min(world.n - 3, int(fraction * world.n)))
    with partial_everywhere():
        spec = kr.factor_spectrum(world, top)
    assert not spec.complete and spec.pairs == top
    ref, K = factor_reference(world)
    magnitudes = np.sort(np.abs(ref))[::-1]
    held = spec.values[1:]
    assert_close(np.abs(held), magnitudes[:top], atol=EIG_ATOL, what="the top |λ|, in order")
    assert np.all(np.min(np.abs(held[:, None] - ref[None, :]), axis=1) < EIG_ATOL), "each value is an eigenvalue"
    assert spec.values[0] == 1.0
    U = np.sqrt(world.p)[:, None] * spec.functions  # back to orthonormal eigenvectors, s first
    assert_close(U.T @ U, np.eye(top + 1), atol=EIG_ATOL)
    assert_close(K @ U, U * spec.values, atol=EIG_ATOL, what="K u = λ u, trivial pair included")
    assert spec.functions.flags.c_contiguous


@given(world=factors(8, 20), seed=seeds())
@settings(max_examples=25)
def test_lanczos_factor_spectrum_agrees_with_the_dense_partial_one(world, seed):
    top = world.n // 3
    with partial_everywhere():
        dense_part = kr.factor_spectrum(world, top)
    with patched(kr, FULL_FACTOR_UP_TO=2):
        assert kr.by_lanczos(world.n, top)
        lanczos = kr.factor_spectrum(world, top, rng=seed)
    assert not lanczos.complete and lanczos.pairs == top
    assert_close(np.abs(lanczos.values), np.abs(dense_part.values), atol=1e-10)


def test_small_factors_and_large_requests_stay_complete():
    assert kr.factor_spectrum(ring(40), 4).complete, "below PARTIAL_FROM: full eigh"
    w = random_world(kr.PARTIAL_FROM, rng=0)
    assert kr.factor_spectrum(w, int(kr.PARTIAL_FRACTION * w.n) + 1).complete, "most pairs wanted: full eigh"
    assert not kr.factor_spectrum(w, 4).complete
    assert kr.factor_spectrum(w).complete


# --- the heap and enumeration --------------------------------------------------------------------------------------


@given(world=product_worlds(2, 3), m=st.integers(1, 12), centred=st.booleans())
@settings(max_examples=80)
def test_heap_equals_enumeration_bit_for_bit(world, m, centred):
    """Complete factor spectra: the heap's values and index tuples are the stable sort's, exactly (ties too)."""
    m = min(m, world.n - 1)
    with patched(kr, ENUMERATE_PER_PAIR=0):
        heap = kr.kronecker_top(world, m, centred=centred)
    with patched(kr, ENUMERATE_PER_PAIR=10**9):
        enum = kr.kronecker_top(world, m, centred=centred)
    assert np.array_equal(heap.values, enum.values) and np.array_equal(heap.indices, enum.indices)
    spectra = tuple(kr.factor_spectrum(f) for f in world.factors)
    all_values = np.ones(1)
    for spec in spectra:
        all_values = np.kron(all_values, spec.values)
    if centred:
        all_values[0] = -np.inf
    order = np.argsort(-all_values, kind="stable")[:m]
    assert np.array_equal(enum.values, all_values[order])
    assert np.array_equal(np.ravel_multi_index(tuple(enum.indices.T), world.shape), order)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_enumeration_sorts_only_the_candidates_above_the_mth_value(seed):
    rng = np.random.default_rng(seed)
    base = random_world(7, rng=seed)
    world = ProductWorld([base, base, ring(7, laziness=0.2), random_world(7, rng=seed + 10)])  # ties from the pair
    spectra = tuple(kr.factor_spectrum(f) for f in world.factors)
    assert world.n > kr.SORT_ALL_UP_TO
    for m in rng.integers(1, 200, size=5):
        with patched(kr, SORT_ALL_UP_TO=10**9):
            full = kr._enumerate(spectra, int(m), True)
        cut = kr._enumerate(spectra, int(m), True)
        assert np.array_equal(full[0], cut[0]) and np.array_equal(full[1], cut[1])


@given(sizes=st.lists(st.integers(6, 12), min_size=2, max_size=3), seed=seeds(), m=st.integers(1, 4),
       centred=st.booleans(), loops=st.sampled_from([0.0, 0.5]))
@settings(max_examples=40)
def test_kronecker_top_with_partial_factors_matches_dense_eigh(sizes, seed, m, centred, loops):
    """Indefinite factors, partial spectra, the heap forced: the exact top-m of the explicit Kronecker product."""
    world = ProductWorld([random_world(n, rng=seed + i, self_loop=loops if i % 2 else 0.0)
                          for i, n in enumerate(sizes)])
    with partial_everywhere(), patched(kr, ENUMERATE_PER_PAIR=0):
        basis = kr.kronecker_top(world, m + 1, centred=centred)
    K = dense_kernel(world)
    vals, vecs = np.linalg.eigh(K)
    vals, vecs = vals[::-1], vecs[:, ::-1]
    window = slice(1, m + 2) if centred else slice(0, m + 1)
    assert_close(basis.values, vals[window], atol=EIG_ATOL)
    U = np.sqrt(world.p)[:, None] * basis.evaluate()
    start = window.start
    if centred and vals[0] - vals[1] < 1e-6:
        return  # a disconnected world: the trivial eigenvalue is tied
    for j in range(1, m + 2):
        nxt = start + j
        if nxt >= world.n or vals[nxt - 1] - vals[nxt] > 1e-6:  # the first j at a gap
            assert projector_distance(U[:, :j], vecs[:, start:nxt]) < 1e-8


def test_heap_extends_a_partial_dense_spectrum(monkeypatch):
    monkeypatch.setattr(kr, "PARTIAL_FROM", 10)
    monkeypatch.setattr(kr, "PARTIAL_FRACTION", 1.0)
    calls = []
    original = kr.factor_spectrum

    def spy(world, top=None, **kwargs):
        spec = original(world, top, **kwargs)
        calls.append((world.n, top, spec.complete))
        return spec

    monkeypatch.setattr(kr, "factor_spectrum", spy)
    w = ProductWorld([negatives_above_positives(), resampling([0.5, 0.5], 0.4)])
    m = 6
    basis = kr.kronecker_top(w, m)
    ref = np.sort(np.linalg.eigvalsh(w.kernel_matrix()))[::-1][1 : m + 1]
    assert_close(basis.values, ref, atol=EIG_ATOL)
    first = [c for c in calls if c[0] == 30]
    assert first[0] == (30, 2 * (m + 1), False), "a partial dense spectrum first"
    assert len(first) > 1 and first[-1][1] > 2 * (m + 1), "then extended"


# --- the cache -----------------------------------------------------------------------------------------------------


def _modal_worlds(base):
    """Worlds that share the base factor objects and add one nuisance factor each (as a run's modal worlds do)."""
    return [ProductWorld(list(base) + [resampling(np.full(q, 1.0 / q), 0.6)]) for q in (2, 3, 4)]


def _identical(a, b):
    assert np.array_equal(a.values, b.values) and np.array_equal(a.indices, b.indices)
    for sa, sb in zip(a.spectra, b.spectra):
        assert np.array_equal(sa.values, sb.values) and np.array_equal(sa.functions, sb.functions)
    assert np.array_equal(a.evaluate(), b.evaluate())


@pytest.mark.parametrize("centred", [True, False])
def test_cache_reuse_gives_identical_bases(centred):
    base = [ring(12, laziness=0.2), random_world(9, rng=1), path(11, move=0.7)]
    with partial_everywhere():
        cache = kr.FactorSpectra()
        shared = [kr.kronecker_top(w, 3, centred=centred, spectra=cache) for w in _modal_worlds(base)]
        alone = [kr.kronecker_top(w, 3, centred=centred) for w in _modal_worlds(base)]
    assert len(cache) == len(base) + 3
    for a, b in zip(shared, alone):
        _identical(a, b)
    for f in range(len(base)):
        assert shared[0].spectra[f] is shared[1].spectra[f] is shared[2].spectra[f], "computed once"
        assert not shared[0].spectra[f].complete


def test_cache_reuse_with_lanczos_factors_is_bitwise_and_draws_the_same(monkeypatch):
    """Lanczos factors: the same seed gives the same start vectors with or without the cache."""
    monkeypatch.setattr(kr, "FULL_FACTOR_UP_TO", 10)
    base = [random_world(30, rng=4, self_loop=1.0), ring(24, laziness=0.4)]
    cache = kr.FactorSpectra()
    for w in _modal_worlds(base):
        with_cache, without = np.random.default_rng(9), np.random.default_rng(9)
        _identical(kr.kronecker_top(w, 4, rng=with_cache, spectra=cache), kr.kronecker_top(w, 4, rng=without))
        assert with_cache.bit_generator.state == without.bit_generator.state, "rng consumed alike"
    assert not cache.held(base[0]).complete


def test_kronecker_top_leaves_the_rng_alone_without_lanczos_factors():
    gen = np.random.default_rng(3)
    before = gen.bit_generator.state
    kr.kronecker_top(ProductWorld([ring(5), path(4)]), 3, rng=gen)
    assert gen.bit_generator.state == before


def test_factor_spectra_cache_semantics():
    cache = kr.FactorSpectra()
    w = random_world(40, rng=2)
    with partial_everywhere():
        first = cache.get(w, 5)
        assert first.pairs == 5 and not first.complete and w in cache and len(cache) == 1
        assert cache.get(w, 3) is first and cache.get(w, 5) is first, "enough pairs held: no recomputation"
        more = cache.get(w, 9)
        assert more.pairs == 9 and cache.held(w) is more, "more pairs: recomputed and held"
        full = cache.get(w)
        assert full.complete and cache.get(w, 30) is full and cache.get(w, 2) is full, "complete: always returned"
    twin = random_world(40, rng=2)
    assert twin not in cache and cache.held(twin) is None, "keyed by identity, not by value"
    cache.clear()
    assert len(cache) == 0


def test_factor_spectra_keeps_its_factors_alive():
    cache = kr.FactorSpectra()
    w = ring(6)
    ref = weakref.ref(w)
    cache.get(w)
    del w
    gc.collect()
    assert ref() is not None, "the cache holds the factor, so its id cannot be reused"


def test_top_eigenpairs_passes_the_cache_to_kronecker_only():
    cache = kr.FactorSpectra()
    w = ProductWorld([ring(6), path(5)])
    top_eigenpairs(w, 3, spectra=cache)
    assert len(cache) == 2
    top_eigenpairs(w, 3, backend="dense", spectra=cache)
    top_eigenpairs(random_world(60, degree=4, rng=0), 3, backend="sparse", spectra=cache)
    assert len(cache) == 2


# --- evaluate ------------------------------------------------------------------------------------------------------


def naive_evaluate(basis, states):
    """Whole factor rows first, then the columns: the twin of KroneckerBasis.evaluate."""
    out = np.ones((np.size(states), basis.indices.shape[0]))
    for f, (spec, z) in enumerate(zip(basis.spectra, basis.world.unravel(states))):
        out *= spec.functions[np.ravel(z)][:, basis.indices[:, f]]
    return out


@given(world=product_worlds(1, 3), m=st.integers(1, 8), seed=seeds(), count=st.integers(0, 40),
       block=st.sampled_from([1, 3, 512]))
@settings(max_examples=60)
def test_evaluate_equals_a_naive_twin(world, m, seed, count, block):
    m = min(m, world.n - 1)
    basis = kr.kronecker_top(world, m)
    states = np.random.default_rng(seed).integers(0, world.n, size=count)
    with patched(kr, EVALUATE_BLOCK=block):
        assert np.array_equal(basis.evaluate(states), naive_evaluate(basis, states))
        assert np.array_equal(basis.evaluate(), naive_evaluate(basis, np.arange(world.n)))
        grid = states[: count - count % 2].reshape(-1, 2) if count >= 2 else states
        assert np.array_equal(basis.evaluate(grid), naive_evaluate(basis, grid))


def test_evaluate_on_a_huge_world_with_partial_spectra():
    world = ProductWorld([random_world(60, rng=i) for i in range(5)])  # 7.8e8 states
    with partial_everywhere():
        basis = kr.kronecker_top(world, 6)
    assert not any(spec.complete for spec in basis.spectra)
    states = np.random.default_rng(0).integers(0, world.n, size=2_000)
    assert np.array_equal(basis.evaluate(states), naive_evaluate(basis, states))


# --- the centred operator ------------------------------------------------------------------------------------------


@given(world=worlds(), seed=seeds(), columns=st.integers(1, 4))
@settings(max_examples=60)
def test_deflated_operator_equals_the_dense_matrix(world, seed, columns):
    op = centred_operator(world)
    s = np.sqrt(world.p)
    A = dense_kernel(world) - 3.0 * np.outer(s, s)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(world.n)
    X = rng.standard_normal((world.n, columns))
    x0, X0 = x.copy(), X.copy()
    assert op.shape == A.shape and op.dtype == np.float64
    assert_close(op.matvec(x), A @ x)
    assert_close(op.rmatvec(x), A @ x)
    assert_close(op.matmat(X), A @ X)
    assert_close(op @ X[:, :1], A @ X[:, :1])
    assert_close(op.matvec(s), -2.0 * s, what="s moves to −2")
    assert np.array_equal(x, x0) and np.array_equal(X, X0), "inputs untouched"


# --- the BLAS thread limit -----------------------------------------------------------------------------------------


def _blas_threads():
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


def test_solver_threads_limits_and_restores(monkeypatch):
    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # the suite's one thread would make the checks vacuous
        _check_solver_threads_limits_and_restores(monkeypatch)


def _check_solver_threads_limits_and_restores(monkeypatch):
    before = _blas_threads()
    assert all(t == 2 for t in before)
    rows = basis_module.SOLVER_THREADS_FROM
    with solver_threads(rows):
        assert all(t == 1 for t in _blas_threads())
        with solver_threads(rows):  # re-entrant: the inner block leaves the limit in force
            pass
        assert all(t == 1 for t in _blas_threads())
    assert _blas_threads() == before
    with solver_threads(rows - 1):
        assert _blas_threads() == before, "small problems leave the pools alone"
    monkeypatch.setattr(basis_module, "SOLVER_BLAS_THREADS", None)
    with solver_threads(10**6):
        assert _blas_threads() == before
