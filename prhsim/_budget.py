"""The memory guard: refuse an allocation that cannot fit, before making it.

Every builder or solver that allocates in proportion to a world's size first
calls :func:`ensure_fits` with the bytes it is about to need. Above the limit it
raises :class:`ResourceError` (a ValueError) naming what was asked, the
estimate, the limit and the argument to lower, instead of a MemoryError
traceback (or the kernel's OOM killer) after minutes of work.

The limit is half of the machine's physical memory unless set with
:func:`memory_limit` (a context manager, so a caller's setting does not leak
into other code)::

    >>> from prhsim import memory_limit
    >>> with memory_limit(2**30):
    ...     current_memory_limit()
    1073741824

Beside the memory guard, the rough time classes every command's cost plan labels its estimate with
(:func:`time_class`), and the classes it announces before any work (:data:`LONG_CLASSES`).
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

#: Fraction of physical memory allowed when no limit is set.
DEFAULT_FRACTION = 0.5
#: Bytes of one float64.
FLOAT = 8

_LIMIT: ContextVar[int | None] = ContextVar("prhsim_memory_limit", default=None)
#: Time classes by estimated seconds.
TIME_CLASSES = ((1.0, "under a second"), (60.0, "seconds"), (3600.0, "minutes"), (math.inf, "hours"))
#: The classes a command announces in a note before any work ("this run may take minutes: …").
LONG_CLASSES = ("minutes", "hours")


def time_class(seconds: float) -> str:
    """The label of :data:`TIME_CLASSES` for an estimate of ``seconds``."""
    return next(label for bound, label in TIME_CLASSES if seconds < bound)


def time_notes(subject: str, seconds: float, why: str) -> list[str]:
    """``this <subject> may take <class>: <why> (about S s estimated; a rough class)`` where the class of ``seconds``
    is one of :data:`LONG_CLASSES`, the note a command prints before a long piece of work; else none."""
    label = time_class(seconds)
    if label not in LONG_CLASSES:
        return []
    return [f"this {subject} may take {label}: {why} (about {seconds:,.0f} s estimated; a rough class)"]


#: The longest wall time a command runs without being told to insist (``--insist``): a week. An estimate beyond it
#: is almost always a setting typed an order of magnitude too large.
HORIZON_SECONDS = 7 * 86400.0


def beyond_horizon(subject: str, seconds: float, why: str) -> str | None:
    """``this <subject> would take about D days (<why>), beyond the 7-day horizon: …`` where ``seconds`` is beyond
    :data:`HORIZON_SECONDS`; else None."""
    if seconds <= HORIZON_SECONDS:
        return None
    return (f"this {subject} would take about {seconds / 86400:,.0f} days ({why}), beyond the "
            f"{HORIZON_SECONDS / 86400:.0f}-day horizon: lower its settings, or pass --insist")


class ResourceError(ValueError):
    """A computation would need more memory than the limit; the message names the setting to lower."""


def physical_memory() -> int:
    """Bytes of physical memory on this machine."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - platforms without sysconf
        return 8 * 2**30


def current_memory_limit() -> int:
    """The limit in force, in bytes."""
    value = _LIMIT.get()
    return int(DEFAULT_FRACTION * physical_memory()) if value is None else value


@contextmanager
def memory_limit(nbytes: int | float) -> Iterator[None]:
    """Run a block under a memory limit of ``nbytes`` bytes."""
    if not nbytes > 0:
        raise ValueError(f"a memory limit must be positive, got {nbytes}")
    token = _LIMIT.set(int(nbytes))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def format_bytes(nbytes: float) -> str:
    """Human-readable size: ``1.5 GB``, ``730 MB``, ``12 kB`` (powers of 1000)."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{int(nbytes)} B"


def ensure_fits(nbytes: float, what: str, hint: str = "") -> None:
    """Raise :class:`ResourceError` if ``nbytes`` exceed the limit.

    Args:
        nbytes: the estimated bytes of the allocation (a float: sizes may overflow int64).
        what: what would be allocated, e.g. ``"a ring of 10^9 states (Π, p)"``.
        hint: which argument to lower, e.g. ``"lower n"``.
    """
    limit = current_memory_limit()
    if nbytes > limit:
        message = f"{what} would need {format_bytes(nbytes)} (limit {format_bytes(limit)})"
        raise ResourceError(message + (f"; {hint}" if hint else ""))
