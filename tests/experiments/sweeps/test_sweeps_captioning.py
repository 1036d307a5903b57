"""Captioning through one rotation (prhsim.experiments.sweeps._captioning): the true map, the curve, the scores
(prhsim.experiments.sweeps._caption_scores) against twins written from their definitions, the decoder, the figure and
bad inputs."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from support import assert_cells_reduce_to_run

from prhsim.experiments.sweeps._caption_scores import (
    ATTRIBUTES,
    bleu,
    caption_scores,
    chance_scores,
    cider,
    parse_captions,
    references,
)
from prhsim.experiments.sweeps._captioning import (
    CaptioningCurve,
    PairFreeSample,
    caption_images,
    captioning_curve,
    captioning_setup,
    curve_summary,
    fit_map,
)
from prhsim.learners._caption_decoder import DecoderConfig, decode_captions, train_caption_decoder
from prhsim.worlds import caption_law, gridscene

pytest.importorskip("jax")
pytest.importorskip("sacrebleu")
pytest.importorskip("pycocoevalcap")


@pytest.fixture(scope="module")
def scene():
    return gridscene(4, 1)  # 144 states, k = 5 at a gap; its five features are injective in z


@pytest.fixture(scope="module")
def setup(scene):
    return captioning_setup(scene, seed=0)


def _every_caption(law):
    n_n = law.modality.n_nuisance
    units = np.arange(law.n_states * n_n)
    return units // n_n, units % n_n, law.captions(units // n_n, units % n_n)


# --------------------------------------------------------------------------------------------- the true map


def test_decoding_through_the_true_map_reproduces_every_state(setup, scene):
    """Both representations are closed forms of one world, so x(z, ℓ) M* = c(z, n) to rounding (residual 0),
    and the decoder, trained on every state's captions, has learned the 144-state lookup (its loss sits at
    the wording's entropy floor): every image of every state, at every lighting, decodes to a caption of
    its own state. Exact 1.0 is what this world and decoder give; 0.99 leaves room for a platform's rounding
    to flip one near-tie in the decoder's logits."""
    law = setup.law
    n_l = setup.image_q.size
    z = np.repeat(np.arange(law.n_states), n_l)
    light = np.tile(np.arange(n_l), law.n_states)
    x = setup.image_features(z, light)
    assert setup.true_residual < 1e-10
    assert setup.injective
    assert np.max(np.abs(x @ setup.true_map - setup.caption_features(z, np.zeros_like(z)))) < 1e-10
    assert setup.decoder.loss[-1] < math.log(8) / law.length + 0.02  # H(wording)/T: the floor
    scores = caption_scores(scene, z, caption_images(setup, x, setup.true_map))
    assert scores.exact >= 0.99
    assert scores.grammatical >= 0.99
    assert all(v >= 0.99 for v in scores.attributes.values())
    assert scores.bleu >= 99.0


def test_the_true_map_is_not_the_identity(setup):
    """The span closed form's Lanczos start picks its own basis: the rotation is a real one, orthogonal."""
    M = setup.true_map
    np.testing.assert_allclose(M @ M.T, np.eye(setup.k), atol=1e-12)
    assert np.linalg.norm(M - np.eye(setup.k)) > 0.5


# --------------------------------------------------------------------------------------------- the curve


def test_accuracy_grows_with_the_pairs_to_the_true_map_level(setup):
    """Below k pairs part of the rotation is free, and the decodes are near chance; the features are noiseless
    closed forms, so k pairs in general position fix M exactly and 2k and more pairs reach the true map."""
    k = setup.k
    curve = captioning_curve(setup=setup, n_fits=[1, 2 * k, 50], n_seeds=2)
    exact = curve_summary(curve, "exact")
    attr = curve_summary(curve, "attribute_mean")
    cid = curve_summary(curve, "cider")
    assert exact["mean"][0] <= 0.1 and exact["chance"] < 0.02
    assert attr["mean"][0] <= attr["chance"] + 0.15
    assert exact["mean"][0] < exact["mean"][1] <= exact["mean"][2]
    assert exact["mean"][2] >= exact["true_map"] - 0.01 and exact["true_map"] >= 0.99
    assert cid["mean"][0] < cid["mean"][2] == pytest.approx(cid["true_map"], abs=1e-9)
    big = [p for p in curve.points if p.n_fit == 50]
    assert all(p.map_distance < 1e-9 for p in big)
    assert CaptioningCurve.model_validate_json(curve.model_dump_json()) == curve


