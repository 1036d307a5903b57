"""SGD learners in JAX + optax (docs/theory.md §1.1, §7): hard whitening converges to the closed form,
vmapped seeds equal solo runs, SIGReg collapses at a small weight, divergence stops with the step named.

Worlds are small and configurations shared, so each compiled loop is reused (float64, conftest.py).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from prhsim.optima import whitened_optimum
from prhsim.learners._evaluate import evaluate_learned, seed_spread
from prhsim.worlds import Modality, codebook, good, gridscene, path, random_world, ring, view_world

jax = pytest.importorskip("jax")
pytest.importorskip("optax")

from prhsim.learners._encoders import observation_inputs, tabular_encoder  # noqa: E402
from prhsim.learners import SGDLearner, TrainConfig, train  # noqa: E402
from prhsim.learners._exact_law import pair_list  # noqa: E402

#: The exact (full-batch) whitening run shared by the convergence and vmap tests.
EXACT = TrainConfig(steps=1000, lr=0.1, log_every=250)
#: Minibatches of B = 256 pairs.
MINIBATCH = TrainConfig(data="minibatch", batch_size=256, steps=1000, lr=3e-2, log_every=250)


@pytest.mark.slow
@pytest.mark.parametrize("world, k, centred", [(path(8), 2, True), (ring(16), 2, True),
                                               (gridscene(3, objects=1).world, 3, True), (path(8), 3, False)],
                         ids=["path8", "ring16", "gridscene3x1", "path8-uncentred"])
def test_exact_whitening_on_a_table_converges_to_the_closed_form(world, k, centred):
    """Full batch over Π's pairs: the whitened alignment reaches L* and the subspace the closed form's (k at a
    gap; uncentred, the optimum holds the constant). Measured s_Θ ≤ 1e-12 in 1000 steps."""
    opt = whitened_optimum(world, k, centred=centred)
    assert opt.unique and opt.gap > 0.1
    result = train(world, k, EXACT, centred=centred, reference=opt)
    evaluation = evaluate_learned(result.features[0], world, opt)
    assert evaluation.s_theta < 1e-6 and evaluation.rho_p < 1e-6  # the target is 1e-2
    assert result.loss[0, -1] == pytest.approx(opt.value, rel=1e-8)  # the exact loss is E_π‖f̃ − f̃'‖²
    assert evaluation.alignment_ratio == pytest.approx(1.0, abs=1e-8)
    assert result.distance[0, 0] > 0.1 and result.distance[0, -1] == pytest.approx(evaluation.s_theta, abs=1e-12)
    assert result.logged.tolist() == [0, 250, 500, 750, 1000]
    assert not result.any_collapsed and result.features.shape == (1, world.n, k)


def test_minibatch_whitening_gets_close_to_the_closed_form():
    """B = 256 sampled pairs per step: the batch whitening has O(1/√(2B)) ≈ 0.044 error per step, which the
    cosine decay averages away; measured s_Θ 0.010 and 0.005 (seeds 0, 1), bound 0.05."""
    world = path(8)
    opt = whitened_optimum(world, 2)
    result = train(world, 2, MINIBATCH, seeds=(0, 1), reference=opt)
    for F in result.features:
        evaluation = evaluate_learned(F, world, opt)
        assert evaluation.s_theta < 0.05 and evaluation.rho_p < 0.05
        assert 1.0 <= evaluation.alignment_ratio < 1.01
    assert np.all(result.distance[:, -1] < 0.05) and np.all(result.distance[:, 0] > 0.5)


@pytest.mark.parametrize("config", [EXACT, TrainConfig(data="minibatch", steps=200, lr=3e-2, log_every=100)],
                         ids=["exact", "minibatch"])
def test_vmapped_seeds_equal_solo_runs(config):
    """Seeds are vmapped; each one's init, pairs and directions depend on its seed alone."""
    world = path(8)
    together = train(world, 2, config, seeds=(0, 1, 2, 3))
    for i, seed in enumerate(together.seeds):
        alone = train(world, 2, config, seeds=(seed,))
        np.testing.assert_allclose(together.features[i], alone.features[0], atol=1e-9, rtol=0)
        np.testing.assert_allclose(together.loss[i], alone.loss[0], atol=1e-9, rtol=0)
    if config.data == "exact":  # every seed reaches the same orbit: seed-to-seed ρ_P ≈ 0
        spread = seed_spread(together.features, world.p)
        assert np.max(spread.rho_p) < 1e-6 and np.max(spread.s_theta) < 1e-6
    else:
        assert not np.allclose(together.features[0], together.features[1])


