"""An MLP on observations rendered batch by batch (worlds too large for a table of inputs), evaluated on a
sample of states drawn from p: the same training as the table path, and the sampled evaluation against
twins written from the definitions (float64, conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest

from prhsim.learners import evaluate_learned, evaluate_sampled
from prhsim.learners._encoders import observation_inputs, rendered_inputs
from prhsim.optima import whitened_optimum
from prhsim.worlds import Modality, codebook, good, gridscene, path, view_world

jax = pytest.importorskip("jax")
pytest.importorskip("optax")

from prhsim.learners import EVAL_SAMPLE, TrainConfig, train  # noqa: E402

WORLD = view_world(path(8), codebook(8, 2, rng=0), good())
MLP = TrainConfig(encoder="mlp", data="minibatch", hidden=(32, 32), steps=300, lr=1e-2, log_every=100)


def test_rendered_inputs_are_the_table_s_rows_and_a_sample_standardises_like_p(monkeypatch):
    rendered = rendered_inputs(WORLD)
    np.testing.assert_array_equal(rendered(np.arange(WORLD.n)), observation_inputs(WORLD))
    import prhsim.learners._encoders as encoders

    monkeypatch.setattr(encoders, "CHUNK", 5)  # many chunks: both paths standardise by the same chunked sums
    np.testing.assert_array_equal(rendered_inputs(WORLD)(np.arange(WORLD.n)), observation_inputs(WORLD))
    monkeypatch.undo()
    sampled = rendered_inputs(WORLD, exact=False)  # moments of 65,536 states drawn from p
    np.testing.assert_allclose(sampled.mean, rendered.mean, atol=0.02)
    free = view_world(path(4), Modality("t", [0.5, 0.5]), good())
    np.testing.assert_array_equal(rendered_inputs(free)(np.arange(8)), observation_inputs(free))
    scene = gridscene(2, objects=1)
    world = view_world(scene.world, scene.modalities()[0], good())
    assert rendered_inputs(world)(np.array([[0, 1], [2, 3]])).shape == (2, 2, rendered_inputs(world).d)
    with pytest.raises(ValueError, match="modal world"):
        rendered_inputs(path(4))


def test_the_rendered_path_trains_exactly_as_the_table_path():
    """Same seeds, same pairs, same inputs: the parameters and losses agree bit for bit; only the evaluation
    differs (every state against EVAL_SAMPLE states drawn from p)."""
    opt = whitened_optimum(WORLD, 2)
    table = train(WORLD, 2, MLP, reference=opt, seeds=(0, 1))
    rendered = train(WORLD, 2, TrainConfig(**{**MLP.__dict__, "observations": "rendered"}), reference=opt, seeds=(0, 1))
    for a, b in zip(jax.tree.leaves(table.params), jax.tree.leaves(rendered.params)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(table.loss, rendered.loss)
    assert table.states is None and rendered.states.shape == (EVAL_SAMPLE,)
    assert rendered.features.shape == (2, EVAL_SAMPLE, 2)
    np.testing.assert_allclose(rendered.features[0], table.features[0][rendered.states], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="needs encoder='mlp', data='minibatch'"):
        TrainConfig(observations="rendered")
    with pytest.raises(ValueError, match="modal world"):
        train(path(8), 2, TrainConfig(**{**MLP.__dict__, "observations": "rendered"}))


def naive_sampled(F: np.ndarray, R: np.ndarray) -> tuple[float, float]:
    """s_Θ and ρ_P from the definitions on the sample: centre, orthonormalise by QR (the empirical inner
    product), s_Θ² = mean(1 − σ²) over the singular values σ of QaᵀQb; ρ_P after whitening each by its
    empirical covariance: min over orthogonal Q of ‖A − BQ‖ / √(Mk)."""
    m, k = F.shape
    A, B = F - F.mean(axis=0), R - R.mean(axis=0)
    Qa, Qb = np.linalg.qr(A)[0], np.linalg.qr(B)[0]
    sigma = np.linalg.svd(Qa.T @ Qb, compute_uv=False)
    s_theta = float(np.sqrt(max(np.mean(1 - np.minimum(sigma, 1) ** 2), 0)))
    Wa = A @ np.linalg.inv(np.linalg.cholesky(A.T @ A / m)).T
    Wb = B @ np.linalg.inv(np.linalg.cholesky(B.T @ B / m)).T
    U, _, Vt = np.linalg.svd(Wb.T @ Wa)
    rho = float(np.linalg.norm(Wa - Wb @ (U @ Vt)) / np.sqrt(m * k))
    return s_theta, rho


def test_the_sampled_evaluation_equals_its_twin_and_brackets_the_exact_one():
    """On states drawn from p, s_Θ and ρ_P equal the twin to 1e-10; on a large sample they sit within a few
    bootstrap errors of the evaluation over every state."""
    scene = gridscene(3, objects=1)
    world = view_world(scene.world, scene.modalities()[2], good())
    opt = whitened_optimum(world, 3)
    rng = np.random.default_rng(0)
    F = opt.features() @ rng.standard_normal((3, 3)) + 0.05 * rng.standard_normal((world.n, 3))
    from prhsim.worlds import pair_sampler

    states = pair_sampler(world).pairs(20_000, rng=1)[0]
    sampled = evaluate_sampled(F[states], opt.features(states))
    s_theta, rho = naive_sampled(F[states], opt.features(states))
    assert sampled.s_theta == pytest.approx(s_theta, abs=1e-10) and sampled.rho_p == pytest.approx(rho, abs=1e-10)
    exact = evaluate_learned(F, world, opt, ep=False)
    assert abs(sampled.s_theta - exact.s_theta) < 4 * sampled.s_theta_se + 1e-3
    assert abs(sampled.rho_p - exact.rho_p) < 4 * sampled.rho_p_se + 1e-3
    assert 0 < sampled.s_theta_se < 0.05 and sampled.samples == 20_000
    with pytest.raises(ValueError, match="M >= 2k"):
        evaluate_sampled(F[:3], opt.features(np.arange(3)))
