"""The one optimiser record and step loop of every learner: validated once, the same for every config,
and the scanned loop equal to a step-by-step twin written from optax's update."""

from __future__ import annotations

import numpy as np
import pytest

from prhsim.learners import DecoderConfig, Optimiser, TextConfig, TrainConfig

jax = pytest.importorskip("jax")


@pytest.mark.parametrize("fields, message", [
    ({"steps": 0}, "steps must be a positive integer, got 0"),
    ({"steps": 2.5}, "steps must be a positive integer, got 2.5"),
    ({"steps": True}, "steps must be a positive integer, got True"),
    ({"lr": 0.0}, "lr must be positive, got 0.0"),
    ({"clip": -1.0}, "clip must be positive, got -1.0"),
    ({"warmup": 1.5}, r"warmup must lie in \[0, 1\], got 1.5"),
    ({"end_lr": -0.1}, r"end_lr must lie in \[0, 1\], got -0.1"),
    ({"steps": 10, "warmup": 0.99}, "warmup must leave steps for the cosine decay"),
    ({"weight_decay": -1e-3}, "weight_decay must be non-negative, got -0.001"),
])
@pytest.mark.parametrize("record", [Optimiser, TrainConfig, TextConfig, DecoderConfig])
def test_every_learner_config_is_checked_by_the_one_record(record, fields, message):
    with pytest.raises(ValueError, match=message):
        record(**fields)


def test_a_config_s_optimiser_is_its_fields():
    config = TextConfig(steps=40, lr=0.2, warmup=0.1, end_lr=0.5, weight_decay=0.01, clip=2.0)
    same = Optimiser(steps=40, lr=0.2, warmup=0.1, end_lr=0.5, weight_decay=0.01, clip=2.0)
    assert Optimiser.of(config) == same and hash(Optimiser.of(config)) == hash(same)
    assert Optimiser.of(config).warmup_steps == 4 and config.rate(7) == same.rate(7)
    with pytest.raises(TypeError):
        DecoderConfig(1000, 64)  # keyword-only: a positional value cannot land in another field


@pytest.mark.parametrize("optimiser", [Optimiser(steps=30, lr=0.1, warmup=0.2, end_lr=0.1, weight_decay=0.01, clip=0.5),
                                       Optimiser(steps=30, lr=0.05, warmup=0.0)])
def test_the_schedule_twin_is_optax_s_schedule(optimiser):
    import optax

    schedule = optax.warmup_cosine_decay_schedule(0.0, optimiser.lr, optimiser.warmup_steps, optimiser.steps,
                                                  optimiser.end_lr * optimiser.lr)
    for t in range(optimiser.steps + 2):
        assert optimiser.rate(t) == float(schedule(jax.numpy.asarray(t, dtype=jax.numpy.int32))), t


def test_the_scanned_loop_equals_a_step_by_step_twin():
    """scan_steps against a Python loop of value_and_grad, clip, AdamW on the schedule (written from optax's
    definitions: moments with bias correction, decoupled decay), on a quadratic with a fixed batch per step."""
    import jax.numpy as jnp

    from prhsim.learners._optimiser import scan_steps

    opt = Optimiser(steps=12, lr=0.1, warmup=0.25, end_lr=0.1, weight_decay=0.05, clip=0.7)
    gen = np.random.default_rng(0)
    A, batches, x0 = gen.normal(size=(3, 3)), gen.normal(size=(opt.steps, 3)), gen.normal(size=3)

    def loss(params, batch, scale):
        return scale * jnp.sum((A @ params["x"] - batch) ** 2)

    tx = opt.build()
    params, state, values = jax.jit(scan_steps(loss, tx))({"x": jnp.asarray(x0)}, tx.init({"x": jnp.asarray(x0)}),
                                                          jnp.asarray(batches), 0.5)
    x, m, v = x0.copy(), np.zeros(3), np.zeros(3)
    want = []
    for t, batch in enumerate(batches):
        residual = A @ x - batch
        want.append(0.5 * float(residual @ residual))
        g = 0.5 * 2 * A.T @ residual
        norm = np.linalg.norm(g)
        g = g if norm < opt.clip else g * opt.clip / norm
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        m_hat, v_hat = m / (1 - 0.9 ** (t + 1)), v / (1 - 0.999 ** (t + 1))
        x = x - opt.rate(t) * (m_hat / (np.sqrt(v_hat) + 1e-8) + opt.weight_decay * x)
    np.testing.assert_allclose(np.asarray(values), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(params["x"]), x, rtol=1e-12, atol=1e-14)