def test_k_pairs_of_distinct_states_fix_the_map(setup):
    """The fit states are drawn without replacement, so N_fit = k pairs span R^k and give the true map, every seed."""
    curve = captioning_curve(setup=setup, n_fits=[setup.k], n_seeds=6)
    assert all(p.map_distance < 1e-9 and p.scores == curve.true_map[i] for i, p in enumerate(curve.points))


def test_the_pair_free_sample_carries_the_image_noise(setup):
    from prhsim.experiments.sweeps._captioning import pair_free_sample

    clean = pair_free_sample(setup, 4000, rng=0)
    noisy = pair_free_sample(setup, 4000, rng=0, noise=0.5)
    extra = np.trace(np.cov(noisy.image, rowvar=False)) - np.trace(np.cov(clean.image, rowvar=False))
    assert extra == pytest.approx(setup.k * 0.25, rel=0.15)  # σ² per feature
    assert np.array_equal(noisy.caption, clean.caption)  # the text side is untouched


def test_noise_makes_the_curve_graded(setup):
    curve = captioning_curve(setup=setup, n_fits=[setup.k, 1000], n_seeds=1, noise=0.2)
    d = [p.map_distance for p in curve.points]
    assert d[1] < d[0] and d[1] < 0.05


def test_the_pair_free_point_takes_a_matrix_or_a_callable(setup):
    k = setup.k
    seen = {}

    def method(sample: PairFreeSample):
        seen["sample"] = sample
        return setup.true_map

    for pair_free in (setup.true_map, method):
        curve = captioning_curve(setup=setup, pair_free=pair_free, pair_free_samples=50, n_fits=[0, 20], n_seeds=1)
        assert curve.n_fits == [0, 20]
        free, paired = curve.points
        assert free.map == "pair_free" and free.n_fit == 0 and free.map_distance == 0.0
        assert free.scores == curve.true_map[0] == paired.scores
    s = seen["sample"]
    assert s.image.shape == s.caption.shape == (50, k)
    assert s.image_pairs.shape == s.caption_pairs.shape == (50, 2, k)
    default = captioning_curve(setup=setup, pair_free=setup.true_map, n_seeds=1)
    assert default.n_fits[0] == 0 and default.n_fits[1:] == sorted(default.n_fits[1:])


def test_cells_in_any_order_reduce_to_the_run():
    """The command's cells (the decoder, each seed's levels, each map), computed in a shuffled order, reduce to what
    its run computes: each map's draws are its own cell's, the decoder is built again for the run."""
    from prhsim.experiments.sweeps import _captioning as sweep

    s = sweep.CaptioningSettings(n_fits=[1, 3], n_seeds=2, decoder_steps=50, images=20, pair_free_samples=200,
                                 text="view", world={"kind": "gridscene", "size": 3, "objects": 1})
    coordinates = sweep.cells(s)
    assert coordinates[:3] == [{"part": "decoder"}, {"part": "levels", "seed": 0}, {"part": "map", "seed": 0, "n_fit": 0}]
    assert len(coordinates) == 1 + 2 * (1 + 3)
    assert_cells_reduce_to_run(sweep, s)
    default = s.model_copy(update={"n_fits": None, "n_seeds": 1})  # the default N_fit grid: read with the setup's k
    k = sweep._setup(default)[0].k  # the setup every cell of this process shares
    assert len(sweep.cells(default)) == 1 + 1 + 1 + len(sweep.default_n_fits(k))  # decoder, levels, pair-free, fits
    assert_cells_reduce_to_run(sweep, default)


