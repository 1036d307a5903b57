"""How many more samples a learner needs to reach the alignment another reaches (docs/theory.md §5.1).

Given a learner's alignment at increasing budgets ``b_1 < … < b_m`` (one curve), the budget it
needs to reach a target alignment a is read off the curve by linear interpolation in
``log b`` between the last budget below a and the first at or above it. Outside the budgets
the answer is a bound: a curve already at a on ``b_1`` needs at most ``b_1``; a curve that
never reaches a needs more than ``b_m``.

:func:`samples_needed` answers one curve; :func:`sample_ratio` divides by the budget at which
the reference learner reached a. The curve is used as measured (not made monotone): the first
crossing counts.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple, Sequence

import numpy as np


class Needed(NamedTuple):
    """The budget a curve needs to reach a target: ``value`` exactly, or a bound.

    Attributes:
        value: the interpolated budget (``kind == "exact"``), or the bound.
        kind: "exact", "at_most" (reached at the first budget) or "more_than" (never reached).
    """

    value: float
    kind: Literal["exact", "at_most", "more_than"]


def samples_needed(budgets: Sequence[float], curve: Sequence[float], target: float) -> Needed:
    """The budget at which ``curve`` first reaches ``target`` (module docstring)."""
    b = np.asarray(budgets, dtype=np.float64)
    y = np.asarray(curve, dtype=np.float64)
    if b.ndim != 1 or b.size < 1 or b.shape != y.shape:
        raise ValueError(f"budgets and curve must be vectors of one length, got {b.shape} and {y.shape}")
    if np.any(b <= 0) or np.any(np.diff(b) <= 0):
        raise ValueError(f"budgets must be positive and increasing, got {b.tolist()}")
    if not np.all(np.isfinite(y)) or not math.isfinite(target):
        raise ValueError("the curve and the target must be finite")
    hits = np.flatnonzero(y >= target)
    if hits.size == 0:
        return Needed(float(b[-1]), "more_than")
    i = int(hits[0])
    if i == 0:
        return Needed(float(b[0]), "at_most")
    lo, hi = math.log(b[i - 1]), math.log(b[i])
    t = (target - y[i - 1]) / (y[i] - y[i - 1])  # y[i-1] < target <= y[i], so 0 < t <= 1
    return Needed(float(math.exp(lo + t * (hi - lo))), "exact")


def sample_ratio(budgets: Sequence[float], curve: Sequence[float], target: float, reference_budget: float) -> Needed:
    """``samples_needed(...) / reference_budget``, with the same kind."""
    needed = samples_needed(budgets, curve, target)
    if not reference_budget > 0:
        raise ValueError(f"the reference budget must be positive, got {reference_budget}")
    return Needed(needed.value / float(reference_budget), needed.kind)
