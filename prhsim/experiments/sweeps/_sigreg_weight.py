"""The SIGReg weight sweep: where SIGReg collapses, where the modalities align, how far it sits from the closed form.

For each weight λ of a grid, SIGReg (LeJEPA's objective, docs/theory.md §7) is trained
on every modality of one world with the run's training settings
(:func:`prhsim.experiments._learning.learn`), and measured against the whitened closed
form: the fraction of collapsed seeds, ``s_Θ`` to the closed form after whitening
under p, ``‖Cov_p f − I‖`` before whitening, and the cross-modal ``ρ_P`` of every pair.
Cells: one per λ (:func:`cells`, :func:`cell`, :func:`reduce`). A cell builds the world and solves its closed
form (deterministic, from the settings), then trains at λ with the run's seeds (``seed``, ``seed + 1``, …, the same
at every λ), so a cell's numbers depend on the settings and λ alone. The library function solves the closed form
once and trains every λ the same way.

What λ means: in the "lejepa" convention the loss is ``λ·SIGReg + (1 − λ)·invariance``,
in the "additive" one ``invariance + λ·SIGReg``; in both data modes SIGReg carries the
factor N of a batch of N = ``training.batch_size`` pairs (the exact regulariser is
scaled by it), so one λ means one balance whether the data are exact or sampled.
"""

from __future__ import annotations

import time
from typing import Any, Literal, Sequence

import numpy as np
from pydantic import Field, model_validator

from prhsim import __version__
from prhsim._types import Progress, as_progress
from prhsim._budget import memory_limit
from prhsim.config import RandomWorld, RunConfig, WorldConfig
from prhsim.experiments._learning import learn
from prhsim.experiments._plan import plan_run
from prhsim.experiments._results import LearnerSummary, SweepResult
from prhsim.experiments._rotation import rotation_uniqueness
from prhsim.experiments._run import build

#: The default grid of λ: 9 points from 1e-4 to 0.5, log-spaced (the "lejepa" convention's range).
DEFAULT_LAMS = tuple(float(x) for x in np.geomspace(1e-4, 0.5, 9))


def check_lams(lams: Sequence[float], convention: str) -> tuple[float, ...]:
    """λ values: positive, finite, distinct, below 1 in the "lejepa" convention; returned sorted."""
    values = tuple(float(x) for x in lams)
    if not values:
        raise ValueError("the sweep needs at least one value of lam")
    for x in values:
        if not np.isfinite(x) or x <= 0:
            raise ValueError(f"lam must be a positive finite number, got {x}")
        if convention == "lejepa" and x >= 1:
            raise ValueError(f"lam must be below 1 in the lejepa convention (lam·SIGReg + (1 − lam)·invariance), "
                             f"got {x}; use training.convention=\"additive\" for larger weights")
    if len(set(values)) != len(values):
        raise ValueError(f"lam values must be distinct, got {list(values)}")
    return tuple(sorted(values))


def sigreg_weight_sweep(config: RunConfig, lams: Sequence[float] = DEFAULT_LAMS, *,
                        progress: Progress | None = None) -> SweepResult:
    """Train SIGReg at every λ on every modality of ``config``'s world and measure it (see the module docstring).

    Each λ is trained by :func:`weight_cell` with the seeds of ``config`` alone, so its numbers depend on λ and
    the settings only (the same as the command's cell at λ).

    Raises:
        ValueError: on a bad λ grid.
        ResourceError: the run would not fit in memory (as :func:`prhsim.experiments.plan_run`).
    """
    say = as_progress(progress)
    lams = check_lams(lams, config.training.convention)
    config = config.model_copy(update={"learner": "sigreg"})
    plan = plan_run(config)
    start = time.perf_counter()
    with memory_limit(plan.limit):
        say("building the world")
        setup, outcome = _closed_form(config, say)
        records = []
        for i, lam in enumerate(lams):
            say(f"lam = {lam:.3g} ({i + 1} of {len(lams)})", done=i, total=len(lams))
            records.append(weight_cell(config, setup, outcome, lam, say))
        say(f"{len(lams)} weights trained", done=len(lams), total=len(lams))
    return _reduce(records, config, lams, time.perf_counter() - start)


def _closed_form(config: RunConfig, say: Progress | None = None) -> tuple[Any, Any]:
    """The run's world (:func:`prhsim.experiments._run.build`) and its closed form, solved once per λ grid or cell."""
    setup = build(config)
    outcome = rotation_uniqueness(setup.base, setup.modalities, setup.views, config.k, centred=config.centred,
                                  progress=say, rng=config.seed)
    return setup, outcome


