"""The torch training loop (docs/theory.md §1.1, §7): the JAX learner's trajectory from the same init,
the closed form at convergence, the shared losses, the errors, and the learner seam.

Both loops run in float64 here (JAX through conftest.py, torch through ``dtype``).
"""

from __future__ import annotations

import builtins
import subprocess
import sys

import numpy as np
import pytest

from prhsim.experiments import rotation_uniqueness
from prhsim.optima import whitened_optimum
from prhsim.learners._evaluate import evaluate_learned
from prhsim.worlds import codebook, good, gridscene, path, random_world, ring, view_world

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
optax = pytest.importorskip("optax")

from prhsim.learners import _objectives
from prhsim.learners import TrainConfig, train  # noqa: E402
from prhsim.learners._train_parts import build_encoder  # noqa: E402
from prhsim.learners._torch import TorchLearner, learning_rate, train_torch  # noqa: E402

F64 = torch.float64
GRID = gridscene(2, objects=1)
#: A product world (2·2·3·3·8 = 288 states) whose exact loss applies π factor by factor.
FACTOR_WORLD = view_world(GRID.world, GRID.modalities()[1], good())
SIGREG_WORLD = random_world(30, rng=0)
MLP_WORLD = view_world(path(8), codebook(8, 2, rng=0), good())


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """The tensors are tiny: one intra-op thread (on a busy small CPU, torch's threads spin against each other)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def jax_init(world, k, config, seeds=(0,)):
    """The JAX encoder's init for each seed, stacked on a leading seed axis (numpy)."""
    encoder = build_encoder(world, k, config)
    inits = [encoder.init(jax.random.key(s)) for s in seeds]
    return jax.tree.map(lambda *leaves: np.stack([np.asarray(a) for a in leaves]), *inits)


# name: (world, k, config, seeds, atol on the features).
CASES = {
    # exact whitening, π applied factor by factor; a one-step warmup, weight decay, cosine to 0.1·lr
    "factor-whiten": (FACTOR_WORLD, 3, TrainConfig(steps=100, lr=0.05, warmup=0.01, weight_decay=1e-3, end_lr=0.1,
                                                   log_every=25), (0,), 1e-13),
    # exact whitening over the pair list of π, a ten-step warmup and weight decay
    "pairs-whiten-warmup": (ring(12), 2, TrainConfig(steps=100, lr=0.05, warmup=0.1, weight_decay=0.01, end_lr=0.1,
                                                     log_every=25), (0,), 3e-8),
    # batch whitening on sampled pairs, two seeds, the gradient clipped at 0.05
    "minibatch-whiten-clip": (path(8), 2, TrainConfig(data="minibatch", batch_size=64, steps=100, lr=0.03, clip=0.05,
                                                      warmup=0.0, log_every=25), (0, 1), 1e-13),
    # batch SIGReg, LeJEPA's convention, directions resampled every step
    "minibatch-sigreg": (SIGREG_WORLD, 2, TrainConfig(objective="sigreg", data="minibatch", batch_size=64, steps=100,
                                                      lr=0.03, num_directions=16, warmup=0.0, log_every=25), (3,), 1e-13),
    # population SIGReg, additive (β = 4λB = 100), fixed directions
    "exact-sigreg-additive": (SIGREG_WORLD, 2, TrainConfig(objective="sigreg", convention="additive", lam=100 / (4 * 256),
                                                           steps=100, lr=0.01, num_directions=16, directions="fixed",
                                                           warmup=0.0, log_every=25), (0,), 1e-13),
    # an MLP on rendered observations, exact whitening
    "mlp-whiten": (MLP_WORLD, 2, TrainConfig(encoder="mlp", hidden=(16, 16), steps=100, lr=0.01, warmup=0.0,
                                             log_every=25), (0,), 1e-8),
}


