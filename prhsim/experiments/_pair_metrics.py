"""The PRH sample metrics between two modalities of a run (docs/theory.md §10): what a PRH paper would report.

For a pair of modalities with whitened features F_a on Z x N_a and F_b on Z x N_b, N
states z are drawn from p_Z without replacement (N = min(samples, |Z|)), and for each a
nuisance n_a ~ q_a and n_b ~ q_b independently: row i of A is F_a(z_i, n_a,i) and of B
is F_b(z_i, n_b,i), one observation of the same state in each modality, as paired
image/caption features are. On these rows: mutual k-NN (k = min(10, N/4)) with its chance
level k/(N − 1), linear CKA, and R@1 (mean of both directions) with an orthogonal map
fitted on a random half of the rows and scored on the other half. With ``permutations`` K,
mutual k-NN and linear CKA are also calibrated against K row permutations of B
(:func:`prhsim.metrics.calibrate`: the calibrated score and the p-value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

#: Features of a modality at modal states ``z·|N| + n``: ``rows(states) -> (s, k)``.
Rows = Callable[[np.ndarray], np.ndarray]

#: States drawn per pair (capped at |Z|). The k-NN search is exact and unscreened here
#: (``screen=False``): a bf16 screen pays only from 2048 rows and would import torch.
SAMPLES = 2000
#: The k of mutual k-NN (lowered to N/4 on small worlds).
KNN_K = 10


@dataclass(frozen=True)
class PairMetrics:
    """The sample metrics of one pair of modalities (see the module docstring)."""

    samples: int
    knn_k: int
    mutual_knn: float
    knn_chance: float
    linear_cka: float
    r1: float
    permutations: int | None = None
    mutual_knn_calibrated: float | None = None
    mutual_knn_p: float | None = None
    linear_cka_calibrated: float | None = None
    linear_cka_p: float | None = None


def _at(rows: Rows | np.ndarray, states: np.ndarray) -> np.ndarray:
    return rows[states] if isinstance(rows, np.ndarray) else rows(states)


def pair_metrics(rows_a: Rows | np.ndarray, q_a: np.ndarray, rows_b: Rows | np.ndarray, q_b: np.ndarray,
                 p_z: np.ndarray, *, rng: np.random.Generator, samples: int = SAMPLES,
                 permutations: int = 0) -> PairMetrics | None:
    """Sample metrics of two modalities sharing Z (None when Z has fewer than 8 states, or when a drawn row of
    either representation is zero: the k-NN metrics compare directions, which a zero row has not).

    ``rows_a``, ``rows_b``: each modality's features at modal states (a function of the
    states, or a full table over ``Z x N``).
    """
    from prhsim.metrics import calibrate, knn_chance, linear_cka, mutual_knn, retrieval

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
    r = retrieval(A, B, fit=fit, ks=(1,))
    calibrated = {}
    if permutations:  # drawn after every draw above, so the raw metrics do not depend on K
        seed = int(rng.integers(2**31))
        knn = calibrate("mutual_knn", A, B, permutations=permutations, knn_k=k, rng=seed)
        cka = calibrate("linear_cka", A, B, permutations=permutations, rng=seed)
        calibrated = dict(permutations=permutations, mutual_knn_calibrated=knn.calibrated, mutual_knn_p=knn.p_value,
                          linear_cka_calibrated=cka.calibrated, linear_cka_p=cka.p_value)
    return PairMetrics(samples=n, knn_k=k, mutual_knn=float(mutual_knn(A, B, knn_k=k, screen=False)),
                       knn_chance=float(knn_chance(n, k)), linear_cka=float(linear_cka(A, B)),
                       r1=float((r.a_to_b[1] + r.b_to_a[1]) / 2), **calibrated)
