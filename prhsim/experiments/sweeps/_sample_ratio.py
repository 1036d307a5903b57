"""A map of the sample ratio over two properties of the captions, predicted without SGD (docs/theory.md §5.4).

For every cell of a grid over two settings (``x`` and ``y``, each one of the caption world's
properties: ``dependence`` of the world, ``omission`` and ``redundancy`` of the captions) the cell's
world and captions are built and, for each task (good views, bad views, next-token prediction),
each budget and each of ``n_draws`` draws, the task's objective is fitted exactly within linear
encoders of the learners' input features on the drawn records
(:func:`prhsim.experiments._caption_prediction.predicted_alignment`, no training). The draws are
nested: draw d holds the largest budget's records and each budget takes its first N of them, so a
curve is one stream of data. From the curves come the predicted sample ratios of bad views and
next-token prediction against good views (:func:`prhsim.experiments.sweeps._sample_ratios.bootstrap_ratio`,
the paper's definition), with their intervals; and, beside them, each task's closed form (the
universal encoder with unlimited data) and the ratio of its alignment to good views' closed form's.

``confirm`` names cells where the learners run as well (a sample-efficiency sweep of that cell,
with its learner settings), so the figure shows whether SGD follows the prediction there.

As a sweep of cells (:mod:`prhsim.experiments.sweeps._cells`): one cell per point (x, y), then one
per confirmed point's learners; a cell's streams are keyed by the seed and its own coordinates (a
task, a draw), the same seed lists at every point (:class:`_Map`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal

import numpy as np
from pydantic import Field, model_validator

from prhsim import __version__
from prhsim._rng import CAPTION_CHECK, CAPTION_RECORDS, CAPTION_TARGET
from prhsim._types import Progress, as_progress
from prhsim.config import CaptionConfig, GridSceneWorld, Settings
from prhsim.experiments._caption_alignment import caption_target
from prhsim.experiments._caption_prediction import OneCaptionScorer, nested_scores, predicted_limit
from prhsim.experiments._record import Record
from prhsim.experiments.sweeps._sample_efficiency import closed_form_alignment, draw_records, sample_efficiency
from prhsim.experiments.sweeps._sample_ratios import RATIO_SIGNS, bootstrap_ratio
from prhsim.worlds import SpanLaw

#: The properties a map's axes can range over: the world's dependence, the captions' omission and redundancy.
Axis = Literal["dependence", "omission", "redundancy"]
AXES: tuple[str, ...] = ("dependence", "omission", "redundancy")
TASKS = ("good", "bad", "ntp")
DEFAULT_X = (0.0, 0.2, 0.4, 0.6, 0.8)
DEFAULT_Y = (0.0, 0.25, 0.5, 0.75, 1.0)
DEFAULT_BUDGETS = (10, 30, 100, 300, 1000, 3000, 10000)
#: The time estimate's constants, measured on a shared 2-core CPU: one fit and scoring of the linear class
#: (FIT_SECONDS: the default map, 2,625 fits and 75 limits, took 116 s) and the closed forms of the three tasks in
#: one cell (CLOSED_SECONDS: 8 to 50 s with word synonyms), each per 1,296 states.
FIT_SECONDS, CLOSED_SECONDS, BASE_STATES = 0.044, 25.0, 1296


class MapRatio(Record):
    """A predicted sample ratio of one task in one cell (see :class:`prhsim.experiments.sweeps._sample_efficiency.Ratio`)."""

    task: str
    target: float
    ratio: float | None
    kind: str
    low: float | None
    high: float | None
    token_ratio: float | None


class MapCell(Record):
    """One cell: its settings, the predicted curves (mean over draws), ratios, limits and closed forms.

    ``limits`` maps a task to its prediction's limit (mutual 10-NN); ``closed`` maps a task to its closed form's
    mutual 10-NN and R@1 (None where the law is too large to enumerate); ``confirmed`` holds the learners' ratios
    where the cell was confirmed.
    """

    x: float
    y: float
    curves: dict[str, list[float]]
    ratios: list[MapRatio]
    limits: dict[str, float]
    closed: dict[str, dict[str, float] | None]
    confirmed: list[MapRatio] | None = None

    def limit_share(self, task: str) -> float | None:
        """The prediction's limit for ``task`` over good views' (None where good views' is not positive)."""
        good = self.limits.get("good", 0.0)
        return self.limits[task] / good if good > 0 and task in self.limits else None

    def share(self, task: str, metric: str = "mutual_knn") -> float | None:
        """The closed form's alignment of ``task`` over good views' closed form's (None where either is missing)."""
        mine, good = self.closed.get(task), self.closed.get("good")
        if mine is None or good is None or not good[metric] > 0:
            return None
        return mine[metric] / good[metric]


class SampleRatioMap(Record):
    """The result of :func:`sample_ratio_map`."""

    prhsim_version: str
    world: str
    captions: str
    x: str
    y: str
    x_values: list[float]
    y_values: list[float]
    k: int
    budgets: list[int]
    n_draws: int
    metric: str
    target_fraction: float
    chance: float
    r1_chance: float
    tokens_per_sample: dict[str, float]
    cells: list[MapCell]
    seconds: float


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _cell_settings(world: GridSceneWorld, captions: CaptionConfig, axis: str, value: float
                   ) -> tuple[GridSceneWorld, CaptionConfig]:
    if axis == "dependence":
        return world.model_copy(update={"dependence": float(value)}), captions
    return world, captions.model_copy(update={axis: float(value)})


def sample_ratio_map(world: GridSceneWorld, captions: CaptionConfig, *, x: str = "dependence",
                     x_values=DEFAULT_X, y: str = "redundancy", y_values=DEFAULT_Y, budgets=DEFAULT_BUDGETS,
                     n_draws: int = 5, k: int = 10, min_span: int = 9, target_fraction: float = 1.0,
                     ridge: float = 0.0, closed_forms: bool = False, confirm=(), learner: dict[str, Any] | None = None,
                     rng: int = 0, progress: Callable[..., None] | None = None) -> SampleRatioMap:
    """The map (module docstring): each cell of :meth:`_Map.coordinates` by :meth:`_Map.cell`, in order, then
    :meth:`_Map.reduce` (what the command's cells compute, wherever they run). ``learner``: the sample-efficiency
    settings of a confirmed point's learners. ``progress(message, done, total)`` once per cell and at the end.

    Raises:
        ValueError: on a bad argument (the message names it).
    """
    start = time.perf_counter()
    plan = _Map.of(world, captions, x=x, x_values=x_values, y=y, y_values=y_values, budgets=budgets,
                   n_draws=n_draws, k=k, min_span=min_span, target_fraction=target_fraction, ridge=ridge,
                   closed_forms=closed_forms, confirm=confirm, learner=learner, rng=rng)
    say = as_progress(progress)
    coordinates = plan.coordinates()
    records = []
    for i, where in enumerate(coordinates):
        what = "learners at " if where["part"] == "confirm" else ""
        say(f"{what}{x} {where['x']:g}, {y} {where['y']:g} ({i}/{len(coordinates)} cells done)",
            done=i, total=len(coordinates))
        records.append(plan.cell(where))
    say(f"{len(coordinates)} cells done", done=len(coordinates), total=len(coordinates))
    return plan.reduce(records, time.perf_counter() - start)


@dataclass(frozen=True)
class _Map:
    """The map's checked arguments and its three pieces of work: its cells' coordinates, one cell, and the result.

    A cell is one point ``{"part": "map", "x": a, "y": b}`` (the three tasks' draws, ratios, limits and closed forms)
    or one confirmed point's learners ``{"part": "confirm", "x": a, "y": b}``. A cell's streams are keyed by the seed
    and its own coordinates (a task, a draw), never by its place in the grid: the target ``[rng, CAPTION_TARGET]``,
    draw d of task t ``[rng, CAPTION_RECORDS + t, d]``, the bootstrap of task t ``[rng, CAPTION_CHECK, t]``, and the
    learners' :func:`sample_efficiency`'s with the same seed. Every point draws from the same seed lists (common
    random numbers across the map), and a confirmation is scored against its point's very target.
    """

    world: GridSceneWorld
    captions: CaptionConfig
    args: dict[str, Any]
    budgets: list[int]
    grid: list[tuple[float, float]]
    confirm: frozenset[tuple[float, float]]

    @classmethod
    def of(cls, world: GridSceneWorld, captions: CaptionConfig, **args: Any) -> "_Map":
        x, y = args["x"], args["y"]
        if x == y or x not in AXES or y not in AXES:
            raise ValueError(f"x and y must be two different properties among {AXES}, got {x!r} and {y!r}")
        grid = [(float(a), float(b)) for b in args["y_values"] for a in args["x_values"]]
        confirm = frozenset((float(a), float(b)) for a, b in args["confirm"])
        missing = confirm - set(grid)
        if missing:
            raise ValueError(f"confirm names cells that are not on the grid: {sorted(missing)}")
        return cls(world, captions, args, sorted({int(b) for b in args["budgets"]}), grid, confirm)

    def coordinates(self) -> list[dict[str, Any]]:
        """Every point (``y`` outer, ``x`` inner), then the confirmed points' learners in the same order."""
        return [{"part": "map", "x": a, "y": b} for a, b in self.grid] + \
            [{"part": "confirm", "x": a, "y": b} for a, b in self.grid if (a, b) in self.confirm]

    def point(self, a: float, b: float) -> tuple[GridSceneWorld, CaptionConfig]:
        """The world and captions of the point (a, b)."""
        w, c = _cell_settings(self.world, self.captions, self.args["x"], a)
        return _cell_settings(w, c, self.args["y"], b)

    def cell(self, where: dict[str, Any]) -> dict[str, Any]:
        """The cell's record (JSON values): a point's :class:`MapCell` (without ``confirmed``), its tokens per
        sample and chance levels; or a confirmed point's learners' ratios."""
        args, budgets, rng = self.args, self.budgets, int(self.args["rng"])
        a, b = float(where["x"]), float(where["y"])
        w, c = self.point(a, b)
        scene, style = w.build_scene(), c.build()
        if where["part"] == "confirm":
            result = sample_efficiency(scene, **{**(args["learner"] or {}), "budgets": budgets, "k": args["k"],
                                                 "min_span": args["min_span"], "style": style, "predict": False,
                                                 "target_fraction": args["target_fraction"], "closed_forms": False,
                                                 "rng": rng})
            return {"confirmed": [MapRatio(task=r.task, target=r.target, ratio=r.ratio, kind=r.kind, low=r.low,
                                           high=r.high, token_ratio=r.token_ratio).model_dump(mode="json")
                                  for r in result.ratios]}
        spans, n_draws, ridge = SpanLaw(int(args["min_span"])), int(args["n_draws"]), args["ridge"]
        target = caption_target(scene, k=args["k"], style=style, rng=np.random.default_rng([rng, CAPTION_TARGET]))
        rows, limits, closed, tokens = {}, {}, {}, {}
        for t, task in enumerate(TASKS):
            scorer = OneCaptionScorer(target, task)
            values = np.empty((n_draws, len(budgets)))
            for d in range(n_draws):
                full = draw_records(scene, target, task, budgets[-1], "world",
                                    np.random.default_rng([rng, CAPTION_RECORDS + t, d]))
                tokens[task] = full.tokens_seen() / full.count
                values[d] = nested_scores(target, task, spans, target.k, full, budgets, scorer=scorer, ridge=ridge)
            rows[task] = values
            limits[task] = float(predicted_limit(target, task, spans, target.k, world=scene.world, ridge=ridge,
                                                 scorer=scorer))
            if args["closed_forms"]:
                found = closed_form_alignment(target, task, spans, "world")
                closed[task] = None if found is None else {"mutual_knn": found.alignment.mutual_knn,
                                                           "r1": found.alignment.r1}
        ratios = [_map_ratio(task, budgets, rows["good"], rows[task], tokens, 2.0 * target.knn_chance,
                             args["target_fraction"], rng) for task in TASKS[1:]]
        cell = MapCell(x=a, y=b, curves={t: v.mean(axis=0).tolist() for t, v in rows.items()}, ratios=ratios,
                       limits=limits, closed=closed)
        return {"cell": cell.model_dump(mode="json"), "tokens": tokens, "chance": float(target.knn_chance),
                "r1_chance": float(target.r1_chance)}

    def reduce(self, records: list[dict[str, Any]], seconds: float) -> SampleRatioMap:
        """The map from its cells' records (in the order of :meth:`coordinates`); tokens per sample and chance
        levels are the last point's."""
        found = list(zip(self.coordinates(), records))
        confirmed = {(w["x"], w["y"]): r["confirmed"] for w, r in found if w["part"] == "confirm"}
        cells: list[MapCell] = []
        tokens, chance, r1_chance = {}, float("nan"), float("nan")
        for w, r in found:
            if w["part"] == "map":
                cells.append(MapCell.model_validate({**r["cell"], "confirmed": confirmed.get((w["x"], w["y"]))}))
                tokens, chance, r1_chance = r["tokens"], r["chance"], r["r1_chance"]
        args = self.args
        return SampleRatioMap(
            prhsim_version=__version__, world=self.world.describe(),
            captions=self.captions.describe() or "the template grammar", x=args["x"], y=args["y"],
            x_values=[float(v) for v in args["x_values"]], y_values=[float(v) for v in args["y_values"]],
            k=int(args["k"]), budgets=self.budgets, n_draws=int(args["n_draws"]), metric="mutual_knn",
            target_fraction=float(args["target_fraction"]), chance=chance, r1_chance=r1_chance,
            tokens_per_sample=tokens, cells=cells, seconds=seconds)


def _map_ratio(task, budgets, good, mine, tokens, floor, fraction, rng) -> MapRatio:
    found = bootstrap_ratio(budgets, good, mine, fraction=fraction, floor=floor,
                            rng=np.random.default_rng([int(rng), CAPTION_CHECK, TASKS.index(task)]))
    e = found.estimate
    scale = tokens[task] / tokens["good"]
    return MapRatio(task=task, target=e.target, ratio=_finite(e.ratio), kind=e.kind, low=_finite(found.low),
                    high=_finite(found.high), token_ratio=_finite(e.ratio * scale))


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class SampleRatioSettings(Settings):
    """``prhsim sweep sample-ratio``: the predicted sample ratios over two properties of the captions.

    Attributes:
        world: the gridscene (default 3x3 grid, 2 objects, 2 shapes, 2 colours).
        captions: the captions' other settings (default: a synonym drawn for each colour and shape word, the
            only wording: the layout is fixed, so the linear class can read each word at its place, and the words
            vary enough that the one-hot caption is not itself aligned with the image).
        x, y: the two properties the map ranges over (dependence, omission, redundancy).
        x_values, y_values: their values.
        budgets: records per fit; n_draws: draws per budget (the bootstrap resamples them).
        k: features of the image and of the text; min_span: the shortest span.
        target_fraction, ridge: as in ``prhsim sweep sample-efficiency``.
        closed_forms: also compute each task's closed form in every cell (minutes: every span of every caption).
        confirm: cells ``[x, y]`` where the learners run too (a sample-efficiency sweep of the cell).
        steps, batch_size, n_seeds: the confirming learners' settings.
        seed: seeds every draw.
    """

    grids = ("x_values", "y_values")

    world: GridSceneWorld = Field(default_factory=lambda: GridSceneWorld(size=3, objects=2, shapes=2, colours=2))
    captions: CaptionConfig = Field(default_factory=lambda: CaptionConfig(wording=["word_synonyms"]))
    x: Axis = "dependence"
    y: Axis = "redundancy"
    x_values: list[Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=lambda: list(DEFAULT_X))
    y_values: list[Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=lambda: list(DEFAULT_Y))
    budgets: list[Annotated[int, Field(ge=2)]] = Field(default_factory=lambda: list(DEFAULT_BUDGETS))
    n_draws: int = Field(5, ge=1, le=100)
    k: int = Field(10, ge=1)
    min_span: int = Field(9, ge=1)
    target_fraction: float = Field(1.0, gt=0, le=1)
    ridge: float = Field(0.0, ge=0)
    closed_forms: bool = False
    confirm: list[Annotated[list[float], Field(min_length=2, max_length=2)]] = Field(default_factory=list)
    steps: int = Field(1000, ge=20)
    batch_size: int = Field(256, ge=2)
    n_seeds: int = Field(3, ge=1, le=32)
    seed: int = Field(0, ge=0)
    may_be_empty = ("confirm",)

    @model_validator(mode="after")
    def _axes(self) -> "SampleRatioSettings":
        if self.x == self.y:
            raise ValueError(f"x and y must be two different properties, got {self.x!r} twice")
        for axis, values in ((self.x, self.x_values), (self.y, self.y_values)):
            if axis == "dependence" and max(values) >= 1:
                raise ValueError(f"dependence must lie in [0, 1), got {max(values)} in the {axis} values")
            if axis == "omission" and max(values) >= 1:
                raise ValueError(f"omission must lie in [0, 1), got {max(values)} in the {axis} values")
        return self


def estimate(s: SampleRatioSettings) -> Any:
    """Per cell: 3 tasks x budgets x draws fits (FIT_SECONDS each) and, with closed forms, CLOSED_SECONDS; both in
    proportion to the states against the default 1,296."""
    from prhsim.experiments.sweeps._registry import Estimate

    cells = len(s.x_values) * len(s.y_values)
    scale = s.world.n_states / BASE_STATES
    fits = 3 * len(s.budgets) * s.n_draws * FIT_SECONDS * scale
    closed = CLOSED_SECONDS * scale if s.closed_forms else 0.0
    learners = len(s.confirm) * 3 * len(s.budgets) * s.n_seeds * s.steps * s.batch_size * 2e-6
    return Estimate(cells * (fits + closed) + learners,
                    f"{cells} cells of {3 * len(s.budgets) * s.n_draws} fits"
                    + (f", {len(s.confirm)} confirmed by learners" if s.confirm else ""))


def _arguments(s: SampleRatioSettings) -> dict[str, Any]:
    """The library's arguments from the settings (the confirming learners on two threads)."""
    return dict(x=s.x, x_values=s.x_values, y=s.y, y_values=s.y_values, budgets=s.budgets, n_draws=s.n_draws, k=s.k,
                min_span=s.min_span, target_fraction=s.target_fraction, ridge=s.ridge, closed_forms=s.closed_forms,
                confirm=[tuple(c) for c in s.confirm], rng=s.seed,
                learner={"n_seeds": s.n_seeds, "steps": s.steps, "batch_size": s.batch_size, "threads": 2})


def run(s: SampleRatioSettings, say: Progress | None = None) -> Any:
    """``prhsim sweep sample-ratio`` from its settings."""
    return sample_ratio_map(s.world, s.captions, **_arguments(s), progress=say)


def cells(s: SampleRatioSettings) -> list[dict[str, Any]]:
    """One cell per point of the map, then one per confirmed point's learners (:class:`_Map`)."""
    return _Map.of(s.world, s.captions, **_arguments(s)).coordinates()


def cell(s: SampleRatioSettings, coordinates: dict[str, Any]) -> dict[str, Any]:
    """The cell's record (:meth:`_Map.cell`: its streams keyed by the seed and its own coordinates), with its
    seconds."""
    start = time.perf_counter()
    record = _Map.of(s.world, s.captions, **_arguments(s)).cell(coordinates)
    return {**record, "seconds": time.perf_counter() - start}


def reduce(s: SampleRatioSettings, records: list[dict[str, Any]]) -> SampleRatioMap:
    """The sweep's result from its cells (the same record as :func:`run`'s, seconds summed over the cells)."""
    return _Map.of(s.world, s.captions, **_arguments(s)).reduce(records, sum(r["seconds"] for r in records))


def _fmt(r: MapRatio) -> str:
    if r.kind == "none" or r.ratio is None:
        return "never"
    return f"{RATIO_SIGNS[r.kind]}{r.ratio:.3g}x"


def summary(r: Any) -> list[str]:
    """One line per cell: the predicted ratios, and the closed forms' alignments against good views'."""
    lines = [f"{r.world} ({r.captions}), k = {r.k}: predicted samples over good views' to reach what each reaches at "
             f"{r.budgets[-1]:,} ({r.metric}, {r.n_draws} draws); each closed form's alignment over good views' "
             "(mutual 10-NN / R@1; the paper: bad 0.48 / 0.54, next-token 0.60 / 0.48):"]
    for c in r.cells:
        ratios = ", ".join(f"{m.task} {_fmt(m)}" for m in c.ratios)
        shares = ""
        if c.share("bad") is not None:
            parts = []
            for t in ("bad", "ntp"):
                knn, r1 = c.share(t), c.share(t, "r1")
                if knn is not None:
                    parts.append(f"{t} {knn:.2f} / " + ("-" if r1 is None else f"{r1:.2f}"))
            shares = "; closed forms " + ", ".join(parts)
        confirmed = "" if c.confirmed is None else "; learners " + ", ".join(f"{m.task} {_fmt(m)}" for m in c.confirmed)
        lines.append(f"  {r.x} {c.x:g}, {r.y} {c.y:g}: {ratios}{shares}{confirmed}")
    return lines
