"""Checks of joint tables (contexts x tokens) and of the integers that size them: one line naming what is wrong."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: A joint table must sum to 1 within this.
SUM_TOL = 1e-9


def check_joint(P: Any, *, positive: bool = False, what: str = "P") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (C, V) joint table: finite, ≥ 0 (> 0 when ``positive``), summing to 1, every row and column with mass."""
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or min(P.shape) < 2:
        raise ValueError(f"{what} must be a (contexts x tokens) table with at least 2 of each, got shape {P.shape}")
    if not np.all(np.isfinite(P)):
        raise ValueError(f"{what} contains NaN or inf")
    if positive and not np.all(P > 0):
        c, y = np.argwhere(~(P > 0))[0]
        raise ValueError(f"{what} must be positive everywhere here (log P is taken), got P[{c}, {y}] = {P[c, y]}")
    if np.any(P < 0):
        c, y = np.argwhere(P < 0)[0]
        raise ValueError(f"{what} must be nonnegative, got P[{c}, {y}] = {P[c, y]}")
    total = math.fsum(P.ravel())
    if abs(total - 1.0) > SUM_TOL:
        raise ValueError(f"{what} must sum to 1 (within {SUM_TOL:g}), got {total!r}")
    p_c, p_y = P.sum(axis=1), P.sum(axis=0)
    if np.any(p_c <= 0):
        raise ValueError(f"every context needs positive mass, but row {int(np.argmax(p_c <= 0))} of {what} is empty")
    if np.any(p_y <= 0):
        raise ValueError(f"every token needs positive mass, but column {int(np.argmax(p_y <= 0))} of {what} is empty")
    return P, p_c, p_y


def check_rank(k: Any, top: int, shape: tuple[int, ...]) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= top:
        raise ValueError(f"k must be an integer in 1..{top} (min(C, V) − 1 for a table of shape {shape}), got {k!r}")
    return int(k)


def check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)
