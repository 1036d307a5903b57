"""Stopping on convergence (docs/theory.md §1.5): the eigen-residual against a twin from its definition, the
Davis–Kahan bound as a theorem over random worlds, the preconditioned heavy-ball method, and the stopping
rule against twins that take a fixed budget (float64, conftest.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from prhsim.learners import CurveRate, curve_rate, eigen_residual, heavy_ball
from prhsim.learners._evaluate import subspace_distance
from prhsim.optima import whitened_optimum
from prhsim.worlds import gridscene, random_world, ring
from prhsim.testing.strategies import as_finite, seeds, worlds_at_a_gap

jax = pytest.importorskip("jax")
pytest.importorskip("optax")

from prhsim.learners import TrainConfig, train  # noqa: E402


def naive_residual(F: np.ndarray, world, centred: bool) -> tuple[float, np.ndarray]:
    """r and the Ritz values from the definition: dense T = P⁻¹J, R = TX − X C⁻¹XᵀPTX, r² = tr(C⁻¹RᵀPR)."""
    finite = as_finite(world)
    p = np.asarray(finite.p, dtype=float)
    J = np.asarray(finite.Pi.toarray() if hasattr(finite.Pi, "toarray") else finite.Pi, dtype=float)
    T = J / p[:, None]
    X = F - p @ F if centred else F
    P = np.diag(p)
    C = X.T @ P @ X
    M = np.linalg.solve(C, X.T @ P @ T @ X)
    R = T @ X - X @ M
    r = math.sqrt(np.trace(np.linalg.solve(C, R.T @ P @ R)))
    return r, np.sort(np.linalg.eigvals(M).real)[::-1]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), seed=seeds(), centred=st.booleans())
def test_the_residual_equals_its_definition_on_pair_lists_and_factor_laws(data, seed, centred):
    """Random tables on random worlds (product worlds use the factor law, others the pair list): r and the
    Ritz values equal the dense twin's to 1e-10."""
    world, k, _ = data.draw(worlds_at_a_gap(), label="world")
    F = np.random.default_rng(seed).standard_normal((world.n, k))
    res = eigen_residual(F, world, centred=centred)
    r, ritz = naive_residual(F, world, centred)
    assert res.norm == pytest.approx(r, rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(res.ritz, ritz, rtol=0, atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), seed=seeds(), size=st.floats(1e-4, 1.0))
def test_davis_kahan_bounds_the_distance_to_the_optimum(data, seed, size):
    """The sinΘ theorem: for any table whose Ritz values stay above μ_{k+1}, s_Θ ≤ r / ((θ_k − μ_{k+1})·√k)."""
    world, k, mu = data.draw(worlds_at_a_gap(), label="world")
    opt = whitened_optimum(world, k)
    F = opt.features() + size * np.random.default_rng(seed).standard_normal((world.n, k))
    res = eigen_residual(F, world)
    bound = res.bound(mu[k])
    s = subspace_distance(F, opt.features(), np.asarray(world.p))
    assert s <= bound * (1 + 1e-9) + 1e-12
    if res.ritz[-1] <= mu[k]:
        assert bound == math.inf


def test_the_residual_vanishes_on_the_optimum_and_refuses_a_collapsed_table():
    world = random_world(20, rng=3)
    opt = whitened_optimum(world, 3)
    res = eigen_residual(opt.features() @ np.array([[0.0, 1, 0], [1, 0, 0], [0, 0, 2]]), world)
    assert res.norm < 1e-12 and np.allclose(res.ritz, opt.eigenvalues[:3], atol=1e-12)
    with pytest.raises(ValueError, match="singular"):
        eigen_residual(np.ones((world.n, 3)), world)
    with pytest.raises(ValueError, match="one row per state"):
        eigen_residual(np.ones((world.n + 1, 3)), world)


def test_heavy_ball_is_polyak_s_choice():
    g, s = 0.0072, 1.9976
    eta, beta = heavy_ball(g, s)
    assert eta == pytest.approx(4 / (math.sqrt(s) + math.sqrt(g)) ** 2, rel=1e-15)
    assert math.sqrt(beta) == pytest.approx((math.sqrt(s) - math.sqrt(g)) / (math.sqrt(s) + math.sqrt(g)), rel=1e-14)
    with pytest.raises(ValueError, match="0 < gap <= spread"):
        heavy_ball(0.0, 1.0)


