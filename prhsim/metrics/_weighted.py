"""p-weighted helpers shared by the comparison metrics (docs/theory.md §2: every inner product is D-weighted)."""

from __future__ import annotations

import numpy as np


def check_finite(name: str, array: np.ndarray) -> np.ndarray:
    """A float array with no NaN or inf, or a ValueError naming it (``"features contain NaN or inf"``)."""
    array = np.asarray(array, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contain NaN or inf")
    return array


def check_pair(F1: np.ndarray, F2: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate two feature tables on the same states with weights p; return float arrays."""
    F1, F2, p = (np.asarray(a, dtype=np.float64) for a in (F1, F2, p))
    if F1.ndim != 2 or F2.ndim != 2:
        raise ValueError(f"features must be 2-D (states x features), got shapes {F1.shape} and {F2.shape}")
    if F1.shape != F2.shape:
        raise ValueError(f"feature tables must have the same shape, got {F1.shape} and {F2.shape}")
    if p.shape != (F1.shape[0],):
        raise ValueError(f"weights must have shape ({F1.shape[0]},), got {p.shape}")
    check_finite("features", F1)
    check_finite("features", F2)
    check_finite("weights", p)
    return F1, F2, p


def weighted_cross(A: np.ndarray, B: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``AᵀDB = Σ_z p(z) a(z) b(z)ᵀ``."""
    return A.T @ (p[:, None] * B)


def weighted_norm(A: np.ndarray, p: np.ndarray) -> float:
    """``‖A‖_D = sqrt(tr(AᵀDA))``."""
    return float(np.sqrt(np.sum(p[:, None] * A * A)))
