"""What a sweep is to the command line: its settings, how it runs, what it prints and draws (one record each)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel

from prhsim._types import Progress


def comma_list(value: str) -> str:
    """``"1e-3,0.01"`` as the TOML list ``[1e-3,0.01]`` of a ``--set`` value, or a one-line ValueError."""
    parts = [part.strip() for part in value.split(",") if part.strip()]
    try:
        [float(part) for part in parts]
    except ValueError:
        raise ValueError(f"expected numbers like 1e-3,0.01,0.1, got {value!r}") from None
    return "[" + ",".join(parts) + "]"


def shape_list(value: str) -> str:
    """``"8,12"`` or ``"8x12"`` as the TOML list ``[8,12]`` of grid sizes, or a one-line ValueError."""
    parts = [part.strip() for part in value.replace("x", ",").split(",") if part.strip()]
    if not parts or not all(part.isdigit() for part in parts):
        raise ValueError(f"expected sizes like 8,12 or 8x12, got {value!r}")
    return "[" + ",".join(parts) + "]"


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
        module: the sweep's module, holding ``Settings`` (named by ``settings``), ``run(settings, say)``,
            ``summary(result)`` (lines, or rich renderables) and optionally ``notes(settings)`` (checked
            before any work: cost notes, or a ResourceError).
        settings: the name of the settings model in ``module``.
        figure: ``"module:function"`` drawing the result (imported only when drawing).
        help: one paragraph for ``--help``.
        flags: shorthand options.
        figure_file: the figure's file name, when not ``NAME.png``.
    """

    name: str
    module: str
    settings: str
    figure: str
    help: str
    flags: tuple[Flag, ...] = ()
    figure_file: str | None = None

    def _module(self) -> Any:
        return importlib.import_module(self.module)

    def settings_model(self) -> type[BaseModel]:
        return getattr(self._module(), self.settings)

    def run(self, settings: BaseModel, say: Progress) -> Any:
        return self._module().run(settings, say)

    def summary(self, result: Any) -> list[Any]:
        return self._module().summary(result)

    def notes(self, settings: BaseModel) -> list[str]:
        notes = getattr(self._module(), "notes", None)
        return [] if notes is None else notes(settings)

    def draw(self, result: Any) -> Any:
        module, _, function = self.figure.partition(":")
        return getattr(importlib.import_module(module), function)(result)

    @property
    def png(self) -> str:
        return self.figure_file or f"{self.name}.png"
