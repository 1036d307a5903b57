"""The registry of sample metrics: a name to a :class:`Metric` record that every consumer reads (docs/theory.md §10).

A sample metric scores two paired samples ``a`` (N x d_a) and ``b`` (N x d_b), row i of each an observation of
the same input. Its record says how to score (``score``), whether it reads the neighbour count ``knn_k``, whether
it fits something on part of the rows (``fitted``: R@1's orthogonal map), its chance level, the definitions it
has (``conventions``), a rough cost, a short label, and whether it is ``reported``: the metrics every consumer
computes by default (``prhsim run``'s pair table, the metric-bridge sweep, ``prhsim real eval``), while
``prhsim prh`` and :func:`prhsim.metrics.calibrate` take any registered name. A new metric is its module and
one :func:`register_metric` call (or one entry below); the consumers iterate :func:`reported_metrics`.

The entries:

* ``mutual_knn``, ``cycle_knn``, ``cknna``: the k-NN metrics (:mod:`prhsim.metrics._knn`,
  :mod:`prhsim.metrics._cknna`); mutual k-NN's chance level is ``k/(N − 1)``;
* ``linear_cka``, ``unbiased_cka``, ``rbf_cka`` (:mod:`prhsim.metrics._cka`) and ``svcca``; they ignore k;
* ``retrieval_r1``: R@1 of paired retrieval after one orthogonal map fitted on the rows of ``fit``, the mean of
  both directions (:func:`prhsim.metrics.retrieval`); without ``fit``, on a random half of the rows drawn by
  ``default_rng(0).permutation(N)[:N // 2]``; chance ``1/T`` with T = N − ⌊N/2⌋ held-out rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from prhsim.metrics._cka import linear_cka, rbf_cka, unbiased_cka
from prhsim.metrics._cknna import cknna
from prhsim.metrics._cknna_variants import cknna_agnostic, cknna_biased
from prhsim.metrics._convention import Convention, check_convention
from prhsim.metrics._knn import cycle_knn, knn_chance, mutual_knn
from prhsim.metrics._retrieval import chance_recall, retrieval
from prhsim.metrics._svcca import svcca


@dataclass(frozen=True)
class Metric:
    """A sample metric of the registry.

    Attributes:
        name: its name (``prhsim prh --metric NAME``, a key of every consumer's results).
        score: ``(a, b, *, knn_k[, fit][, convention]) -> float`` on two (N, d) samples.
        neighbours: whether the metric reads ``knn_k``, its neighbours (the kNN metrics; the others ignore it).
        chance: ``(N, knn_k) -> float``, the expected score of independent representations on N rows (a fitted
            metric: N held-out rows), where known; :meth:`chance_level` applies it to the rows a score is given.
        conventions: the definitions it has (:mod:`prhsim.metrics._convention`); a score is given
            ``convention=`` only when it is not "prhsim", so a score of ``(a, b, *, knn_k)`` is a metric.
        cost: ``(N, d_a, d_b, knn_k) -> (seconds of one layer pair, seconds of one permutation of it)``, a
            rough figure for the time class of a protocol (:mod:`prhsim.metrics._protocol_cost`).
        label: how tables head its column (default: its name).
        fitted: whether the score fits on part of the rows: it is given ``fit=`` (a boolean mask of the rows to
            fit on, or None for its own default split). A fitted metric is not calibrated by the consumers (a
            permutation null would refit on every permutation).
        reported: whether every consumer computes it by default (:func:`reported_metrics`).
    """

    name: str
    score: Callable[..., float]
    neighbours: bool = False
    chance: Callable[[int, int], float] | None = None
    conventions: tuple[Convention, ...] = ("prhsim",)
    cost: Callable[[int, int, int, int], tuple[float, float]] | None = None
    label: str = ""
    fitted: bool = False
    reported: bool = False

    @property
    def heading(self) -> str:
        """The label of its column: ``label``, or its name."""
        return self.label or self.name

    def chance_level(self, n: int, knn_k: int, *, fit: Any = None) -> float | None:
        """The chance level of a score on ``n`` rows (None where unknown); a fitted metric ranks the rows outside
        ``fit`` (a boolean mask or row indices; None: its default split leaves ``n − ⌊n/2⌋``)."""
        if self.chance is None:
            return None
        if self.fitted:
            fit = None if fit is None else np.asarray(fit)
            n -= n // 2 if fit is None else int(np.count_nonzero(fit) if fit.dtype == bool else fit.size)
        return float(self.chance(n, knn_k))

    def __call__(self, a: Any, b: Any, *, knn_k: int, convention: Convention = "prhsim", fit: Any = None) -> float:
        """The score of ``a`` against ``b``; ``fit`` is passed to a fitted metric only (the others ignore it)."""
        keywords = {"fit": fit} if self.fitted else {}
        if check_convention(convention) == "prhsim":
            return self.score(a, b, knn_k=knn_k, **keywords)
        if convention not in self.conventions:
            raise ValueError(f"metric {self.name!r} has no {convention!r} convention (it has: "
                             f"{', '.join(self.conventions)})")
        return self.score(a, b, knn_k=knn_k, convention=convention, **keywords)


def _mutual_knn(a: Any, b: Any, *, knn_k: int, convention: Convention = "prhsim") -> float:
    return float(mutual_knn(a, b, knn_k=knn_k, convention=convention))


def _cycle_knn(a: Any, b: Any, *, knn_k: int, convention: Convention = "prhsim") -> float:
    return float(cycle_knn(a, b, knn_k=knn_k, convention=convention))


def _cknna(a: Any, b: Any, *, knn_k: int, convention: Convention = "prhsim") -> float:
    return float(cknna(a, b, knn_k=knn_k, convention=convention))


def _linear_cka(a: Any, b: Any, *, knn_k: int, convention: Convention = "prhsim") -> float:
    return linear_cka(a, b, convention=convention)


def _unbiased_cka(a: Any, b: Any, *, knn_k: int, convention: Convention = "prhsim") -> float:
    return unbiased_cka(a, b, convention=convention)


def _rbf_cka(a: Any, b: Any, *, knn_k: int, convention: Convention = "prhsim") -> float:
    return rbf_cka(a, b, convention=convention)


def _svcca(a: Any, b: Any, *, knn_k: int, convention: Convention = "prhsim") -> float:
    return svcca(a, b, convention=convention)


def half_split(n: int) -> np.ndarray:
    """The default fitting rows of a fitted metric: a boolean mask of ``default_rng(0).permutation(n)[:n // 2]``."""
    fit = np.zeros(n, dtype=bool)
    fit[np.random.default_rng(0).permutation(n)[: n // 2]] = True
    return fit


def _retrieval_r1(a: Any, b: Any, *, knn_k: int, fit: Any = None) -> float:
    recall = retrieval(a, b, fit=half_split(a.shape[0]) if fit is None else fit, ks=(1,))
    return float((recall.a_to_b[1] + recall.b_to_a[1]) / 2)


def _knn_chance(n: int, knn_k: int) -> float:
    return float(knn_chance(n, knn_k))


def _r1_chance(held_out: int, knn_k: int) -> float:
    return chance_recall(held_out, 1)


_BOTH: tuple[Convention, ...] = ("prhsim", "prh")


# Rough seconds per unit on this project's 2-core CPU (float32 stacks of 1,000 and 2,000 rows, 256 and 768 wide,
# 1 and 4 layers, 100 permutations; the larger of the two sizes' rates): the kNN metrics gather O(N·k) per layer pair
# and permutation; CKNNA recomputes its N x N kernels for each; the CKAs couple the two sides through an O(N²)
# gather per permutation; SVCCA recomputes its SVDs, O(N·d²); R@1 its SVDs and the held-out scores, O(N·d² + N²·d).
def _knn_cost(n: int, da: int, db: int, k: int) -> tuple[float, float]:
    return 1.5e-7 * n * k, 1.5e-7 * n * k


def _cknna_cost(n: int, da: int, db: int, k: int) -> tuple[float, float]:
    return 1.3e-7 * n * n, 1.3e-7 * n * n


def _dense_cost(n: int, da: int, db: int, k: int) -> tuple[float, float]:
    """The dense CKNNA variants: N x N kernels and a sort of every row, per pair and per permutation."""
    seconds = 1e-7 * n * n * max(1.0, math.log2(n))
    return seconds, seconds


def _cka_cost(n: int, da: int, db: int, k: int) -> tuple[float, float]:
    return 5e-10 * n * (da + db) ** 2 + 3e-8 * n * n, 5e-9 * n * n


def _svcca_cost(n: int, da: int, db: int, k: int) -> tuple[float, float]:
    return 2.5e-8 * n * (da * da + db * db), 2.5e-8 * n * (da * da + db * db)


#: Metric name -> its :class:`Metric` (each scores two (N, d) samples); :func:`register_metric` adds one.
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("mutual_knn", _mutual_knn, neighbours=True, chance=_knn_chance, conventions=_BOTH, cost=_knn_cost,
           label="mutual kNN", reported=True),
    Metric("cycle_knn", _cycle_knn, neighbours=True, conventions=_BOTH, cost=_knn_cost, label="cycle kNN"),
    Metric("cknna", _cknna, neighbours=True, conventions=_BOTH, cost=_cknna_cost, label="CKNNA"),
    Metric("cknna_agnostic", cknna_agnostic, neighbours=True, chance=_knn_chance, conventions=_BOTH,
           cost=_dense_cost, label="CKNNA (distance-agnostic)"),
    Metric("cknna_biased", cknna_biased, neighbours=True, conventions=_BOTH, cost=_dense_cost,
           label="CKNNA (biased)"),
    Metric("linear_cka", _linear_cka, conventions=_BOTH, cost=_cka_cost, label="linear CKA", reported=True),
    Metric("unbiased_cka", _unbiased_cka, conventions=_BOTH, cost=_cka_cost, label="unbiased CKA"),
    Metric("rbf_cka", _rbf_cka, conventions=_BOTH, cost=_cka_cost, label="RBF CKA"),
    Metric("svcca", _svcca, conventions=_BOTH, cost=_svcca_cost, label="SVCCA"),
    Metric("retrieval_r1", _retrieval_r1, chance=_r1_chance, cost=_svcca_cost, label="R@1", fitted=True,
           reported=True),
)}


def register_metric(metric: Metric, *, replace: bool = False) -> Metric:
    """Add ``metric`` to :data:`METRICS` under its name (every consumer then offers it; a ``reported`` one is
    computed by default). Returns it.

    Raises:
        ValueError: a name already registered (unless ``replace``), or a name that is not a Python identifier.
        TypeError: ``metric`` is not a :class:`Metric`.
    """
    if not isinstance(metric, Metric):
        raise TypeError(f"register_metric takes a Metric record, got {type(metric).__name__}")
    if not metric.name.isidentifier():
        raise ValueError(f"a metric's name must be an identifier (it keys results files), got {metric.name!r}")
    if metric.name in METRICS and not replace:
        raise ValueError(f"metric {metric.name!r} is already registered; pass replace=True to replace it")
    METRICS[metric.name] = metric
    return metric


def reported_metrics() -> tuple[str, ...]:
    """The names of the registered metrics every consumer computes by default, in registration order."""
    return tuple(name for name, metric in METRICS.items() if metric.reported)


def metric_record(name: Any) -> Metric:
    """The record of a registered metric.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if not isinstance(name, str) or name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(sorted(METRICS))}")
    return METRICS[name]