@pytest.mark.parametrize("name", list(CASES))
def test_torch_and_jax_follow_the_same_trajectory(name):
    """From the JAX init, 100 steps of each loop on the same data, directions and optimiser.

    Measured max |ΔF| (JAX − torch): factor-whiten 4.3e-15, minibatch-whiten-clip 4.4e-16,
    minibatch-sigreg 3.3e-16, exact-sigreg-additive 2.2e-16 (losses, tr Cov and s_Θ likewise ≤ 3e-15).
    Two gaps are not the losses': pairs-whiten-warmup 7.5e-9 (optax's warmup line is float32 and XLA
    fuses it into an FMA, so a few warmup learning rates differ by ~1e-9 relative; the rest of the
    schedule agrees exactly, see test_the_learning_rate_is_optax_schedule), and mlp-whiten 1.3e-9,
    all of it in the last bias: the centred loss does not depend on it, so its gradient is rounding
    noise that Adam normalises (every other parameter ≤ 3e-15; the centred features 7.7e-15,
    checked at 1e-13).
    """
    world, k, config, seeds, atol = CASES[name]
    init = jax_init(world, k, config, seeds)
    reference = whitened_optimum(world, k) if config.objective == "whiten" and config.encoder == "tabular" else None
    expected = train(world, k, config, seeds=seeds, init_params=init, reference=reference)
    result = train_torch(world, k, config, seeds=seeds, init_params=init, reference=reference, dtype=F64)
    assert result.seeds == seeds and result.logged.tolist() == [0, 25, 50, 75, 100]
    np.testing.assert_allclose(result.features, expected.features, atol=atol, rtol=0)
    np.testing.assert_allclose(result.loss, expected.loss, atol=atol, rtol=0)
    assert jax.tree.structure(result.params) == jax.tree.structure(expected.params)
    for got, want in zip(jax.tree.leaves(result.params), jax.tree.leaves(expected.params)):
        assert isinstance(got, np.ndarray) and got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=atol, rtol=0)
    if config.encoder == "mlp":  # only the last bias is free: the centred features agree to rounding
        p = world.p
        centre = lambda F: F - np.einsum("n,snk->sk", p, F)[:, None, :]  # noqa: E731
        np.testing.assert_allclose(centre(result.features), centre(expected.features), atol=1e-13, rtol=0)
    np.testing.assert_allclose(result.trace_cov, expected.trace_cov, atol=atol, rtol=0)
    assert result.collapsed.tolist() == expected.collapsed.tolist()
    if reference is not None:
        np.testing.assert_allclose(result.distance, expected.distance, atol=atol, rtol=0)
    else:
        assert result.distance is None
    if config.clip < 1:  # the clip is active: without it the trajectory differs
        unclipped = train_torch(world, k, config, seeds=seeds, init_params=init, dtype=F64, clip=1e9)
        assert np.max(np.abs(unclipped.features - result.features)) > 1e-2


@pytest.mark.parametrize("config", [TrainConfig(steps=100, lr=0.05, warmup=0.1, end_lr=0.1),
                                    TrainConfig(steps=50, lr=0.3, warmup=0.0, end_lr=0.5),
                                    TrainConfig(steps=40, lr=1e-2)], ids=["warmup", "no-warmup", "default"])
def test_the_learning_rate_is_optax_schedule(config):
    """``learning_rate(config, t)`` equals optax's ``warmup_cosine_decay_schedule`` at t exactly (float32
    with a warmup, as optax returns it), past the last step too."""
    schedule = optax.warmup_cosine_decay_schedule(0.0, config.lr, int(round(config.warmup * config.steps)),
                                                  config.steps, config.end_lr * config.lr)
    for t in range(config.steps + 2):
        assert learning_rate(config, t) == float(schedule(jax.numpy.asarray(t, dtype=jax.numpy.int32))), t


@pytest.mark.slow
def test_exact_whitening_on_a_table_converges_to_the_closed_form():
    """path(8), k = 2 from torch's own init: measured s_Θ 6e-16 after 1000 steps (float64)."""
    world = path(8)
    opt = whitened_optimum(world, 2)
    result = train_torch(world, 2, steps=1000, lr=0.1, log_every=250, reference=opt, dtype=F64)
    evaluation = evaluate_learned(result.features[0], world, opt)
    assert evaluation.s_theta < 1e-6 and evaluation.rho_p < 1e-6
    assert result.loss[0, -1] == pytest.approx(opt.value, rel=1e-8)
    assert result.distance[0, 0] > 0.1 and result.distance[0, -1] == pytest.approx(evaluation.s_theta, abs=1e-12)
    assert result.logged.tolist() == [0, 250, 500, 750, 1000]
    assert not result.any_collapsed and result.seconds > 0
    assert result.params["table"].shape == (1, 8, 2) and result.params["table"].dtype == np.float64


@pytest.mark.parametrize("objective, data, target",
                         [("whiten", "exact", "whitened_alignment"), ("sigreg", "minibatch", "lejepa_loss")])
def test_the_loop_calls_the_shared_loss(monkeypatch, objective, data, target):
    """The objective is its record's (:mod:`prhsim.learners._objectives`): doubling it there doubles every logged loss."""
    config = TrainConfig(objective=objective, data=data, batch_size=16, steps=6, log_every=3, num_directions=8)
    plain = train_torch(path(8), 2, config, dtype=F64)
    original, calls = getattr(_objectives, target), []

    def doubled(*args, **kwargs):
        calls.append(1)
        return 2.0 * original(*args, **kwargs)

    monkeypatch.setattr(_objectives, target, doubled)
    patched = train_torch(path(8), 2, config, dtype=F64)
    assert len(calls) == config.steps + 1  # every step and the final loss
    np.testing.assert_allclose(patched.loss[:, 0], 2.0 * plain.loss[:, 0], rtol=1e-12)


