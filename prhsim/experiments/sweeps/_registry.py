"""What a sweep is to the command line: its settings, how it runs, what it prints and draws (one record each)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel

from prhsim._types import as_progress


def comma_list(value: str) -> str:
    """``"1e-3,0.01"`` as the TOML list ``[1e-3,0.01]`` of a ``--set`` value, or a one-line ValueError."""
    parts = [part.strip() for part in value.split(",") if part.strip()]
    try:
        [float(part) for part in parts]
    except ValueError:
        raise ValueError(f"expected numbers like 1e-3,0.01,0.1, got {value!r}") from None
    return "[" + ",".join(parts) + "]"


@dataclass(frozen=True)
class Estimate:
    """A sweep's rough time from its settings alone (before any work): ``seconds`` and what they count (``why``).

    ``seconds`` is work counted from the settings times per-unit constants measured on a shared 2-core CPU
    (each sweep's module names its own); only its class (:data:`prhsim._budget.TIME_CLASSES`) is shown.
    """

    seconds: float
    why: str

    @property
    def time_class(self) -> str:
        """The rough class of :attr:`seconds`, labelled as ``prhsim run``'s plan labels it."""
        from prhsim._budget import time_class

        return time_class(self.seconds)


@dataclass(frozen=True)
class Flag:
    """A shorthand option of one sweep: ``--name VALUE`` is ``--set key=<to_set(VALUE)>`` (None: set nothing)."""

    name: str
    key: str
    help: str
    to_set: Callable[[str], str | None] = lambda value: value
    metavar: str = "VALUE"
    type: Any = str


@dataclass(frozen=True)
class Sweep:
    """One sweep of ``prhsim sweep``: everything the command needs, the code it runs imported on first use.

    Attributes:
        name: the subcommand (``prhsim sweep NAME``), and the figure's file name ``NAME.png``.
        module: the sweep's module, holding ``Settings`` (named by ``settings``), ``run(settings, say)``, its
            cells (``cells``, ``cell``, ``reduce``: :mod:`prhsim.experiments.sweeps._cells`), ``summary(result)``
            (lines, or rich renderables), ``estimate(settings)`` (its :class:`Estimate`) and optionally
            ``notes(settings)`` (checked before any work: cost notes, or a ResourceError).
        settings: the name of the settings model in ``module``.
        figure: ``"module:function"`` drawing the result (imported only when drawing).
        help: one paragraph for ``--help``.
        flags: shorthand options of this sweep's own settings.
        run_flags: for a sweep over ``prhsim run``'s settings, the names of ``prhsim run``'s options it takes too
            (one table of them, in the command line: ``prhsim.cli._run_flags.RUN_FLAGS``).
        figure_file: the figure's file name, when not ``NAME.png``.
        requires, extra: the optional modules the sweep needs and the extra that installs them: without them
            :meth:`run` raises a one-line ValueError, and the command refuses before any work
            (:meth:`check_requirements`).
        smoke: command-line arguments of a tiny setting (seconds): what the tests run every sweep at.
        exports: the names of ``module`` (its library function, result and helpers) that ``prhsim.experiments``
            offers, each imported from the module when first used.
        long: ``--set`` assignments under which the sweep's estimate is minutes or more (the tests check that it
            says so before any work).
    """

    name: str
    module: str
    settings: str
    figure: str
    help: str
    flags: tuple[Flag, ...] = ()
    run_flags: tuple[str, ...] = ()
    figure_file: str | None = None
    requires: tuple[str, ...] = ()
    extra: str = ""
    smoke: tuple[str, ...] = ()
    exports: tuple[str, ...] = ()
    long: tuple[str, ...] = ()

    def check_requirements(self) -> None:
        """A one-line ValueError when a module of :attr:`requires` is missing."""
        from prhsim._extras import require

        require(f"prhsim sweep {self.name}", self.requires, self.extra)

    def module_object(self) -> Any:
        """The sweep's module (imported on first use)."""
        return importlib.import_module(self.module)

    def settings_model(self) -> type[BaseModel]:
        return getattr(self.module_object(), self.settings)

    def run(self, settings: BaseModel, say: Callable[..., None] | None = None) -> Any:
        """The sweep's result; ``say`` gets its progress (:func:`prhsim._types.as_progress`: a callable of the message
        alone gets the message alone)."""
        self.check_requirements()
        return self.module_object().run(settings, as_progress(say))

    def summary(self, result: Any) -> list[Any]:
        return self.module_object().summary(result)

    def estimate(self, settings: BaseModel) -> Estimate:
        """The sweep's rough time from its settings (no work done)."""
        return self.module_object().estimate(settings)

    def plan(self, settings: BaseModel, workers: int = 1, *, insist: bool = False) -> Any:
        """The sweep's cost plan on ``workers`` (:func:`prhsim.experiments.sweeps._cost.plan_sweep`: each running
        cell's memory share, refusals before any work, the wall time's class and horizon)."""
        from prhsim.experiments.sweeps._cost import plan_sweep

        return plan_sweep(self, settings, workers, insist=insist)

    def notes(self, settings: BaseModel, workers: int = 1, *, insist: bool = False) -> list[str]:
        """The module's notes (its refusals first), then the time class where it is minutes or hours, on ``workers``."""
        return list(self.plan(settings, workers, insist=insist).notes)

    def draw(self, result: Any) -> Any:
        module, _, function = self.figure.partition(":")
        return getattr(importlib.import_module(module), function)(result)

    @property
    def png(self) -> str:
        return self.figure_file or f"{self.name}.png"