def test_curve_rate_of_a_geometric_curve():
    steps = np.arange(0, 500, 100)
    rate = curve_rate(steps, 0.5 * 0.8 ** (steps / 100), target=1e-3)
    assert rate.rate_per_100 == pytest.approx(0.8, rel=1e-12)
    # 0.5·0.8^(4 + m/100) = 1e-3 → m = 100·log(1e-3/(0.5·0.8^4))/log(0.8)
    assert rate.steps_needed == math.ceil(100 * math.log(1e-3 / (0.5 * 0.8**4)) / math.log(0.8) - 1e-9)
    flat = curve_rate(steps, np.full(5, 0.3), target=1e-3)
    assert flat.steps_needed is None and "no longer falling" in flat.describe("s_Theta")
    assert curve_rate(steps[:1], np.ones(1), 1e-3) is None
    assert "about" in CurveRate(0.5, 120).describe("s_Theta")


RING = ring(64)
OPT = whitened_optimum(RING, 2)


def test_preconditioned_heavy_ball_reaches_the_optimum_at_the_predicted_rate():
    """ring(64), k = 2, gap 0.0072: AdamW at lr 0.1 is still at s_Θ > 0.1 after 1000 steps; the preconditioned
    heavy ball with (η, β) from the spectrum stops on its bound (≤ 1e-4) within 300 steps, and its measured
    rate over the last logged stretch is the predicted √β per step within 25 %."""
    config = TrainConfig.preconditioned(OPT.eigenvalues, steps=1000, log_every=20, tol=1e-4)
    assert config.method == "precond" and config.momentum > 0.5
    result = train(RING, 2, config, seeds=(0, 1), reference=OPT)
    stop = result.stop
    assert stop.rule == "residual" and list(stop.converged) == [True, True] and stop.reason == ("residual", "residual")
    assert max(stop.at) <= 300 and result.logged[-1] == max(stop.at)
    assert np.all(result.distance[:, -1] <= stop.bound[:, -1] * (1 + 1e-9)) and np.all(stop.bound[:, -1] <= 1e-4)
    rate = curve_rate(result.logged[-4:], result.distance[0, -4:], 1e-3).rate_per_100
    predicted = math.sqrt(config.momentum) ** 100
    assert abs(math.log(rate) / math.log(predicted) - 1) < 0.25
    adam = train(RING, 2, TrainConfig(steps=1000, lr=0.1, log_every=250), seeds=(0,), reference=OPT)
    assert adam.distance[0, -1] > 0.1 and adam.stop.reason == ("budget",)


def test_the_stopping_rule_agrees_with_a_twin_that_takes_a_fixed_budget():
    """A stopped run equals, bit for bit, the run whose budget is the stopping step (precond has no schedule);
    the fixed long run's bound first meets the tolerance at that very logged step."""
    config = TrainConfig.preconditioned(OPT.eigenvalues, steps=600, log_every=20, tol=1e-5)
    stopped = train(RING, 2, config, seeds=(3,), reference=OPT)
    (t,) = stopped.stop.at
    assert stopped.stop.converged[0] and t < 600
    twin = train(RING, 2, config.__class__(**{**config.__dict__, "tol": None, "steps": int(t)}), seeds=(3,),
                 reference=OPT)
    np.testing.assert_array_equal(stopped.features, twin.features)
    np.testing.assert_array_equal(stopped.loss, twin.loss)
    assert twin.stop.reason == ("budget",) and not twin.stop.converged[0]
    long = train(RING, 2, config.__class__(**{**config.__dict__, "tol": None}), seeds=(3,), reference=OPT)
    bound = long.stop.bound[0]
    first = int(np.flatnonzero(bound <= 1e-5)[0])
    assert long.logged[first] == t
    np.testing.assert_array_equal(long.loss[0, : first + 1], stopped.loss[0])


