"""A sweep's cost plan on N workers, before any work: each running cell gets its share of the memory limit.

Cells run ``at_once = min(workers, cells)`` at a time (worker processes, Ray CPUs or threads), so the memory
limit ``L`` (``--memory-limit``, or half of physical memory) is shared: each running cell may use ``L / at_once``.
The sweep's own checks (its module's ``notes`` and ``estimate``, which refuse through
:func:`prhsim._budget.ensure_fits` what one cell cannot fit) run under that share, so

* a cell that cannot fit one worker (``at_once = 1``) is refused before any work, as before;
* N workers that together would exceed the limit are refused, naming the largest ``--workers`` that fits;
* every cell then computes under the same share (:func:`prhsim.experiments.sweeps.run_sweep` passes it to each
  worker), so a check inside a cell sees the limit the plan assumed.

The time estimate counts the whole sweep in one process; on N workers its wall time is about ``seconds / at_once``
(cells of similar cost), and that is what the time class (``this sweep may take minutes``) is given. A sweep whose
wall time is beyond :data:`prhsim._budget.HORIZON_SECONDS` (a week) is refused before any work unless the caller insists
(``--insist``): such an estimate is almost always a setting typed one order of magnitude too large.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from prhsim._budget import (
    ResourceError,
    beyond_horizon,
    current_memory_limit,
    format_bytes,
    memory_limit,
    time_notes,
)
from prhsim.experiments.sweeps._cells import sweep_cells


class BeyondHorizon(ValueError):
    """A sweep's estimated wall time is beyond :data:`prhsim._budget.HORIZON_SECONDS` and the caller did not
    insist."""


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep costs on its workers: its cells, how many run at once, each one's memory share, its notes.

    Attributes:
        cells: the sweep's cells.
        at_once: cells that run at the same time (``min(workers, cells)``).
        limit: the memory limit in bytes shared by the running cells.
        share: each running cell's bytes (``limit // at_once``).
        seconds: the estimated wall time (the one-process estimate over ``at_once``).
        notes: the module's notes, then the time class where it is minutes or hours.
    """

    cells: int
    at_once: int
    limit: int
    share: int
    seconds: float
    notes: tuple[str, ...]


def settings_limit(settings: BaseModel) -> int:
    """The memory limit in force for ``settings``: its own ``memory_limit_gb`` (a sweep over ``prhsim run``'s
    settings holds one), else the limit of :func:`prhsim.memory_limit`."""
    own = getattr(settings, "memory_limit_gb", None)
    return int(own * 1e9) if own else current_memory_limit()


def with_share(settings: BaseModel, share: int) -> BaseModel:
    """``settings`` with its own memory limit (where it holds one) set to ``share`` bytes."""
    if "memory_limit_gb" not in type(settings).model_fields:
        return settings
    return settings.model_copy(update={"memory_limit_gb": share / 1e9})


def plan_sweep(sweep: Any, settings: BaseModel, workers: int = 1, *, insist: bool = False) -> SweepPlan:
    """The cost plan of ``sweep`` (a record of :data:`prhsim.experiments.sweeps.SWEEPS`) for ``settings`` on
    ``workers`` (module docstring).

    Raises:
        ResourceError: one cell cannot fit the limit, or ``workers`` cells at once cannot (one line naming the
            largest number of workers that fits).
        BeyondHorizon: the wall time is beyond :data:`prhsim._budget.HORIZON_SECONDS` and ``insist`` is False.
        ValueError: the settings give no cells.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    module = sweep.module_object()
    cells = len(sweep_cells(module, settings))
    at_once = min(workers, cells)
    limit = settings_limit(settings)
    share = limit // at_once
    try:
        notes, seconds, why = _checked(sweep, module, with_share(settings, share), share)
    except ResourceError as exc:
        if at_once == 1:
            raise
        try:  # does one cell fit the whole limit? then fewer workers do
            _checked(sweep, module, settings, limit)
        except ResourceError as alone:  # it does not: the refusal of one cell
            raise alone from None
        fits = next(n for n in range(at_once - 1, 0, -1) if _fits(sweep, module, settings, limit // n))
        raise ResourceError(f"on {at_once} workers each cell has {format_bytes(share)} of the limit: {exc}, or run "
                            f"--workers {fits}{' or fewer' if fits > 1 else ''} (or raise --memory-limit)") from None
    wall = seconds / at_once
    where = f" on {at_once} workers" if at_once > 1 else ""
    refusal = beyond_horizon("sweep", wall, why + where)
    if refusal and not insist:
        raise BeyondHorizon(refusal)
    return SweepPlan(cells, at_once, limit, share, wall, tuple(notes) + tuple(time_notes("sweep", wall, why + where)))


def _checked(sweep: Any, module: Any, settings: BaseModel, share: int) -> tuple[list[str], float, str]:
    """The module's notes and its estimate, under a memory limit of ``share`` bytes."""
    with memory_limit(share):
        own = getattr(module, "notes", None)
        notes = [] if own is None else list(own(settings))
        estimate = sweep.estimate(settings)
    return notes, estimate.seconds, estimate.why


def _fits(sweep: Any, module: Any, settings: BaseModel, share: int) -> bool:
    try:
        _checked(sweep, module, with_share(settings, share), share)
    except ResourceError:
        return False
    return True
