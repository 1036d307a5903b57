"""The arguments every sample metric and the permutation null share, checked in one place and refused in one
wording: the argument's name, the allowed range as docs/prh.md states it, and the value given.

* ``knn_k`` (neighbours): an integer with ``1 <= knn_k < N``, N the number of rows;
* ``alpha`` (a level): a number in (0, 1);
* ``permutations`` (K, the null's re-pairings): an integer of at least 1 (0 where it means "off");
* rows: at least 2 (a score of one row compares nothing);
* a representation: not constant (every row equal has zero variance; its kernels and neighbour lists are ties
  only, so every metric of it is undefined).
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any


def check_knn_k(knn_k: Any, n: int) -> int:
    """``knn_k`` as an int with ``1 <= knn_k < N`` (N = ``n`` rows); else a one-line ValueError (every refused
    argument here is one, whatever was wrong with it)."""
    if isinstance(knn_k, bool) or not isinstance(knn_k, Integral):
        raise ValueError(f"knn_k must be an integer with 1 <= knn_k < N = {n}, got {knn_k!r}")
    if not 1 <= int(knn_k) < n:
        raise ValueError(f"knn_k must be an integer with 1 <= knn_k < N = {n}, got {int(knn_k)}")
    return int(knn_k)


def check_alpha(alpha: Any) -> float:
    """``alpha`` as a float in (0, 1); else a one-line ValueError."""
    if isinstance(alpha, bool) or not isinstance(alpha, Real) or not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    return float(alpha)


def check_permutations(count: Any, minimum: int = 1) -> int:
    """``count`` as an int of at least ``minimum`` (1; 0 where no permutation means "not calibrated"); else a
    one-line ValueError."""
    if isinstance(count, bool) or not isinstance(count, Integral) or int(count) < minimum:
        raise ValueError(f"permutations must be an integer of at least {minimum}, got {count!r}")
    return int(count)


def check_rows(n: int, what: str, minimum: int = 2) -> None:
    """At least ``minimum`` rows for ``what`` (a metric's or function's name); else a one-line ValueError."""
    if n < minimum:
        raise ValueError(f"{what} needs at least {minimum} rows, got N = {n}")


def constant_rows(xp: Any, x: Any) -> bool:
    """Whether every row of x equals the first (a representation with zero variance)."""
    return bool(xp.all(x == x[0:1, :]))


def require_variance(xp: Any, name: str, x: Any, what: str = "CKA") -> None:
    """Raise ``ValueError("a has zero variance: CKA is undefined")`` for a constant representation (``what``: the
    metric's name in the message)."""
    if constant_rows(xp, x):
        raise ValueError(f"{name} has zero variance: {what} is undefined")
