"""The three eigen-backends agree (THEORY §1, §6, §8.1)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import SOLVER_ATOL, assert_close
from prhsim.jepa import choose_backend, kronecker_top, top_eigenpairs
from prhsim.metrics import principal_angles
from prhsim.worlds import FiniteWorld, ProductWorld, grid, random_world, resampling, ring


def _at_gap(values, m):
    return values[m - 1] - values[m] > 1e-6


@pytest.mark.parametrize("centred", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dense_and_sparse_agree_on_sparse_worlds(seed, centred):
    w = random_world(1500, degree=6, rng=seed)
    m = 8
    ref = top_eigenpairs(w, m + 1, centred=centred, backend="dense")
    it = top_eigenpairs(w, m + 1, centred=centred, backend="sparse", rng=seed)
    assert it.backend == "sparse" and ref.backend == "dense"
    assert_close(it.values, ref.values, atol=SOLVER_ATOL)
    for j in range(1, m + 1):
        if _at_gap(ref.values, j):
            s = principal_angles(ref.evaluate()[:, :j], it.evaluate()[:, :j], w.p).s_theta
            assert s < 1e-8, (j, s)


@given(sizes=st.lists(st.integers(2, 5), min_size=2, max_size=4), seed=st.integers(0, 1000),
       centred=st.booleans(), loops=st.floats(0, 1))
@settings(max_examples=60)
def test_kronecker_matches_dense_on_products(sizes, seed, centred, loops):
    """Indefinite factors (zero-diagonal Sinkhorn worlds) included: exact top-m by algebraic value."""
    factors = [random_world(s, rng=seed + i, self_loop=loops if i % 2 else 0.0) if s >= 3 else resampling([0.3, 0.7], 0.6)
               for i, s in enumerate(sizes)]
    w = ProductWorld(factors)
    m = min(6, w.n - 2)
    kron = kronecker_top(w, m + 1, centred=centred)
    ref = top_eigenpairs(w, m + 1, centred=centred, backend="dense")
    assert_close(kron.values, ref.values, atol=1e-12)
    for j in range(1, m + 1):
        if _at_gap(ref.values, j):
            s = principal_angles(ref.evaluate()[:, :j], kron.evaluate()[:, :j], w.p).s_theta
            assert s < 1e-8


def test_kronecker_falls_back_to_enumeration_when_few_positive_products():
    # factors with one positive eigenvalue (the trivial one): the rest of K's spectrum is <= 0
    neg = ring(4, laziness=0.0)  # eigenvalues 1, 0, 0, -1
    w = ProductWorld([neg, resampling([0.5, 0.5], 1.0)])
    kron = kronecker_top(w, 4, centred=True)
    ref = np.sort(np.linalg.eigvalsh(w.kernel_matrix()))[::-1][1:5]
    assert_close(kron.values, ref)


def test_sparse_world_values_with_operator_on_product():
    w = grid([6, 7], move=[0.4, 0.9])
    ops = top_eigenpairs(w, 5, backend="sparse")
    assert_close(ops.values, top_eigenpairs(w, 5).values, atol=SOLVER_ATOL)


def test_eigenfunctions_are_p_whitened():
    w = ProductWorld([random_world(4, rng=0), random_world(5, rng=1)])
    H = top_eigenpairs(w, 6, centred=True).evaluate()
    assert_close(H.T @ (w.p[:, None] * H), np.eye(6))
    assert_close(w.p @ H, np.zeros(6), what="centred features have p-mean 0")


def test_backend_choice():
    assert choose_backend(ring(50), 5) == "dense"
    assert choose_backend(random_world(2000, degree=4, rng=0), 5) == "sparse"
    assert choose_backend(grid([3, 3]), 2) == "kronecker"


def test_bad_requests():
    with pytest.raises(ValueError, match="eigenpairs"):
        top_eigenpairs(ring(5), 5, centred=True)
    with pytest.raises(ValueError, match="unknown eigen-backend"):
        top_eigenpairs(ring(5), 2, backend="magic")
    with pytest.raises(ValueError, match="ProductWorld"):
        top_eigenpairs(ring(5), 2, backend="kronecker")


def test_huge_product_world_top16():
    w = ProductWorld([ring(1000, laziness=0.3 + 0.1 * i) for i in range(3)])
    assert w.n == 10**9
    basis = top_eigenpairs(w, 16)
    assert basis.backend == "kronecker" and basis.values.size == 16
    assert np.all(np.diff(basis.values) <= 0)
    H = basis.evaluate(np.array([0, 123_456_789, 10**9 - 1]))
    assert H.shape == (3, 16) and np.all(np.isfinite(H))


def test_large_sparse_factor_uses_partial_lanczos_spectrum():
    base = random_world(3000, degree=6, rng=5)  # above FULL_FACTOR_UP_TO: top-|λ| pairs by Lanczos
    w = ProductWorld([base, resampling([0.2, 0.3, 0.5], 0.4)])
    kron = kronecker_top(w, 9)
    assert not kron.spectra[0].complete and kron.spectra[1].complete
    ref = top_eigenpairs(w, 9, backend="sparse")
    assert_close(kron.values, ref.values, atol=SOLVER_ATOL)
    for j in range(1, 9):
        if _at_gap(ref.values, j):
            assert principal_angles(ref.evaluate()[:, :j], kron.evaluate()[:, :j], w.p).s_theta < 1e-7


def test_partial_spectrum_is_extended_when_the_heap_runs_past_it(monkeypatch):
    """Force partial spectra on small indefinite factors; the heap must double them and stay exact."""
    import prhsim.jepa._kronecker as kr

    monkeypatch.setattr(kr, "FULL_FACTOR_UP_TO", 10)
    tops = []
    original = kr.factor_spectrum

    def spy(world, top=None):
        tops.append(top)
        return original(world, top)

    monkeypatch.setattr(kr, "factor_spectrum", spy)
    # a factor with 20 eigenvalues -0.03 above its 9 positive ones 0.02: the heap must walk past the negatives
    n = 30
    rng = np.random.default_rng(0)
    s = np.full(n, 1 / np.sqrt(n))
    V, _ = np.linalg.qr(np.column_stack([s, rng.normal(size=(n, n - 1))]))
    lam = np.array([1.0] + [-0.03] * 20 + [0.02] * 9)
    K = (V * lam) @ V.T
    w = ProductWorld([FiniteWorld(np.full(n, 1 / n), np.maximum(K, 0) / n), resampling([0.5, 0.5], 0.4)])
    m = 6
    kron = kr.kronecker_top(w, m)
    ref = np.sort(np.linalg.eigvalsh(w.kernel_matrix()))[::-1][1 : m + 1]
    assert_close(kron.values, ref, atol=1e-10)
    assert max(t for t in tops if t is not None) > 2 * (m + 1), "the doubling path was exercised"