def test_a_stopped_seed_is_frozen_so_its_result_does_not_depend_on_the_others():
    config = TrainConfig.preconditioned(OPT.eigenvalues, steps=600, log_every=20, tol=1e-5)
    together = train(RING, 2, config, seeds=(0, 1, 2), reference=OPT)
    assert len(set(together.stop.at.tolist())) > 1  # the seeds stop at different steps
    for i, s in enumerate((0, 1, 2)):
        alone = train(RING, 2, config, seeds=(s,), reference=OPT)
        # vmap over 3 seeds rounds differently from 1 (as test_vmapped_seeds_equal_solo_runs measures)
        np.testing.assert_allclose(together.features[i], alone.features[0], atol=1e-9, rtol=0)
        assert together.stop.at[i] == alone.stop.at[0]


def test_adamw_stops_on_its_residual_and_keeps_the_budget_s_schedule():
    """A budget-long cosine schedule, stopped early: the logged losses equal the fixed-budget run's up to the stop."""
    world = gridscene(3, objects=1).world
    opt = whitened_optimum(world, 3)
    config = TrainConfig(steps=1000, lr=0.1, log_every=50, tol=1e-3)
    stopped = train(world, 3, config, seeds=(0,), reference=opt)
    assert stopped.stop.reason == ("residual",) and stopped.stop.at[0] < 1000
    full = train(world, 3, config.__class__(**{**config.__dict__, "tol": None}), seeds=(0,), reference=opt)
    j = len(stopped.logged) - 1
    np.testing.assert_array_equal(full.loss[0, :j], stopped.loss[0, :j])


def test_sigreg_and_minibatches_stop_on_a_plateau_of_their_loss():
    world = random_world(30, rng=1)
    for config in (TrainConfig(objective="sigreg", steps=3000, lr=1e-2, log_every=50, tol=1e-4, lam=0.2),
                   TrainConfig(data="minibatch", batch_size=256, steps=3000, lr=3e-2, log_every=50, tol=1e-4)):
        result = train(world, 2, config, seeds=(0,))
        assert result.stop.rule == "plateau" and result.stop.residual is None
        assert result.stop.reason == ("plateau",) and result.stop.at[0] < 3000
        assert result.logged[-1] == result.stop.at[0]


def test_the_stopping_settings_are_checked_in_one_line():
    for fields, message in [({"method": "precond"}, "needs encoder='tabular', data='exact' and such an objective (whiten)"),
                            ({"method": "precond", "encoder": "mlp", "objective": "whiten"}, "precond"),
                            ({"momentum": 0.5}, "momentum is the heavy-ball momentum"),
                            ({"tol": 1.5}, "tol must lie in"),
                            ({"plateau": 0.0}, "plateau must lie in"),
                            ({"method": "sgd"}, "method must be 'adamw' or 'precond'")]:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            TrainConfig(**{"data": "minibatch" if fields.get("method") == "precond" and len(fields) == 1 else "exact",
                           **fields})
    from prhsim.learners import DecoderConfig, TextConfig, train_torch

    for record in (TextConfig, DecoderConfig):
        with pytest.raises(ValueError, match="train.* with method='adamw'"):
            record(method="precond")
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="the torch loop takes every step"):
        train_torch(RING, 2, TrainConfig(tol=1e-3, steps=10))
    with pytest.raises(ValueError, match="spectrum must hold"):
        train(RING, 2, TrainConfig.preconditioned(None, steps=10, tol=1e-3), spectrum=[0.9])


def test_without_a_spectrum_the_rule_bounds_the_residual_itself():
    """No μ_{k+1}: η = 1, β = 0 (subspace iteration), and the rule stops on r/√k ≤ tol; there is no bound."""
    config = TrainConfig.preconditioned(None, steps=4000, log_every=50, tol=1e-6)
    assert (config.lr, config.momentum) == (1.0, 0.0)
    result = train(ring(16), 2, config, seeds=(0,))
    assert result.stop.bound is None and result.stop.converged[0]
    assert result.stop.residual[0, -1] / math.sqrt(2) <= 1e-6
