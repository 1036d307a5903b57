"""Comparing modalities with different state spaces through the pairs that share z (docs/theory.md §2, §4).

Modality m lives on ``Z x N_m`` (index ``z·|N_m| + n``) with law
``p_Z(z) q_m(n)``. The coupling γ draws z, then ``n1 ~ q1`` and ``n2 ~ q2``
independently, so with conditional means ``m_i(z) = E[f_i | z]`` and
conditional covariances ``Σ_i(z)``:

* ``M = E_γ[f2ᵀ f1] = Σ_z p_Z(z) m2(z)ᵀ m1(z)`` and ``Q̂ = U Vᵀ`` for ``M = U S Vᵀ``;
* ``res² = min_Q E_γ‖f1 − f2 Q‖² = Σ_z p_Z(z) (‖m1(z) − m2(z)Q̂‖² + tr Σ1(z) + tr Σ2(z))``,
  equal to ``2k − 2Σσ(M)`` for whitened tables but without its cancellation;
* ``‖sinΘ‖²_F = E_γ‖f2 − f1 Mᵀ‖²`` (projection of f2 on span f1, whitened f1).

With ``|N_1| = |N_2| = 1`` this is :func:`prhsim.metrics.procrustes` and
:func:`prhsim.metrics.principal_angles` on one state space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prhsim._budget import FLOAT, ensure_fits
from prhsim.metrics._procrustes import orthogonal_map
from prhsim.metrics._weighted import check_finite


@dataclass(frozen=True)
class Comparison:
    """Two whitened representations compared (all p-weighted).

    Attributes:
        rho_p: ``min_Q ‖f1 − f2 Q‖ / √k`` ∈ [0, √2].
        s_theta: ``‖sinΘ‖_F / √k`` ∈ [0, 1].
        correlations: σ of the cross-covariance (canonical correlations), descending.
        Q: the fitted orthogonal map, ``f1 ≈ f2 Q``.
    """

    rho_p: float
    s_theta: float
    correlations: np.ndarray
    Q: np.ndarray

    @property
    def mean_correlation(self) -> float:
        return float(np.mean(self.correlations))

    @property
    def det_q(self) -> float:
        return float(np.linalg.det(self.Q))


def conditional_moments(F: np.ndarray, q: np.ndarray, n_z: int) -> tuple[np.ndarray, np.ndarray]:
    """``m(z) = E_q[f(z, ·)]`` (n_z x k) and the centred values ``f(z, n) − m(z)`` (n_z x |N| x k)."""
    F = np.asarray(F, dtype=np.float64)
    q = check_finite("nuisance weights", q)
    if F.ndim != 2 or F.shape[0] != n_z * q.size:
        raise ValueError(f"modal features must have {n_z} x {q.size} = {n_z * q.size} rows, got shape {F.shape}")
    ensure_fits(2 * FLOAT * float(F.size), f"the conditional moments of {F.shape[0]:,} x {F.shape[1]} features",
                "lower k or the number of states")
    check_finite("features", F)
    T = F.reshape(n_z, q.size, F.shape[1])
    mean = np.einsum("znk,n->zk", T, q)
    return mean, T - mean[:, None, :]


def _weighted_sq(T: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``Σ_n q(n) ‖T[z, n]‖²`` per z."""
    return np.einsum("znk,n->z", T * T, q)


def coupled_comparison(F1: np.ndarray, q1: np.ndarray, F2: np.ndarray, q2: np.ndarray, p_z: np.ndarray) -> Comparison:
    """Compare whitened modal features ``F1`` on ``Z x N_1`` and ``F2`` on ``Z x N_2`` via pairs sharing z.

    Raises:
        ValueError: on mismatched shapes, or features or weights containing NaN or inf.
    """
    p_z = check_finite("weights", p_z)
    n_z = p_z.size
    ensure_fits(4 * FLOAT * (float(np.size(F1)) + float(np.size(F2))),
                f"comparing modal features of {np.size(F1):,} and {np.size(F2):,} values",
                "lower k or the number of states")
    m1, d1 = conditional_moments(F1, q1, n_z)
    m2, d2 = conditional_moments(F2, q2, n_z)
    if m1.shape[1] != m2.shape[1]:
        raise ValueError(f"both modalities need the same number of features, got {m1.shape[1]} and {m2.shape[1]}")
    k = m1.shape[1]
    M = m2.T @ (p_z[:, None] * m1)
    Q = orthogonal_map(M)
    var1, var2 = _weighted_sq(d1, np.asarray(q1)), _weighted_sq(d2, np.asarray(q2))
    res_sq = p_z @ (np.sum((m1 - m2 @ Q) ** 2, axis=1) + var1 + var2)
    proj = M.T  # f2 ≈ f1 Mᵀ
    sin_sq = p_z @ (np.sum((m2 - m1 @ proj) ** 2, axis=1) + var2 + _weighted_sq(d1 @ proj, np.asarray(q1)))
    return Comparison(
        rho_p=float(np.sqrt(max(res_sq, 0.0) / k)),
        s_theta=float(np.sqrt(max(sin_sq, 0.0) / k)),
        correlations=np.clip(np.linalg.svd(M, compute_uv=False), 0.0, 1.0),
        Q=Q,
    )


def nuisance_free_dimension(F: np.ndarray, q: np.ndarray, p_z: np.ndarray, *, threshold: float = 0.5) -> int:
    """Number of whitened directions that are functions of z alone: eigenvalues of ``E_p[m mᵀ]`` above ``threshold``.

    For closed-form optima these eigenvalues are 1 (nuisance-free) or 0 (``E[h|z] = 0``), docs/theory.md §4.
    """
    p_z = check_finite("weights", p_z)
    mean, _ = conditional_moments(F, q, p_z.size)
    gram = mean.T @ (p_z[:, None] * mean)
    return int(np.sum(np.linalg.eigvalsh((gram + gram.T) / 2) > threshold))