def test_a_map_gives_the_same_numbers_in_another_grid(setup):
    """A map's draws are keyed by its seed and N_fit: a grid of other N_fit (or none) leaves it as it is."""
    one = captioning_curve(setup=setup, n_fits=[2, 7], n_seeds=1, images=20)
    two = captioning_curve(setup=setup, n_fits=[7], n_seeds=1, images=20)
    assert one.points[1] == two.points[0] and one.true_map == two.true_map and one.chance == two.chance


def test_fit_map_recovers_a_rotation():
    gen = np.random.default_rng(0)
    Q, _ = np.linalg.qr(gen.normal(size=(4, 4)))
    X = gen.normal(size=(6, 4))
    np.testing.assert_allclose(fit_map(X, X @ Q), Q, atol=1e-12)


# --------------------------------------------------------------------------------------------- scores vs twins


@pytest.mark.parametrize("shape", [(4, 1), (3, 2)])
def test_parsing_every_caption_recovers_its_state(shape):
    sc = gridscene(*shape)
    law = caption_law(sc)
    z, _, tokens = _every_caption(law)
    read, truth = parse_captions(sc, tokens), sc.decode(z)
    for a in ATTRIBUTES:
        np.testing.assert_array_equal(read[a], truth[a])


def _twin_scores(scene, states, tokens):
    """Exact and per-attribute accuracy, and grammaticality, by explicit loops over words and over the grammar."""
    law = caption_law(scene)
    vocab = law.vocabulary
    names = {vocab[4 + o]: o for o in range(scene.n_objects)}
    colour = {vocab[4 + scene.n_objects + i]: i // 2 for i in range(2 * scene.n_colours)}
    s0 = 4 + scene.n_objects + 2 * scene.n_colours
    shape = {vocab[s0 + i]: i // 2 for i in range(2 * scene.n_shapes)}
    number = {vocab[s0 + 2 * scene.n_shapes + i]: i for i in range(scene.size)}
    every = {}
    for z, n, row in zip(*_every_caption(law)):
        every[tuple(row)] = z
    exact, hits, grammar = [], Counter(), []
    for z, row in zip(states, tokens):
        words = [vocab[t] for t in row]
        if scene.n_objects == 1 and words[0] == "at":
            words = words[5:8] + words[0:5] + words[8:]
        said = {}
        for b in range(scene.n_objects):
            w = words[9 * b:9 * b + 9]
            o = names.get(w[0])
            if o is None:
                continue
            place = {}
            if (w[4], w[6]) in (("row", "column"), ("column", "row")):
                place = {w[4]: number.get(w[5], -1), w[6]: number.get(w[7], -1)}
            said.setdefault(o, []).append({"col": place.get("column", -1), "row": place.get("row", -1),
                                           "shape": shape.get(w[2], -1), "colour": colour.get(w[1], -1)})
        truth = scene.decode(np.array([z]))
        ok_all = True
        for o in range(scene.n_objects):
            clause = said.get(o, [])
            for a in ATTRIBUTES:
                ok = len(clause) == 1 and clause[0][a] == truth[a][0, o]
                hits[a] += ok
                ok_all &= ok
        exact.append(ok_all)
        grammar.append(tuple(row) in every)
    m = len(states) * scene.n_objects
    return float(np.mean(exact)), {a: hits[a] / m for a in ATTRIBUTES}, float(np.mean(grammar))


@pytest.mark.parametrize("shape", [(4, 1), (3, 2)])
def test_accuracies_match_a_twin_loop(shape):
    """Right captions, captions of other states, and corrupted ones (a token swapped for a random id)."""
    sc = gridscene(*shape)
    law = caption_law(sc)
    gen = np.random.default_rng(1)
    m = 300
    states = gen.choice(law.n_states, size=m)
    said = np.where(gen.random(m) < 0.5, states, gen.choice(law.n_states, size=m))
    tokens = law.captions(said, gen.choice(8, size=m))
    for i in np.flatnonzero(gen.random(m) < 0.5):
        tokens[i, gen.integers(law.length)] = gen.integers(law.vocab_size)
    scores = caption_scores(sc, states, tokens)
    exact, attributes, grammatical = _twin_scores(sc, states, tokens)
    assert scores.exact == pytest.approx(exact)
    assert scores.attributes == pytest.approx(attributes)
    assert scores.grammatical == pytest.approx(grammatical)
    assert 0.1 < scores.exact < 0.9 and 0.1 < scores.grammatical < 0.9


def _twin_bleu(hyps, refs):
    """Corpus BLEU-4 from its definition: clipped n-gram counts, geometric mean, brevity penalty (closest length)."""
    match, total = [0] * 4, [0] * 4
    hyp_len = ref_len = 0
    for h, rs in zip(hyps, refs):
        h = h.split()
        rs = [r.split() for r in rs]
        hyp_len += len(h)
        ref_len += min((abs(len(r) - len(h)), len(r)) for r in rs)[1]
        for n in range(1, 5):
            grams = Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
            most = Counter()
            for r in rs:
                for g, c in Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1)).items():
                    most[g] = max(most[g], c)
            match[n - 1] += sum(min(c, most[g]) for g, c in grams.items())
            total[n - 1] += max(len(h) - n + 1, 0)
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100 * bp * math.exp(sum(math.log(m / t) for m, t in zip(match, total)) / 4)


