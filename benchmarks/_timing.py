"""Timing helpers shared by the benchmark scripts (best of several runs; the machine is shared and noisy)."""

from __future__ import annotations

import time
from typing import Callable


def best_of(fn: Callable[[], object], repeats: int = 3) -> float:
    """Best wall time in seconds of ``repeats`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def row(label: str, seconds: float) -> str:
    """One printed line: what was timed and its best time."""
    return f"{label:<66s} {seconds:9.3f} s"