def test_nan_stops_training_and_names_the_step_and_seed():
    table = np.random.default_rng(0).normal(size=(2, 8, 2))
    table[1, 3, 0] = np.nan  # the second seed only
    with pytest.raises(ValueError, match=r"training diverged: the loss is nan at step 0 for seed 7 \(lr=0\.1\)"):
        train_torch(path(8), 2, seeds=(4, 7), init_params={"table": table}, steps=10, log_every=5, lr=0.1,
                    dtype=F64)


def test_a_singular_covariance_stops_training_and_names_the_step():
    """A constant table has a singular covariance: torch's solve raises where JAX's returns non-finite values."""
    with pytest.raises(ValueError, match=r"training diverged: the loss is undefined at step 0 for seed 2 \(lr=0\.1\)"):
        train_torch(path(8), 2, seeds=(2,), init_params={"table": np.ones((1, 8, 2))}, steps=10, lr=0.1, dtype=F64)


def test_bad_init_params_are_refused():
    with pytest.raises(ValueError, match=r"init_params must match the encoder's params stacked over 1 seed\(s\)"):
        train_torch(path(8), 2, init_params={"table": np.zeros((2, 8, 2))})
    one_layer = {"layers": ((np.zeros((1, 16, 2)), np.zeros((1, 2))),)}  # the config has a hidden layer
    with pytest.raises(ValueError, match=r"init_params must match .*\(1, 4\)"):
        train_torch(MLP_WORLD, 2, encoder="mlp", hidden=(4,), init_params=one_layer)
    with pytest.raises(ValueError, match=r"k must be an integer in 1\.\.7"):
        train_torch(path(8), 8)


def test_torch_learner_in_the_experiments_seam():
    """Two good views of path(9), trained in float32 (the default dtype): whitened, compared,
    and the same representation as the closed form (measured ρ_P 8e-6 after 600 steps, bound 1e-3)."""
    base = path(9)
    modalities = [codebook(base.n, 2, name="a", rng=1), codebook(base.n, 3, name="b", rng=2)]
    learner = TorchLearner(TrainConfig(steps=600, lr=0.1, log_every=200))
    out = rotation_uniqueness(base, modalities, [good(), good()], 2, learner=learner, rng=0)
    for m in out.modalities:
        rep = m.representation
        assert rep.learner == "whiten" and rep.info["device"] == "cpu" and not rep.info["collapsed"]
        assert rep.info["steps"] == 600 and rep.features.shape == (1, m.world.n, 2)
    assert out.pairs[0].comparison.rho_p < 1e-3


def test_importing_the_torch_loop_imports_neither_torch_nor_jax():
    code = ("import sys, prhsim.learners, prhsim.learners._torch; "
            "bad = [m for m in ('torch', 'jax', 'optax') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_torch_loop_runs_without_jax(monkeypatch):
    """With every ``import jax`` / ``import optax`` refused, each objective, data mode and encoder still trains."""
    real_import = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name.split(".")[0] in ("jax", "optax"):
            raise ImportError(f"the torch loop imported {name}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    for config in (TrainConfig(steps=4, log_every=2), TrainConfig(objective="sigreg", data="minibatch",
                                                                   batch_size=8, num_directions=4, steps=4),
                   TrainConfig(encoder="mlp", hidden=(4,), steps=4)):
        assert train_torch(MLP_WORLD, 2, config).features.shape == (1, 16, 2)
    with pytest.raises(ImportError, match="imported jax"):  # the JAX learner cannot run now
        train(MLP_WORLD, 2, steps=2)


def test_the_mlp_forward_is_one_function_for_jax_and_torch():
    """``mlp_apply`` runs on JAX and torch arrays: its GELU is jax.nn.gelu's bit for bit under jit, torch's tanh
    GELU to rounding, and the MLP gives one output on both libraries."""
    import jax
    import jax.numpy as jnp

    from prhsim.learners._encoders import gelu, mlp_apply, mlp_init

    x = np.random.default_rng(0).normal(size=(500,)) * 4
    for dtype in (np.float32, np.float64):  # the suite runs JAX with x64 (tests/conftest.py)
        a = jnp.asarray(x, dtype)
        np.testing.assert_array_equal(np.asarray(jax.jit(gelu)(a)), np.asarray(jax.jit(jax.nn.gelu)(a)))
    t = torch.tensor(x)
    np.testing.assert_allclose(gelu(t).numpy(), torch.nn.functional.gelu(t, approximate="tanh").numpy(),
                               rtol=0, atol=1e-14)
    params = mlp_init(jax.random.key(0), 5, 3, (7, 4))
    inputs = np.random.default_rng(1).normal(size=(11, 5))
    want = np.asarray(mlp_apply(params, jnp.asarray(inputs)))
    torch_params = {"layers": tuple((torch.tensor(np.asarray(W)), torch.tensor(np.asarray(b)))
                                    for W, b in params["layers"])}
    np.testing.assert_allclose(mlp_apply(torch_params, torch.tensor(inputs)).numpy(), want, rtol=0, atol=1e-13)
