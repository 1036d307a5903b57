"""Argument checks shared by the world builders: one line naming the argument and its value."""

from __future__ import annotations


def check_prob(name: str, value: float) -> float:
    """A probability in [0, 1]."""
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def check_size(name: str, n: int, minimum: int = 2) -> int:
    """An integer of at least ``minimum``."""
    if int(n) != n or n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n}")
    return int(n)