SIGREG_WORLD = random_world(30, rng=0)


@pytest.mark.parametrize("beta, collapsed", [(1.0, True), (100.0, False)], ids=["beta1", "beta100"])
def test_population_sigreg_collapses_at_a_small_weight(beta, collapsed):
    """docs/theory.md §7: ``E_π‖f − f'‖² + β·EP`` collapses for β ≤ 1 on a 30-state world. Exact data with the
    additive convention is ``(1/4)(E_π‖f − f'‖² + 4λB·EP)`` with B the nominal batch size: β = 4λB. Measured tr Cov: 0, 0, 0 (β = 1);
    1.55 (β = 100, ‖Cov − I‖ = 0.32, whitened alignment / L* = 1.05; §7 reports 0.31 and 1.039)."""
    world = SIGREG_WORLD
    opt = whitened_optimum(world, 2)
    result = train(world, 2, objective="sigreg", convention="additive", lam=beta / (4 * 256), batch_size=256,
                   steps=2000, lr=1e-2, num_directions=32, seeds=(0, 1, 2))
    assert result.collapsed.tolist() == [collapsed] * 3
    if collapsed:
        assert np.all(result.trace_cov < 1e-3)
    else:
        assert np.all(result.trace_cov > 1.0)
        for F in result.features:
            evaluation = evaluate_learned(F, world, opt)
            assert evaluation.cov_error < 0.5 and 1.0 <= evaluation.alignment_ratio < 1.2
            assert evaluation.ep < evaluation.ep_closed_form  # SIGReg trades alignment for Gaussianity


@pytest.mark.parametrize("lam, collapsed", [(1e-3, True), (0.02, False)], ids=["lam1e-3", "lam0.02"])
def test_batch_sigreg_collapses_at_a_small_weight(lam, collapsed):
    """The batch version (LeJEPA's convention, B = 128): batch SIGReg ≈ B·EP, so β ≈ 4λB/(1 − λ):
    0.51 at λ = 1e-3 (collapse; measured tr Cov 0.003, 0.005) and 10.4 at LeJEPA's λ = 0.02 (tr Cov 0.79)."""
    result = train(SIGREG_WORLD, 2, objective="sigreg", data="minibatch", batch_size=128, lam=lam, steps=300,
                   lr=3e-2, num_directions=16, log_every=100, seeds=(0, 1))
    assert result.collapsed.tolist() == [collapsed] * 2
    assert np.all(result.trace_cov < 0.01) if collapsed else np.all(result.trace_cov > 0.5)


def test_nan_stops_training_and_names_the_step():
    world = path(8)
    poisoned = {"table": np.where(np.eye(8)[None, :, :2] > 0, np.nan, 1.0)}
    with pytest.raises(ValueError, match=r"training diverged: the loss is nan at step 0 for seed 0"):
        train(world, 2, EXACT, init_params=poisoned)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # optax casts the huge lr
def test_a_huge_learning_rate_diverges_with_the_step_named():
    """lr = 1e6 does not diverge in float64 (Adam's steps are bounded by lr and the loss is scale-free);
    lr = 1e200 overflows the covariance at the first update."""
    with pytest.raises(ValueError, match=r"training diverged: the loss is nan at step 1 for seed 0 \(lr=1e\+200\)"):
        train(path(8), 2, EXACT, lr=1e200)


@pytest.mark.slow
def test_an_mlp_on_rendered_observations_converges_on_a_modal_world():
    """A codebook modality with a good view: the MLP sees g(z, n) and still reaches the nuisance-free optimum."""
    world = view_world(path(8), codebook(8, 2, rng=0), good())
    opt = whitened_optimum(world, 2)
    result = train(world, 2, encoder="mlp", hidden=(32, 32), steps=600, lr=1e-2, log_every=200, reference=opt)
    evaluation = evaluate_learned(result.features[0], world, opt)
    assert evaluation.s_theta < 1e-6 and result.distance[0, -1] < 1e-6


