"""p-weighted orthogonal Procrustes and principal angles on one state space (docs/theory.md §2).

Procrustes: with ``M = F2ᵀ D F1 = U S Vᵀ``, ``Q̂ = U Vᵀ`` minimises
``‖F1 − F2 Q‖_D`` over O(k) (note the direction: the SVD of ``F1ᵀDF2`` would
need ``V Uᵀ``). The residual is evaluated directly, not as
``‖F1‖² + ‖F2‖² − 2Σσ``, which cancels catastrophically near zero.

Principal angles: ``Gi = qr(D^{1/2} Fi)``; ``cos θ = σ(G1ᵀG2)`` and
``‖sinΘ‖_F = ‖(I − G1G1ᵀ)G2‖_F`` (projector form; ``sqrt(1 − cos²)`` is
inaccurate for small angles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prhsim.metrics._weighted import check_finite, check_pair, weighted_cross, weighted_norm


@dataclass(frozen=True)
class Procrustes:
    """Result of :func:`procrustes`: ``F1 ≈ F2 @ Q``.

    Attributes:
        Q: the orthogonal map (k x k); ``det_q`` is ±1 (reflections are allowed).
        residual: ``min_Q ‖F1 − F2 Q‖_D``.
        rho: ``residual / √k`` (∈ [0, √2] for whitened tables).
        singular_values: σ of ``F2ᵀDF1`` (canonical correlations when both are whitened).
    """

    Q: np.ndarray
    residual: float
    rho: float
    singular_values: np.ndarray

    @property
    def det_q(self) -> float:
        return float(np.linalg.det(self.Q))


def orthogonal_map(M: np.ndarray) -> np.ndarray:
    """``U Vᵀ`` for ``M = U S Vᵀ``: the orthogonal Q maximising ``tr(Qᵀ M)``."""
    U, _, Vt = np.linalg.svd(check_finite("cross-covariances", M))
    return U @ Vt


def procrustes(F1: np.ndarray, F2: np.ndarray, p: np.ndarray) -> Procrustes:
    """Weighted orthogonal Procrustes: ``Q̂ = argmin_{Q ∈ O(k)} ‖F1 − F2 Q‖_D``.

    Example:
        >>> import numpy as np
        >>> F = np.eye(3)[:, :2] * np.sqrt(3); p = np.full(3, 1 / 3)
        >>> R = np.array([[0.0, 1.0], [1.0, 0.0]])
        >>> round(procrustes(F, F @ R, p).residual, 12)
        0.0
    """
    F1, F2, p = check_pair(F1, F2, p)
    M = weighted_cross(F2, F1, p)
    Q = orthogonal_map(M)
    residual = weighted_norm(F1 - F2 @ Q, p)
    k = F1.shape[1]
    return Procrustes(Q, residual, residual / np.sqrt(k), np.linalg.svd(M, compute_uv=False))


@dataclass(frozen=True)
class PrincipalAngles:
    """Principal angles between ``span F1`` and ``span F2`` in L²(p).

    Attributes:
        cosines: ``cos θ_j``, descending.
        sin_theta: ``‖sinΘ‖_F`` by the projector form.
        s_theta: ``‖sinΘ‖_F / √k`` ∈ [0, 1].
    """

    cosines: np.ndarray
    sin_theta: float
    s_theta: float


def principal_angles(F1: np.ndarray, F2: np.ndarray, p: np.ndarray) -> PrincipalAngles:
    """p-weighted principal angles, sines by the projector form ``‖G2 − G1(G1ᵀG2)‖_F``."""
    F1, F2, p = check_pair(F1, F2, p)
    s = np.sqrt(p)[:, None]
    G1, _ = np.linalg.qr(s * F1)
    G2, _ = np.linalg.qr(s * F2)
    cross = G1.T @ G2
    sin_theta = float(np.linalg.norm(G2 - G1 @ cross))
    k = F1.shape[1]
    return PrincipalAngles(np.clip(np.linalg.svd(cross, compute_uv=False), 0.0, 1.0), sin_theta, sin_theta / np.sqrt(k))
