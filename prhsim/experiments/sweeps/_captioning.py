"""Captioning through one rotation, in a gridscene where the true answer is known (docs/theory.md §1.1, §4, §5.1, §9).

The pieces:

* **Text side** (:func:`captioning_setup`): the caption modality's good-view closed form on every
  whole caption ``u = z·|N| + n``: by default the text JEPA's optimum on pairs of spans of at
  least one clause (:func:`prhsim.optima.span_optimum`, view "good", the world's pair law; §5.1),
  or the closed form of the caption modality's view world (``text="view"``, §4). Both are
  nuisance-free, ``c(z, n) = Q_cᵀ h*(z)``. A decoder (:mod:`prhsim.learners._caption_decoder`) is
  trained on captions alone, from ``c(u)`` back to the tokens of u, u drawn from ``p ⊗ q``; it
  sees no image. A nuisance-free c hides the wording, so the decoder learns ``p(x | z)`` and
  decodes one wording of it.
* **Image side**: the pixel modality's good-view closed form (§1.1, §4), ``x(z, ℓ) = Q_xᵀ h*(z)``,
  one image of random lighting ℓ ~ q per evaluated state (as in
  :mod:`prhsim.experiments._caption_alignment`); optionally ``x + σ ε``, ε ~ N(0, I) (``noise``),
  a stand-in for an imperfect image encoder.
* **One rotation**: image features are carried to the text side by ``x ↦ x M`` with M ∈ O(k),
  fitted on N_fit (image, caption) pairs of held-in states, ``M̂ = UVᵀ`` from
  ``svd(Σ_i x_i c_iᵀ) = U S Vᵀ`` (argmin ``Σ_i ‖c_i − x_i M‖²``, :func:`prhsim.metrics.orthogonal_map`).
  The **true map** is the weighted Procrustes of every state (§2):
  ``M* = argmin_{M ∈ O(k)} Σ_z p(z) ‖c̄(z) − x̄(z) M‖²`` with x̄, c̄ the q-means over the nuisance;
  for two closed forms it is exact (``M* = Q_xᵀ Q_c``, residual 0 to rounding). At N_fit = 0 a
  **pair-free** map is passed in (§9): a k x k matrix, or a callable of a :class:`PairFreeSample`
  (unpaired images and captions, and each modality's own positive pairs) returning one.
* **Scores** (:mod:`prhsim.experiments.sweeps._caption_scores`), of the decoded captions of
  held-out images against the world's description of each image's state: exact and per-attribute
  accuracy, grammaticality, BLEU-4 and CIDEr-D, beside the chance level of a caption of a random
  state ``z' ~ p`` independent of the image.

:func:`captioning_curve` runs the map fits over N_fit values and seeds, as cells:

* the **decoder** cell: the decoder's summary (trained once per curve, seed ``rng``, since it never
  sees an image; its own decodes draw one wording per state from ``[rng, CAPTIONING_DECODER]``);
* a **levels** cell per seed s: the true map's and chance's scores on the seed's held-out images;
* a **map** cell per seed s and N_fit (0: the pair-free map, fitted on its pair-free sample).

Seed s's stream ``[s, CAPTIONING_SEED]`` draws the held-in / held-out split of the states, the lighting
of each evaluated image and its noise, then the chance captions; each cell that needs them draws
them again, so they are the same in every cell. A map cell draws its N_fit pairs (states ~ p among
the held-in, lighting ~ q, wording ~ q, and the noise), or its pair-free sample, from its own
stream ``cell_stream(rng, {"part": "map", "seed": s, "n_fit": N_fit})``: the same wherever and in
whatever order the cells run, and in any grid of N_fit. Every cell computes the same setup (the
closed forms and the decoder); a process builds it once for all the cells it computes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal, NamedTuple, Sequence, Union

import numpy as np
from pydantic import Field, model_validator

from prhsim import __version__
from prhsim._budget import ensure_fits
from prhsim._rng import CAPTIONING_DECODER, CAPTIONING_SEED, RngLike, cell_stream, check_rng
from prhsim._types import Progress, as_progress
from prhsim.config import GridSceneWorld, Settings, WorldConfig
from prhsim.experiments._record import Record
from prhsim.experiments.sweeps._caption_scores import (
    CAPTION_SCORES,
    CLAUSE,
    CaptionScores,
    Metric,
    accuracies,
    caption_scores,
    chance_scores,
)
from prhsim.learners import (
    CaptionDecoder,
    DecoderConfig,
    check_decoder,
    decode_captions,
    train_caption_decoder,
)
from prhsim.metrics import iterative_match, orthogonal_map, procrustes, spectral_match
from prhsim.optima import AUTO_K_MAX, closed_form, span_optimum
from prhsim.worlds import (
    CaptionLaw,
    GridScene,
    SpanLaw,
    caption,
    caption_law,
    good,
    gridscene,
    pair_sampler,
    pixels,
    view_world,
)

TEXT_ROUTES: tuple[str, ...] = ("spans", "view")
#: The default world: a 4 x 4 grid with one object (144 states, k = 5 at the gap 0.087).
DEFAULT_SIZE, DEFAULT_OBJECTS = 4, 1


class PairFreeSample(NamedTuple):
    """What a pair-free map may read (docs/theory.md §9): no (image, caption) pair.

    Attributes:
        image: features of images of states ``z ~ p`` (lighting ~ q), (m, k).
        caption: caption representations of states drawn independently ``z ~ p`` (wording ~ q), (m, k).
        image_pairs: the image modality's positive pairs ``(z, z') ~ π``, (m, 2, k), independent lightings.
        caption_pairs: the caption modality's positive pairs ``(z, z') ~ π``, (m, 2, k), independent wordings.
        p: the law of Z (for methods that weight by it).
    """

    image: np.ndarray
    caption: np.ndarray
    image_pairs: np.ndarray
    caption_pairs: np.ndarray
    p: np.ndarray


MapEstimate = Union[np.ndarray, Callable[[PairFreeSample], np.ndarray]]


@dataclass(frozen=True)
class CaptioningSetup:
    """The world, both closed forms, the decoder and the true map of one captioning experiment.

    Attributes:
        scene: the gridscene; law: its caption law; k: the features of both representations.
        text: how the caption representation was made: "spans", "view" or "given".
        captions: the caption representation of every whole caption ``z·|N| + n``, (|Z|·|N|, k).
        image_table: the pixel closed form's features of every image ``z·|L| + ℓ``, (|Z|·|L|, k).
        image_q: the law of the lighting (the pixel modality's nuisance).
        decoder: the caption decoder (trained on ``captions`` alone).
        true_map: M*, (k, k); true_residual: ``ρ = ‖c̄ − x̄ M*‖_D / √k`` (0 for two closed forms).
        injective: the image features of distinct states differ (else no decoder can tell them apart).
    """

    scene: GridScene
    law: CaptionLaw
    k: int
    text: str
    captions: np.ndarray
    image_table: np.ndarray
    image_q: np.ndarray
    decoder: CaptionDecoder
    true_map: np.ndarray
    true_residual: float
    injective: bool

    def image_features(self, states: np.ndarray, lighting: np.ndarray) -> np.ndarray:
        """The features of the images ``(z, ℓ)``, (m, k)."""
        return self.image_table[np.asarray(states) * self.image_q.size + np.asarray(lighting)]

    def caption_features(self, states: np.ndarray, wording: np.ndarray) -> np.ndarray:
        """The representations of the captions ``(z, n)``, (m, k)."""
        return self.captions[np.asarray(states) * self.law.modality.n_nuisance + np.asarray(wording)]


def captioning_setup(scene: GridScene, *, k: int | Literal["auto"] = "auto",
                     text: Literal["spans", "view"] | np.ndarray = "spans", decoder: DecoderConfig | None = None,
                     seed: int = 0) -> CaptioningSetup:
    """Build the closed forms, train the decoder on captions alone and compute the true map (module docstring).

    Args:
        scene: a gridscene.
        k: the pixel closed form's features ("auto": at its largest relative gap); the caption
            representation has the same k.
        text: "spans" (span closed form, good views, the world's pairs, spans of ≥ 9 tokens),
            "view" (the caption modality's view-world closed form), or a caption representation of
            every whole caption, (|Z|·|N|, k).
        decoder: the decoder's hyperparameters.
        seed: the decoder's seed (and the Lanczos start of the span closed form).

    Raises:
        ValueError: on a bad argument.
    """
    if not isinstance(scene, GridScene):
        raise ValueError(f"captioning needs a gridscene, got {type(scene).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    law = caption_law(scene)
    image_modality = pixels(scene)
    optimum = closed_form(view_world(scene.world, image_modality, good()), k)
    k = optimum.k
    n_z, n_n, n_l = law.n_states, law.modality.n_nuisance, image_modality.n_nuisance
    image_table = optimum.features()
    if isinstance(text, str):
        if text not in TEXT_ROUTES:
            raise ValueError(f"text must be one of {TEXT_ROUTES} or a caption representation, got {text!r}")
        if text == "spans":
            table = span_optimum(law, SpanLaw(CLAUSE), "good", k, world=scene.world, rng=int(seed)).captions
        else:
            table = closed_form(view_world(scene.world, caption(scene), good()), k).features()
        route = text
    else:
        table = np.asarray(text, dtype=np.float64)
        if table.shape != (n_z * n_n, k):
            raise ValueError(f"a caption representation needs shape ({n_z * n_n:,}, {k}) (every whole caption, "
                             f"k = {k}), got {table.shape}")
        if not np.all(np.isfinite(table)):
            raise ValueError("the caption representation is not finite")
        route = "given"
    q_img = np.asarray(image_modality.nuisance, dtype=np.float64)
    x_mean = np.einsum("zlk,l->zk", image_table.reshape(n_z, n_l, k), q_img)
    c_mean = np.einsum("znk,n->zk", table.reshape(n_z, n_n, k), law.q)
    fit = procrustes(c_mean, x_mean, law.p)  # c̄ ≈ x̄ M*
    injective = bool(len(np.unique(np.round(x_mean, 9), axis=0)) == n_z)
    trained = train_caption_decoder(law, table, decoder, seed=int(seed))
    return CaptioningSetup(scene, law, k, route, table, image_table, q_img, trained, fit.Q, float(fit.rho), injective)


# --------------------------------------------------------------------------------------------- maps


def fit_map(image: np.ndarray, captions: np.ndarray) -> np.ndarray:
    """The orthogonal M minimising ``Σ_i ‖c_i − x_i M‖²`` over pairs (x_i, c_i): ``orthogonal_map(Xᵀ C)``, (k, k)."""
    X, C = np.asarray(image, dtype=np.float64), np.asarray(captions, dtype=np.float64)
    if X.ndim != 2 or X.shape != C.shape or X.shape[0] < 1:
        raise ValueError(f"a map is fitted on pairs of equal shape (N, k), N >= 1; got {X.shape} and {C.shape}")
    return orthogonal_map(X.T @ C)


def pair_free_sample(setup: CaptioningSetup, count: int, rng: RngLike = None, noise: float = 0.0) -> PairFreeSample:
    """``count`` unpaired images and captions, and ``count`` positive pairs of each modality (:class:`PairFreeSample`);
    ``noise``: σ of the Gaussian noise on every image feature, as on the images the map is used on."""

    gen = check_rng(rng)
    law, n_n, n_l = setup.law, setup.law.modality.n_nuisance, setup.image_q.size
    z_img, z_cap = gen.choice(law.n_states, size=(2, count), p=law.p)
    image = setup.image_features(z_img, gen.choice(n_l, size=count, p=setup.image_q))
    text = setup.caption_features(z_cap, gen.choice(n_n, size=count, p=law.q))
    sampler = pair_sampler(setup.scene.world)
    za, zb = sampler.pairs(count, rng=gen)
    image_pairs = np.stack([setup.image_features(za, gen.choice(n_l, size=count, p=setup.image_q)),
                            setup.image_features(zb, gen.choice(n_l, size=count, p=setup.image_q))], axis=1)
    za, zb = sampler.pairs(count, rng=gen)
    caption_pairs = np.stack([setup.caption_features(za, gen.choice(n_n, size=count, p=law.q)),
                              setup.caption_features(zb, gen.choice(n_n, size=count, p=law.q))], axis=1)
    if noise:
        image = image + noise * gen.standard_normal(image.shape)
        image_pairs = image_pairs + noise * gen.standard_normal(image_pairs.shape)
    return PairFreeSample(image, text, image_pairs, caption_pairs, law.p)


def resolve_pair_free(setup: CaptioningSetup, pair_free: MapEstimate, count: int = 2000,
                      rng: RngLike = None, noise: float = 0.0) -> np.ndarray:
    """The k x k map of ``pair_free``: the matrix itself, or the callable's answer on a :func:`pair_free_sample`."""
    k = setup.k
    if callable(pair_free):
        M = pair_free(pair_free_sample(setup, count, rng, noise))
        what = "the pair-free callable returned"
    else:
        M = pair_free
        what = "the pair-free map is"
    M = np.asarray(M, dtype=np.float64)
    if M.shape != (k, k) or not np.all(np.isfinite(M)):
        raise ValueError(f"{what} not a finite {k} x {k} matrix (shape {M.shape})")
    return M


def caption_images(setup: CaptioningSetup, image: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Decode image features (m, k) carried to the text side by ``x ↦ x M``: token ids (m, T)."""
    return decode_captions(setup.decoder, np.asarray(image, dtype=np.float64) @ np.asarray(M, dtype=np.float64))


# --------------------------------------------------------------------------------------------- the curve


class DecoderSummary(Record):
    """The decoder of a curve: its hyperparameters, its final loss against the floor, its own accuracy.

    ``loss_floor`` is ``H(caption | z)/T`` under the law, the least loss of a decoder that knows z
    but not the wording; ``exact`` the exact accuracy of decoding every state's caption
    representation (one wording ~ q each), the level no map can beat.
    """

    steps: int
    batch_size: int
    lr: float
    hidden: list[int]
    final_loss: float
    loss_floor: float
    exact: float
    seconds: float


class CaptioningPoint(Record):
    """One map (fitted on ``n_fit`` pairs, or pair-free at ``n_fit`` = 0) and seed.

    ``map_distance`` is ``‖M − M*‖_F / √k`` (0 for the true map, at most 2).
    """

    n_fit: int
    seed: int
    map: Literal["pairs", "pair_free"]
    map_distance: float
    scores: CaptionScores


class CaptioningCurve(Record):
    """The result of :func:`captioning_curve` (module docstring); ``true_map`` and ``chance`` per seed."""

    prhsim_version: str
    world: str
    n_states: int
    size: int
    n_objects: int
    k: int
    text: str
    noise: float
    injective: bool
    true_residual: float
    held_in: int
    images: int
    n_fits: list[int]
    seeds: list[int]
    decoder: DecoderSummary
    true_map: list[CaptionScores]
    chance: list[CaptionScores]
    points: list[CaptioningPoint]
    seconds: float


def default_n_fits(k: int) -> list[int]:
    """N_fit values around and past k: ``1, k//2, k−1, k, 2k, 5k, 10, 20, 50, 100, 1000`` (positive, distinct, sorted)."""
    return sorted({n for n in (1, k // 2, k - 1, k, 2 * k, 5 * k, 10, 20, 50, 100, 1000) if n >= 1})


def _metric(scores: CaptionScores, metric: str) -> float:
    return float(getattr(scores, metric))


def curve_summary(curve: CaptioningCurve, metric: Metric = "exact") -> dict[str, Any]:
    """Per N_fit, the mean, min and max over seeds of a metric; and the true-map and chance levels (seed means)."""
    if metric not in CAPTION_SCORES:
        raise ValueError(f"metric must be one of {CAPTION_SCORES}, got {metric!r}")
    rows = [[_metric(p.scores, metric) for p in curve.points if p.n_fit == n] for n in curve.n_fits]
    return {"n_fits": list(curve.n_fits), "mean": [float(np.mean(r)) for r in rows],
            "low": [float(np.min(r)) for r in rows], "high": [float(np.max(r)) for r in rows],
            "true_map": float(np.mean([_metric(s, metric) for s in curve.true_map])),
            "chance": float(np.mean([_metric(s, metric) for s in curve.chance]))}


def captioning_curve(scene: GridScene | None = None, *, n_fits: Sequence[int] | None = None, n_seeds: int = 10,
                     k: int | Literal["auto"] = "auto", text: Literal["spans", "view"] | np.ndarray = "spans",
                     pair_free: MapEstimate | None = None, pair_free_samples: int = 2000, noise: float = 0.0,
                     held_in: float = 0.5, images: int = 1000, decoder: DecoderConfig | None = None,
                     setup: CaptioningSetup | None = None, name: str = "gridscene", rng: int = 0,
                     progress: Callable[..., None] | None = None) -> CaptioningCurve:
    """Caption held-out images through one rotation fitted on N_fit pairs, for every N_fit and seed (module docstring).

    Args:
        scene: a gridscene (default: 4 x 4, one object).
        n_fits: the numbers of (image, caption) pairs (default :func:`default_n_fits`, with 0 first when
            ``pair_free`` is given); 0 means the pair-free map.
        n_seeds: the number of seeds of the draws: ``1000·rng + s`` for s < n_seeds.
        k, text, decoder: as :func:`captioning_setup` (ignored when ``setup`` is given).
        pair_free: the map at N_fit = 0: a k x k matrix, or a callable of a :class:`PairFreeSample`
            (``pair_free_samples`` rows, drawn per seed) returning one.
        noise: σ of the Gaussian noise added to every image feature (fit and held-out); 0: the closed form.
        held_in: the fraction of states whose images may be paired (the rest are captioned).
        images: at most this many held-out images are captioned per seed (one per state).
        setup: a prebuilt :class:`CaptioningSetup` (its scene is used).
        rng: the seed of the decoder, of the span closed form and of the draws (module docstring: each cell's
            stream).
        progress: ``progress(message, done, total)``: the setup (uncounted), then once per seed and at the end,
            counted in maps (the true map and one per N_fit, each seed).

    Raises:
        ValueError: on a bad argument (the message names it).
    """
    start = time.perf_counter()
    say = as_progress(progress)
    if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)) or rng < 0:
        raise ValueError(f"rng must be a non-negative integer, got {rng!r}")
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, (int, np.integer)) or not 1 <= n_seeds <= 1000:
        raise ValueError(f"n_seeds must be an integer in 1..1000, got {n_seeds!r}")
    if isinstance(noise, bool) or not (isinstance(noise, (int, float, np.floating)) and np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    if not (isinstance(held_in, (float, int)) and 0 < held_in < 1):
        raise ValueError(f"held_in must be a fraction in (0, 1), got {held_in!r}")
    for label, value, low in (("images", images, 2), ("pair_free_samples", pair_free_samples, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{label} must be an integer of at least {low}, got {value!r}")
    if pair_free is not None and not callable(pair_free):
        pair_free = np.asarray(pair_free, dtype=np.float64)
    if setup is None:
        scene = gridscene(DEFAULT_SIZE, DEFAULT_OBJECTS) if scene is None else scene
        say("closed forms, then the caption decoder trained on captions alone")
        setup = captioning_setup(scene, k=k, text=text, decoder=decoder, seed=int(rng))
    fits = _fit_grid(n_fits, pair_free is not None, setup.k)
    check_draws(max(fits), pair_free_samples if 0 in fits else 0, setup.k)
    n_in = _held_in(held_in, setup.law.n_states)
    seed_list = _seeds(int(rng), int(n_seeds))
    decoder_record = captioning_decoder_cell(setup, int(rng))
    levels, points = [], []
    per_seed = len(fits) + 1
    total = per_seed * len(seed_list)
    for i, seed in enumerate(seed_list):
        say(f"seed {i + 1} of {len(seed_list)}: the true map and {len(fits)} fitted", done=i * per_seed, total=total)
        draws = seed_draws(setup, seed, n_in, images, noise)
        score = _scorer(setup.scene, draws.out_states)  # one per seed: equal decodes score once
        levels.append(captioning_levels_cell(setup, draws, score))
        for n in fits:
            stream = cell_stream(int(rng), map_coordinates(seed, n))
            points.append(captioning_map_cell(setup, draws, n, pair_free, pair_free_samples, noise, stream, score))
    say(f"{len(seed_list)} seeds done", done=total, total=total)
    return _reduce(decoder_record, levels, points, fits, seed_list, noise, n_in, name, time.perf_counter() - start)


def _fit_grid(n_fits: Sequence[int] | None, pair_free: bool, k: int) -> list[int]:
    """The N_fit values, ascending (0: the pair-free map): ``n_fits``, or :func:`default_n_fits` (0 first with a
    pair-free map)."""
    if n_fits is None:
        fits = ([0] if pair_free else []) + default_n_fits(k)
    else:
        fits = list(n_fits)
        if not fits or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in fits):
            raise ValueError(f"n_fits must be non-negative integers, got {list(n_fits)!r}")
        fits = sorted({int(n) for n in fits})
    if 0 in fits and not pair_free:
        raise ValueError("N_fit = 0 needs a pair-free map (pair_free=...)")
    return fits


def _held_in(held_in: float, n_z: int) -> int:
    """The number of held-in states (at least one, and two held out)."""
    n_in = int(round(held_in * n_z))
    if not 1 <= n_in <= n_z - 2:
        raise ValueError(f"held_in = {held_in} leaves {n_in} of {n_z} states held in: need at least one held in "
                         "and two held out")
    return n_in


def _seeds(rng: int, n_seeds: int) -> list[int]:
    """The seeds of the draws: ``1000·rng + s`` for s < n_seeds."""
    return [rng * 1000 + s for s in range(n_seeds)]


def map_coordinates(seed: int, n_fit: int) -> dict[str, Any]:
    """The coordinates of the map cell at seed ``seed`` and ``n_fit`` (its stream's key)."""
    return {"part": "map", "seed": int(seed), "n_fit": int(n_fit)}


class SeedDraws(NamedTuple):
    """What seed s draws from ``[s, CAPTIONING_SEED]``: the split, the held-out images (their features, noise
    added), and the generator after them (the chance captions come next)."""

    seed: int
    gen: np.random.Generator
    fit_states: np.ndarray
    out_states: np.ndarray
    p_in: np.ndarray
    x_out: np.ndarray


def seed_draws(setup: CaptioningSetup, seed: int, n_in: int, images: int, noise: float) -> SeedDraws:
    """Seed ``seed``'s held-in states, its held-out images (at most ``images``, one per state) and their features."""
    law = setup.law
    gen = np.random.default_rng([seed, CAPTIONING_SEED])
    order = gen.permutation(law.n_states)
    fit_states, out_states = order[:n_in], order[n_in:]
    out_states = np.sort(out_states[:images])
    p_in = law.p[fit_states] / law.p[fit_states].sum()
    x_out = setup.image_features(out_states, gen.choice(setup.image_q.size, size=out_states.size, p=setup.image_q))
    if noise:
        x_out = x_out + noise * gen.standard_normal(x_out.shape)
    return SeedDraws(int(seed), gen, fit_states, out_states, p_in, x_out)


def _scorer(scene: GridScene, states: np.ndarray,
            memo: dict[tuple[bytes, bytes], CaptionScores] | None = None) -> Callable[[np.ndarray], CaptionScores]:
    """:func:`caption_scores` of the images of ``states``, remembered in ``memo`` by the states and the decoded
    tokens (equal decodes, as every map at N_fit >= k without noise gives, score once)."""
    memo = {} if memo is None else memo
    states = np.asarray(states, dtype=np.int64)

    def score(tokens: np.ndarray) -> CaptionScores:
        key = (states.tobytes(), np.asarray(tokens).tobytes())
        if key not in memo:
            memo[key] = caption_scores(scene, states, tokens)
        return memo[key]

    return score


def captioning_decoder_cell(setup: CaptioningSetup, rng: int) -> dict[str, Any]:
    """The decoder cell (JSON values): the world, k, the true map's residual and the decoder's summary, its own
    accuracy from one wording per state drawn from ``[rng, CAPTIONING_DECODER]``."""
    law, scene = setup.law, setup.scene
    n_z, n_n = law.n_states, law.modality.n_nuisance
    dec_gen = np.random.default_rng([int(rng), CAPTIONING_DECODER])
    own = decode_captions(setup.decoder, setup.caption_features(np.arange(n_z), dec_gen.choice(n_n, size=n_z, p=law.q)))
    cfg = setup.decoder.config
    summary = DecoderSummary(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, hidden=list(cfg.hidden),
                             final_loss=float(setup.decoder.loss[-1]), loss_floor=_caption_entropy(law) / law.length,
                             exact=accuracies(scene, np.arange(n_z), own)[0], seconds=setup.decoder.seconds)
    return {"n_states": n_z, "size": scene.size, "n_objects": scene.n_objects, "k": setup.k, "text": setup.text,
            "injective": setup.injective, "true_residual": setup.true_residual,
            "decoder": summary.model_dump(mode="json")}


def captioning_levels_cell(setup: CaptioningSetup, draws: SeedDraws,
                           score: Callable[[np.ndarray], CaptionScores] | None = None) -> dict[str, Any]:
    """A levels cell (JSON values): the true map's and chance's scores on the seed's held-out images (chance draws
    its captions from ``draws.gen``, after the images)."""
    score = score or _scorer(setup.scene, draws.out_states)
    true = score(caption_images(setup, draws.x_out, setup.true_map))
    chance = chance_scores(setup.scene, draws.out_states, draws.gen)
    return {"images": int(draws.out_states.size), "true_map": true.model_dump(mode="json"),
            "chance": chance.model_dump(mode="json")}


def captioning_map_cell(setup: CaptioningSetup, draws: SeedDraws, n_fit: int, pair_free: MapEstimate | None,
                        pair_free_samples: int, noise: float, rng: np.random.Generator,
                        score: Callable[[np.ndarray], CaptionScores] | None = None) -> dict[str, Any]:
    """A map cell (JSON values): the map fitted on ``n_fit`` pairs drawn from ``rng`` (0: ``pair_free`` on a
    sample drawn from ``rng``), its distance to the true map and its scores on the seed's held-out images."""
    law = setup.law
    if n_fit == 0:
        M, kind = resolve_pair_free(setup, pair_free, pair_free_samples, rng, noise), "pair_free"
    else:
        fit_states = draws.fit_states
        z = rng.choice(fit_states, size=n_fit, p=draws.p_in, replace=n_fit > fit_states.size)  # distinct while they last
        x = setup.image_features(z, rng.choice(setup.image_q.size, size=n_fit, p=setup.image_q))
        if noise:
            x = x + noise * rng.standard_normal(x.shape)
        c = setup.caption_features(z, rng.choice(law.modality.n_nuisance, size=n_fit, p=law.q))
        M, kind = fit_map(x, c), "pairs"
    score = score or _scorer(setup.scene, draws.out_states)
    point = CaptioningPoint(n_fit=int(n_fit), seed=draws.seed, map=kind,
                            map_distance=float(np.linalg.norm(M - setup.true_map) / np.sqrt(setup.k)),
                            scores=score(caption_images(setup, draws.x_out, M)))
    return {"point": point.model_dump(mode="json")}


def _reduce(decoder: dict[str, Any], levels: Sequence[dict[str, Any]], points: Sequence[dict[str, Any]],
            fits: list[int], seeds: list[int], noise: float, n_in: int, name: str, seconds: float) -> CaptioningCurve:
    """The curve from its cells' records: the decoder cell's, the levels cells' (one per seed) and the map cells'
    (seed by seed, N_fit ascending)."""
    return CaptioningCurve(
        prhsim_version=__version__, world=name, n_states=decoder["n_states"], size=decoder["size"],
        n_objects=decoder["n_objects"], k=decoder["k"], text=decoder["text"], noise=float(noise),
        injective=decoder["injective"], true_residual=decoder["true_residual"], held_in=n_in,
        images=levels[-1]["images"], n_fits=list(fits), seeds=list(seeds),
        decoder=DecoderSummary.model_validate(decoder["decoder"]),
        true_map=[CaptionScores.model_validate(r["true_map"]) for r in levels],
        chance=[CaptionScores.model_validate(r["chance"]) for r in levels],
        points=[CaptioningPoint.model_validate(r["point"]) for r in points], seconds=seconds)


def _caption_entropy(law: CaptionLaw) -> float:
    """``H(caption | z)`` in nats: the entropy of q pushed to the distinct captions of each state, p-averaged."""
    n_z, n_n = law.n_states, law.modality.n_nuisance
    units = np.arange(n_z * n_n)
    rows = law.captions(units // n_n, units % n_n).reshape(n_z, n_n, -1)
    same = np.all(rows[:, :, None, :] == rows[:, None, :, :], axis=-1)  # (z, n, n'): one caption
    mass = same @ law.q  # the q-mass of the caption (z, n) within state z
    return float(law.p @ -(np.log(mass) @ law.q))


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class CaptioningSettings(Settings):
    """``prhsim sweep captioning``: caption held-out images through one rotation fitted on N_fit (image, caption) pairs.

    Attributes:
        world: a gridscene (default 4x4 grid, one object: 144 states).
        n_fits: numbers of pairs the rotation is fitted on (default around and past k); 0 is added for the pair-free map.
        n_seeds: draws of the held-in states, the pairs, the lightings and the noise.
        k: features (default: the pixel closed form's gap).
        text: the caption representation: "spans" (the text JEPA's closed form on spans) or "view" (the
            caption modality's view-world closed form).
        noise: σ of Gaussian noise on every image feature (0: the closed form).
        pair_free: the map at N_fit = 0: "iterative" (features alone), "spectral" (each modality's own pairs) or "none".
        pair_free_samples: unpaired images, captions and pairs of each modality the pair-free map reads.
        held_in: the fraction of states whose images may be paired; the others are captioned.
        images: at most this many held-out images per seed.
        decoder_steps, decoder_batch: the caption decoder's training (on captions alone).
        seed: seeds the decoder and the draws.
    """

    grids = ('n_fits',)

    renamed = {"seeds": "n_seeds"}

    world: WorldConfig = Field(default_factory=lambda: GridSceneWorld(size=4, objects=1))
    n_fits: list[Annotated[int, Field(ge=1)]] | None = Field(None, min_length=1)
    n_seeds: int = Field(10, ge=1, le=100)
    k: int | Literal["auto"] = "auto"
    text: Literal["spans", "view"] = "spans"
    noise: float = Field(0.0, ge=0)
    pair_free: Literal["iterative", "spectral", "none"] = "iterative"
    pair_free_samples: int = Field(2000, ge=10)
    held_in: float = Field(0.5, gt=0, lt=1)
    images: int = Field(1000, ge=2)
    decoder_steps: int = Field(1000, ge=1)
    decoder_batch: int = Field(64, ge=1)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _gridscene(self) -> "CaptioningSettings":
        if self.world.kind != "gridscene":
            raise ValueError(f"captioning needs a world with pixel and caption renderers (gridscene), got {self.world.kind}")
        return self


def check_draws(n_fit: int, pair_free_samples: int, k: int) -> None:
    """Refuse (ResourceError) draws that cannot fit: the largest fit's ``n_fit`` pairs (states, nuisances, image
    and caption features and their noisy copy, 8·n·(4k + 6) bytes) and the pair-free sample (six tables of
    ``pair_free_samples`` x k and their indices, 8·n·(8k + 16) bytes)."""
    ensure_fits(8.0 * n_fit * (4 * k + 6), f"the {n_fit:,} (image, caption) pairs of the largest N_fit (k = {k})",
                "lower n_fits")
    ensure_fits(8.0 * pair_free_samples * (8 * k + 16),
                f"the pair-free sample of {pair_free_samples:,} rows per modality (k = {k})", "lower pair_free_samples")


def notes(s: CaptioningSettings) -> list[str]:
    """Refuse, before any work, what cannot fit (the decoder, the fitted pairs, the pair-free sample; k = auto
    counted at its largest, AUTO_K_MAX); no note otherwise."""
    k = AUTO_K_MAX if s.k == "auto" else int(s.k)
    check_decoder(DecoderConfig(steps=s.decoder_steps, batch_size=s.decoder_batch), caption_law(s.world.build_scene()), k)
    check_draws(max(s.n_fits or [0]), 0 if s.pair_free == "none" else s.pair_free_samples, k)
    return []


#: Seconds of the setup (closed forms, the span closed form, compiling the decoder), per decoder step at a batch
#: of 64 captions, and per map scored (the true map and one per N_fit, each seed), measured at the default
#: gridscene(4, 1 object) on a shared 2-core CPU: the default (1000 steps, 10 seeds x 12 maps) 27-43 s with
#: 16-22 s before the first seed and 2.1 s a seed; 2000 steps and 20 seeds 67 s (27 s and 2.0 s a seed).
SETUP_SECONDS, STEP_SECONDS, MAP_SECONDS = 16.0, 5e-3, 0.17


def estimate(s: CaptioningSettings) -> Any:
    """SETUP_SECONDS + STEP_SECONDS x steps x batch/64 + MAP_SECONDS x seeds x maps (k = auto counted at
    AUTO_K_MAX for the default N_fit grid)."""
    from prhsim.experiments.sweeps._registry import Estimate

    k = AUTO_K_MAX if s.k == "auto" else int(s.k)
    fits = len(s.n_fits if s.n_fits is not None else default_n_fits(k)) + (s.pair_free != "none")
    maps = s.n_seeds * (fits + 1)
    decoder = STEP_SECONDS * s.decoder_steps * s.decoder_batch / 64
    return Estimate(SETUP_SECONDS + decoder + MAP_SECONDS * maps,
                    f"a decoder of {s.decoder_steps:,} steps of {s.decoder_batch:,} captions, then {maps:,} maps "
                    f"({s.n_seeds} seeds x {fits + 1})")


def _pair_free(s: CaptioningSettings) -> Callable[[PairFreeSample], np.ndarray] | None:
    """The settings' pair-free map: a callable of a :class:`PairFreeSample`, or None."""

    def linear(result):  # the estimate acts on each sample's whitened coordinates; x ↦ x M reads raw features
        return result.whitening_a.whitener @ result.map @ result.whitening_b.colourer

    return {"iterative": lambda sample: linear(iterative_match(sample.image, sample.caption, rng=s.seed)),
            "spectral": lambda sample: linear(spectral_match(sample.image, sample.image_pairs, sample.caption,
                                                             sample.caption_pairs)),
            "none": None}[s.pair_free]


def _n_fits(s: CaptioningSettings) -> list[int] | None:
    """The settings' N_fit values as :func:`captioning_curve` reads them (0 added for a pair-free map)."""
    return None if s.n_fits is None else ([0] if s.pair_free != "none" else []) + list(s.n_fits)


def run(s: CaptioningSettings, say: Progress | None = None) -> Any:
    """``prhsim sweep captioning`` from its settings; ``say`` reports progress (counted in maps)."""
    return captioning_curve(s.world.build_scene(), n_fits=_n_fits(s), n_seeds=s.n_seeds, k=s.k, text=s.text,
                            pair_free=_pair_free(s), pair_free_samples=s.pair_free_samples, noise=s.noise,
                            held_in=s.held_in, images=s.images,
                            decoder=DecoderConfig(steps=s.decoder_steps, batch_size=s.decoder_batch),
                            name=s.world.describe(), rng=s.seed, progress=say)


def cells(s: CaptioningSettings) -> list[dict[str, Any]]:
    """The decoder cell, then per seed its levels cell and one map cell per N_fit, ascending (0: pair-free)."""
    scene = s.world.build_scene()
    # the setup's k, without its decoder: only the default N_fit grid reads it
    k = closed_form(view_world(scene.world, pixels(scene), good()), s.k).k if s.n_fits is None else 0
    fits = _fit_grid(_n_fits(s), s.pair_free != "none", k)
    _held_in(s.held_in, scene.n)
    return [{"part": "decoder"}] + [c for seed in _seeds(s.seed, s.n_seeds)
                                    for c in [{"part": "levels", "seed": seed}, *(map_coordinates(seed, n) for n in fits)]]


#: The setup of the cells this process computes last, by its key (:func:`_setup`), and the scores its cells have
#: computed (by held-out states and decoded tokens: a function of the setup's scene alone).
_SETUPS: dict[tuple, tuple[CaptioningSetup, dict[tuple[bytes, bytes], CaptionScores]]] = {}


def _setup(s: CaptioningSettings) -> tuple[CaptioningSetup, dict[tuple[bytes, bytes], CaptionScores]]:
    """The settings' :class:`CaptioningSetup` and its scores so far, built once per process for all its cells. The
    key is what the setup is a function of: the settings it reads, JAX's precision and the functions that build it
    (a stand-in set by a test is never served to a later call)."""
    import jax

    key = (json.dumps({"world": s.world.model_dump(mode="json"), "k": s.k, "text": s.text, "steps": s.decoder_steps,
                       "batch": s.decoder_batch, "seed": s.seed}, sort_keys=True),
           bool(jax.config.jax_enable_x64), train_caption_decoder, span_optimum, closed_form)
    if key not in _SETUPS:
        _SETUPS.clear()
        _SETUPS[key] = (captioning_setup(s.world.build_scene(), k=s.k, text=s.text, seed=s.seed,
                                         decoder=DecoderConfig(steps=s.decoder_steps, batch_size=s.decoder_batch)), {})
    return _SETUPS[key]


def cell(s: CaptioningSettings, coordinates: dict[str, Any]) -> dict[str, Any]:
    """One cell (module docstring): the decoder's, a seed's levels, or a map's (its draws from its own stream,
    ``cell_stream(seed, coordinates)``), with its seconds."""
    start = time.perf_counter()
    setup, memo = _setup(s)
    part = coordinates["part"]
    if part == "decoder":
        record = captioning_decoder_cell(setup, s.seed)
    else:
        draws = seed_draws(setup, int(coordinates["seed"]), _held_in(s.held_in, setup.law.n_states), s.images, s.noise)
        score = _scorer(setup.scene, draws.out_states, memo)
        if part == "levels":
            record = captioning_levels_cell(setup, draws, score)
        else:
            n = int(coordinates["n_fit"])
            stream = cell_stream(s.seed, map_coordinates(draws.seed, n))
            record = captioning_map_cell(setup, draws, n, _pair_free(s), s.pair_free_samples, s.noise, stream, score)
    return {**record, "seconds": time.perf_counter() - start}


def reduce(s: CaptioningSettings, records: list[dict[str, Any]]) -> CaptioningCurve:
    """The curve from its cells, in the order of :func:`cells` (the decoder's, then per seed its levels and its
    maps): the same record as :func:`run`'s, seconds summed over the cells. The N_fit grid is read with the decoder
    cell's k."""
    decoder, rest = records[0], records[1:]
    fits = _fit_grid(_n_fits(s), s.pair_free != "none", decoder["k"])
    per_seed = len(fits) + 1
    levels, points = rest[::per_seed], [r for i, r in enumerate(rest) if i % per_seed]
    return _reduce(decoder, levels, points, fits, _seeds(s.seed, s.n_seeds), s.noise,
                   _held_in(s.held_in, decoder["n_states"]), s.world.describe(), sum(r["seconds"] for r in records))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    lines = [f"{r.world}: {r.n_states} states, k = {r.k}, {r.text} captions, noise {r.noise:g}, {len(r.seeds)} seeds, "
             f"{r.images} held-out images; decoder on captions alone: loss {r.decoder.final_loss:.4f} "
             f"(floor {r.decoder.loss_floor:.4f}), exact {r.decoder.exact:.3f} on its own representations"]
    for metric in ("exact", "attribute_mean", "cider"):
        s = curve_summary(r, metric)
        cells = ", ".join(f"{'pair-free' if n == 0 else n}: {m:.3f}" for n, m in zip(s["n_fits"], s["mean"]))
        lines.append(f"  {metric} by N_fit: {cells}; true map {s['true_map']:.3f}, chance {s['chance']:.3f}")
    free = [p for p in r.points if p.n_fit == 0]
    if free:
        kinds = sorted(free[0].scores.attributes)
        per = ", ".join(f"{a} {np.mean([p.scores.attributes[a] for p in free]):.2f}" for a in kinds)
        lines.append(f"  pair-free map: distance to the true map {np.mean([p.map_distance for p in free]):.3f}; "
                     f"per attribute {per}")
    return lines
