"""The Platonic-Representation-Hypothesis protocol on layer stacks (docs/theory.md §10).

Two models embed the same N inputs at every layer: stacks ``A`` (N x L_a x D_a) and
``B`` (N x L_b x D_b), or lists of per-layer (N, D_l) arrays (widths may differ). As in
the PRH code:

1. clip each stack (the whole N x L x D tensor of one model; a list: each layer on its
   own, as the PRH code clips the layers of a list) at ``q``, the ``clip_quantile``
   quantile of its |x|: ``x ← clamp(x, −q, q)``. With ``clip_scope="tensor"`` q is the
   quantile of all entries, by linear interpolation between order statistics (numpy's
   default) or, under ``convention="prh"``, the order statistic ``sort(|x|)[⌊q·numel⌋]``
   (0-based) that the PRH code's ``exact=True`` takes. ``clip_scope="sample_mean"``
   instead takes each input's quantile over its L x D entries and averages them over the
   N inputs (the PRH code's default ``exact=False``; the same in both conventions);
   ``clip_quantile=None`` or 1 skips the clip;
2. L2-normalise every row of every layer (a zero row stays zero; each row is scaled by its largest
   entry first, so that features near the top of float32 do not overflow);
3. score every layer pair (i, j) with the metric: ``table[i, j] = metric(A[:, i], B[:, j])``; a layer whose
   rows are all equal after steps 1-2 (zero variance, e.g. a class token before the first block: every metric
   of it is undefined) is left out, its cells NaN, and a model with no other layer is refused;
4. report the best score ``max_ij table[i, j]`` over the scored cells and its layer pair (the first in
   row-major order on ties), the whole table and the metric's chance level
   (``knn_chance(N, k)`` for mutual_knn, None for the others). Under ``convention="prh"``
   a table with no score above 0 reports 0 and no layer pair, as the PRH code does.

Orientation: ``table[i, j] = metric(A_i, B_j)`` (A is the metric's first argument; for
the asymmetric cycle k-NN, A is the return step). The PRH code's ``compute_alignment``
calls ``compute_score(y_feats, x_feats)``: its metric's first argument is the
``--modality_y`` model, so ``prh_protocol(y, x)`` gives its number and ``layers`` =
(layer of y, layer of x).

``convention`` ("prhsim" or "prh", :mod:`prhsim.metrics._convention`) selects every
metric's definition and the tensor clip's quantile rule.

The metric is a name of the registry (:data:`prhsim.metrics._registry.METRICS`).
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

import numpy as np

from prhsim.metrics._cka import as_array, check_finite
from prhsim.metrics._convention import Convention, check_convention
from prhsim.metrics._arguments import check_knn_k, constant_rows
from prhsim.metrics._registry import metric_record


ClipScope = Literal["tensor", "sample_mean"]


class ProtocolScore(NamedTuple):
    """Result of :func:`prh_protocol`.

    Attributes:
        best: the largest score over all layer pairs.
        layers: its layer pair ``(i, j)`` (layer i of a, layer j of b); None under ``convention="prh"``
            when no pair scores above 0 (the PRH code's best starts at 0: ``best`` is then 0).
        table: every score, a float64 numpy array (L_a x L_b); NaN in the rows and columns of constant layers
            (:func:`scored_layers`), left out of the best.
        chance: the metric's chance level (mutual_knn: ``knn_chance(N, knn_k)``), else None.
        calibration: the best score against its permutation null (:func:`prhsim.metrics.calibrated_protocol`),
            or None.
    """

    best: float
    layers: tuple[int, int] | None
    table: np.ndarray
    chance: float | None
    calibration: Any = None


def _quantile(xp: Any, x: Any, q: float) -> Any:
    """Quantile q of x along its last axis, linear interpolation (numpy's ``method="linear"``)."""
    s = xp.sort(x, axis=-1)
    pos = q * (s.shape[-1] - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, s.shape[-1] - 1)
    return s[..., lo] + (pos - lo) * (s[..., hi] - s[..., lo])


def _order_statistic(xp: Any, x: Any, q: float) -> Any:
    """The PRH code's exact quantile: ``sort(x)[⌊q·numel⌋]`` (0-based) of a flat array."""
    return xp.sort(x)[min(int(q * x.shape[0]), x.shape[0] - 1)]


def clip_stack(x: Any, quantile: float | None = 0.95, *, scope: ClipScope = "tensor",
               convention: Convention = "prhsim") -> Any:
    """``clamp(x, −q, q)`` with q the ``quantile`` of |x| (see the module docstring); None or 1: no clip.

    ``x`` is one model's (N, ...) array; ``convention="prh"`` takes the tensor scope's q as the order
    statistic ``sort(|x|)[⌊quantile·numel⌋]`` where prhsim interpolates between order statistics.
    """
    convention = check_convention(convention)
    if quantile is None:
        return x
    if not 0.0 < quantile <= 1.0:
        raise ValueError(f"clip_quantile must lie in (0, 1] or be None, got {quantile}")
    if scope not in ("tensor", "sample_mean"):
        raise ValueError(f"clip_scope must be 'tensor' or 'sample_mean', got {scope!r}")
    xp, x = as_array("features", x)
    if quantile == 1.0:  # the largest |x|: nothing is clipped (the PRH code returns x)
        return x
    mag = xp.abs(xp.reshape(x, (x.shape[0], -1)))
    if scope == "tensor":
        flat = xp.reshape(mag, (-1,))
        q = _order_statistic(xp, flat, quantile) if convention == "prh" else _quantile(xp, flat, quantile)
    else:
        q = xp.mean(_quantile(xp, mag, quantile))
    return xp.clip(x, -q, q)


def _prepare(name: str, x: Any, quantile: float | None, scope: ClipScope,
             convention: Convention = "prhsim") -> tuple[Any, list[Any]]:
    """``(xp, layers)``: one model's clipped, row-normalised layers, each (N, D_l) (module docstring)."""
    if isinstance(x, (list, tuple)):
        if not x:
            raise ValueError(f"{name} is an empty list of layers")
        layers = []
        for i, layer in enumerate(x):
            xp, layer = as_array(f"{name}[{i}]", layer)
            if layer.ndim != 2:
                raise ValueError(f"{name}[{i}] must be a 2-D layer (samples x features), got shape {tuple(layer.shape)}")
            layers.append(layer)
        if len({layer.shape[0] for layer in layers}) != 1:
            raise ValueError(f"the layers of {name} must have one number of samples N, "
                             f"got {sorted({layer.shape[0] for layer in layers})}")
    else:
        xp, x = as_array(name, x)
        if x.ndim != 3:
            raise ValueError(f"{name} must be a 3-D stack (samples x layers x features) or a list of 2-D layers, "
                             f"got shape {tuple(x.shape)}")
        layers = [x]
    out = []
    for i, layer in enumerate(layers):
        check_finite(xp, f"{name}[{i}]" if isinstance(x, (list, tuple)) else name, layer)
        layer = clip_stack(layer, quantile, scope=scope, convention=convention)
        # scaled by each row's largest entry first, so that the squares of huge entries cannot overflow
        big = xp.max(xp.abs(layer), axis=-1, keepdims=True)
        layer = layer / xp.where(big > 0, big, xp.ones_like(big))
        norm = xp.sqrt(xp.sum(layer * layer, axis=-1, keepdims=True))
        out.append(layer / xp.where(norm > 0, norm, xp.ones_like(norm)))
    if not isinstance(x, (list, tuple)):
        return xp, [out[0][:, i, :] for i in range(out[0].shape[1])]
    return xp, out


def prepared_pair(feats_a: Any, feats_b: Any, quantile: float | None, scope: ClipScope,
                  convention: Convention = "prhsim") -> tuple[Any, list[Any], list[Any]]:
    """``(xp, layers_a, layers_b)``: both models clipped and normalised, checked to share a library and N."""
    xp, A = _prepare("feats_a", feats_a, quantile, scope, convention)
    xp_b, B = _prepare("feats_b", feats_b, quantile, scope, convention)
    if xp_b is not xp:
        raise ValueError(f"feats_a and feats_b must be arrays of one library, got {xp.__name__} and {xp_b.__name__}")
    if A[0].shape[0] != B[0].shape[0]:
        raise ValueError(f"feats_a and feats_b must have the same number of samples N, "
                         f"got {A[0].shape[0]} and {B[0].shape[0]}")
    return xp, A, B


def scored_layers(xp: Any, layers_a: list[Any], layers_b: list[Any]) -> tuple[list[int], list[int]]:
    """The indices of the layers of each model the protocol scores: those whose rows are not all equal (a constant
    layer has zero variance: every metric of it is undefined); a one-line ValueError when a model has none."""
    kept = []
    for name, layers in (("feats_a", layers_a), ("feats_b", layers_b)):
        live = [i for i, x in enumerate(layers) if not constant_rows(xp, x)]
        if not live:
            raise ValueError(f"{name}: every layer has zero variance (all rows equal): no alignment metric of it "
                             f"is defined")
        kept.append(live)
    return kept[0], kept[1]


def prh_protocol(feats_a: Any, feats_b: Any, *, metric: str = "mutual_knn", knn_k: int = 10,
                 clip_quantile: float | None = 0.95, clip_scope: ClipScope = "tensor",
                 convention: Convention = "prhsim") -> ProtocolScore:
    """Score every layer pair of two models and return the best (see the module docstring).

    Args:
        feats_a: (N, L_a, D_a) stack, one representation per layer (numpy, torch or JAX), or a
            list of (N, D_l) layers (each clipped on its own).
        feats_b: (N, L_b, D_b) stack or list of layers of the same N inputs, same library.
        metric: a name in :data:`prhsim.metrics._registry.METRICS`.
        knn_k: neighbours for the kNN metrics (ignored by the others).
        clip_quantile: the quantile of |x| each stack is clipped at; None: no clip.
        clip_scope: "tensor" (one quantile of the whole stack) or "sample_mean".
        convention: "prhsim" or "prh": the metric's definition and the tensor clip's rule (module docstring).

    Returns:
        :class:`ProtocolScore`.

    Raises:
        ValueError: an unknown metric (the message lists the names), stacks that are not
            3-D (or lists of layers that are not 2-D), different N, NaN/inf, an unknown
            convention, a model whose every layer is constant, or a metric's error (prefixed with its
            layer pair).
    """
    convention = check_convention(convention)
    xp, A, B = prepared_pair(feats_a, feats_b, clip_quantile, clip_scope, convention)
    return layer_protocol(xp, A, B, metric=metric, knn_k=knn_k, convention=convention)


def layer_protocol(xp: Any, A: list[Any], B: list[Any], *, metric: str, knn_k: int,
                   convention: Convention) -> ProtocolScore:
    """Steps 3-4 of the protocol on layers already clipped and normalised (:func:`prepared_pair`)."""
    score = metric_record(metric)
    if score.neighbours:
        check_knn_k(knn_k, A[0].shape[0])
    rows, cols = scored_layers(xp, A, B)
    table = np.full((len(A), len(B)), np.nan)
    for i in rows:
        for j in cols:
            try:
                table[i, j] = score(A[i], B[j], knn_k=knn_k, convention=convention)
            except ValueError as err:
                raise ValueError(f"layer pair ({i}, {j}): {err}") from None
    chance = score.chance_level(A[0].shape[0], knn_k)
    if convention == "prh" and not np.any(table > 0.0):  # the PRH code's running best starts at 0
        return ProtocolScore(0.0, None, table, chance)
    i, j = np.unravel_index(int(np.nanargmax(table)), table.shape)
    return ProtocolScore(float(table[i, j]), (int(i), int(j)), table, chance)