def test_observation_inputs():
    world = view_world(path(4), codebook(4, 3, dim=5, rng=1), good())
    X = observation_inputs(world)
    p = world.p
    assert X.shape == (12, 5)
    np.testing.assert_allclose(p @ X, 0.0, atol=1e-12)
    np.testing.assert_allclose(p @ (X * X), 1.0, atol=1e-12)
    free = view_world(path(4), Modality("t", [0.5, 0.5]), good())
    one_hot = observation_inputs(free)
    assert one_hot.shape == (8, 6) and np.all(one_hot.sum(axis=1) == 2.0)
    assert np.array_equal(one_hot[5], [0, 0, 1, 0, 0, 1])  # modal state 5 = (z=2, n=1)
    assert np.array_equal(observation_inputs(path(3)), np.eye(3))


def test_the_exact_pair_list_is_pi():
    world = gridscene(2, objects=1).world
    pairs = pair_list(world)
    dense = world.to_finite().Pi
    rebuilt = np.zeros_like(dense)
    rebuilt[pairs.rows, pairs.cols] = pairs.pi
    np.testing.assert_allclose(rebuilt, dense, atol=1e-15)
    caption_world = view_world(gridscene().world, gridscene().modalities()[1], good())
    with pytest.raises(ValueError, match=r"2,032,128,000 pairs \(limit 20,000,000\); use data=.minibatch."):
        pair_list(caption_world)


def test_bad_arguments_are_refused():
    world = path(8)
    with pytest.raises(ValueError, match="objective must be one of"):
        TrainConfig(objective="vicreg")
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match=r"k must be an integer in 1\.\.7"):
        train(world, 8, EXACT)
    with pytest.raises(ValueError, match="seeds must be non-negative integers"):
        train(world, 2, EXACT, seeds=(-1,))
    with pytest.raises(ValueError, match="the reference has 8 states x 3 features"):
        train(world, 2, EXACT, reference=whitened_optimum(world, 3))
    with pytest.raises(ValueError, match=r"init_params must match"):
        train(world, 2, EXACT, init_params={"table": np.zeros((2, 8, 2))})
    with pytest.raises(ValueError, match="init scale must be positive"):
        tabular_encoder(4, 2, scale=0.0)


def test_sgd_learner_returns_a_representation():
    learner = SGDLearner(TrainConfig(steps=200, lr=0.1, log_every=100))
    rep = learner(path(8), 2, rng=3)
    assert rep.learner == "whiten" and rep.features.shape == (1, 8, 2) and rep.seeds == (3,)
    assert rep.seed_info[0]["seed"] == 3 and rep.info["steps"] == 200 and not rep.seed_info[0]["collapsed"]


def test_importing_the_learners_does_not_import_jax():
    code = ("import sys, prhsim.learners, prhsim.learners._jax, prhsim.learners._evaluate, prhsim.learners._encoders, "
            "prhsim.learners._jax_runner; bad = [m for m in ('jax', 'optax') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_minibatch_pairs_are_consecutive_sampler_calls_per_seed():
    """Step t's pairs of seed s are the (t+1)-th ``pair_sampler(world).pairs(B, rng=gen)`` call on
    ``gen = default_rng([s, SGD_PAIRS])``, whatever the chunking (log_every) or the other seeds."""
    from prhsim._rng import SGD_PAIRS
    from prhsim.learners._train_parts import draw_pairs
    from prhsim.worlds import ProductWorld, pair_sampler

    for world in (ring(16), ProductWorld([path(5), random_world(7, rng=0)])):
        sampler = pair_sampler(world)
        gens = [np.random.default_rng([s, SGD_PAIRS]) for s in (0, 3)]
        first, second = draw_pairs(sampler, 8, 3, gens), draw_pairs(sampler, 8, 2, gens)
        for i, s in enumerate((0, 3)):
            gen = np.random.default_rng([s, SGD_PAIRS])
            expected = [sampler.pairs(8, rng=gen) for _ in range(5)]
            for j in range(2):  # anchors, views
                drawn = np.concatenate([first[j][i], second[j][i]])
                np.testing.assert_array_equal(drawn, np.array([e[j] for e in expected]))


def test_exact_sigreg_is_refused_when_its_gradient_would_not_fit():
    """The exact SIGReg's gradient keeps every block's n x n x M terms: 512² x 64 x 3 floats x 4 seeds = 1.6 GB."""
    from prhsim import ResourceError, memory_limit

    world = ring(512)
    with memory_limit(int(1e9)), pytest.raises(ResourceError, match="the gradient of the exact sigreg loss over 512 states"):
        train(world, 2, objective="sigreg", num_directions=64, seeds=(0, 1, 2, 3))
