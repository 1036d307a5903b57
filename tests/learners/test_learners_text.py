"""Caption learners and their closed forms: the token encoder against its definition, the span and next-token
optima against finite-world twins and against what the theory says they are, and SGD reaching them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from support import assert_close
from prhsim.learners import TEXT_TASKS, TextConfig, TrainConfig, embed_captions, train, train_text
from prhsim.optima import TieWarning, closed_form, next_token_optimum, span_optimum
from prhsim.learners._evaluate import subspace_distance
from prhsim.learners._text_encoder import token_apply, token_init, token_one_hot
from prhsim.learners._text_learners import caption_prefixes, draw_steps, initial_text
from prhsim.metrics import nuisance_free_dimension, procrustes, whiten
from prhsim.worlds import SpanLaw, caption_law, good, gridscene, pixels, span_world, view_world

jax = pytest.importorskip("jax")


@pytest.fixture(scope="module")
def tiny():
    scene = gridscene(2, objects=1, shapes=2, colours=2)
    return scene, caption_law(scene)


def _weights(law):
    return (law.p[:, None] * law.q[None, :]).ravel()


def test_token_encoder_is_an_mlp_on_the_one_hot():
    """The JAX encoder equals a numpy MLP (GELU, tanh form as in jax.nn.gelu) on the (position, token) one-hot."""
    T, n_ids, k = 6, 5, 3
    params = token_init(jax.random.key(0), T, n_ids, k, (7, 4))
    ids = np.random.default_rng(0).integers(n_ids, size=(11, T))
    x = token_one_hot(ids, n_ids)
    assert np.array_equal(x.reshape(11, T, n_ids).argmax(-1), ids) and np.all(x.sum(axis=1) == T)
    for W, b in params["layers"][:-1]:
        h = x @ np.asarray(W) + np.asarray(b)
        x = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    W, b = params["layers"][-1]
    assert_close(np.asarray(token_apply(params, jax.numpy.asarray(ids))), x @ np.asarray(W) + np.asarray(b), atol=1e-12)


def test_the_gathered_first_layer_is_the_one_hot_product_and_its_gradient():
    """Forward and gradient of the gathered layer against the product with the one-hot (its naive twin)."""
    from prhsim.learners._text_encoder import gathered_layer

    T, n_ids, H = 5, 4, 3
    rng = np.random.default_rng(1)
    W = jax.numpy.asarray(rng.normal(size=(T * n_ids, H)))
    ids = rng.integers(n_ids, size=(2, 7, T))  # repeated rows: the gradient must add every use
    ids[0, 1] = ids[0, 0]
    G = rng.normal(size=(2, 7, H))
    x = token_one_hot(ids, n_ids)
    assert_close(np.asarray(gathered_layer(W, jax.numpy.asarray(ids))), x @ np.asarray(W), atol=1e-12)
    grad = jax.grad(lambda W: (gathered_layer(W, jax.numpy.asarray(ids)) * G).sum())(W)
    assert_close(np.asarray(grad), x.reshape(-1, T * n_ids).T @ G.reshape(-1, H), atol=1e-12)


@pytest.mark.parametrize("view", ["good", "bad"])
@pytest.mark.parametrize("with_world", [False, True])
def test_span_optimum_matches_the_span_worlds_closed_form(tiny, view, with_world):
    scene, law = tiny
    world = scene.world if with_world else None
    sw = span_world(law, SpanLaw(4), view, world)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)  # the spectrum only
        spectrum = closed_form(sw.world, 12, backend="dense").eigenvalues
    k = next(k for k in range(6, 12) if spectrum[k - 1] - spectrum[k] > 1e-6)  # k at a gap
    reference = closed_form(sw.world, k, backend="dense")
    optimum = span_optimum(law, SpanLaw(4), view, k, world=world)
    assert_close(optimum.eigenvalues, reference.eigenvalues, atol=1e-10)
    rows = {r.tobytes(): i for i, r in enumerate(sw.tokens)}
    captions = law.captions(np.repeat(np.arange(16), 8), np.tile(np.arange(8), 16))
    F = reference.features()[[rows[c.tobytes()] for c in captions]]
    assert optimum.unique and reference.unique
    assert subspace_distance(optimum.captions, F, _weights(law), centred=False) < 1e-8


def test_good_views_of_world_pairs_recover_the_pixel_closed_form():
    """Theorem (docs/theory.md §5.1): with the pixels' pair law, the good-view text optimum is h*(z) up to a rotation."""
    scene = gridscene(2, objects=2, shapes=2, colours=2)  # 256 states; k = 2 at the gap
    law = caption_law(scene)
    image = closed_form(view_world(scene.world, pixels(scene), good()), "auto")
    k = image.k
    optimum = span_optimum(law, SpanLaw(9), "good", k, world=scene.world)
    F = optimum.captions.reshape(law.n_states, law.modality.n_nuisance, k)
    assert_close(F, F[:, :1, :].repeat(law.modality.n_nuisance, axis=1), atol=1e-9)  # nuisance-free
    H = image.features(np.arange(law.n_states) * pixels(scene).n_nuisance)
    assert procrustes(whiten(F[:, 0], law.p), whiten(H, law.p), law.p).rho < 1e-7


