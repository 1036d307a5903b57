"""Evaluating a learned representation against the closed form (docs/theory.md §1.1, §2, §7): cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from support import ATOL, assert_close
from prhsim.optima import closed_form, spectral_contrastive_optimum, whitened_optimum
from prhsim.objectives import population_sigreg
from prhsim.learners._evaluate import COLLAPSE_TOL, evaluate_learned, seed_spread, subspace_distance, trace_covariance
from prhsim.worlds import path, random_world


def _orthogonal(k: int, gen: np.random.Generator) -> np.ndarray:
    Q, _ = np.linalg.qr(gen.normal(size=(k, k)))
    return Q


@settings(max_examples=15)
@given(n=st.integers(5, 14), k=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_ky_fan_ratio_is_at_least_one_on_random_features(n, k, seed):
    """Any whitened F: ``E_π‖f − f'‖² ≥ L*`` (Ky Fan), so the ratio is ≥ 1; the closed form attains 1."""
    world = random_world(n, rng=seed)
    opt = closed_form(world, k)
    gen = np.random.default_rng(seed)
    F = gen.normal(size=(n, k)) * gen.uniform(0.1, 5.0, size=k) + gen.normal(size=k)
    result = evaluate_learned(F, world, opt, ep=False)
    assert result.alignment_ratio >= 1.0 - 1e-12
    at_optimum = evaluate_learned(opt.F, world, opt, ep=False)
    assert at_optimum.alignment_ratio == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("centred", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_closed_form_after_an_affine_map_is_at_distance_zero(centred, seed):
    """``F*·M + b`` (M invertible; b = 0 uncentred) whitens back to ``F*·Q``: s_Θ = ρ_P = 0, the ratio is 1."""
    world = random_world(12, rng=seed)
    opt = whitened_optimum(world, 3, centred=centred)
    gen = np.random.default_rng(seed)
    M = _orthogonal(3, gen) @ np.diag(gen.uniform(0.3, 4.0, size=3))
    shift = gen.normal(size=3) if centred else np.zeros(3)
    result = evaluate_learned(opt.F @ M + shift, world, opt)
    assert result.s_theta < ATOL and result.rho_p < ATOL
    assert result.alignment_ratio == pytest.approx(1.0, abs=ATOL)
    assert_close(result.correlations, np.ones(3), atol=ATOL)
    assert_close(result.mean, shift + world.p @ opt.F @ M, atol=ATOL)
    assert result.cov_error == pytest.approx(np.linalg.norm(M.T @ M - np.eye(3)), abs=1e-9)
    rotated = evaluate_learned(opt.F @ _orthogonal(3, gen), world, opt)
    assert rotated.s_theta < ATOL and rotated.rho_p < ATOL and rotated.cov_error < ATOL
    assert abs(abs(rotated.det_q) - 1.0) < ATOL


def test_a_different_subspace_is_at_positive_distance():
    world = path(8)
    opt = whitened_optimum(world, 2)
    wrong = whitened_optimum(world, 3).F[:, [0, 2]]  # swaps the second slow feature for the third
    result = evaluate_learned(wrong, world, opt)
    assert result.s_theta == pytest.approx(np.sqrt(0.5), abs=1e-9)  # one right angle out of k = 2
    assert result.alignment_ratio > 1.0 + 1e-3


def test_population_sigreg_at_the_solution_and_at_the_closed_form():
    world = path(8)
    opt = whitened_optimum(world, 2)
    F = 2.0 * opt.F
    A = np.linalg.qr(np.random.default_rng(0).normal(size=(2, 2)))[0]
    result = evaluate_learned(F, world, opt, directions=A)
    assert result.ep == pytest.approx(float(population_sigreg(F, world.p, A)), rel=1e-12)
    assert result.ep_closed_form == pytest.approx(float(population_sigreg(opt.F, world.p, A)), rel=1e-12)
    assert evaluate_learned(F, world, opt, ep=False).ep is None
    assert evaluate_learned(F, world, opt).ep is not None  # "auto": a small world


def test_collapse_indicator():
    world = path(8)
    opt = whitened_optimum(world, 2)
    small = evaluate_learned(1e-3 * opt.F + 5.0, world, opt)
    assert small.trace_cov == pytest.approx(2e-6, rel=1e-9) and small.collapsed
    assert small.s_theta < ATOL  # whitening still recovers the direction of a shrunken table
    big = evaluate_learned(opt.F, world, opt)
    assert big.trace_cov == pytest.approx(2.0, rel=1e-12) and not big.collapsed
    assert trace_covariance(opt.F, world.p) == pytest.approx(2.0)
    assert COLLAPSE_TOL * 2 > small.trace_cov


def test_bad_inputs_raise_one_line_errors():
    world = path(8)
    opt = whitened_optimum(world, 2)
    F = opt.F.copy()
    F[3, 1] = np.nan
    with pytest.raises(ValueError, match="learned features contain NaN or inf"):
        evaluate_learned(F, world, opt)
    with pytest.raises(ValueError, match=r"features must have shape \(8, 2\)"):
        evaluate_learned(opt.F[:, :1], world, opt)
    with pytest.raises(ValueError, match=r"features must have shape \(9, 2\)"):
        evaluate_learned(np.ones((9, 2)), path(9), opt)
    with pytest.raises(ValueError, match="whitened optimum"):
        evaluate_learned(opt.F, world, spectral_contrastive_optimum(world, 2))
    with pytest.raises(ValueError, match="singular"):
        evaluate_learned(np.ones((8, 2)), world, opt)  # fully collapsed: nothing to whiten
    with pytest.raises(ValueError, match="ep must be"):
        evaluate_learned(opt.F, world, opt, ep="yes")


def test_seed_spread_and_subspace_distance():
    world = path(8)
    opt = whitened_optimum(world, 2)
    gen = np.random.default_rng(0)
    stack = np.stack([opt.F @ _orthogonal(2, gen) * s + 1.0 for s in (1.0, 2.0, 0.5)])
    spread = seed_spread(stack, world.p)
    assert spread.rho_p.shape == (3, 3) and np.max(spread.rho_p) < ATOL and np.max(spread.s_theta) < ATOL
    other = np.stack([opt.F, whitened_optimum(world, 3).F[:, [0, 2]]])
    spread = seed_spread(other, world.p)
    assert spread.s_theta[0, 1] == pytest.approx(np.sqrt(0.5), abs=1e-9) and spread.rho_p[1, 0] == spread.rho_p[0, 1]
    assert subspace_distance(stack[1], opt.F, world.p) < ATOL
    assert np.isnan(subspace_distance(np.full((8, 2), np.nan), opt.F, world.p))
    with pytest.raises(ValueError, match="seeds"):
        seed_spread(opt.F, world.p)