def weight_cell(config: RunConfig, setup: Any, outcome: Any, lam: float,
                say: Progress | None = None) -> dict[str, Any]:
    """SIGReg trained at weight ``lam`` on every modality (the seeds of ``config``), as JSON values: the world's
    description and closed form beside the learner's summary."""
    at = config.model_copy(update={"training": config.training.model_copy(update={"lam": lam})})
    summaries = learn(at, outcome, ["sigreg"], progress=say)
    return {"world": setup.name, "n_states": setup.base.n, "k": outcome.k, "views": [v.label for v in setup.views],
            "closed_form_rho_p": {f"{p.a} vs {p.b}": p.comparison.rho_p for p in outcome.pairs},
            "summaries": [s.model_dump(mode="json") for s in summaries]}


def _reduce(records: Sequence[dict[str, Any]], config: RunConfig, lams: Sequence[float],
            seconds: float) -> SweepResult:
    """The sweep's record from the cells of ``lams`` (in that order; every cell describes the same world)."""
    first = records[0]
    return SweepResult(prhsim_version=__version__, world=first["world"], n_states=first["n_states"], k=first["k"],
                       views=first["views"], convention=config.training.convention, lams=list(lams),
                       cells=[LearnerSummary.model_validate(c) for r in records for c in r["summaries"]],
                       closed_form_rho_p=first["closed_form_rho_p"], seconds=seconds)


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class SigregWeightSettings(RunConfig):
    """``prhsim sweep sigreg-weight``: a run's settings (world, modalities, views, training) and the grid of λ.

    The default world is the 30-state random world of docs/theory.md §7, with two modalities and
    k = 2 on a random world; a world of another kind takes a run's defaults (three modalities,
    k "auto"). ``lams`` are checked by :func:`check_lams` and kept sorted.
    """

    grids = ('lams',)

    world: WorldConfig = Field(default_factory=lambda: RandomWorld(n=30))
    modalities: int = Field(2, ge=1, le=8)
    k: int | Literal["auto"] = 2
    learner: Literal["sigreg"] = "sigreg"
    lams: list[float] = Field(default_factory=lambda: list(DEFAULT_LAMS))

    @model_validator(mode="before")
    @classmethod
    def _other_world(cls, data: Any) -> Any:
        world = data.get("world") if isinstance(data, dict) else None
        if isinstance(world, dict) and world.get("kind", "random") != "random":
            data = {"modalities": 3, "k": "auto", **data}
        return data

    @model_validator(mode="after")
    def _grid(self) -> "SigregWeightSettings":
        lams = list(check_lams(self.lams, self.training.convention))
        if lams != self.lams:
            object.__setattr__(self, "lams", lams)
        return self


def notes(s: SigregWeightSettings) -> list[str]:
    """The cost of the sweep, known before it runs (a ResourceError where it cannot fit)."""
    return [f"{len(s.lams)} weights; each trains like one run of: {plan_run(s).summary()}"]


def estimate(s: SigregWeightSettings) -> Any:
    """Weights x the run plan's seconds (each weight trains like one run of ``prhsim run``)."""
    from prhsim.experiments.sweeps._registry import Estimate

    each = plan_run(s).seconds
    return Estimate(len(s.lams) * each, f"{len(s.lams)} weights x about {each:.2g} s each, the run plan's estimate "
                                        f"of {s.training.n_seeds} seed(s) x {s.training.steps} steps")


def run(s: SigregWeightSettings, say: Progress | None = None) -> SweepResult:
    """``prhsim sweep sigreg-weight`` from its settings; ``say`` reports progress (counted in weights)."""
    return sigreg_weight_sweep(s, s.lams, progress=say)


def cells(s: SigregWeightSettings) -> list[dict[str, float]]:
    """One cell per weight λ (sorted)."""
    return [{"lam": lam} for lam in check_lams(s.lams, s.training.convention)]


def cell(s: SigregWeightSettings, coordinates: dict[str, float]) -> dict[str, Any]:
    """SIGReg at ``coordinates["lam"]``: the world and its closed form built from the settings, then
    :func:`weight_cell` (seeds from the settings alone), with its seconds."""
    start = time.perf_counter()
    config = s.model_copy(update={"learner": "sigreg"})
    with memory_limit(plan_run(config).limit):
        setup, outcome = _closed_form(config)
        record = weight_cell(config, setup, outcome, float(coordinates["lam"]))
    return {**record, "seconds": time.perf_counter() - start}


def reduce(s: SigregWeightSettings, records: list[dict[str, Any]]) -> SweepResult:
    """The sweep's result from its cells (the same record as :func:`run`'s, seconds summed over the cells)."""
    return _reduce(records, s.model_copy(update={"learner": "sigreg"}), check_lams(s.lams, s.training.convention),
                   sum(r["seconds"] for r in records))


def summary(r: SweepResult) -> list[Any]:
    """The tables the command prints after the sweep (:func:`._sigreg_weight_figure.sweep_tables`)."""
    from prhsim.experiments.sweeps._sigreg_weight_figure import sweep_tables

    return sweep_tables(r)

