"""Named worlds have the spectra their constructions promise."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from support import assert_close, dense
from prhsim.worlds import path, random_world, resampling, ring


@given(n=st.integers(3, 40), laziness=st.floats(0, 1))
def test_ring_spectrum(n, laziness):
    vals = np.sort(np.linalg.eigvalsh(dense(ring(n, laziness=laziness).kernel_matrix())))
    expected = np.sort(laziness + (1 - laziness) * np.cos(2 * np.pi * np.arange(n) / n))
    assert_close(vals, expected, atol=1e-12)


@given(n=st.integers(2, 40), move=st.floats(0, 1))
def test_path_spectrum(n, move):
    vals = np.sort(np.linalg.eigvalsh(dense(path(n, move=move).kernel_matrix())))
    expected = np.sort(1 - move * (1 - np.cos(np.pi * np.arange(n) / n)))
    assert_close(vals, expected, atol=1e-12)


def test_resampling_spectrum():
    q = np.array([0.1, 0.2, 0.3, 0.4])
    vals = np.sort(np.linalg.eigvalsh(resampling(q, 0.3).kernel_matrix()))[::-1]
    assert_close(vals, [1, 0.7, 0.7, 0.7])


def test_large_ring_is_sparse_by_default():
    assert ring(1000).is_sparse and not ring(10).is_sparse


def test_random_world_is_seeded():
    a, b, c = random_world(20, rng=3), random_world(20, rng=3), random_world(20, rng=4)
    assert_close(a.Pi, b.Pi, atol=0)
    assert not np.allclose(a.Pi, c.Pi)


def test_sparse_random_world_marginals():
    w = random_world(2000, degree=6, rng=0)
    assert_close(np.asarray(w.Pi.sum(axis=1)).ravel(), w.p, atol=1e-14)


@pytest.mark.parametrize("call, message", [
    (lambda: ring(2), "ring size"),
    (lambda: path(5, move=1.5), "move"),
    (lambda: resampling([0.5, 0.5], -0.1), "rate"),
    (lambda: random_world(10, degree=10), "degree"),
])
def test_bad_parameters(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_an_unreachable_sinkhorn_target_is_one_clear_error():
    """p(z) > 1/2 without self-pairs has no symmetric scaling; the overflow on the way is not a warning."""
    from prhsim.worlds import sinkhorn_world

    with pytest.raises(ValueError, match="Sinkhorn scaling diverged"):
        sinkhorn_world(np.ones((3, 3)) - np.eye(3), [0.6, 0.2, 0.2])
