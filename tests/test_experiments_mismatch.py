"""Kernel-mismatch bounds: the observed drift never exceeds Yu–Wang–Samworth or Davis–Kahan (THEORY §3)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from prhsim.experiments import kernel_mismatch
from prhsim.worlds import FiniteWorld, random_world, sinkhorn_world

SLACK = 1e-9


def perturbed(world: FiniteWorld, scale: float, rng: np.random.Generator) -> FiniteWorld:
    """Π₂ = (1 − t)Π₁ + tΠ' with Π' another random coupling of the same p (Sinkhorn), t = scale."""
    n = world.n
    A = rng.uniform(size=(n, n)) ** 3
    other = sinkhorn_world((A + A.T) / 2, world.p)
    return FiniteWorld(world.p, (1 - scale) * np.asarray(world.Pi) + scale * np.asarray(other.Pi))


@given(n=st.integers(5, 25), seed=st.integers(0, 100_000), scale=st.floats(0.001, 1.0),
       centred=st.booleans(), loops=st.sampled_from([0.0, 0.5, 3.0]), data=st.data())
@settings(max_examples=250)
def test_observed_drift_never_exceeds_the_bounds(n, seed, scale, centred, loops, data):
    k = data.draw(st.integers(1, n - 3))
    rng = np.random.default_rng(seed)
    w1 = random_world(n, rng=rng, self_loop=loops)
    w2 = perturbed(w1, scale, rng)
    r = kernel_mismatch(w1, w2, k, centred=centred)
    assert r.residual <= np.sqrt(2) * r.sin_theta + SLACK
    assert r.sin_theta <= r.residual + SLACK
    if np.isfinite(r.yws_sin):
        assert r.sin_theta <= r.yws_sin + SLACK
        assert r.residual <= r.yws_residual + SLACK
    if np.isfinite(r.dk_sin):
        assert r.sin_theta <= r.dk_sin + SLACK
    if np.isfinite(r.weyl_sin):
        assert r.sin_theta <= r.weyl_sin + SLACK


def test_small_perturbation_is_in_range_of_both_bounds():
    rng = np.random.default_rng(0)
    w1 = random_world(30, rng=rng, self_loop=3.0)
    w2 = perturbed(w1, 0.02, rng)
    r = kernel_mismatch(w1, w2, 2)
    assert np.isfinite(r.yws_sin) and np.isfinite(r.dk_sin)
    assert 0 < r.sin_theta <= r.dk_sin
    ratios = r.ratios()
    assert 0 < ratios["yws_sin"] <= 1 and 0 < ratios["dk_sin"] <= 1


def test_identical_kernels_have_zero_drift():
    w = random_world(12, rng=1)
    r = kernel_mismatch(w, w, 3)
    assert r.sin_theta < 1e-10 and r.residual < 1e-10 and r.e_fro == 0


def test_different_marginals_are_refused():
    with pytest.raises(ValueError, match="same p"):
        kernel_mismatch(random_world(8, rng=0), random_world(8, rng=1), 2)
