"""Centring, whitening and canonical correlations under p (docs/theory.md §2, learned embeddings).

``F ← (F − 1μᵀ) C^{-1/2}`` with μ and C the p-mean and p-covariance; the
Procrustes singular values of two whitened tables are their canonical correlations.
"""

from __future__ import annotations

import numpy as np

from prhsim.metrics._weighted import check_finite, check_pair, weighted_cross

#: Relative eigenvalue floor below which a covariance counts as singular.
RANK_RTOL = 1e-10


def whiten(F: np.ndarray, p: np.ndarray, *, centre: bool = True) -> np.ndarray:
    """Return ``(F − 1μᵀ) C^{-1/2}`` (or ``F C^{-1/2}`` uncentred), with ``C = (F−μ)ᵀD(F−μ)``.

    Raises:
        ValueError: if C is singular (a collapsed or redundant feature), or F or p contain NaN or inf.
    """
    F = np.asarray(F, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    if F.ndim != 2 or p.shape != (F.shape[0],):
        raise ValueError(f"whiten needs features (n x k) and weights (n,), got {F.shape} and {p.shape}")
    check_finite("features", F)
    check_finite("weights", p)
    if centre:
        F = F - p @ F
    C = weighted_cross(F, F, p)
    vals, vecs = np.linalg.eigh((C + C.T) / 2)
    if vals[0] <= RANK_RTOL * max(vals[-1], 0.0) or vals[-1] <= 0:
        raise ValueError(f"cannot whiten: the p-covariance is singular (eigenvalues {vals[0]:.3g} .. {vals[-1]:.3g})")
    return F @ (vecs / np.sqrt(vals)) @ vecs.T


def canonical_correlations(F1: np.ndarray, F2: np.ndarray, p: np.ndarray, *, centre: bool = True) -> np.ndarray:
    """Canonical correlations of two tables on the same states: σ(W1ᵀ D W2) after whitening, descending."""
    F1, F2, p = check_pair(F1, F2, p)
    W1, W2 = whiten(F1, p, centre=centre), whiten(F2, p, centre=centre)
    return np.clip(np.linalg.svd(weighted_cross(W1, W2, p), compute_uv=False), 0.0, 1.0)