def test_bleu_matches_its_definition_and_identical_captions_score_the_maximum():
    sc = gridscene(3, 2)
    law = caption_law(sc)
    gen = np.random.default_rng(2)
    states = gen.choice(law.n_states, size=40, replace=False)
    refs = references(law, states)
    hyps = law.decode(law.captions(np.where(gen.random(40) < 0.5, states, gen.choice(law.n_states, size=40)),
                                   gen.choice(8, size=40)))
    assert bleu(hyps, refs) == pytest.approx(_twin_bleu(hyps, refs), rel=1e-9)
    same = [r[3] for r in refs]
    assert bleu(same, refs) == pytest.approx(100.0)
    assert cider(same, [[s] for s in same]) == pytest.approx(10.0)
    assert cider(hyps, [[s] for s in same]) < 10.0


def test_right_captions_score_every_accuracy_one(scene):
    law = caption_law(scene)
    states = np.arange(law.n_states)
    scores = caption_scores(scene, states, law.captions(states, np.arange(law.n_states) % 8))
    assert scores.exact == scores.grammatical == scores.attribute_mean == 1.0
    assert scores.bleu == pytest.approx(100.0)
    assert 0 < scores.cider < 10.0  # one of the 8 references matches: CIDEr averages over all of them
    chance = chance_scores(scene, states, 0)
    assert chance.exact == pytest.approx(1 / law.n_states)
    assert chance.attributes == pytest.approx({"col": 0.25, "row": 0.25, "shape": 1 / 3, "colour": 1 / 3})


def test_attributes_are_read_through_synonyms_and_lost_to_a_wrong_word(scene):
    law = caption_law(scene)
    vocab = list(law.vocabulary)
    tokens = law.captions(np.array([0]), np.array([0]))  # "alpha red square at row zero column zero ;"
    mixed = tokens.copy()
    mixed[0, 1] = vocab.index("crimson")  # the other synonym set's word for red: ungrammatical, still read
    wrong = tokens.copy()
    wrong[0, 5] = vocab.index("red")  # no number after "row"
    scores = caption_scores(scene, np.array([0, 0]), np.concatenate([mixed, wrong]))
    assert scores.grammatical == 0.0 and scores.exact == 0.5
    assert scores.attributes == {"col": 1.0, "row": 0.5, "shape": 1.0, "colour": 1.0}


# --------------------------------------------------------------------------------------------- decoder, figure


def test_the_decoder_commits_to_one_wording(setup):
    """A nuisance-free representation decodes to one whole wording, never a mixture of two (module docstring)."""
    law = setup.law
    tokens = decode_captions(setup.decoder, setup.caption_features(np.arange(law.n_states), np.zeros(law.n_states,
                                                                                                       dtype=int)))
    _, _, every = _every_caption(law)
    assert {tuple(r) for r in tokens} <= {tuple(r) for r in every}


