"""ProductWorld: row-major Kronecker structure, never formed (docs/theory.md §6)."""

import numpy as np
import pytest

from support import assert_close, dense
from prhsim.worlds import FiniteWorld, ProductWorld, grid, path, random_world, ring, torus


def _factors():
    return [random_world(3, rng=1), ring(4), random_world(5, rng=2, concentration=0.5)]


def test_kernel_and_p_match_np_kron_row_major():
    fs = _factors()
    w = ProductWorld(fs)
    assert w.shape == (3, 4, 5) and w.n == 60
    K = np.kron(dense(fs[0].kernel_matrix()), np.kron(dense(fs[1].kernel_matrix()), dense(fs[2].kernel_matrix())))
    assert_close(w.kernel_matrix(), K)
    assert_close(w.p, np.kron(fs[0].p, np.kron(fs[1].p, fs[2].p)))
    X = np.random.default_rng(0).normal(size=(60, 3))
    assert_close(w.kernel.matmat(X), K @ X)
    states = np.array([0, 7, 59])
    assert_close(w.p_at(states), w.p[states])
    assert w.unravel(states)[1].tolist() == [0, 1, 3]  # state 59 = (2, 3, 4)


def test_nested_products_are_flattened_and_to_finite_is_valid():
    w = ProductWorld([ProductWorld([ring(3), ring(4)]), path(2)])
    assert w.shape == (3, 4, 2)
    f = w.to_finite()
    assert isinstance(f, FiniteWorld) and f.n == 24
    assert_close(dense(f.kernel_matrix()), w.kernel_matrix())


def test_huge_product_world_refuses_to_materialise():
    w = ProductWorld([ring(1000)] * 3)
    assert w.n == 10**9
    with pytest.raises(ValueError, match="refusing"):
        _ = w.p
    assert_close(w.p_at(np.array([0, 10**9 - 1])), [1e-9, 1e-9])


def test_torus_and_grid_are_products():
    assert torus([3, 5]).shape == (3, 5)
    g = grid([3, 4], move=[0.2, 0.9])
    assert g.shape == (3, 4)
    with pytest.raises(ValueError, match="one move probability per axis"):
        grid([3, 4], move=[0.2])
    with pytest.raises(ValueError, match="factors must be worlds"):
        ProductWorld([np.eye(2)])
