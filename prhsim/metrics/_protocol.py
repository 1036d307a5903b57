"""The Platonic-Representation-Hypothesis protocol on layer stacks, and the metric registry (docs/theory.md §10).

Two models embed the same N inputs at every layer: stacks ``A`` (N x L_a x D_a) and
``B`` (N x L_b x D_b). As in the PRH code:

1. clip each stack (the whole N x L x D tensor of one model) at ``q``, the
   ``clip_quantile`` quantile of its |x| (linear interpolation between order statistics,
   numpy's default): ``x ← clamp(x, −q, q)``. ``clip_scope="sample_mean"`` instead takes
   each input's quantile over its L x D entries and averages them over the N inputs
   (the PRH code's default ``exact=False``); ``clip_quantile=None`` skips the clip;
2. L2-normalise every row of every layer (a zero row stays zero);
3. score every layer pair (i, j) with the metric: ``table[i, j] = metric(A[:, i], B[:, j])``;
4. report the best score ``max_ij table[i, j]`` and its layer pair (the first in
   row-major order on ties), the whole table and the metric's chance level
   (``knn_chance(N, k)`` for mutual_knn, None for the others).

:data:`METRICS` is the registry of sample metrics: a name to a :class:`Metric` record (its
score ``(a, b, *, k) -> float``, whether k counts neighbours, its chance level), read by
:func:`prh_protocol` and ``prhsim prh --metric``. The CKA and SVCCA entries ignore k. The kNN
entries import :mod:`prhsim.metrics._knn` and :mod:`prhsim.metrics._cknna` when first called.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal, NamedTuple

import numpy as np

from prhsim._moved import renamed_keyword
from prhsim.metrics._cka import as_array, check_finite, linear_cka, rbf_cka, unbiased_cka
from prhsim.metrics._svcca import svcca


def _mutual_knn(a: Any, b: Any, *, knn_k: int) -> float:
    from prhsim.metrics._knn import mutual_knn

    return float(mutual_knn(a, b, knn_k=knn_k))


def _cycle_knn(a: Any, b: Any, *, knn_k: int) -> float:
    from prhsim.metrics._knn import cycle_knn

    return float(cycle_knn(a, b, knn_k=knn_k))


def _cknna(a: Any, b: Any, *, knn_k: int) -> float:
    from prhsim.metrics._cknna import cknna

    return float(cknna(a, b, knn_k=knn_k))


def _linear_cka(a: Any, b: Any, *, knn_k: int) -> float:
    return linear_cka(a, b)


def _unbiased_cka(a: Any, b: Any, *, knn_k: int) -> float:
    return unbiased_cka(a, b)


def _rbf_cka(a: Any, b: Any, *, knn_k: int) -> float:
    return rbf_cka(a, b)


def _svcca(a: Any, b: Any, *, knn_k: int) -> float:
    return svcca(a, b)


def _knn_chance(n: int, knn_k: int) -> float:
    from prhsim.metrics._knn import knn_chance

    return float(knn_chance(n, knn_k))


@dataclass(frozen=True)
class Metric:
    """A sample metric of the registry.

    Attributes:
        name: its name (``prhsim prh --metric NAME``).
        score: ``(a, b, *, knn_k) -> float`` on two (N, d) samples.
        neighbours: whether the metric reads ``knn_k``, its neighbours (the kNN metrics; the others ignore it).
        chance: ``(N, knn_k) -> float``, the expected score of independent representations, where known.
    """

    name: str
    score: Callable[..., float]
    neighbours: bool = False
    chance: Callable[[int, int], float] | None = None

    def __call__(self, a: Any, b: Any, *, knn_k: int) -> float:
        return self.score(a, b, knn_k=knn_k)


#: Metric name -> its :class:`Metric` (each scores two (N, d) samples).
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("mutual_knn", _mutual_knn, neighbours=True, chance=_knn_chance),
    Metric("cycle_knn", _cycle_knn, neighbours=True),
    Metric("cknna", _cknna, neighbours=True),
    Metric("linear_cka", _linear_cka),
    Metric("unbiased_cka", _unbiased_cka),
    Metric("rbf_cka", _rbf_cka),
    Metric("svcca", _svcca),
)}

ClipScope = Literal["tensor", "sample_mean"]


class ProtocolScore(NamedTuple):
    """Result of :func:`prh_protocol`.

    Attributes:
        best: the largest score over all layer pairs.
        layers: its layer pair ``(i, j)`` (layer i of a, layer j of b).
        table: every score, a float64 numpy array (L_a x L_b).
        chance: the metric's chance level (mutual_knn: ``knn_chance(N, knn_k)``), else None.
        calibration: the best score against its permutation null (:func:`prhsim.metrics.calibrated_protocol`),
            or None.
    """

    best: float
    layers: tuple[int, int]
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


def clip_stack(x: Any, quantile: float | None = 0.95, *, scope: ClipScope = "tensor") -> Any:
    """``clamp(x, −q, q)`` with q the ``quantile`` of |x| (see the module docstring); None: no clip."""
    if quantile is None:
        return x
    if not 0.0 < quantile <= 1.0:
        raise ValueError(f"clip_quantile must lie in (0, 1] or be None, got {quantile}")
    xp, x = as_array("features", x)
    mag = xp.abs(xp.reshape(x, (x.shape[0], -1)))
    if scope == "tensor":
        q = _quantile(xp, xp.reshape(mag, (-1,)), quantile)
    elif scope == "sample_mean":
        q = xp.mean(_quantile(xp, mag, quantile))
    else:
        raise ValueError(f"clip_scope must be 'tensor' or 'sample_mean', got {scope!r}")
    return xp.clip(x, -q, q)


def _prepare(name: str, x: Any, quantile: float | None, scope: ClipScope) -> tuple[Any, Any]:
    xp, x = as_array(name, x)
    if x.ndim != 3:
        raise ValueError(f"{name} must be a 3-D stack (samples x layers x features), got shape {tuple(x.shape)}")
    check_finite(xp, name, x)
    x = clip_stack(x, quantile, scope=scope)
    norm = xp.sqrt(xp.sum(x * x, axis=-1, keepdims=True))
    return xp, x / xp.where(norm > 0, norm, xp.ones_like(norm))


@renamed_keyword("k", "knn_k", "k is a number of features everywhere else")
def prh_protocol(feats_a: Any, feats_b: Any, *, metric: str = "mutual_knn", knn_k: int = 10,
                 clip_quantile: float | None = 0.95, clip_scope: ClipScope = "tensor") -> ProtocolScore:
    """Score every layer pair of two models and return the best (see the module docstring).

    Args:
        feats_a: (N, L_a, D_a) stack, one representation per layer (numpy, torch or JAX).
        feats_b: (N, L_b, D_b) stack of the same N inputs, same library.
        metric: a name in :data:`METRICS`.
        knn_k: neighbours for the kNN metrics (ignored by the others; ``k``: its deprecated spelling).
        clip_quantile: the quantile of |x| each stack is clipped at; None: no clip.
        clip_scope: "tensor" (one quantile of the whole stack) or "sample_mean".

    Returns:
        :class:`ProtocolScore`.

    Raises:
        ValueError: an unknown metric (the message lists the names), stacks that are not
            3-D, different N, NaN/inf, or a metric's error (prefixed with its layer pair).
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(sorted(METRICS))}")
    xp, A = _prepare("feats_a", feats_a, clip_quantile, clip_scope)
    xp_b, B = _prepare("feats_b", feats_b, clip_quantile, clip_scope)
    if xp_b is not xp:
        raise ValueError(f"feats_a and feats_b must be arrays of one library, got {xp.__name__} and {xp_b.__name__}")
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"feats_a and feats_b must have the same number of samples N, "
                         f"got {A.shape[0]} and {B.shape[0]}")
    score = METRICS[metric]
    table = np.empty((A.shape[1], B.shape[1]))
    for i in range(A.shape[1]):
        for j in range(B.shape[1]):
            try:
                table[i, j] = score(A[:, i, :], B[:, j, :], knn_k=knn_k)
            except ValueError as err:
                raise ValueError(f"layer pair ({i}, {j}): {err}") from None
    i, j = np.unravel_index(int(np.argmax(table)), table.shape)
    chance = None if score.chance is None else score.chance(A.shape[0], knn_k)
    return ProtocolScore(float(table[i, j]), (int(i), int(j)), table, chance)
