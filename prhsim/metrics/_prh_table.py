"""The PRH table: the layer protocol on every row model against every column model (docs/theory.md §10).

For row models r_1..r_R and column models c_1..c_C (feature stacks N x L x D, or lists of (N, D_l) layers, of the
same N inputs), entry (i, j) is :func:`prhsim.metrics.prh_protocol` of r_i (its A) against c_j (its B): the best
score over every layer pair and that pair. With ``permutations`` K each entry's best score is also calibrated
(:func:`prhsim.metrics.calibrated_protocol`: its null is the max over every layer pair with B's rows permuted), and
the table's R·C p-values are corrected together by Holm's step-down rule at ``alpha`` (``significant``), as a
table of many tests needs: the WIT-1024 table of the PRH paper is such a grid of language against vision models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from prhsim._types import Progress, as_progress
from prhsim.metrics._calibrate import calibrated_protocol, holm
from prhsim.metrics._convention import Convention
from prhsim.metrics._protocol import ClipScope, prh_protocol
from prhsim.metrics._protocol_cost import protocol_seconds
from prhsim.metrics._registry import metric_record
from prhsim.metrics._arguments import check_alpha, check_knn_k, check_permutations

#: A model's features: an (N, L, D) stack or a list of (N, D_l) layers.
Stack = Any


@dataclass(frozen=True)
class TableCalibration:
    """Every entry's best score against its permutation null, and Holm's correction over the whole table.

    Attributes:
        permutations: K, row permutations of B per entry.
        alpha: the level of each critical value and of Holm's correction.
        calibrated, p_values, tau: (R, C) arrays: each entry's calibrated score, p-value and critical value.
        significant: (R, C) booleans: the p-values that reach ``alpha`` under Holm's correction over R·C tests.
    """

    permutations: int
    alpha: float
    calibrated: np.ndarray
    p_values: np.ndarray
    tau: np.ndarray
    significant: np.ndarray


@dataclass(frozen=True)
class PrhTable:
    """Result of :func:`prh_table`.

    Attributes:
        rows, cols: the row and column names, in order.
        metric: the registered metric scored; ``knn_k`` its neighbours (None for a metric that reads none).
        scores: (R, C) best score of each entry (``rows[i]`` is A, ``cols[j]`` is B).
        layer_pairs: (R, C, 2) integers: the best entry's (layer of rows[i], layer of cols[j]); (-1, -1) where no
            layer pair scores above 0 under ``convention="prh"``.
        chance: the metric's chance level on N rows (None where unknown).
        calibration: :class:`TableCalibration`, or None without permutations.
    """

    rows: list[str]
    cols: list[str]
    metric: str
    knn_k: int | None
    scores: np.ndarray
    layer_pairs: np.ndarray
    chance: float | None
    calibration: TableCalibration | None


def _samples(x: Stack) -> int:
    return int(x[0].shape[0] if isinstance(x, (list, tuple)) else x.shape[0])


def _widths(x: Stack) -> list[int]:
    """The width of each layer of a stack (N, L, D) or a per-layer list."""
    if isinstance(x, (list, tuple)):
        return [int(layer.shape[1]) for layer in x]
    return [int(x.shape[2])] * int(x.shape[1])


def entry_seconds(a: Stack, b: Stack, *, metric: str, knn_k: int, permutations: int | None = None) -> float:
    """The rough seconds of one entry (:func:`prhsim.metrics.protocol_seconds`; 0 for a metric without a cost)."""
    seconds = protocol_seconds(metric, _samples(a), _widths(a), _widths(b), knn_k=knn_k,
                               permutations=permutations or 0)
    return 0.0 if seconds is None else seconds


def protocol_entry(a: Stack, b: Stack, name_a: str, name_b: str, *, metric: str = "mutual_knn", knn_k: int = 10,
                   clip_quantile: float | None = 0.95, clip_scope: ClipScope = "tensor",
                   convention: Convention = "prhsim", permutations: int | None = None, alpha: float = 0.05) -> Any:
    """The protocol of ``a`` against ``b`` (calibrated with ``permutations``), its errors naming both models.

    Raises:
        ValueError: different N ("NAME_A has N samples and NAME_B M"), knn_k outside [1, N) for a metric that
            reads it, or the protocol's own errors prefixed with "NAME_A vs NAME_B: ".
    """
    record = metric_record(metric)
    n = _samples(a)
    if n != _samples(b):
        raise ValueError(f"{name_a} has {n:,} samples and {name_b} {_samples(b):,}: "
                         "the protocol compares the same samples in both")
    if record.neighbours:
        check_knn_k(knn_k, n)
    try:
        if permutations:
            return calibrated_protocol(a, b, permutations=permutations, alpha=alpha, metric=metric, knn_k=knn_k,
                                       clip_quantile=clip_quantile, clip_scope=clip_scope, convention=convention)
        return prh_protocol(a, b, metric=metric, knn_k=knn_k, clip_quantile=clip_quantile, clip_scope=clip_scope,
                            convention=convention)
    except ValueError as exc:
        raise ValueError(f"{name_a} vs {name_b}: {exc}") from None


def prh_table(features: Mapping[str, Stack], rows: Sequence[str], cols: Sequence[str], *,
              metric: str = "mutual_knn", knn_k: int = 10, clip_quantile: float | None = 0.95,
              clip_scope: ClipScope = "tensor", convention: Convention = "prhsim", permutations: int | None = None,
              alpha: float = 0.05, progress: Progress | None = None) -> PrhTable:
    """Every row model against every column model (module docstring).

    Args:
        features: model name -> its features (numpy, torch or JAX; one N for all).
        rows, cols: names of ``features``, the table's rows (each an A) and columns (each a B).
        metric, knn_k, clip_quantile, clip_scope, convention: as :func:`prhsim.metrics.prh_protocol`.
        permutations: K of each entry's calibration, or None.
        alpha: the calibration's level and Holm's.
        progress: told of each entry, counted in thousandths of the entries' rough seconds (so an ETA weighs each
            entry by its cost).

    Raises:
        ValueError: a name missing from ``features``, an unknown metric, or an entry's error (:func:`protocol_entry`).
    """
    record = metric_record(metric)
    check_alpha(alpha)
    if permutations is not None:
        check_permutations(permutations)
    missing = [name for name in (*rows, *cols) if name not in features]
    if missing:
        raise ValueError(f"no features for {missing[0]!r}; the features hold {', '.join(map(repr, features))}")
    say = as_progress(progress)
    cost = {(r, c): entry_seconds(features[r], features[c], metric=metric, knn_k=knn_k, permutations=permutations)
            for r in rows for c in cols}
    total = sum(cost.values())
    shape = (len(rows), len(cols))
    scores, calibrated, p_values, tau = (np.full(shape, np.nan) for _ in range(4))
    pairs = np.zeros((*shape, 2), dtype=int)
    chance, done = None, 0.0
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            say(f"{r} vs {c}" + (f" (calibrating on {permutations:,} permutations)" if permutations else ""),
                done=round(1000 * done), total=round(1000 * total))
            done += cost[r, c]
            result = protocol_entry(features[r], features[c], r, c, metric=metric, knn_k=knn_k,
                                    clip_quantile=clip_quantile, clip_scope=clip_scope, convention=convention,
                                    permutations=permutations, alpha=alpha)
            scores[i, j], chance = result.best, result.chance
            pairs[i, j] = (-1, -1) if result.layers is None else result.layers
            if result.calibration is not None:
                cal = result.calibration
                calibrated[i, j], p_values[i, j], tau[i, j] = cal.calibrated, cal.p_value, cal.tau
    calibration = None
    if permutations:
        calibration = TableCalibration(permutations=int(permutations), alpha=float(alpha), calibrated=calibrated,
                                       p_values=p_values, tau=tau, significant=holm(p_values, alpha))
    return PrhTable(rows=list(rows), cols=list(cols), metric=metric, knn_k=knn_k if record.neighbours else None,
                    scores=scores, layer_pairs=pairs, chance=chance, calibration=calibration)