def test_bad_views_learn_the_wording_first():
    """Shared wording is perfectly predictable across the pair: every top feature is a wording feature (E[f|z] = 0)."""
    scene = gridscene(2, objects=2, shapes=2, colours=2)
    law = caption_law(scene)
    optimum = span_optimum(law, SpanLaw(9), "bad", 2, world=scene.world)
    F = whiten(optimum.captions, _weights(law))
    assert nuisance_free_dimension(F, law.q, law.p) == 0
    mean = F.reshape(law.n_states, law.modality.n_nuisance, 2).transpose(0, 2, 1) @ law.q
    assert np.abs(mean).max() < 1e-9


def test_next_token_optimum_is_a_function_of_the_wording_alone():
    """gridscene's attributes are independent under p, so no next token depends on z beyond the template:
    the correspondence-analysis features pooled over a caption depend on its wording only."""
    scene = gridscene(2, objects=2, shapes=2, colours=2)
    law = caption_law(scene)
    optimum = next_token_optimum(law, 6)
    F = optimum.captions.reshape(law.n_states, law.modality.n_nuisance, 6)
    assert_close(F, F[:1].repeat(law.n_states, axis=0), atol=1e-10)
    # whitened over the prefixes, so not zero: pooled over a caption it still varies with the wording
    # (whatever basis of a tied eigenspace the solver returns)
    assert np.ptp(F, axis=1).max() > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("view", ["good", "bad"])
def test_the_token_encoder_reaches_the_closed_form_with_the_exact_pair_law(tiny, view):
    """Exact π (no sampling), hard whitening, the MLP on the spans' token one-hots: s_Θ to the closed form -> 0."""
    scene, law = tiny
    sw = span_world(law, SpanLaw(6), view, scene.world)
    optimum = closed_form(sw.world, "auto")
    inputs = token_one_hot(sw.tokens, law.vocab_size + 1)
    config = TrainConfig(encoder="mlp", data="exact", objective="whiten", steps=200, lr=1e-2, hidden=(64, 64))
    result = train(sw.world, optimum.k, config, inputs=inputs, reference=optimum, seeds=(0, 1))
    assert optimum.unique
    assert np.all(result.distance[:, -1] < 0.02), result.distance[:, -1]
    assert np.all(result.distance[:, -1] < result.distance[:, 0] / 10)


