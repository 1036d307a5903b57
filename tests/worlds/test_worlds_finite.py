"""FiniteWorld: validation on construction and the kernel K = D^-1/2 Π D^-1/2 (docs/theory.md §0)."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, strategies as st

from support import assert_close, dense
from prhsim.worlds import FiniteWorld, random_world


def _valid():
    p = np.array([0.2, 0.3, 0.5])
    Pi = np.array([[0.1, 0.05, 0.05], [0.05, 0.15, 0.1], [0.05, 0.1, 0.35]])
    return p, Pi


def test_valid_world_and_kernel_identities():
    p, Pi = _valid()
    w = FiniteWorld(p, Pi)
    K = w.kernel_matrix()
    s = np.sqrt(p)
    assert_close(K @ s, s, what="K s = s")
    assert_close(K, K.T)
    assert_close(w.kernel.matvec(s), s)
    vals = np.linalg.eigvalsh(K)
    assert vals.max() == pytest.approx(1.0) and vals.min() >= -1 - 1e-12


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda p, Pi: (p, Pi + 0.01 * np.array([[0, 1, -1], [-1, 0, 1], [1, -1, 0]])), "symmetric"),
        (lambda p, Pi: (np.array([0.25, 0.25, 0.5]), Pi), "marginal"),
        (lambda p, Pi: (p, Pi + 0.06 * np.array([[1, -1, 0], [-1, 1, 0], [0, 0, 0]])), "non-negative"),
        (lambda p, Pi: (p, np.where(np.eye(3) == 1, np.nan, Pi)), "NaN"),
        (lambda p, Pi: (np.array([np.nan, 0.5, 0.5]), Pi), "NaN"),
        (lambda p, Pi: (np.array([0.0, 0.5, 0.5]), Pi), "strictly positive"),
        (lambda p, Pi: (p * 2, Pi), "sum to 1"),
        (lambda p, Pi: (p, Pi[:2, :2]), "shape"),
    ],
)
def test_bad_input_raises_value_error_naming_the_violation(mutate, message):
    p, Pi = mutate(*_valid())
    with pytest.raises(ValueError, match=message):
        FiniteWorld(p, Pi)


def test_negative_entry_is_quoted():
    p = np.array([0.5, 0.5])
    Pi = np.array([[0.6, -0.1], [-0.1, 0.6]])
    with pytest.raises(ValueError, match=r"Pi\[0, 1\] = -0.1"):
        FiniteWorld(p, Pi)


def test_asymmetric_pi_is_symmetrised_only_when_asked():
    # a non-reversible chain on a 3-cycle with uniform p: both marginals are p, Π is not symmetric
    p = np.full(3, 1 / 3)
    P = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])
    Pi = p[:, None] * P
    with pytest.raises(ValueError, match="symmetric"):
        FiniteWorld(p, Pi)
    w = FiniteWorld(p, Pi, symmetrize=True)
    assert_close(dense(w.Pi), (Pi + Pi.T) / 2)


def test_sparse_world_stays_sparse():
    w = random_world(300, degree=4, rng=0)
    assert w.is_sparse
    assert sp.issparse(w.kernel_matrix())
    x = np.random.default_rng(0).normal(size=w.n)
    assert_close(w.kernel.matvec(x), dense(w.kernel_matrix()) @ x)


def test_sparse_validation_names_negative_entry():
    p = np.array([0.5, 0.5])
    Pi = sp.csr_array(np.array([[0.6, -0.1], [-0.1, 0.6]]))
    with pytest.raises(ValueError, match="non-negative"):
        FiniteWorld(p, Pi)


def test_world_arrays_are_read_only():
    w = FiniteWorld(*_valid())
    with pytest.raises(ValueError):
        w.p[0] = 0.5


@given(n=st.integers(3, 25), seed=st.integers(0, 10_000))
def test_random_worlds_are_valid_and_indefinite_without_self_loops(n, seed):
    w = random_world(n, rng=seed)
    vals = np.linalg.eigvalsh(w.kernel_matrix())
    assert vals[-1] == pytest.approx(1.0, abs=1e-10)
    assert vals[0] >= -1 - 1e-10
    assert_close(w.Pi.sum(axis=0), w.p, atol=1e-12)
    if n >= 6:
        assert vals[0] < 0  # zero diagonal: trace K = 0 forces negative eigenvalues


def _sparse_valid():
    p, Pi = _valid()
    return p, sp.csr_array(Pi)


@pytest.mark.parametrize("symmetrize", [False, True])
def test_sparse_pi_is_a_write_protected_copy(symmetrize):
    p, Pi = _sparse_valid()
    w = FiniteWorld(p, Pi, symmetrize=symmetrize)
    for array in (w.Pi.data, w.Pi.indices, w.Pi.indptr):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = array[0]
    before = dense(w.Pi)
    Pi.data[:] = 0.0  # the caller's matrix, mutated after construction
    Pi.indices[:] = 0
    assert_close(dense(w.Pi), before, atol=0)
    assert_close(dense(w.Pi), _valid()[1], atol=0)


def test_dense_world_does_not_share_the_caller_s_arrays():
    p, Pi = _valid()
    w = FiniteWorld(p, Pi)
    p[:] = 1 / 3
    Pi[:] = 0.0
    assert_close(w.p, _valid()[0], atol=0)
    assert_close(w.Pi, _valid()[1], atol=0)
    with pytest.raises(ValueError, match="read-only"):
        w.Pi[0, 0] = 1.0


def test_cached_kernel_matrix_is_write_protected():
    dense_world, sparse_world = FiniteWorld(*_valid()), FiniteWorld(*_sparse_valid())
    K = dense_world.kernel_matrix()
    with pytest.raises(ValueError, match="read-only"):
        K[0, 0] = 2.0
    Ks = sparse_world.kernel_matrix()
    for array in (Ks.data, Ks.indices, Ks.indptr):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = array[0]
    assert dense_world.kernel_matrix() is K  # the one cached matrix, intact
    assert_close(dense(Ks), K)
    x = np.array([1.0, -2.0, 0.5])
    assert_close(sparse_world.kernel.matvec(x), K @ x)  # read-only arrays still serve every operation
    copy = dense_world.dense_kernel()
    copy[0, 0] = 5.0  # dense_kernel is the caller's own copy
    assert K[0, 0] != 5.0


def test_a_frozen_sparse_world_supports_the_usual_operations():
    w = random_world(300, degree=4, rng=1)
    K = w.kernel_matrix()
    assert_close(dense(K), dense(K.T))
    assert_close(dense(K @ K), dense(K) @ dense(K))
    assert_close(np.asarray(w.Pi.sum(axis=0)).ravel(), w.p, atol=1e-12)
    assert sp.issparse(K.tocoo()) and not K.data.flags.writeable
