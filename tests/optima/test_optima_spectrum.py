"""The three eigen-backends agree (docs/theory.md §1, §6, §8.1)."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

from support import ATOL, SOLVER_ATOL, assert_close, dense, negatives_above_positives, projector_distance
from prhsim.optima import choose_backend, kronecker_top, top_eigenpairs, whitened_optimum
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
    import prhsim.optima._kronecker as kr

    monkeypatch.setattr(kr, "FULL_FACTOR_UP_TO", 10)
    tops = []
    original = kr.factor_spectrum

    def spy(world, top=None, **kwargs):
        tops.append(top)
        return original(world, top, **kwargs)

    monkeypatch.setattr(kr, "factor_spectrum", spy)
    # a factor with 20 eigenvalues -0.03 above its 9 positive ones 0.02: the heap must walk past the negatives
    w = ProductWorld([negatives_above_positives(), resampling([0.5, 0.5], 0.4)])
    m = 6
    kron = kr.kronecker_top(w, m)
    ref = np.sort(np.linalg.eigvalsh(w.kernel_matrix()))[::-1][1 : m + 1]
    assert_close(kron.values, ref, atol=1e-10)
    assert max(t for t in tops if t is not None) > 2 * (m + 1), "the doubling path was exercised"


# --- the sparse backend's centring on a world whose top centred eigenvalues go negative (docs/theory.md §1.1, §8.3) ---
#
# Deflating with −ssᵀ instead of −3ssᵀ parks s at eigenvalue 0. That is harmless while the requested window
# λ_2..λ_{m+1} stays positive, so a test world must have *few* positive eigenvalues and more than 800 states
# (the automatic backend then picks Lanczos). Trace K ≥ 0 forces the many negative eigenvalues to be small, so
# the world is built as K = K_C ⊗ K_D with an explicit spectrum:
#
# * C: 4 states, uniform p, Hadamard eigenvectors, K_C = H diag(1, .7, .45, .2) Hᵀ. The entries of K_C are
#   (1 ± .7 ± .45 ± .2)/4 with an even number of minus signs, the smallest (1 − .7 − .45 + .2)/4 = .0125 ≥ 0.
# * D: 201 states, uniform p, K_D = s sᵀ − N with N = V diag(ν) Vᵀ on s^⊥, ν_1 = 5e-4 and ν_2..ν_200 evenly
#   in [4e-3, 4.9e-3]. Π_D = K_D / 201 ≥ 0 because |N_ij| ≤ max ν < 1/201.
#
# spec K = {λ_C(i)·μ_D(j)}: four positive values 1, .7, .45, .2, then −.2ν_1 = −1e-4, −.45ν_1 = −2.25e-4,
# −.7ν_1 = −3.5e-4, −ν_1 = −5e-4, then the bulk from −.2·4e-3 = −8e-4 down. The centred top-7 is
# .7, .45, .2, −1e-4, −2.25e-4, −3.5e-4, −5e-4 (gap 3e-4 to the bulk); the −ssᵀ deflation would return
# .7, .45, .2, 0, −1e-4, −2.25e-4, −3.5e-4 with s itself as the fourth vector.

FEW_POSITIVE_C = np.array([1.0, 0.7, 0.45, 0.2])
FEW_POSITIVE_NU = np.concatenate([[5e-4], np.linspace(4e-3, 4.9e-3, 199)])
FEW_POSITIVE_M = 7


def _few_positive_world():
    H = np.array([[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 1, -1], [1, -1, -1, 1]]) / 2.0  # rows: eigenvectors
    K_C = (H.T * FEW_POSITIVE_C) @ H
    n_d = FEW_POSITIVE_NU.size + 1
    s_d = np.full(n_d, 1 / np.sqrt(n_d))
    rng = np.random.default_rng(0)
    V = np.linalg.qr(np.column_stack([s_d, rng.standard_normal((n_d, n_d - 1))]))[0][:, 1:]
    K_D = np.outer(s_d, s_d) - (V * FEW_POSITIVE_NU) @ V.T
    Pi = sp.csr_array(sp.kron(sp.csr_array(K_C / 4), sp.csr_array(K_D / n_d)))
    n = 4 * n_d
    world = FiniteWorld(np.full(n, 1 / n), Pi)
    # the naive twin: K = D^{-1/2} Π D^{-1/2} densified by hand, full eigh, descending
    p = np.full(n, 1 / n)
    K = Pi.toarray() / np.sqrt(np.outer(p, p))
    vals, vecs = np.linalg.eigh((K + K.T) / 2)
    expected = np.sort(np.outer(FEW_POSITIVE_C, np.concatenate([[1.0], -FEW_POSITIVE_NU])).ravel())[::-1]
    return world, vals[::-1], vecs[:, ::-1], expected


@pytest.fixture(scope="module")
def few_positive():
    return _few_positive_world()


def test_few_positive_world_is_as_designed(few_positive):
    world, vals, vecs, expected = few_positive
    assert world.is_sparse and world.n == 804
    assert choose_backend(world, FEW_POSITIVE_M) == "sparse"
    assert_close(vals, expected, atol=ATOL, what="naive eigh = the Kronecker products")
    assert_close(expected[1 : FEW_POSITIVE_M + 1], [0.7, 0.45, 0.2, -1e-4, -2.25e-4, -3.5e-4, -5e-4])
    assert np.sum(expected > 0) == 4
    assert_close(expected[FEW_POSITIVE_M + 1], -8e-4, what="the bulk starts 3e-4 below the window")
    assert_close(vecs[:, 0] * np.sign(vecs[0, 0]), world.sqrt_p, what="λ_1 = 1 belongs to s")


def test_sparse_centred_window_reaching_negative_eigenvalues(few_positive):
    """Auto backend (Lanczos) on the centred operator vs naive dense eigh: values, subspaces, centring."""
    world, vals, vecs, _ = few_positive
    m = FEW_POSITIVE_M
    basis = top_eigenpairs(world, m, centred=True, rng=3)
    assert basis.backend == "sparse"
    assert_close(basis.values, vals[1 : m + 1], atol=SOLVER_ATOL, what="centred values are λ_2..λ_{m+1}")
    U = np.sqrt(world.p)[:, None] * basis.evaluate()
    assert_close(world.sqrt_p @ U, np.zeros(m), atol=SOLVER_ATOL, what="no trivial direction in the centred basis")
    assert_close(U.T @ U, np.eye(m), atol=SOLVER_ATOL)
    for j in range(1, m + 1):  # every j is at a gap of at least 1.25e-4
        assert projector_distance(U[:, :j], vecs[:, 1 : j + 1]) < SOLVER_ATOL, j
    assert_close(np.sum(U * (world.kernel.matmat(U)), axis=0), vals[1 : m + 1], atol=SOLVER_ATOL,
                 what="Rayleigh quotients of K itself")


def test_sparse_closed_form_with_negative_window(few_positive):
    """The whole closed form through the automatic (sparse) backend: value 2Σ(1 − λ_i), i = 2..k+1."""
    world, vals, vecs, _ = few_positive
    k = FEW_POSITIVE_M - 1
    opt = whitened_optimum(world, k)
    assert opt.basis.backend == "sparse" and opt.unique
    assert_close(opt.eigenvalues, vals[1 : k + 2], atol=SOLVER_ATOL)
    assert_close(opt.value, 2 * np.sum(1 - vals[1 : k + 1]), atol=SOLVER_ATOL)
    assert_close(opt.gap, vals[k] - vals[k + 1], atol=SOLVER_ATOL)
    F = opt.F
    assert_close(world.p @ F, np.zeros(k), atol=SOLVER_ATOL)
    assert projector_distance(np.sqrt(world.p)[:, None] * F, vecs[:, 1 : k + 1]) < SOLVER_ATOL


@pytest.mark.parametrize("seed", [0, 1])
def test_explicit_sparse_backend_deep_into_an_indefinite_spectrum(seed):
    """A small sparse world, Lanczos forced, m = n − 2: the window holds most of the negative eigenvalues."""
    w = random_world(40, degree=3, rng=seed)
    assert w.is_sparse
    m = w.n - 2
    K = dense(w.Pi) / np.sqrt(np.outer(w.p, w.p))
    vals, vecs = np.linalg.eigh((K + K.T) / 2)
    vals, vecs = vals[::-1], vecs[:, ::-1]
    assert vals[m] < -0.05 and vals[m - 1] < -0.05  # the parked 0 of a −ssᵀ deflation would enter the window
    basis = top_eigenpairs(w, m, centred=True, backend="sparse", rng=seed)
    assert basis.backend == "sparse"
    assert_close(basis.values, vals[1 : m + 1], atol=SOLVER_ATOL)
    U = np.sqrt(w.p)[:, None] * basis.evaluate()
    assert_close(w.sqrt_p @ U, np.zeros(m), atol=SOLVER_ATOL)
    for j in range(1, m + 1):
        if _at_gap(vals[1:], j):
            assert projector_distance(U[:, :j], vecs[:, 1 : j + 1]) < SOLVER_ATOL, j
