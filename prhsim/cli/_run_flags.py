"""The options of ``prhsim run``'s settings, one table: ``prhsim run`` takes them all, and a sweep over the run's
settings (its record's ``run_flags``) takes those it names, with one spelling, one help and one parser each.

``--NAME VALUE`` sets the setting ``key`` (a dotted path: ``--size 4`` is ``--set world.size=4``; ``--world`` is the
world's kind, and replaces a configured world of another kind). Each option's help ends with the command's own
default, read from its settings model, so the two commands cannot disagree about what a flag does or what it
defaults to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import click
from pydantic import BaseModel

from prhsim.cli._options import parse_k, parse_shape
from prhsim.config import RUN_DEFAULT_EPS, WORLD_KINDS


@dataclass(frozen=True)
class RunFlag:
    """``--name VALUE`` sets ``key`` of the run's settings (``type``, ``callback``: click's parsing of VALUE)."""

    name: str
    key: str
    help: str
    type: Any = None
    metavar: str | None = None
    callback: Callable[..., Any] | None = None
    unset: str | None = None  # what an unset setting (None in the model) means, for the help

    @property
    def dest(self) -> str:
        """The keyword the command's function receives the value under."""
        return self.name.replace("-", "_")

    def option(self, defaults: BaseModel | None = None) -> Callable[[Any], Any]:
        """The click option; its help names ``key`` and, from ``defaults`` (the command's default settings), the
        default value."""
        default = _at(defaults.model_dump(mode="json"), self.key) if defaults is not None else None
        shown = _shown(default) if default is not None else self.unset if defaults is not None else None
        said = f"{self.key}" + (f", default {shown}" if shown is not None else "")
        return click.option(f"--{self.name}", self.dest, type=self.type, default=None, metavar=self.metavar,
                            callback=self.callback, help=f"{self.help} ({said}).")


#: Every option of the run's settings, by name (in ``--help``'s order).
RUN_FLAGS: dict[str, RunFlag] = {flag.name: flag for flag in (
    RunFlag("world", "world", "World over Z; `prhsim worlds` lists each kind's settings", click.Choice(WORLD_KINDS)),
    RunFlag("modalities", "modalities", "Number of modalities", int, "M"),
    RunFlag("views", "views", "good: nuisance resampled across the pair; bad: nuisance kept w.p. 1-eps",
            click.Choice(["good", "bad"])),
    RunFlag("eps", "eps", "Bad view's resampling probability, for bad views", float, "EPS",
            unset=f"{RUN_DEFAULT_EPS:g}"),
    RunFlag("k", "k", "Number of features, or auto: the largest relative gap of K_Z in 1..32", None, "N|auto",
            parse_k),
    RunFlag("seed", "seed", "Seed for every random choice", int, "SEED"),
    RunFlag("size", "world.size", "gridscene: grid side", int, "SIZE"),
    RunFlag("objects", "world.objects", "gridscene: number of objects", int, "N"),
    RunFlag("n", "world.n", "ring, random: number of states", int, "N"),
    RunFlag("shape", "world.shape", "torus, grid: size per axis", None, "A,B,..", parse_shape),
    RunFlag("steps", "training.steps", "SGD budget: at most this many steps per learner and modality; a seed stops "
            "once converged", int, "STEPS"),
    RunFlag("seeds", "training.n_seeds", "SGD seeds per learner and modality", int, "S"),
    RunFlag("encoder", "training.encoder", "SGD encoder: one vector per state, or an MLP on the observation; auto: a "
            "table unless a modal world exceeds 5,000,000 states", click.Choice(["auto", "tabular", "mlp"])),
    RunFlag("memory-limit", "memory_limit_gb",
            "Refuse work whose estimated peak memory exceeds GB; unset, half of this machine's",
            click.FloatRange(min=0, min_open=True), "GB"),
)}


def run_flag_options(names: Iterable[str], defaults: BaseModel | None = None) -> Callable[[Any], Any]:
    """A decorator adding the options ``names`` of :data:`RUN_FLAGS`, their defaults read from ``defaults``."""
    flags = [RUN_FLAGS[name] for name in names]

    def decorate(fn: Any) -> Any:
        for flag in reversed(flags):
            fn = flag.option(defaults)(fn)
        return fn

    return decorate


def run_flag_values(names: Iterable[str], values: dict[str, Any]) -> dict[str, Any]:
    """The settings the options ``names`` set, by key (``values``: the command's keywords; unset options omitted)."""
    return {RUN_FLAGS[name].key: values[RUN_FLAGS[name].dest] for name in names
            if values.get(RUN_FLAGS[name].dest) is not None}


def flag_of(key: str) -> str:
    """``--size`` for ``world.size``: the option that sets ``key``."""
    return next(f"--{flag.name}" for flag in RUN_FLAGS.values() if flag.key == key)


def _at(document: dict[str, Any], key: str) -> Any:
    node: Any = document
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node.get("kind") if isinstance(node, dict) else node


def _shown(value: Any) -> str:
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
