"""How many more samples a learner needs than good views to reach the same alignment (docs/theory.md §5.4).

Given alignment curves at increasing budgets ``b_1 < … < b_m``, the budget a curve needs to
reach an alignment a is read off it by linear interpolation in ``log b`` between the last budget
below a and the first at or above it (:func:`samples_needed`); outside the budgets the answer is
a bound: a curve already at a on ``b_1`` needs at most ``b_1``, one that never reaches a needs
more than ``b_m``. The curve is used as measured (not made monotone): the first crossing counts.

The sample ratio of a task X (bad views, next-token prediction) against good views, as the paper
defines it ("good views reach the alignment next-token prediction reaches with 42x fewer
samples"): the target is what X reaches at the largest budget, ``a = fraction · X(b_m)``, and

    ratio = N_X(a) / N_good(a)

(:func:`sample_ratio`); its token ratio scales it by the tokens a sample of each holds. A task
whose target is not above ``floor`` (its untrained encoder, or the chance level) aligns with
nothing and has no ratio ("none"). :func:`bootstrap_ratio` gives the ratio of the mean curves
over seeds with a percentile interval from resampling the seeds of each task.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple, Sequence

import numpy as np

from prhsim._rng import RngLike, check_rng

#: Resamples of the seeds behind a ratio's interval.
RESAMPLES = 1000
RatioKind = Literal["exact", "at_least", "at_most", "undetermined", "none"]
#: How a ratio of each kind is written before its value: exact as is, a bound with ≥ or ≤, undetermined with ~.
RATIO_SIGNS: dict[str, str] = {"exact": "", "at_least": "≥", "at_most": "≤", "undetermined": "~"}


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


class SampleRatio(NamedTuple):
    """Samples a task needs against good views at the alignment it reaches (module docstring).

    Attributes:
        target: a, the alignment compared at.
        task_samples, good_samples: ``N_X(a)`` and ``N_good(a)`` (or the bounds).
        ratio: ``N_X(a) / N_good(a)``; a bound unless ``kind`` is "exact"; inf when "none".
        kind: "exact"; "at_least" (good views are at a from the first budget); "at_most" (good views never
            reach a, or X is at a from its first budget); "undetermined" (both are at a from the first
            budget); "none" (X does not align above the floor: no ratio).
    """

    target: float
    task_samples: float
    good_samples: float
    ratio: float
    kind: RatioKind


def sample_ratio(budgets: Sequence[float], good: Sequence[float], task: Sequence[float], *, fraction: float = 1.0,
                 floor: float = -math.inf) -> SampleRatio:
    """The sample ratio of the curve ``task`` against the curve ``good`` at ``fraction`` of what ``task`` reaches."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    task = np.asarray(task, dtype=np.float64)
    target = float(fraction * task[-1]) if task.size else math.nan
    if not target > floor:
        return SampleRatio(target, math.nan, math.nan, math.inf, "none")
    mine = samples_needed(budgets, task, target)
    theirs = samples_needed(budgets, good, target)
    ratio = mine.value / theirs.value
    if mine.kind == "exact" and theirs.kind == "exact":
        kind: RatioKind = "exact"
    elif theirs.kind == "more_than" or (mine.kind == "at_most" and theirs.kind == "exact"):
        kind = "at_most"
    elif theirs.kind == "at_most" and mine.kind == "exact":
        kind = "at_least"
    else:
        kind = "undetermined"
    return SampleRatio(target, mine.value, theirs.value, float(ratio), kind)


class RatioInterval(NamedTuple):
    """A sample ratio of the mean curves, with a percentile interval over resampled seeds.

    Attributes:
        estimate: the ratio of the mean curves.
        low, high: the 2.5 and 97.5 percentiles of the ratio over the resamples, as order statistics (bounds
            counted at their value, "none" as inf).
        exact_share: the share of resamples whose ratio is exact (not a bound).
    """

    estimate: SampleRatio
    low: float
    high: float
    exact_share: float


def bootstrap_ratio(budgets: Sequence[float], good: np.ndarray, task: np.ndarray, *, fraction: float = 1.0,
                    floor: float = -math.inf, resamples: int = RESAMPLES, rng: RngLike = None) -> RatioInterval:
    """:func:`sample_ratio` of the mean curves over seeds, and its interval from resampling each task's seeds.

    Args:
        budgets: the budgets (m,).
        good, task: the alignment of each seed at each budget, (S_good, m) and (S_task, m).
        fraction, floor: as :func:`sample_ratio`.
        resamples: bootstrap resamples; rng: seeds them.
    """
    good, task = np.atleast_2d(np.asarray(good, float)), np.atleast_2d(np.asarray(task, float))
    m = len(budgets)
    if good.shape[1] != m or task.shape[1] != m:
        raise ValueError(f"one value per budget ({m}) in every row, got {good.shape} and {task.shape}")
    if isinstance(resamples, bool) or int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    estimate = sample_ratio(budgets, good.mean(axis=0), task.mean(axis=0), fraction=fraction, floor=floor)
    gen = check_rng(rng)
    ratios, exact = np.empty(int(resamples)), 0
    for r in range(int(resamples)):
        g = good[gen.integers(good.shape[0], size=good.shape[0])].mean(axis=0)
        t = task[gen.integers(task.shape[0], size=task.shape[0])].mean(axis=0)
        one = sample_ratio(budgets, g, t, fraction=fraction, floor=floor)
        ratios[r] = one.ratio
        exact += one.kind == "exact"
    ordered = np.sort(ratios)  # order statistics: no interpolation, so an infinite ratio stays infinite
    n = ordered.size
    low, high = ordered[int(np.floor(0.025 * (n - 1)))], ordered[int(np.ceil(0.975 * (n - 1)))]
    return RatioInterval(estimate, float(low), float(high), exact / int(resamples))
