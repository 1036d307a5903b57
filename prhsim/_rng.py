"""Normalise the ``rng`` argument of every stochastic function."""

from __future__ import annotations

import numpy as np

RngLike = int | np.random.Generator | None


def check_rng(rng: RngLike) -> np.random.Generator:
    """Return a numpy Generator from an int seed, a Generator, or None (seed 0).

    None means seed 0, not entropy: prhsim is deterministic unless asked otherwise.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng(0)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise ValueError(f"rng must be an int seed or a numpy Generator, got {type(rng).__name__}")
