"""Calibrated alignment scores on worlds where the answer is known (docs/prh.md, "Calibrated scores").

A raw sample alignment score (docs/theory.md §10) is confounded by scale: when the two sides
are unrelated it is not 0, it grows with the width of the representations, and taking the best
of many layer pairs raises it further. Gröger, Wen & Brbić (2026, "Revisiting the Platonic
Representation Hypothesis: An Aristotelian View") calibrate it against a permutation null
(:func:`prhsim.metrics.calibrate`): the p-value ``(1 + #{j : s_j >= s − γ})/(K + 1)`` (γ: the tie rule) over K
re-pairings of the rows, the critical value τ (the ⌈(1 − α)(K + 1)⌉-th smallest of
``{s, s_1, …, s_K}``) and the calibrated score ``clamp((s − τ)/(1 − τ), 0, 1)``. The sweep shows
what that removes, on four families where the truth is known:

* ``null``: two modalities (pixels and captions of the default gridscene, 20,736 states, their
  good-view closed forms with k = 10 features, each turned by its own Haar rotation) evaluated on
  two **independent** samples of N states drawn from p. Nothing is shared, the rows of B are
  exchangeable given A, so the p-value is uniform on ``{1/(K+1), …, 1}`` (conservative where the
  metric's scores tie): a Kolmogorov–Smirnov test against U(0, 1) over ``n_seeds`` draws, and the
  rate of draws with a calibrated score above 0 (``s > τ``), whose exact level for scores without
  ties is ``(K + 1 − m)/(K + 1)`` with ``m = ⌈(1 − α)(K + 1)⌉`` (α itself when (1 − α)(K + 1) is
  an integer), with its binomial standard error ``sqrt(r(1 − r)/n)``.
* ``good`` and ``bad`` views: both modalities on the **same** N states (independent nuisances).
  Good views: the theorem holds, both are one representation up to rotation (linear CKA 1 in the
  population). Bad(ε) views of the pixels against good captions: by the merge rule (docs/theory.md
  §4) k_Z of the k pixel features are nuisance-free and the cross-covariance has singular values
  ``(1^{k_Z}, 0, …)``, so the population linear CKA of whitened features is ``k_Z/k``.
* ``width``: isotropic Gaussian noise of width d on both sides (the null), and a fixed shared
  signal, the top ``SIGNAL_RANK`` good-view features of both modalities on the same states,
  embedded by a random isometry into width d plus isotropic noise of variance ``v_d`` per
  coordinate. ``v_d`` solves ``r/(r(1 + v)² + (d − r)v²) = signal_cka`` (r = SIGNAL_RANK), so the
  signal's **population** linear CKA is ``signal_cka`` at every width; only the sample's bias
  moves with d.
* ``depth``: L independent noise layers (width ``depth_width``) on each side; the raw statistic is
  the max over the L x L layer pairs. ``calibrate(..., aggregate="max")`` applies one permutation
  to every layer of B, so its null is the null of the max; calibrating the chosen best pair alone
  (``naive``) ignores the search and rejects at about ``1 − (1 − level)^{L²}``.

Every draw i of a family seeds its own generator ``default_rng([seed, family, …, i])``, so a grid
can grow without moving the other cells; the K permutations of a draw are shared by its metrics.
A cell (:func:`cells`) is one family or grid point: the null, the views, one width or one depth,
with all its draws; its record depends on the settings and its coordinates alone, never on where
or in what order the cells run, and :func:`calibration_sweep` reduces the same cells in order.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from prhsim import __version__
from prhsim._budget import ensure_fits
from prhsim._types import Progress, as_progress
from prhsim.config import Settings
from prhsim.experiments._record import Record
from prhsim.experiments.sweeps._calibration_draws import (
    MODALITIES,
    SIGNAL_RANK,
    Scene,
    depth_draw,
    null_draw,
    pair_table,
    signal_noise_variance,
    view_draw,
    width_draw,
)
from prhsim.metrics import PRH_METRICS, calibrate, rejection_note

#: The gridscene of every family but the noise ones (its default: 4x4 grid, two objects, 20,736 states).
WORLD = "gridscene(4, objects=2)"
DEFAULT_METRICS = ("linear_cka", "mutual_knn")
DEFAULT_WIDTHS = (8, 32, 128, 512)
DEFAULT_DEPTHS = (1, 2, 4, 8)

ViewName = Literal["good", "bad"]
Kind = Literal["null", "signal"]

#: The most permutations the sweep takes (its settings' upper bound).
MOST_PERMUTATIONS = 100_000


def critical_rank(alpha: float, permutations: int) -> int:
    """m = ⌈(1 − α)(K + 1)⌉, the 1-based rank of τ among the K + 1 scores (as :func:`prhsim.metrics.calibrate`)."""
    return min(permutations + 1, max(1, math.ceil((1.0 - alpha) * (permutations + 1) - 1e-9)))


def exact_level(alpha: float, permutations: int) -> float:
    """P(s > τ) under an exchangeable null without ties: ``(K + 1 − m)/(K + 1)``."""
    return (permutations + 1 - critical_rank(alpha, permutations)) / (permutations + 1)


def rejection_se(rate: float, draws: int) -> float:
    """The binomial standard error ``sqrt(r(1 − r)/n)`` of a rate r measured on n draws."""
    return math.sqrt(rate * (1.0 - rate) / draws)


class NullScores(Record):
    """One metric on the null family: per draw its raw score, p-value, τ and calibrated score.

    ``ks_statistic`` and ``ks_p_value``: :func:`scipy.stats.kstest` of ``p_values`` against U(0, 1);
    ``rejection_rate``: the fraction of draws with ``calibrated > 0``, ``rejection_se`` its binomial
    standard error.
    """

    metric: str
    raw: list[float]
    p_values: list[float]
    tau: list[float]
    calibrated: list[float]
    raw_mean: float
    calibrated_mean: float
    ks_statistic: float
    ks_p_value: float
    rejection_rate: float
    rejection_se: float


class ViewScores(Record):
    """One metric on the good- or bad-view family (both modalities on the same states), per draw.

    ``population``: the population linear CKA the theory predicts (1 for good views, k_Z/k for bad;
    None for the other metrics, and for a bad view whose k_Z a tie leaves undetermined).
    """

    view: ViewName
    metric: str
    raw: list[float]
    p_values: list[float]
    tau: list[float]
    calibrated: list[float]
    raw_mean: float
    calibrated_mean: float
    p_value_max: float
    population: float | None


class WidthScores(Record):
    """One metric at one width: the noise null or the embedded signal, per draw.

    ``noise_variance``: v_d per coordinate (the null's noise has variance 1); ``population``: the
    population linear CKA (0 for the null, ``signal_cka`` for the signal; None for other metrics).
    """

    width: int
    kind: Kind
    metric: str
    noise_variance: float
    population: float | None
    raw: list[float]
    calibrated: list[float]
    p_values: list[float]
    raw_mean: float
    calibrated_mean: float
    rejection_rate: float
    rejection_se: float


class DepthScores(Record):
    """One metric at L layers per side (L² pairs of independent noise layers), per draw.

    ``raw``: the max over the pairs; ``calibrated``/``p_values``: against the null of the max
    (``aggregate="max"``); ``naive_calibrated``/``naive_p_values``: the best pair calibrated alone.
    ``naive_predicted``: ``1 − (1 − level)^{L²}``, the naive rate if the pairs' tests were independent
    and tie-free.
    """

    depth: int
    pairs: int
    metric: str
    raw: list[float]
    calibrated: list[float]
    p_values: list[float]
    naive_calibrated: list[float]
    naive_p_values: list[float]
    raw_mean: float
    calibrated_mean: float
    rejection_rate: float
    rejection_se: float
    naive_rejection_rate: float
    naive_rejection_se: float
    naive_predicted: float


class CalibrationSweep(Record):
    """Result of :func:`calibration_sweep` (module docstring)."""

    prhsim_version: str
    world: str
    modalities: list[str]
    k: int
    samples: int
    permutations: int
    alpha: float
    level: float
    p_floor: float
    knn_k: int
    metrics: list[str]
    eps: float
    nuisance_free: int | None
    n_seeds: int
    n_seeds_views: int
    n_seeds_confounders: int
    signal_rank: int
    signal_cka: float
    depth_width: int
    seed: int
    null: list[NullScores]
    views: list[ViewScores]
    widths: list[WidthScores]
    depths: list[DepthScores]
    seconds: float

    def pooled(self, family: Literal["widths", "depths"], metric: str) -> tuple[float, float, int]:
        """(rate, binomial s.e., draws) of ``calibrated > 0`` over every null draw of the width grid (the noise) or
        of the depth grid (the null of the max): each is a valid test at every width and depth, so they pool."""
        cells = [c for c in getattr(self, family) if c.metric == metric and getattr(c, "kind", "null") == "null"]
        calibrated = [x for c in cells for x in c.calibrated]
        rate = float(np.mean(np.asarray(calibrated) > 0.0))
        return rate, rejection_se(rate, len(calibrated)), len(calibrated)

    def find(self, family: str, metric: str, **where: Any) -> Any:
        """The one record of ``family`` ("null", "views", "widths", "depths") for ``metric`` matching ``where``."""
        hits = [r for r in getattr(self, family) if r.metric == metric
                and all(getattr(r, key) == value for key, value in where.items())]
        if len(hits) != 1:
            raise KeyError(f"{len(hits)} {family} records for {metric} with {where}")
        return hits[0]


def _ks(p_values: list[float]) -> tuple[float, float]:
    from scipy.stats import kstest

    test = kstest(np.asarray(p_values, dtype=np.float64), "uniform")
    return float(test.statistic), float(test.pvalue)


def _rate(calibrated: list[float]) -> tuple[float, float]:
    rate = float(np.mean(np.asarray(calibrated) > 0.0))
    return rate, rejection_se(rate, len(calibrated))


def _check(samples: int, permutations: int, alpha: float, knn_k: int, metrics: tuple[str, ...], eps: float,
           grids: dict[str, tuple[int, ...]], counts: dict[str, int], signal_cka: float, depth_width: int) -> None:
    """The library function's own checks (the settings model makes the same as one-line errors)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps must lie in (0, 1) (a bad view; 1 is the good view), got {eps}")
    if not 0.0 < signal_cka <= 1.0:
        raise ValueError(f"signal_cka must lie in (0, 1], got {signal_cka}")
    if rejection_note(permutations, alpha) is not None:  # K + 1 < 1/alpha: exact_level(alpha, K) = 0
        raise ValueError(rejection_note(permutations, alpha))
    if 2 * knn_k >= samples:
        raise ValueError(f"knn_k = {knn_k} needs more than {2 * knn_k} samples, got samples = {samples}")
    if not metrics:
        raise ValueError("metrics is empty: name at least one of " + ", ".join(PRH_METRICS))
    unknown = [m for m in metrics if m not in PRH_METRICS]
    if unknown or len(set(metrics)) != len(metrics):
        raise ValueError(f"metrics must be distinct names of {', '.join(PRH_METRICS)}, got {list(metrics)}")
    for name, grid in grids.items():
        if not grid:
            raise ValueError(f"{name} is empty: give at least one value")
    if min(grids["widths"]) < SIGNAL_RANK:
        raise ValueError(f"every width must be at least the signal's rank {SIGNAL_RANK}, got {min(grids['widths'])}")
    if min(grids["depths"]) < 1:
        raise ValueError(f"every depth must be at least 1, got {min(grids['depths'])}")
    if depth_width < 1:
        raise ValueError(f"depth_width must be at least 1, got {depth_width}")
    for name, count in counts.items():
        if count < 1:
            raise ValueError(f"{name} must be at least 1, got {count}")


def calibration_sweep(*, samples: int = 256, permutations: int = 199, alpha: float = 0.05, knn_k: int = 10,
                      metrics: tuple[str, ...] = DEFAULT_METRICS, eps: float = 0.1, n_seeds: int = 200,
                      n_seeds_views: int = 5, n_seeds_confounders: int = 40,
                      widths: tuple[int, ...] = DEFAULT_WIDTHS, depths: tuple[int, ...] = DEFAULT_DEPTHS,
                      depth_width: int = 8, signal_cka: float = 0.5, seed: int = 0,
                      progress: Progress | None = None) -> CalibrationSweep:
    """Raw and permutation-calibrated scores on the null, good and bad views, and against width and depth.

    Runs :func:`calibration_cell` on every cell of :func:`cells` in order and reduces them as :func:`reduce` does:
    the command's result, wherever the command runs its cells.

    Args:
        samples: N, the rows of every pair of representations.
        permutations: K, the permutations of B's rows per calibration (shared by a draw's metrics).
        alpha: the level of the critical value τ, in (0, 1).
        knn_k: the neighbours of the k-NN metrics (``2·knn_k < samples``).
        metrics: names of :data:`prhsim.metrics.PRH_METRICS`.
        eps: the pixels' bad view in the bad-view family, in (0, 1).
        n_seeds: draws of the null family; n_seeds_views: draws of each view; n_seeds_confounders:
            draws per width and per depth.
        widths: widths d of the width family (each at least SIGNAL_RANK).
        depths: layers L per side of the depth family (L² pairs).
        depth_width: the width of every noise layer of the depth family.
        signal_cka: the embedded signal's population linear CKA at every width, in (0, 1].
        seed: seeds every draw (module docstring).
        progress: ``progress(message, done, total)`` at each cell, at each quarter of its draws and at the end,
            counted in work units (:func:`draw_units`).

    Raises:
        ValueError: on a bad argument (one line).
    """
    start = time.perf_counter()
    say = as_progress(progress)
    metrics, widths, depths = tuple(metrics), tuple(int(w) for w in widths), tuple(int(d) for d in depths)
    _check(samples, permutations, alpha, knn_k, metrics, eps, {"widths": widths, "depths": depths},
           {"n_seeds": n_seeds, "n_seeds_views": n_seeds_views, "n_seeds_confounders": n_seeds_confounders},
           signal_cka, depth_width)
    # the library's own checks passed: the settings are built unvalidated, so its wider ranges stay accepted
    s = CalibrationSettings.model_construct(
        samples=int(samples), permutations=int(permutations), alpha=float(alpha), knn_k=int(knn_k),
        metrics=list(metrics), eps=float(eps), n_seeds=int(n_seeds), n_seeds_views=int(n_seeds_views),
        n_seeds_confounders=int(n_seeds_confounders), widths=list(widths), depths=list(depths),
        depth_width=int(depth_width), signal_cka=float(signal_cka), seed=int(seed))
    say(f"closed forms of {MODALITIES[0]} (good and bad({eps:g}) views) and {MODALITIES[1]} on {WORLD}")
    scene = Scene(eps)
    plan = [(c, _cell_units(s, c)) for c in cells(s)]
    total, done, records = sum(draws * units for _, (draws, units) in plan), 0, []
    for coordinates, (draws, units) in plan:
        where = _describe(coordinates)
        quarter = max(1, draws // 4)

        def tick(i: int, where: str = where, draws: int = draws, units: int = units, done: int = done,
                 quarter: int = quarter) -> None:
            if i % quarter == 0:
                say(f"{where}: draw {i + 1} of {draws}", done=done + i * units, total=total)

        records.append(calibration_cell(s, None if coordinates["family"] == "depth" else scene, coordinates, tick))
        done += draws * units
    say("every family done", done=done, total=total)
    return _reduce(s, records, time.perf_counter() - start)


def _describe(coordinates: dict[str, Any]) -> str:
    family = coordinates["family"]
    if family == "width":
        return f"width d = {coordinates['width']}"
    if family == "depth":
        return f"depth L = {coordinates['depth']} ({coordinates['depth'] ** 2} layer pairs)"
    return "null" if family == "null" else "good and bad views"


def _scores(cals: list[Any], *fields: str) -> dict[str, list[float]]:
    """Per field (``raw``, ``p_value``, ``tau``, ``calibrated``) the draws' values as floats (JSON values)."""
    return {field: [float(getattr(c, field)) for c in cals] for field in fields}


def calibration_cell(s: "CalibrationSettings", scene: Scene | None, coordinates: dict[str, Any],
                     tick: Any = None) -> dict[str, Any]:
    """One cell's record (JSON values): every draw of one family (null, views), width or depth, each from its own
    generator ``[seed, family, ..., draw]`` (module docstring), scored by every metric; ``scene`` (None for depth)
    holds the closed forms, and ``tick(i)`` is called before draw i."""
    tick = tick or (lambda i: None)
    metrics, samples, permutations = list(s.metrics), s.samples, s.permutations

    def cal(metric: str, a: Any, b: Any, perms: np.ndarray, aggregate: Literal["max"] | None = None) -> Any:
        return calibrate(metric, a, b, permutations=perms, alpha=s.alpha, aggregate=aggregate, knn_k=s.knn_k)

    family = coordinates["family"]
    fields = ("raw", "p_value", "tau", "calibrated")
    if family == "null":
        per: dict[str, list[Any]] = {m: [] for m in metrics}
        for i in range(s.n_seeds):
            tick(i)
            A, B, perms = null_draw(scene, s.seed, i, samples, permutations)
            for metric in metrics:
                per[metric].append(cal(metric, A, B, perms))
        return {"family": family, "scores": {m: _scores(c, *fields) for m, c in per.items()}}
    if family == "views":
        views: dict[str, dict[str, list[Any]]] = {v: {m: [] for m in metrics} for v in ("good", "bad")}
        for i in range(s.n_seeds_views):
            tick(i)
            good_a, bad_a, B, perms = view_draw(scene, s.seed, i, samples, permutations)
            for view, A in (("good", good_a), ("bad", bad_a)):
                for metric in metrics:
                    views[view][metric].append(cal(metric, A, B, perms))
        kz = scene.nuisance_free
        return {"family": family, "k": int(scene.k), "nuisance_free": None if kz is None else int(kz),
                "scores": {v: {m: _scores(c, *fields) for m, c in per_view.items()} for v, per_view in views.items()}}
    if family == "width":
        d = int(coordinates["width"])
        kinds: dict[str, dict[str, list[Any]]] = {kind: {m: [] for m in metrics} for kind in ("null", "signal")}
        for i in range(s.n_seeds_confounders):
            tick(i)
            noise, signal, perms = width_draw(scene, s.seed, d, i, samples, permutations, s.signal_cka)
            for kind, (A, B) in (("null", noise), ("signal", signal)):
                for metric in metrics:
                    kinds[kind][metric].append(cal(metric, A, B, perms))
        return {"family": family, "width": d,
                "scores": {kind: {m: _scores(c, *fields) for m, c in per_kind.items()} for kind, per_kind in kinds.items()}}
    L = int(coordinates["depth"])
    maxed: dict[str, list[Any]] = {m: [] for m in metrics}
    naive: dict[str, list[Any]] = {m: [] for m in metrics}
    for i in range(s.n_seeds_confounders):
        tick(i)
        As, Bs, perms = depth_draw(s.seed, L, i, samples, permutations, s.depth_width)
        for metric in metrics:
            table = pair_table(metric, As, Bs, s.knn_k)
            best_a, best_b = np.unravel_index(int(np.argmax(table)), table.shape)
            maxed[metric].append(cal(metric, As, Bs, perms, aggregate="max"))
            naive[metric].append(cal(metric, As[best_a], Bs[best_b], perms))
    return {"family": family, "depth": L, "scores": {m: _scores(c, *fields) for m, c in maxed.items()},
            "naive": {m: _scores(c, "p_value", "calibrated") for m, c in naive.items()}}


def _reduce(s: "CalibrationSettings", records: list[dict[str, Any]], seconds: float) -> CalibrationSweep:
    """The sweep's record from its cells' records (in the order of :func:`cells`)."""
    level = exact_level(s.alpha, s.permutations)
    by = {family: [r for r in records if r["family"] == family] for family in ("null", "views", "width", "depth")}
    null = []
    for metric, c in by["null"][0]["scores"].items():
        ks_d, ks_p = _ks(c["p_value"])
        rate, se = _rate(c["calibrated"])
        null.append(NullScores(metric=metric, raw=c["raw"], p_values=c["p_value"], tau=c["tau"],
                               calibrated=c["calibrated"], raw_mean=float(np.mean(c["raw"])),
                               calibrated_mean=float(np.mean(c["calibrated"])), ks_statistic=ks_d, ks_p_value=ks_p,
                               rejection_rate=rate, rejection_se=se))
    views_record = by["views"][0]
    k, kz = int(views_record["k"]), views_record["nuisance_free"]
    views = []
    for view, per_view in views_record["scores"].items():
        for metric, c in per_view.items():
            population = None
            if metric == "linear_cka":
                population = 1.0 if view == "good" else (None if kz is None else kz / k)
            views.append(ViewScores(view=view, metric=metric, raw=c["raw"], p_values=c["p_value"], tau=c["tau"],
                                    calibrated=c["calibrated"], raw_mean=float(np.mean(c["raw"])),
                                    calibrated_mean=float(np.mean(c["calibrated"])),
                                    p_value_max=float(max(c["p_value"])), population=population))
    width_cells = []
    for r in by["width"]:
        d = int(r["width"])
        v = signal_noise_variance(d, s.signal_cka)
        for kind, per_kind in r["scores"].items():
            for metric, c in per_kind.items():
                rate, se = _rate(c["calibrated"])
                population = (0.0 if kind == "null" else s.signal_cka) if metric == "linear_cka" else None
                width_cells.append(WidthScores(width=d, kind=kind, metric=metric,
                                               noise_variance=1.0 if kind == "null" else v, population=population,
                                               raw=c["raw"], calibrated=c["calibrated"], p_values=c["p_value"],
                                               raw_mean=float(np.mean(c["raw"])),
                                               calibrated_mean=float(np.mean(c["calibrated"])), rejection_rate=rate,
                                               rejection_se=se))
    depth_cells = []
    for r in by["depth"]:
        L = int(r["depth"])
        for metric, c in r["scores"].items():
            naive = r["naive"][metric]
            rate, se = _rate(c["calibrated"])
            naive_rate, naive_se = _rate(naive["calibrated"])
            depth_cells.append(DepthScores(depth=L, pairs=L * L, metric=metric, raw=c["raw"], calibrated=c["calibrated"],
                                           p_values=c["p_value"], naive_calibrated=naive["calibrated"],
                                           naive_p_values=naive["p_value"], raw_mean=float(np.mean(c["raw"])),
                                           calibrated_mean=float(np.mean(c["calibrated"])), rejection_rate=rate,
                                           rejection_se=se, naive_rejection_rate=naive_rate,
                                           naive_rejection_se=naive_se,
                                           naive_predicted=float(1.0 - (1.0 - level) ** (L * L))))
    return CalibrationSweep(prhsim_version=__version__, world=WORLD, modalities=list(MODALITIES), k=k,
                            samples=int(s.samples), permutations=int(s.permutations), alpha=float(s.alpha),
                            level=level, p_floor=1.0 / (s.permutations + 1), knn_k=int(s.knn_k),
                            metrics=list(s.metrics), eps=float(s.eps), nuisance_free=kz, n_seeds=int(s.n_seeds),
                            n_seeds_views=int(s.n_seeds_views), n_seeds_confounders=int(s.n_seeds_confounders),
                            signal_rank=SIGNAL_RANK, signal_cka=float(s.signal_cka), depth_width=int(s.depth_width),
                            seed=int(s.seed), null=null, views=views, widths=width_cells, depths=depth_cells,
                            seconds=seconds)


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class CalibrationSettings(Settings):
    """``prhsim sweep calibration``: raw and permutation-calibrated scores where the answer is known.

    Attributes:
        samples: N, rows of every pair of representations.
        permutations: K, permutations per calibration.
        alpha: the level of τ.
        knn_k: neighbours of the k-NN metrics.
        metrics: metrics of :data:`prhsim.metrics.PRH_METRICS` (cknna and svcca take the generic path:
            K recomputations per calibration).
        eps: the pixels' bad view in the bad-view family.
        n_seeds, n_seeds_views, n_seeds_confounders: draws of the null, of each view, per width and depth.
        widths, depths, depth_width: the width grid, the layers per side, the noise layers' width.
        signal_cka: the width family's signal, its population linear CKA.
        seed: seeds every draw.
    """

    grids = ('widths', 'depths', 'metrics')

    samples: int = Field(256, ge=8, le=20_000)
    permutations: int = Field(199, ge=1, le=MOST_PERMUTATIONS)
    alpha: float = Field(0.05, gt=0, lt=1)
    knn_k: int = Field(10, ge=1)
    metrics: list[str] = Field(list(DEFAULT_METRICS), min_length=1)
    eps: float = Field(0.1, gt=0, lt=1)
    n_seeds: int = Field(200, ge=1, le=100_000)
    n_seeds_views: int = Field(5, ge=1, le=10_000)
    n_seeds_confounders: int = Field(40, ge=1, le=10_000)
    widths: list[Annotated[int, Field(ge=SIGNAL_RANK, le=8192)]] = Field(list(DEFAULT_WIDTHS), min_length=1)
    depths: list[Annotated[int, Field(ge=1, le=32)]] = Field(list(DEFAULT_DEPTHS), min_length=1)
    depth_width: int = Field(8, ge=1, le=8192)
    signal_cka: float = Field(0.5, gt=0, le=1)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> "CalibrationSettings":
        if 2 * self.knn_k >= self.samples:
            raise ValueError(f"knn_k = {self.knn_k} needs more than {2 * self.knn_k} samples, got samples = "
                             f"{self.samples}")
        unknown = [m for m in self.metrics if m not in PRH_METRICS]
        if unknown:
            raise ValueError(f"unknown metric {unknown[0]!r}; the metrics are {', '.join(PRH_METRICS)}")
        if len(set(self.metrics)) != len(self.metrics):
            raise ValueError(f"metrics must be distinct, got {self.metrics}")
        note = rejection_note(self.permutations, self.alpha, most=MOST_PERMUTATIONS)
        if note is not None:
            raise ValueError(note)
        return self


#: Seconds per draw (its representations and permutations) and per calibration of :func:`calibrations` at
#: N = 256, K = 199 (a calibration scales as (K + 1)·N²), fitted to the default sweep on a shared 2-core CPU
#: (200 null draws 12.5 s; depth L = 1, 2, 4, 8 at 40 draws: 4.8, 7.2, 22.6, 70 s; widths 8 to 512: 40 s;
#: 158 s in all, estimated 145 s; 85 s on a quieter machine) and checked on 60 null draws at N = 512 (×2.1
#: the time of N = 256), K = 399 (×1.3) and N = 1024 (×5), all noisy.
DRAW_SECONDS, UNIT_SECONDS = 0.036, 0.0133
#: A draw's own work (its representations and permutations) in units: DRAW_SECONDS / UNIT_SECONDS.
DRAW_UNITS = 3


def calibrations(family: str, n_metrics: int, size: int = 0) -> int:
    """Calibrations of one draw of a family, one per metric and pair of representations (the views' two, the width
    family's two, each weighted by 1 + √(d/32) rounded; a depth draw's max over L² pairs L², its best pair one more)."""
    if family == "null":
        return n_metrics
    if family == "views":
        return 2 * n_metrics
    if family == "width":
        return 2 * n_metrics * round(1 + math.sqrt(size / 32))
    return n_metrics * (size * size + 1)


def draw_units(family: str, n_metrics: int, size: int = 0) -> int:
    """Work units of one draw, counted by the progress: DRAW_UNITS and its :func:`calibrations`."""
    return DRAW_UNITS + calibrations(family, n_metrics, size)


def work_plan(n_metrics: int, n_seeds: int, n_seeds_views: int, n_seeds_confounders: int, widths: tuple[int, ...],
              depths: tuple[int, ...]) -> list[tuple[str, int, int]]:
    """The sweep's stages in order as (family, draws, :func:`draw_units` per draw)."""
    return [("null", n_seeds, draw_units("null", n_metrics)), ("views", n_seeds_views, draw_units("views", n_metrics)),
            *(("width", n_seeds_confounders, draw_units("width", n_metrics, d)) for d in widths),
            *(("depth", n_seeds_confounders, draw_units("depth", n_metrics, L)) for L in depths)]


#: Peak bytes of one cell per N² (N the samples), measured with tracemalloc: 29 (N = 2,000) and 25 (N = 3,000) for
#: the width-512 family, 9 to 11 for the null family; and its N x width copies.
CELL_BYTES_PER_N2 = 32
CELL_COPIES_PER_WIDTH = 4


def notes(s: CalibrationSettings) -> list[str]:
    """Refuse (ResourceError) a cell that cannot fit, before any work: ``CELL_BYTES_PER_N2 · N² +
    8 · CELL_COPIES_PER_WIDTH · N · max width`` bytes."""
    n, width = float(s.samples), float(max([*s.widths, s.depth_width]))
    ensure_fits(CELL_BYTES_PER_N2 * n * n + 8.0 * CELL_COPIES_PER_WIDTH * n * width,
                f"a cell of {s.samples:,} samples (its N x N similarities, widths up to {int(width):,})",
                "lower samples")
    return []


def estimate(s: CalibrationSettings) -> Any:
    """Σ over draws of DRAW_SECONDS + UNIT_SECONDS x :func:`calibrations` x (K + 1)/200 x (N/256)²."""
    from prhsim.experiments.sweeps._registry import Estimate

    plan = work_plan(len(s.metrics), s.n_seeds, s.n_seeds_views, s.n_seeds_confounders, tuple(s.widths),
                     tuple(s.depths))
    draws = sum(d for _, d, _ in plan)
    units = sum(d * u for _, d, u in plan) - DRAW_UNITS * draws  # the calibrations
    scale = (s.permutations + 1) / 200 * (s.samples / 256) ** 2
    return Estimate(draws * DRAW_SECONDS + units * UNIT_SECONDS * scale,
                    f"{draws:,} draws, {units:,} calibrations of N = {s.samples:,} rows x K = {s.permutations:,} "
                    "permutations")


def run(s: CalibrationSettings, say: Progress | None = None) -> Any:
    """``prhsim sweep calibration`` from its settings; ``say`` reports progress (counted in work units)."""
    return calibration_sweep(samples=s.samples, permutations=s.permutations, alpha=s.alpha, knn_k=s.knn_k,
                             metrics=tuple(s.metrics), eps=s.eps, n_seeds=s.n_seeds, n_seeds_views=s.n_seeds_views,
                             n_seeds_confounders=s.n_seeds_confounders, widths=tuple(s.widths), depths=tuple(s.depths),
                             depth_width=s.depth_width, signal_cka=s.signal_cka, seed=s.seed, progress=say)


def cells(s: CalibrationSettings) -> list[dict[str, Any]]:
    """One cell per family and grid point: the null, the views, each width, each depth (in the result's order)."""
    return [{"family": "null"}, {"family": "views"}, *({"family": "width", "width": int(d)} for d in s.widths),
            *({"family": "depth", "depth": int(L)} for L in s.depths)]


def cell(s: CalibrationSettings, coordinates: dict[str, Any]) -> dict[str, Any]:
    """The cell at ``coordinates`` (:func:`calibration_cell`: its draws' streams are keyed by the seed, the family,
    the width or depth and the draw), with its seconds."""
    start = time.perf_counter()
    scene = None if coordinates["family"] == "depth" else _scene(float(s.eps))
    return {**calibration_cell(s, scene, dict(coordinates)), "seconds": time.perf_counter() - start}


def reduce(s: CalibrationSettings, records: list[dict[str, Any]]) -> CalibrationSweep:
    """The sweep's result from its cells' records (the same record as :func:`run`'s, seconds summed over the cells)."""
    return _reduce(s, records, sum(r["seconds"] for r in records))


@functools.lru_cache(maxsize=2)
def _scene(eps: float) -> Scene:
    """The closed forms, built once per process for the cells that run there."""
    return Scene(eps)


def _cell_units(s: CalibrationSettings, coordinates: dict[str, Any]) -> tuple[int, int]:
    """(draws, :func:`draw_units` per draw) of a cell."""
    family, n = coordinates["family"], len(s.metrics)
    if family == "null":
        return s.n_seeds, draw_units("null", n)
    if family == "views":
        return s.n_seeds_views, draw_units("views", n)
    if family == "width":
        return s.n_seeds_confounders, draw_units("width", n, int(coordinates["width"]))
    return s.n_seeds_confounders, draw_units("depth", n, int(coordinates["depth"]))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    kz = "undetermined (a tie)" if r.nuisance_free is None else f"{r.nuisance_free} of {r.k}"
    lines = [(f"{r.world}, {' and '.join(r.modalities)}, k = {r.k}; N = {r.samples}, K = {r.permutations} "
              f"(p-value floor {r.p_floor:.3g}), alpha = {r.alpha:g} (exact level {r.level:.4g}), knn_k = {r.knn_k}"),
             (f"null (independent states, {r.n_seeds} draws): KS against U(0, 1); rejected = calibrated > 0, "
              "rate +- binomial s.e.:")]
    for c in r.null:
        lines.append(f"  {c.metric}: KS D = {c.ks_statistic:.3f}, p = {c.ks_p_value:.3g}; rejected "
                     f"{c.rejection_rate:.3f} +- {c.rejection_se:.3f} (alpha {r.alpha:g}); raw mean {c.raw_mean:.4f}, "
                     f"calibrated mean {c.calibrated_mean:.4f}")
    lines.append(f"views (same states, {r.n_seeds_views} draws; bad({r.eps:g}) pixels: k_Z = {kz}), mean raw / "
                 "calibrated, largest p:")
    for view in ("good", "bad"):
        cells = []
        for metric in r.metrics:
            c = r.find("views", metric, view=view)
            pop = "" if c.population is None else f" (population {c.population:.3g})"
            cells.append(f"{metric} {c.raw_mean:.3f} / {c.calibrated_mean:.3f}, p <= {c.p_value_max:.3g}{pop}")
        lines.append(f"  {view}: " + "; ".join(cells))
    lines.append(f"width d ({r.n_seeds_confounders} draws each), mean raw / calibrated: isotropic noise "
                 f"[rejected] | the embedded signal (population CKA {r.signal_cka:g}):")
    for metric in r.metrics:
        for d in sorted({c.width for c in r.widths}):
            n, s = r.find("widths", metric, width=d, kind="null"), r.find("widths", metric, width=d, kind="signal")
            lines.append(f"  {metric}, d = {d}: {n.raw_mean:.3f} / {n.calibrated_mean:.3f} [{n.rejection_rate:.2f}] | "
                         f"{s.raw_mean:.3f} / {s.calibrated_mean:.3f}")
        rate, se, draws = r.pooled("widths", metric)
        lines.append(f"  {metric}: noise rejected {rate:.3f} +- {se:.3f} over all {draws} draws")
    lines.append(f"depth L (L^2 pairs of noise layers of width {r.depth_width}, {r.n_seeds_confounders} draws each): "
                 "mean raw max / calibrated; rejected by the null of the max | by the best pair alone (predicted):")
    for metric in r.metrics:
        for L in sorted({c.depth for c in r.depths}):
            c = r.find("depths", metric, depth=L)
            lines.append(f"  {metric}, L = {L} ({c.pairs} pairs): {c.raw_mean:.4f} / {c.calibrated_mean:.4f}; "
                         f"{c.rejection_rate:.2f} | {c.naive_rejection_rate:.2f} ({c.naive_predicted:.2f})")
        rate, se, draws = r.pooled("depths", metric)
        lines.append(f"  {metric}: null of the max rejected {rate:.3f} +- {se:.3f} over all {draws} draws")
    return lines
