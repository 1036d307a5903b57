"""The PRH sample metrics between two modalities of a run (docs/theory.md §10): what a PRH paper would report.

For a pair of modalities with whitened features F_a on Z x N_a and F_b on Z x N_b, N
states z are drawn from p_Z without replacement (N = min(samples, |Z|)), and for each a
nuisance n_a ~ q_a and n_b ~ q_b independently: row i of A is F_a(z_i, n_a,i) and of B
is F_b(z_i, n_b,i), one observation of the same state in each modality, as paired
image/caption features are. On these rows every metric of ``metrics`` (by default the
registry's reported ones, :func:`prhsim.metrics.reported_metrics`: mutual k-NN with k =
min(10, N/4), linear CKA, R@1) is scored, a fitted metric (R@1) fitting on a random half of
the rows and scoring the other half; each metric's chance level where its record has one.
With ``permutations`` K, every metric that fits nothing is also calibrated against K row
permutations of B (:func:`prhsim.metrics.calibrate`: the calibrated score and the p-value).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from prhsim.metrics import Calibration, calibrate, metric_record, reported_metrics

#: Features of a modality at modal states ``z·|N| + n``: ``rows(states) -> (s, k)``.
Rows = Callable[[np.ndarray], np.ndarray]

#: States drawn per pair (capped at |Z|). Below the 2048 rows from which the registry's k-NN metrics screen in bf16
#: (``metrics._knn_screen.MIN_ROWS``; the screen would import torch), so the run's search is exact and unscreened.
SAMPLES = 2000
#: The k of mutual k-NN (lowered to N/4 on small worlds).
KNN_K = 10
#: The level of the calibrated scores' critical value.
CALIBRATION_ALPHA = 0.05


@dataclass(frozen=True)
class PairMetrics:
    """The sample metrics of one pair of modalities (see the module docstring).

    Attributes:
        samples: N, the rows drawn.
        knn_k: the neighbours of the k-NN metrics.
        scores: metric name -> its score.
        chance: metric name -> its chance level on N rows (the metrics whose record has one).
        permutations: K of the calibration, or None.
        calibrations: metric name -> its :class:`prhsim.metrics.Calibration` (each calibrated metric).
    """

    samples: int
    knn_k: int
    scores: dict[str, float]
    chance: dict[str, float]
    permutations: int | None = None
    calibrations: dict[str, Calibration] = field(default_factory=dict)


def _at(rows: Rows | np.ndarray, states: np.ndarray) -> np.ndarray:
    return rows[states] if isinstance(rows, np.ndarray) else rows(states)


def pair_metrics(rows_a: Rows | np.ndarray, q_a: np.ndarray, rows_b: Rows | np.ndarray, q_b: np.ndarray,
                 p_z: np.ndarray, *, rng: np.random.Generator, samples: int = SAMPLES, permutations: int = 0,
                 metrics: Sequence[str] | None = None) -> PairMetrics | None:
    """Sample metrics of two modalities sharing Z (None when Z has fewer than 8 states, or when a drawn row of
    either representation is zero: the k-NN metrics compare directions, which a zero row has not).

    ``rows_a``, ``rows_b``: each modality's features at modal states (a function of the
    states, or a full table over ``Z x N``); ``metrics``: registered names (default: the reported ones).
    The rows, the fitting half and the permutations' seed are drawn from ``rng`` in that order whatever the
    metrics, so a metric's score does not depend on which others are scored.
    """
    records = [metric_record(name) for name in (reported_metrics() if metrics is None else metrics)]
    n_z = p_z.size
    n = min(samples, n_z)
    if n < 8:
        return None
    z = np.sort(rng.choice(n_z, size=n, replace=False, p=p_z))
    na = rng.choice(q_a.size, size=n, p=q_a)
    nb = rng.choice(q_b.size, size=n, p=q_b)
    A, B = _at(rows_a, z * q_a.size + na), _at(rows_b, z * q_b.size + nb)
    if not (np.all(np.any(A != 0, axis=1)) and np.all(np.any(B != 0, axis=1))):
        return None
    k = min(KNN_K, n // 4)
    fit = np.zeros(n, dtype=bool)
    fit[rng.permutation(n)[: n // 2]] = True
    calibrations = {}
    if permutations:  # drawn after every draw above, so the raw metrics do not depend on K
        seed = int(rng.integers(2**31))
        calibrations = {m.name: calibrate(m.name, A, B, permutations=permutations, alpha=CALIBRATION_ALPHA, knn_k=k,
                                          rng=seed)
                        for m in records if not m.fitted}
    return PairMetrics(samples=n, knn_k=k, scores={m.name: float(m(A, B, knn_k=k, fit=fit)) for m in records},
                       chance={m.name: m.chance_level(n, k, fit=fit) for m in records if m.chance is not None},
                       permutations=permutations or None, calibrations=calibrations)
