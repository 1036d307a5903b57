"""Permutation-null calibration of alignment scores (Gröger, Wen & Brbić 2026; docs/prh.md, "Calibrated scores").

A sample metric scores paired rows: row i of ``A`` (N x d_a) and row i of ``B``
(N x d_b) are the same item, and ``s = metric(A, B)``. Breaking the pairing
gives the null: for K row permutations π_1..π_K, ``s_j = metric(A, B[π_j])``,
where ``B[π]`` has row i equal to row π(i) of B. Then

* the add-one p-value ``p = (1 + #{j : s_j >= s − γ}) / (K + 1)``: a null score within
  ``γ = TIE_TOL · max(1, |s|)`` below s is a tie and counts against s (the tie rule below);
* the critical value τ: the m-th smallest of the multiset ``{s, s_1, …, s_K}``
  (1-based), ``m = ⌈(1 − α)(K + 1)⌉`` (evaluated up to 1e-9, so that the binary
  rounding of a decimal α such as 0.05 cannot move the rank);
* the calibrated score ``clamp((s − τ)/(s_max − τ), 0, 1)``, with s_max the
  metric's largest value (1 for every registered metric), and 0 when s − τ <= γ or
  s_max − τ <= γ.

The tie rule. The observed score and the null scores are computed by one route: the identity
permutation rides with the first chunk of permutations, every permutation's score is formed by
arithmetic of its own (so it does not depend on the chunk), and the registered score of float64
numpy rows is that route's identity, bit for bit, for every metric (the CKA kinds score such rows
through :mod:`prhsim.metrics._cka_permuted`). A score can still reach the null by a second route
(torch, JAX or float32 rows, which the null scores in float64 on the host), and a permutation that
leaves a score unchanged in exact arithmetic can sum the same products in another order.
``scipy.stats.permutation_test`` counts null scores within ``100 ε |s|`` of the observed one as
ties (ε the float64 machine epsilon, about 2.2e-14 |s|). prhsim uses ``TIE_TOL = 1e-12`` (times
``max(1, |s|)``: the scores lie in [-1, 1], so near 0 the tolerance stays at the scale of the
terms summed): wider than scipy's, to cover a second float64 route (the registered RBF CKA was one
before it joined the null's route: under ``convention="prh"`` on rows far apart, where every score
is the same number, the two differed by 1.9e-15 at N = 20, 1.1e-14 at N = 60 and 4.9e-14 at
N = 200, about 2.4e-16·N); and still far below any difference a metric can resolve (a k-NN score
moves in steps of ``1/(N·k)``, 1e-6 at N = 10⁵, k = 10).

Layer tables: with ``A`` and ``B`` sequences of (N, d_l) arrays, the statistic is the
aggregate ("max", "mean", or a callable of the (L_a, L_b) table returning one number) of the
table ``metric(A_l, B_m)`` over all layer pairs; the null applies the same π_j to every layer
of B and aggregates the permuted table.

Paths. A row permutation of B changes only what couples the two sides, so where the
registered score is prhsim's own, what it leaves alone is computed once (each module says
why that is the recomputed null):

* mutual and cycle k-NN: each side's k-NN lists searched once, relabelled per
  permutation, O(N·k) per permutation (:mod:`prhsim.metrics._calibrate_knn`; the
  registered metric's scores exactly);
* linear, unbiased and RBF CKA: the normalisers once, per permutation only the cross
  term ``‖ãᵀ P b̃‖_F²`` (:mod:`prhsim.metrics._cka_permuted`; float64, the registered score's route);
* every other registered metric (cknna, svcca), and a score registered later under one
  of those names: the generic path recomputes ``metric(A_l, B_m[π_j])`` for every
  permutation and layer pair: correct, K times the cost of one table.

The fast paths run on the host in numpy (inputs of any library are copied there), under
either convention (``convention="prh"``: the PRH code's definitions, as the metric's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np

from prhsim._rng import RngLike, check_rng
from prhsim.metrics._arguments import check_alpha, check_knn_k, check_permutations, check_rows
from prhsim.metrics._cka_permuted import kernel_scorer
from prhsim.metrics._calibrate_knn import knn_scorer
from prhsim.metrics._cka import to_host
from prhsim.metrics._convention import Convention, check_convention
from prhsim.metrics._protocol import ClipScope, ProtocolScore, layer_protocol, prepared_pair
from prhsim.metrics._registry import METRICS, Metric, metric_record

#: A layer table's statistic: "max" or "mean" over all layer pairs, or a callable of the (L_a, L_b) table of scores
#: returning one number (e.g. ``lambda t: t.diagonal().mean()``), applied alike to the observed and every permuted
#: table.
Aggregate = Literal["max", "mean"] | Callable[[np.ndarray], float]

#: The largest value of a metric (the calibrated score's 1); 1.0 for every metric not listed.
S_MAX: dict[str, float] = {}
#: Null scores within ``TIE_TOL · max(1, |s|)`` of the observed score s are ties (module docstring: the tie rule).
TIE_TOL = 1e-12
#: Permutations per top-level chunk: about this many permuted labels at once.
CHUNK_ENTRIES = 2**20


@dataclass(frozen=True, eq=False)
class Calibration:
    """A score against its permutation null (module docstring).

    Attributes:
        metric: the metric's name in :data:`prhsim.metrics._registry.METRICS`.
        raw: the observed score s (layer tables: the aggregate of the unpermuted table).
        calibrated: ``clamp((s − τ)/(s_max − τ), 0, 1)``, 0 when s − τ <= γ or s_max − τ <= γ.
        p_value: ``(1 + #{j : s_j >= s − γ}) / (K + 1)``, γ = ``TIE_TOL · max(1, |s|)`` (ties count against s).
        tau: the critical value, the ⌈(1 − α)(K + 1)⌉-th smallest of {s, s_1, …, s_K}.
        alpha: the level α.
        permutations: K, the number of null scores.
        null: the K null scores s_j in the order of the permutations (float64, read-only).

    Records compare by identity (``eq=False``: they hold an array).
    """

    metric: str
    raw: float
    calibrated: float
    p_value: float
    tau: float
    alpha: float
    permutations: int
    null: np.ndarray = field(repr=False)

    def quantile(self, q: float) -> float:
        """The q-quantile of the null scores (numpy's linear interpolation), 0 <= q <= 1."""
        if isinstance(q, bool) or not isinstance(q, Real) or not 0.0 <= float(q) <= 1.0:
            raise ValueError(f"q must be a number in [0, 1], got {q!r}")
        return float(np.quantile(self.null, float(q)))


def calibrate(metric: str, a: Any, b: Any, *, permutations: int | np.ndarray = 1000, alpha: float = 0.05,
              rng: RngLike = None, aggregate: Aggregate | None = None, knn_k: int = 10,
              convention: Convention = "prhsim") -> Calibration:
    """Calibrate ``metric(a, b)`` against K random re-pairings of the rows (module docstring).

    Args:
        metric: a name in :data:`prhsim.metrics._registry.METRICS`.
        a: (N, d_a) array, or a sequence (list or tuple) of them: layers (numpy, torch or JAX;
            integer and boolean arrays are read as float64).
        b: (N, d_b) array, or a sequence of them; an array beside a sequence is one layer.
        permutations: K, the number of permutations, drawn as ``rng.permutation(N)`` K times;
            or an integer array (K, N) whose rows are permutations of range(N).
        alpha: the level of the critical value τ, in (0, 1).
        rng: seed or Generator for drawn permutations (:func:`prhsim._rng.check_rng`: None is
            seed 0); ignored with an explicit array.
        aggregate: None for two arrays; for sequences, "max" or "mean" over all layer pairs, or a callable of the
            (L_a, L_b) table returning one real number (the calibrated score then assumes it stays within the
            metric's range, as a quantile or a weighted mean does).
        knn_k: neighbours of the k-NN metrics (ignored by the others).
        convention: the metric's definition, "prhsim" or "prh" (:mod:`prhsim.metrics._convention`).

    Returns:
        :class:`Calibration`.

    Raises:
        ValueError: an unknown metric, alpha outside (0, 1), arrays that are not 2-D, hold
            NaN/inf or differ in N, N < 2, K < 1, an array of permutations of the wrong
            shape or with a row that is not a permutation, a missing or unknown aggregate
            for sequences (or one given for two arrays), knn_k outside [1, N) for a k-NN
            metric, or the metric's own errors (zero rows, zero variance, ...).

    >>> x = np.random.default_rng(0).normal(size=(40, 3))
    >>> cal = calibrate("linear_cka", x, 2 * x, permutations=99)
    >>> cal.raw, cal.p_value, cal.calibrated
    (1.0, 0.01, 1.0)
    """
    record = metric_record(metric)
    alpha = check_alpha(alpha)
    convention = check_convention(convention)
    layers_a, layers_b, layered = _layers(a, b)
    statistic = _aggregator(aggregate, layered)
    n = layers_a[0][1].shape[0]
    if record.neighbours:
        check_knn_k(knn_k, n)
    count, chunks = _permutation_chunks(permutations, n, rng, max(1, CHUNK_ENTRIES // n))
    scorer = _scorer(record, layers_a, layers_b, knn_k, convention)
    parts, raw = [], None
    for perms in chunks:
        if raw is None:  # the identity rides with the first chunk: s and the s_j through the same computation
            perms = np.concatenate([np.arange(n, dtype=np.intp)[None, :], perms], axis=0)
        scores = statistic(scorer(perms, _inverse(perms)))
        if raw is None:
            raw, scores = float(scores[0]), scores[1:]
        parts.append(scores)
    null = np.ascontiguousarray(np.concatenate(parts), dtype=np.float64)
    null.setflags(write=False)
    p_value, tau, calibrated = null_verdict(raw, null, alpha, S_MAX.get(record.name, 1.0))
    return Calibration(record.name, raw, calibrated, p_value, tau, alpha, count, null)


def null_verdict(raw: float, null: np.ndarray, alpha: float, s_max: float = 1.0) -> tuple[float, float, float]:
    """(p, τ, calibrated score) of the observed score ``raw`` against the K null scores ``null`` at level ``alpha``,
    under the tie rule (module docstring)."""
    count = len(null)
    tie = TIE_TOL * max(1.0, abs(raw))
    p_value = (1 + int(np.count_nonzero(np.asarray(null) >= raw - tie))) / (count + 1)
    tau = float(np.sort(np.append(null, raw))[_rank(alpha, count) - 1])
    tied = raw - tau <= tie or s_max - tau <= tie
    calibrated = 0.0 if tied else min(max((raw - tau) / (s_max - tau), 0.0), 1.0)
    return float(p_value), tau, float(calibrated)


# --------------------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------------------
def calibrated_protocol(feats_a: Any, feats_b: Any, *, permutations: int | np.ndarray = 1000, alpha: float = 0.05,
                        rng: RngLike = None, metric: str = "mutual_knn", knn_k: int = 10,
                        clip_quantile: float | None = 0.95, clip_scope: ClipScope = "tensor",
                        convention: Convention = "prhsim") -> ProtocolScore:
    """:func:`prhsim.metrics.prh_protocol` (metric, knn_k, clip_quantile, clip_scope, convention as there) with
    its best score calibrated (``score.calibration``): the null statistic is the max over every scored layer pair of the
    clipped, normalised stacks with B's rows permuted, one permutation for every pair, so the search over layers is
    part of the null."""
    check_alpha(alpha)
    if isinstance(permutations, Integral):
        check_permutations(permutations)
    convention = check_convention(convention)
    xp, A, B = prepared_pair(feats_a, feats_b, clip_quantile, clip_scope, convention)
    score = layer_protocol(xp, A, B, metric=metric, knn_k=knn_k, convention=convention)
    scored = ~np.isnan(score.table)  # the best is the max over the scored layers' pairs (constant layers are not)
    A = [x for x, live in zip(A, scored.any(axis=1)) if live]
    B = [x for x, live in zip(B, scored.any(axis=0)) if live]
    calibration = calibrate(metric, A, B, permutations=permutations, alpha=alpha, rng=rng, aggregate="max",
                            knn_k=knn_k, convention=convention)
    return score._replace(calibration=calibration)


def permutations_needed(alpha: float, tests: int = 1) -> int:
    """The smallest K whose smallest p-value ``1/(K + 1)`` reaches ``alpha/tests`` (a level, or Holm's first threshold
    over ``tests`` p-values): ``⌈tests/alpha⌉ − 1`` (evaluated up to 1e-9, as the critical value's rank is)."""
    alpha = check_alpha(alpha)
    if isinstance(tests, bool) or not isinstance(tests, Integral) or tests < 1:
        raise ValueError(f"tests must be a positive integer, got {tests!r}")
    return max(1, math.ceil(int(tests) / alpha - 1e-9) - 1)


def rejection_note(permutations: int, alpha: float, tests: int = 1, *, most: int | None = None) -> str | None:
    """The note every calibrated report prints when K permutations cannot reject at all: its smallest p-value
    ``1/(K + 1)`` is above ``alpha`` (or Holm's first threshold ``alpha/tests``), so a calibrated score of 0 says
    nothing about the pair; None when K suffices. ``most``: the largest K the caller takes; where the K needed is
    above it, the note says to raise alpha instead."""
    needed = permutations_needed(alpha, tests)
    if permutations >= needed:
        return None
    level = f"alpha {alpha:g}" if tests == 1 else f"Holm's first threshold alpha/{tests} = {alpha / tests:.3g}"
    advice = (f"use K >= {needed:,}" if most is None or needed <= most else
              f"it needs K >= {needed:,}, above the most allowed ({most:,}): raise alpha")
    return (f"K = {permutations:,} permutations cannot reject at {level}: the smallest p-value is 1/(K + 1) = "
            f"{1 / (permutations + 1):.3g}; {advice}")


def holm(p_values: Any, alpha: float = 0.05) -> np.ndarray:
    """Holm's step-down correction: which of m p-values reach α with the family-wise error held at α.

    Sort the p-values ascending, p_(1) ≤ … ≤ p_(m); reject p_(i) while ``p_(i) <= α / (m − i + 1)``
    and stop at the first that does not. Returns a boolean array of the input's shape.

    Example:
        >>> holm([0.01, 0.04, 0.03, 0.2], alpha=0.05).tolist()
        [True, False, False, False]
    """
    alpha = check_alpha(alpha)
    p = np.asarray(p_values, dtype=np.float64)
    flat = p.ravel()
    if flat.size == 0 or np.any(~np.isfinite(flat)) or np.any((flat < 0) | (flat > 1)):
        raise ValueError("p_values must be a non-empty array of numbers in [0, 1]")
    order = np.argsort(flat, kind="stable")
    m = flat.size
    passed = flat[order] <= alpha / (m - np.arange(m))
    keep = np.cumprod(passed).astype(bool)  # up to the first that fails
    out = np.zeros(m, dtype=bool)
    out[order] = keep
    return out.reshape(p.shape)


def _rank(alpha: float, count: int) -> int:
    """m = ⌈(1 − α)(K + 1)⌉ (1-based), evaluated up to 1e-9 and kept in [1, K + 1]."""
    return min(count + 1, max(1, math.ceil((1.0 - alpha) * (count + 1) - 1e-9)))


def _as_layer(x: Any, name: str) -> np.ndarray:
    """One representation as a 2-D, finite, real numpy array (integers and booleans as float64)."""
    arr = to_host(x)
    if arr.dtype == bool or np.issubdtype(arr.dtype, np.integer):
        arr = arr.astype(np.float64)
    elif not np.issubdtype(arr.dtype, np.floating):
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (N, d) or a sequence of them, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _layers(a: Any, b: Any) -> tuple[list[tuple[str, np.ndarray]], list[tuple[str, np.ndarray]], bool]:
    """Both sides as lists of (name, array), and whether they are layer tables."""
    layered = isinstance(a, (list, tuple)) or isinstance(b, (list, tuple))
    sides = []
    for side, x in (("a", a), ("b", b)):
        if not layered:
            sides.append([(side, _as_layer(x, side))])
            continue
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        if not xs:
            raise ValueError(f"{side} is an empty sequence of layers")
        sides.append([(f"{side}[{i}]", _as_layer(v, f"{side}[{i}]")) for i, v in enumerate(xs)])
    layers_a, layers_b = sides
    for layers in sides:
        name0, x0 = layers[0]
        for name, x in layers[1:]:
            if x.shape[0] != x0.shape[0]:
                raise ValueError(f"every layer must have the same N rows: {name} has {x.shape[0]}, "
                                 f"{name0} has {x0.shape[0]}")
    na, nb = layers_a[0][1].shape[0], layers_b[0][1].shape[0]
    if na != nb:
        raise ValueError(f"a and b must have the same number of rows N, got {na} and {nb}")
    check_rows(na, "calibrate")
    return layers_a, layers_b, layered


def _aggregator(aggregate: Any, layered: bool) -> Callable[[np.ndarray], np.ndarray]:
    """The statistic of a (C, L_a, L_b) table of scores: one per permutation."""
    if aggregate is not None and not callable(aggregate) and aggregate not in ("max", "mean"):
        raise ValueError(f"aggregate must be None, 'max', 'mean' or a callable of the layer table, got {aggregate!r}")
    if layered and aggregate is None:
        raise ValueError("a and b are layer sequences: pass aggregate='max' or aggregate='mean'")
    if not layered and aggregate is not None:
        raise ValueError(f"aggregate={aggregate!r} is for layer sequences; a and b are single arrays "
                         f"(pass aggregate=None)")
    if callable(aggregate):
        return lambda t: np.array([_aggregated(aggregate, table) for table in t], dtype=np.float64)
    if aggregate == "max":
        return lambda t: t.max(axis=(1, 2))
    if aggregate == "mean":
        return lambda t: t.mean(axis=(1, 2))
    return lambda t: t[:, 0, 0]


def _aggregated(aggregate: Callable[[np.ndarray], Any], table: np.ndarray) -> float:
    """A callable aggregate's value on one (L_a, L_b) table (a read-only copy), or a one-line ValueError."""
    view = np.array(table, dtype=np.float64)
    view.setflags(write=False)
    value = aggregate(view)
    try:
        number = float(np.asarray(value).item()) if np.ndim(value) == 0 or np.size(value) == 1 else None
    except (TypeError, ValueError):
        number = None
    if number is None or not math.isfinite(number):
        raise ValueError(f"aggregate must return one finite real number for a layer table, got {value!r}")
    return number


def _permutation_chunks(permutations: Any, n: int, rng: RngLike, step: int) -> tuple[int, Iterator[np.ndarray]]:
    """K and the permutations in chunks of at most ``step`` rows, each (C, N) intp."""
    if isinstance(permutations, bool):
        raise ValueError(f"permutations must be an int K or an integer array (K, N), got {permutations!r}")
    if isinstance(permutations, Integral):
        count = check_permutations(permutations)
        gen = check_rng(rng)

        def drawn() -> Iterator[np.ndarray]:
            for c0 in range(0, count, step):
                yield np.stack([gen.permutation(n) for _ in range(min(step, count - c0))]).astype(np.intp)

        return count, drawn()
    perms = np.asarray(permutations)
    if perms.dtype == bool or not np.issubdtype(perms.dtype, np.integer):
        raise ValueError(f"permutations must be an int K or an integer array (K, N), got dtype {perms.dtype}")
    if perms.ndim != 2 or perms.shape[1] != n:
        raise ValueError(f"permutations must have shape (K, N) with N = {n}, got shape {perms.shape}")
    if perms.shape[0] < 1:
        raise ValueError("permutations must hold at least 1 permutation, got 0 rows")
    bad = np.flatnonzero(np.any(np.sort(perms, axis=1) != np.arange(n), axis=1))
    if bad.size:
        raise ValueError(f"row {int(bad[0])} of permutations is not a permutation of range({n})")
    perms = perms.astype(np.intp)
    return perms.shape[0], (perms[c0:c0 + step] for c0 in range(0, perms.shape[0], step))


def _inverse(perms: np.ndarray) -> np.ndarray:
    """π⁻¹ of every row: inv[j, perms[j, i]] = i."""
    inv = np.empty_like(perms)
    np.put_along_axis(inv, perms, np.broadcast_to(np.arange(perms.shape[1], dtype=perms.dtype), perms.shape), axis=1)
    return inv


#: The registry's scores with a fast path, as registered when this module was imported (another score registered
#: under one of these names later takes the generic path).
_FAST: dict[str, Any] = {name: METRICS[name].score
                         for name in ("mutual_knn", "cycle_knn", "linear_cka", "unbiased_cka", "rbf_cka")}

Layers = list[tuple[str, np.ndarray]]
Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _scorer(record: Metric, layers_a: Layers, layers_b: Layers, knn_k: int, convention: Convention) -> Scorer:
    """``(perms, inverses) -> (C, L_a, L_b)`` scores of every layer pair under each permutation."""
    if _FAST.get(record.name) is record.score:
        if record.name in ("mutual_knn", "cycle_knn"):
            return knn_scorer(record.name, layers_a, layers_b, knn_k, convention)
        return kernel_scorer(record.name, layers_a, layers_b, convention)
    return _generic_scorer(record, layers_a, layers_b, knn_k, convention)


# --------------------------------------------------------------------------------------
# the generic path
# --------------------------------------------------------------------------------------
def _generic_scorer(record: Metric, layers_a: Layers, layers_b: Layers, knn_k: int, convention: Convention) -> Scorer:
    """Recompute ``metric(A_l, B_m[π])`` for every permutation and pair: K + 1 tables."""
    layered = layers_a[0][0] != "a"  # layer tables name their arrays a[0], a[1], ...

    def score(perms: np.ndarray, inv: np.ndarray) -> np.ndarray:
        out = np.empty((perms.shape[0], len(layers_a), len(layers_b)))
        for c, p in enumerate(perms):
            for m, (_, b) in enumerate(layers_b):
                bp = b[p]
                for l, (_, a) in enumerate(layers_a):
                    try:
                        out[c, l, m] = record(a, bp, knn_k=knn_k, convention=convention)
                    except ValueError as err:
                        if not layered:
                            raise
                        raise ValueError(f"layer pair ({l}, {m}): {err}") from None
        return out

    return score