def test_the_figure_draws_every_series(setup):
    from prhsim.experiments.sweeps._captioning_figure import (
        CHANCE,
        CURVE,
        K_LINE,
        PAIR_FREE,
        TRUE_MAP,
        captioning_figure,
    )

    curve = captioning_curve(setup=setup, pair_free=setup.true_map, n_fits=[0, 1, 10], n_seeds=1)
    fig = captioning_figure(curve)
    gids = {a.get_gid() for ax in fig.axes for a in ax.get_children()}
    for gid in (f"{CURVE}-exact", f"{CURVE}-cider", f"{TRUE_MAP}-exact", f"{TRUE_MAP}-cider", f"{CHANCE}-exact",
                f"{PAIR_FREE}-exact", f"{K_LINE}-exact"):
        assert gid in gids, gid
    assert all(ax.get_xscale() == "log" for ax in fig.axes)


# --------------------------------------------------------------------------------------------- bad inputs


def _one_line(excinfo):
    assert "\n" not in str(excinfo.value)


@pytest.mark.parametrize("kwargs, match", [
    ({"n_fits": [0, 5]}, "pair-free"),
    ({"n_fits": [-1]}, "n_fits"),
    ({"n_fits": [2.5]}, "n_fits"),
    ({"n_fits": []}, "n_fits"),
    ({"n_seeds": 0}, "n_seeds"),
    ({"noise": -0.1}, "noise"),
    ({"held_in": 1.0}, "held_in"),
    ({"images": 1}, "images"),
    ({"pair_free": np.eye(3)}, "5 x 5"),
    ({"pair_free": lambda s: np.eye(2)}, "callable"),
    ({"pair_free": np.full((5, 5), np.nan)}, "finite"),
    ({"rng": -1}, "rng"),
])
def test_bad_curve_arguments_are_one_line_errors(setup, kwargs, match):
    kwargs = {"n_seeds": 1, "n_fits": [0] if "pair_free" in kwargs else [5], **kwargs}
    with pytest.raises(ValueError, match=match) as excinfo:
        captioning_curve(setup=setup, **kwargs)
    _one_line(excinfo)


def test_bad_setup_and_score_arguments_are_one_line_errors(scene, setup):
    law = caption_law(scene)
    cases = [
        (lambda: captioning_setup("gridscene"), "gridscene"),
        (lambda: captioning_setup(scene, text="bad"), "text"),
        (lambda: captioning_setup(scene, text=np.zeros((3, 5))), "shape"),
        (lambda: captioning_setup(scene, seed=-1), "seed"),
        (lambda: caption_scores(scene, np.array([0, 1]), np.zeros((2, 3), dtype=int)), "token ids"),
        (lambda: caption_scores(scene, np.array([0]), np.zeros((1, 9), dtype=int)), "two images"),
        (lambda: caption_scores(scene, np.array([0, 999]), np.zeros((2, 9), dtype=int)), "states"),
        (lambda: parse_captions(scene, np.zeros((2, 10), dtype=int)), "tokens"),
        (lambda: fit_map(np.zeros((3, 2)), np.zeros((3, 3))), "pairs"),
        (lambda: bleu(["a"], [["a"], ["b"]]), "BLEU"),
        (lambda: cider(["a"], [["a"]]), "CIDEr"),
        (lambda: DecoderConfig(steps=0), "steps"),
        (lambda: DecoderConfig(hidden=()), "hidden"),
        (lambda: DecoderConfig(lr=0.0), "lr"),
        (lambda: train_caption_decoder(law, np.zeros((5, 3))), "one row per whole caption"),
        (lambda: train_caption_decoder(law, np.full((law.n_states * 8, 3), np.nan)), "finite"),
        (lambda: decode_captions(setup.decoder, np.zeros((2, 3))), "features"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match) as excinfo:
            call()
        _one_line(excinfo)
