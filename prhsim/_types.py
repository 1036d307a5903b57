"""Array aliases used in signatures, and the progress callback of long computations.

The array names are plain aliases (no runtime checking); the string after each name
gives the shape convention used in docstrings: ``n`` states, ``k`` features,
``m`` eigenpairs.
"""

from __future__ import annotations

import inspect
from typing import Callable, Protocol, Union

import numpy as np
import scipy.sparse as sp

Vector = np.ndarray  # "n"
Matrix = np.ndarray  # "n k" or "n n"
Features = np.ndarray  # "n k": row z is f(z)
PairMatrix = Union[np.ndarray, sp.spmatrix, sp.sparray]  # "n n", dense or sparse
States = np.ndarray  # "s": integer state indices


class Progress(Protocol):
    """A long computation's progress: one message a call; ``done`` of ``total`` work units of the current count
    where the caller knows them (a new ``total``, or ``done`` going back, starts a new count)."""

    def __call__(self, message: str, done: int | None = None, total: int | None = None) -> None: ...


def _counts(say: Callable[..., None]) -> bool:
    """Whether ``say`` takes the ``done`` and ``total`` keywords."""
    try:
        params = inspect.signature(say).parameters
    except (TypeError, ValueError):  # a callable without a signature: one message a call
        return False
    return any(p.kind is p.VAR_KEYWORD for p in params.values()) or {"done", "total"} <= set(params)


def as_progress(say: Callable[..., None] | None) -> Progress:
    """``say`` as a :class:`Progress`: None says nothing; a callable of the message alone gets the message alone."""
    if say is None:
        return lambda message, done=None, total=None: None
    if _counts(say):
        return say
    return lambda message, done=None, total=None: say(message)