def test_step_data_follow_each_learners_definition(tiny):
    scene, law = tiny
    gen = np.random.default_rng(0)
    T, pad = law.length, law.pad
    records = law.sample(50, 2, rng=1)
    data = draw_steps(records, law, TextConfig(views="good", batch_size=64, min_span=3), 2, gen)
    captions = records.tokens.reshape(-1, T)
    for x, y in zip(data["x"].reshape(-1, T), data["y"].reshape(-1, T)):
        sources_x = [i for i, c in enumerate(captions) if np.all((x == pad) | (x == c))]
        sources_y = [i for i, c in enumerate(captions) if np.all((y == pad) | (y == c))]
        assert sources_x and sources_y and (x != pad).sum() >= 3
        # some pair of sources: two different captions of one record
        assert any(a // 2 == b // 2 and a != b for a in sources_x for b in sources_y)
    ntp = draw_steps(law.sample(50, 1, rng=2), law, TextConfig(learner="ntp", batch_size=64), 1, gen)
    t = (ntp["x"] != pad).sum(axis=-1)
    assert t.min() >= 1 and t.max() <= T - 1
    assert np.all((ntp["x"] != pad) == (np.arange(T) < t[..., None]))  # prefixes
    single = law.sample(40, 1, rng=4)  # bad views of one caption: both spans come from it
    one = draw_steps(single, law, TextConfig(views="bad", batch_size=64), 1, gen)
    for x, y in zip(one["x"].reshape(-1, T), one["y"].reshape(-1, T)):
        assert any(np.all((x == pad) | (x == c)) and np.all((y == pad) | (y == c)) for c in single.tokens[:, 0])
    pairs = law.sample_pairs(scene.world, 40, wording="shared", rng=3)
    bad = draw_steps(pairs, law, TextConfig(views="bad", batch_size=64), 1, gen)
    for x, y in zip(bad["x"].reshape(-1, T), bad["y"].reshape(-1, T)):
        match = [(i, c) for i in range(40) for c in range(2)
                 if np.all((x == pad) | (x == pairs.tokens[i, c]))]
        assert any(np.all((y == pad) | (y == pairs.tokens[i, 1 - c])) for i, c in match)  # the pair's other caption


def test_token_accounting_counts_every_caption(tiny):
    _, law = tiny
    config = TextConfig(views="good", steps=20, batch_size=16, log_every=10)
    result = train_text(law, [law.sample(30, 2, rng=0)], 2, config)
    assert (result.samples, result.tokens) == (30, 30 * 2 * law.length)
    with pytest.raises(ValueError, match="at least 2 caption"):
        train_text(law, [law.sample(30, 1, rng=0)], 2, config)
    with pytest.raises(ValueError, match="one set of records per seed"):
        train_text(law, [law.sample(30, 2, rng=0)], 2, config, seeds=(0, 1))


def test_ntp_embedding_pools_the_prefixes(tiny):
    _, law = tiny
    config = TextConfig(learner="ntp", steps=10, batch_size=8, log_every=10)
    result = initial_text(law, 3, config, seeds=(4,))
    captions = law.captions([0, 5], [1, 2])
    prefixes = caption_prefixes(captions, law.pad)
    direct = np.asarray(token_apply(jax.tree.map(lambda a: a[0], result.params["encoder"]), prefixes)).mean(axis=1)
    assert_close(embed_captions(result, law, captions)[0], direct, atol=1e-12)


@pytest.mark.slow
def test_good_views_align_and_bad_views_do_not():
    """Over three seeds, with a margin: good views learn the pixels' representation, bad views the wording."""
    from prhsim.experiments._caption_alignment import caption_alignment, caption_target

    scene = gridscene(3, objects=1, shapes=3, colours=3)  # 81 states, k = 3
    target = caption_target(scene, n_fit=40, rng=0)
    law, k, seeds = target.law, target.k, (0, 1, 2)
    scores = {}
    for learner, wording in (("good", "independent"), ("bad", "shared")):
        records = [law.sample_pairs(scene.world, 3000, wording=wording, rng=s) for s in seeds]
        config = TextConfig.for_task(learner, steps=800, batch_size=256, lr=1e-2, hidden=(64,), min_span=3)
        result = train_text(law, records, k, config, seeds=seeds)
        features = embed_captions(result, law, target.captions)
        scores[learner] = [caption_alignment(target, f) for f in features]
    for g, b in zip(scores["good"], scores["bad"]):
        assert g.nuisance_free == k and b.nuisance_free < k
        assert g.mutual_knn > b.mutual_knn + 0.2, (g, b)
        assert g.rho_p is not None and g.rho_p < 0.3


def test_sigreg_views_train_on_the_lejepa_loss(tiny):
    """objective="sigreg": λ·SIGReg + (1 − λ)·invariance on the two spans, directions redrawn every step."""
    scene, law = tiny
    config = TextConfig(views="good", objective="sigreg", steps=30, batch_size=32, log_every=10, num_directions=16)
    records = [law.sample_pairs(scene.world, 200, rng=s) for s in (0, 1)]
    result = train_text(law, records, 3, config, seeds=(0, 1))
    assert result.loss.shape == (2, 4) and np.all(np.isfinite(result.loss))
    assert not np.allclose(result.loss[0], result.loss[1])  # each seed its own data and directions


def test_a_text_learner_is_jepa_or_ntp_and_a_jepa_learner_takes_a_view():
    """learner is "jepa" (on good or bad views) or "ntp"; a view is not a learner (learner="bad" is refused); the
    three tasks of the sample-efficiency sweep build the same configs."""
    assert TextConfig().task == "good" and TextConfig(views="bad").task == "bad"
    assert TextConfig(learner="ntp").task == "ntp" and TextConfig(learner="ntp").captions_needed == 1
    assert [TextConfig.for_task(t).task for t in TEXT_TASKS] == list(TEXT_TASKS)
    assert TextConfig(views="bad", steps=30).label == "bad views"
    with pytest.raises(ValueError, match="learner must be one of"):
        TextConfig(learner="bad", steps=30)
    with pytest.raises(ValueError, match="views must be one of"):
        TextConfig(views="ntp")
    with pytest.raises(ValueError, match="task must be one of"):
        TextConfig.for_task("jepa")
