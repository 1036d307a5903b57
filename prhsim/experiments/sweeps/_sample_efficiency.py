"""Sample efficiency of good views, bad views and next-token prediction in a world with a known answer (docs/theory.md §5.1).

For every *task* (:data:`prhsim.learners.TEXT_TASKS`: the JEPA learner on good views, the JEPA
learner on bad views, and the next-token learner; :mod:`prhsim.learners._text_learners`), every budget N (records in the training
set) and every seed: draw N records from the caption law, train the token encoder for a fixed
number of steps, embed every whole caption and score it against the pixel modality's closed form
(:func:`prhsim.experiments._caption_alignment.caption_alignment`). Seeds run together under
``vmap``, and every budget reuses the compiled loop (the step's shapes do not depend on N).

Records, by ``pairs``:

* "world" (default, the theorem's setting): a JEPA record is a positive pair ``(z, z') ~ π`` of
  the world — the pixel modality's own pair law — with one caption of each state: of independent
  wording for good views, of shared wording for bad views (the wording is copied across the pair,
  docs/theory.md §4);
* "same": both views describe one state: two captions of independent wording (good), one caption
  cut twice (bad); the text's pair law then differs from the image's, and the theorem no longer
  says the two meet.

Next-token prediction reads each caption alone: its record is one state with one caption, in
both modes.

Token accounting: a record's tokens are every token of every caption it holds
(:meth:`prhsim.worlds.Records.tokens_seen`), so a two-caption record counts both.

Beside the tasks: each task's *closed form* on the same law (the span views' whitened
optimum, :func:`prhsim.optima.span_optimum`; correspondence analysis of the next-token law,
:func:`prhsim.optima.next_token_optimum`), the alignment a task approaches with unlimited data
and a universal encoder; and the *untrained* encoder's alignment (its initialisation).

The ratios: for the reference budget b (by default the first budget at which good views reach
half their alignment at the largest budget, so that the target is learned, not chance), the target is good views' mean alignment at b; the budget
each other task needs to reach it is read off its mean curve (:mod:`._sample_ratios`), divided
by b (samples) and scaled by the tokens per record (tokens); the interval pairs seed s of good
views with seed s of the other task.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Callable, Literal, Sequence

import numpy as np
from pydantic import Field, model_validator

from prhsim import __version__
from prhsim._budget import ResourceError, ensure_fits
from prhsim._moved import renamed_keyword
from prhsim._types import Progress, as_progress
from prhsim.config import GridSceneWorld, Settings, WorldConfig
from prhsim.experiments._caption_alignment import (
    CaptionAlignment,
    CaptionTarget,
    caption_alignment,
    caption_target,
)
from prhsim.experiments._results import _Record
from prhsim.experiments._sample_ratios import sample_ratio
from prhsim.learners import (
    TEXT_TASKS,
    TextConfig,
    check_text_batches,
    embed_captions,
    initial_text,
    train_text,
)
from prhsim.optima import next_token_optimum, span_optimum
from prhsim.worlds import GridScene, Records, TooManySpans, caption_law

DEFAULT_BUDGETS = (300, 1000, 3000, 10000, 30000)
#: Seeds of one sweep: ``1000·rng + s`` for s < n_seeds, so sweeps of different ``rng`` never share one.
MAX_SEEDS = 1000
#: The time estimate's constants, measured on a shared 2-core CPU at the defaults: a run (3 seeds x 3000
#: steps of 512 records) took 43-127 s whatever its task and budget (300 to 30,000; 43-48 s when the
#: machine was least busy), so a record seen in training is UNIT_SECONDS (43 s / 4.6M); drawing a budget's
#: records took 0.1 s per 30,000 and 0.7-2.9 s per 300,000 per seed, about one unit a record (RECORD_UNITS);
#: the closed forms of good and bad views took 27 and 31 s on the default scene's 32,768 captions
#: (DEFAULT_CAPTIONS) and next-token prediction's 1 s. The default sweep: 6-13 min (README), 18 min beside a
#: test run; estimated 11 min. A wider MLP is assumed to cost in proportion to its hidden widths (not measured).
UNIT_SECONDS, RECORD_UNITS, CLOSED_FORM_SECONDS, DEFAULT_CAPTIONS = 9e-6, 1, 29.0, 32_768
LABELS = {"good": "good-view JEPA", "bad": "bad-view JEPA", "ntp": "next-token prediction"}
Metric = Literal["mutual_knn", "mutual_knn_mean", "r1", "r5"]
METRICS: tuple[str, ...] = ("mutual_knn", "mutual_knn_mean", "r1", "r5")


class Cell(_Record):
    """One task, budget and seed."""

    task: str
    budget: int
    seed: int
    tokens: int
    final_loss: float
    alignment: CaptionAlignment


class ClosedForm(_Record):
    """A task's closed form on the caption law: its alignment, and whether it is one rotation orbit.

    ``unique`` is False when k splits a tie (``gap`` ≈ 0): the features are then one subspace of a
    continuum, and a score describes that subspace only.
    """

    alignment: CaptionAlignment
    unique: bool
    gap: float


class Curve(_Record):
    """A task's chosen metric over the budgets: mean and range over seeds."""

    task: str
    label: str
    tokens_per_sample: int
    mean: list[float]
    low: list[float]
    high: list[float]


class Ratio(_Record):
    """Samples (and tokens) a task needs to reach good views' alignment at the reference budget.

    ``kind`` is "exact", "at_most" or "more_than" (then ``samples`` and the ratios are bounds);
    ``seed_ratios`` and ``seed_kinds``: the same, seed s of this task against seed s of good views.
    """

    task: str
    reference_budget: int
    target: float
    samples: float
    kind: str
    ratio: float
    token_ratio: float
    seed_ratios: list[float]
    seed_kinds: list[str]


class SampleEfficiency(_Record):
    """The result of :func:`sample_efficiency`."""

    prhsim_version: str
    world: str
    n_states: int
    k: int
    pairs: str
    min_span: int
    steps: int
    batch_size: int
    lr: float
    hidden: list[int]
    seeds: list[int]
    budgets: list[int]
    metric: str
    knn_k: int
    knn_chance: float
    r1_chance: float
    n_fit: int
    closed_forms: dict[str, ClosedForm | None]
    untrained: dict[str, CaptionAlignment]
    cells: list[Cell]
    curves: list[Curve]
    reference_budget: int
    ratios: list[Ratio]
    seconds: float


def draw_records(scene: GridScene, target: CaptionTarget, task: str, count: int, pairs: str,
                 gen: np.random.Generator) -> Records:
    """A task's training records (module docstring)."""
    law = target.law
    if pairs == "world" and task != "ntp":
        return law.sample_pairs(scene.world, count, wording="independent" if task == "good" else "shared", rng=gen)
    return law.sample(count, 2 if task == "good" else 1, rng=gen)


def closed_form_alignment(target: CaptionTarget, task: str, config: TextConfig, pairs: str
                          ) -> ClosedForm | None:
    """The alignment of a task's closed form, or None when its law is too large to enumerate."""
    world = target.scene.world if pairs == "world" else None
    try:
        if task == "ntp":
            optimum = next_token_optimum(target.law, target.k)
        else:
            optimum = span_optimum(target.law, config.spans, task, target.k, world=world)
    except (ResourceError, TooManySpans):  # more than memory, or the enumeration limit, allows
        return None
    return ClosedForm(alignment=caption_alignment(target, optimum.captions), unique=optimum.unique, gap=optimum.gap)


def check_cost(scene: GridScene, configs, budget: int, n_seeds: int, k: int | Literal["auto"]) -> None:
    """Refuse (ResourceError) a sweep that cannot fit, before any work: every task's learner and batches
    (:func:`prhsim.learners.check_text_batches`) and the records of the largest ``budget``, per seed."""
    law = caption_law(scene)
    for config in configs:
        check_text_batches(config, law.length, n_seeds, n_ids=law.vocab_size + 1, k=None if k == "auto" else int(k))
    ensure_fits(n_seeds * law.records_bytes(budget, 2),
                f"the training records of the largest budget ({n_seeds} seed(s) x {budget:,} samples)", "lower budgets")


@renamed_keyword("learners", "tasks", "good and bad are views of the JEPA learner, not learners")
def sample_efficiency(scene: GridScene, *, budgets: Sequence[int] = DEFAULT_BUDGETS, n_seeds: int = 3,
                      steps: int = 3000, batch_size: int = 512, lr: float = 1e-2, hidden: Sequence[int] = (128,),
                      min_span: int = 9, pairs: Literal["world", "same"] = "world",
                      tasks: Sequence[str] = TEXT_TASKS, metric: Metric = "mutual_knn",
                      reference_budget: int | None = None, k: int | Literal["auto"] = "auto", n_fit: int = 1000,
                      closed_forms: bool = True, name: str = "gridscene", rng: int = 0,
                      progress: Callable[..., None] | None = None) -> SampleEfficiency:
    """Run the sample-efficiency sweep (module docstring) and compute the ratios.

    ``progress(message, done, total)``: the closed forms (uncounted), then once per run and at the end, counted
    in :func:`run_units` (the training's records seen, and the records drawn).

    Raises:
        ValueError: on a bad argument (the message names it).
    """
    start = time.perf_counter()
    budgets = sorted({int(b) for b in budgets})
    if not budgets or budgets[0] < 1:
        raise ValueError(f"budgets must be positive integers, got {budgets}")
    if pairs not in ("world", "same"):
        raise ValueError(f"pairs must be 'world' or 'same', got {pairs!r}")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    tasks = list(dict.fromkeys(tasks))
    if "good" not in tasks or any(x not in TEXT_TASKS for x in tasks):
        raise ValueError(f"tasks must include 'good' and be among {TEXT_TASKS}, got {tasks}")
    if reference_budget is not None and int(reference_budget) not in budgets:
        raise ValueError(f"the reference budget {reference_budget} is not one of the budgets {budgets}")
    if isinstance(n_seeds, bool) or int(n_seeds) != n_seeds or not 1 <= n_seeds <= MAX_SEEDS:
        raise ValueError(f"n_seeds must be an integer in 1..{MAX_SEEDS}, got {n_seeds!r}")
    say = as_progress(progress)
    seed_list = tuple(int(rng) * 1000 + s for s in range(int(n_seeds)))
    configs = {x: TextConfig.for_task(x, steps=int(steps), batch_size=int(batch_size), lr=float(lr),
                             hidden=tuple(hidden), min_span=int(min_span)) for x in tasks}
    check_cost(scene, configs.values(), budgets[-1], len(seed_list), k)  # before anything is computed
    say("the pixel closed form and the evaluation set")
    target = caption_target(scene, k=k, n_fit=n_fit, rng=np.random.default_rng([int(rng), 0]))
    ceilings: dict[str, ClosedForm | None] = {}
    if closed_forms:
        for x in tasks:
            say(f"closed form of {LABELS[x]}")
            ceilings[x] = closed_form_alignment(target, x, configs[x], pairs)
    untrained = {}
    cells: list[Cell] = []
    units = {budget: run_units(int(steps), int(batch_size), budget, len(seed_list)) for budget in budgets}
    total, done, runs = len(tasks) * sum(units.values()), 0, 0
    for x in tasks:
        stream = TEXT_TASKS.index(x) + 1  # a task's records do not depend on which others run
        records0 = None
        for budget in budgets:
            say(f"{LABELS[x]}: {budget:,} samples x {len(seed_list)} seeds ({runs}/{len(tasks) * len(budgets)} runs "
                "done)", done=done, total=total)
            records = [draw_records(scene, target, x, budget, pairs, np.random.default_rng([int(rng), stream, budget, s]))
                       for s in range(len(seed_list))]
            records0 = records0 or records
            result = train_text(target.law, records, target.k, configs[x], seeds=seed_list)
            features = embed_captions(result, target.law, target.captions)
            for s, seed in enumerate(seed_list):
                cells.append(Cell(task=x, budget=budget, seed=seed, tokens=result.tokens,
                                  final_loss=float(result.loss[s, -1]),
                                  alignment=caption_alignment(target, features[s])))
            done, runs = done + units[budget], runs + 1
        init = initial_text(target.law, target.k, configs[x], seeds=seed_list[:1], records=records0[:1])
        untrained[x] = caption_alignment(target, embed_captions(init, target.law, target.captions)[0])
    say(f"{runs} runs done", done=done, total=total)
    curves = [_curve(x, cells, budgets, metric) for x in tasks]
    good = next(c for c in curves if c.task == "good")
    reference = default_reference(budgets, good.mean) if reference_budget is None else int(reference_budget)
    ratios = [_ratio(c, good, cells, budgets, reference, metric, seed_list) for c in curves if c.task != "good"]
    law = target.law
    return SampleEfficiency(
        prhsim_version=__version__, world=name, n_states=law.n_states, k=target.k, pairs=pairs, min_span=int(min_span),
        steps=int(steps), batch_size=int(batch_size), lr=float(lr), hidden=[int(h) for h in hidden],
        seeds=list(seed_list), budgets=budgets, metric=metric, knn_k=target.knn_k, knn_chance=target.knn_chance,
        r1_chance=target.r1_chance, n_fit=int(np.sum(target.fit)), closed_forms=ceilings, untrained=untrained,
        cells=cells, curves=curves, reference_budget=reference, ratios=ratios, seconds=time.perf_counter() - start)


def default_reference(budgets: Sequence[int], good: Sequence[float]) -> int:
    """The first budget at which good views reach half their alignment at the largest budget."""
    return int(next(b for b, a in zip(budgets, good) if a >= 0.5 * good[-1]))


def _values(cells: list[Cell], task: str, budget: int, metric: str) -> list[float]:
    return [getattr(c.alignment, metric) for c in cells if c.task == task and c.budget == budget]


def _curve(task: str, cells: list[Cell], budgets: list[int], metric: str) -> Curve:
    rows = [_values(cells, task, b, metric) for b in budgets]
    per_budget = {c.budget: c.tokens for c in cells if c.task == task}
    return Curve(task=task, label=LABELS[task], tokens_per_sample=per_budget[budgets[0]] // budgets[0],
                 mean=[float(np.mean(r)) for r in rows], low=[float(np.min(r)) for r in rows],
                 high=[float(np.max(r)) for r in rows])


def _ratio(curve: Curve, good: Curve, cells: list[Cell], budgets: list[int], reference: int, metric: str,
           seeds: tuple[int, ...]) -> Ratio:
    i = budgets.index(reference)
    target = good.mean[i]
    needed = sample_ratio(budgets, curve.mean, target, reference)
    tokens = curve.tokens_per_sample / good.tokens_per_sample
    per_seed = []
    for s in seeds:
        mine = [next(getattr(c.alignment, metric) for c in cells if c.task == curve.task and c.budget == b
                     and c.seed == s) for b in budgets]
        theirs = next(getattr(c.alignment, metric) for c in cells if c.task == "good" and c.budget == reference
                      and c.seed == s)
        per_seed.append(sample_ratio(budgets, mine, theirs, reference))
    return Ratio(task=curve.task, reference_budget=reference, target=target, samples=needed.value * reference,
                 kind=needed.kind, ratio=needed.value, token_ratio=needed.value * tokens,
                 seed_ratios=[r.value for r in per_seed], seed_kinds=[r.kind for r in per_seed])


def chance_level(result: SampleEfficiency) -> float:
    """The chance level of the sweep's metric: ``k/(N − 1)`` for mutual k-NN, ``r/|held out|`` for R@r."""
    if result.metric.startswith("mutual"):
        return result.knn_chance
    return min(1.0, (5 if result.metric == "r5" else 1) * result.r1_chance)


def ratio_lines(result: SampleEfficiency) -> list[str]:
    """One line per task: the samples and tokens it needs to reach good views' alignment at the reference budget."""
    lines = [f"target: good views' {result.metric} at {result.reference_budget:,} samples"]
    for r in result.ratios:
        sign = {"exact": "", "at_most": "≤ ", "more_than": "> "}[r.kind]
        finite = [x for x, kind in zip(r.seed_ratios, r.seed_kinds) if kind == "exact"]
        spread = f" (seeds {min(finite):.1f}–{max(finite):.1f}x)" if len(finite) == len(r.seed_ratios) > 1 else ""
        lines.append(f"{r.task}: {sign}{r.ratio:.3g}x samples, {sign}{r.token_ratio:.3g}x tokens{spread}")
    return lines


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class SampleEfficiencySettings(Settings):
    """``prhsim sweep sample-efficiency``: good views, bad views and next-token prediction from finite samples.

    Attributes:
        world: a world with a caption renderer (gridscene; default 4x4 grid, 2 objects, 2 shapes, 2 colours).
        budgets: training samples (records) per run (default 300, 1000, 3000, 10000, 30000).
        n_seeds: seeds per budget (vmapped together).
        steps, batch_size, lr, hidden: the learners' optimisation (the same for every task and budget).
        min_span: the shortest span a JEPA view cuts.
        pairs: "world" (views of a positive pair of states, the pixels' pair law) or "same" (one state).
        tasks: which tasks: "good" and "bad" (the JEPA learner on those views), "ntp" (next-token
            prediction); good is required: the ratios are against it.
        metric: the alignment the curves and ratios use.
        reference_budget: the budget whose good-view alignment is the target (default: the first
            budget at which good views reach half their alignment at the largest budget).
        k: features (default: the pixel closed form's gap).
        n_fit: states the retrieval map is fitted on.
        closed_forms: also score each task's closed form (enumerates every span and prefix).
        seed: seeds the records, the initialisations and the evaluation draws.
    """

    grids = ('budgets', 'tasks')

    renamed = {"seeds": "n_seeds", "learners": "tasks"}

    world: WorldConfig = Field(default_factory=lambda: GridSceneWorld(size=4, objects=2, shapes=2, colours=2))
    budgets: list[Annotated[int, Field(ge=2)]] = Field(default_factory=lambda: list(DEFAULT_BUDGETS), min_length=1)
    n_seeds: int = Field(3, ge=1, le=32)
    steps: int = Field(3000, ge=20)
    batch_size: int = Field(512, ge=2)
    lr: float = Field(1e-2, gt=0)
    hidden: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [128])
    min_span: int = Field(9, ge=1)
    pairs: Literal["world", "same"] = "world"
    tasks: list[Literal["good", "bad", "ntp"]] = Field(default_factory=lambda: ["good", "bad", "ntp"])
    metric: Literal["mutual_knn", "mutual_knn_mean", "r1", "r5"] = "mutual_knn"
    reference_budget: int | None = Field(None, ge=2)
    k: int | Literal["auto"] = "auto"
    n_fit: int = Field(1000, ge=2)
    closed_forms: bool = True
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _captioned(self) -> "SampleEfficiencySettings":
        if self.world.kind != "gridscene":
            raise ValueError(f"sample-efficiency needs a world with a caption renderer (gridscene), got {self.world.kind}")
        if "good" not in self.tasks:
            raise ValueError("tasks must include good: the ratios are measured against good views")
        if self.reference_budget is not None and self.reference_budget not in self.budgets:
            raise ValueError(f"reference_budget {self.reference_budget} is not one of the budgets {self.budgets}")
        return self


def notes(s: SampleEfficiencySettings) -> list[str]:
    """What cannot fit is refused before any work (:func:`check_cost`); no note otherwise."""
    configs = [TextConfig.for_task(x, steps=s.steps, batch_size=s.batch_size, lr=s.lr, hidden=tuple(s.hidden),
                                   min_span=s.min_span) for x in dict.fromkeys(s.tasks)]
    check_cost(s.world.build_scene(), configs, max(s.budgets), s.n_seeds, s.k)
    return []


def run_units(steps: int, batch_size: int, budget: int, n_seeds: int) -> int:
    """Work units of one run: per seed, the records its training sees (steps x batch_size) and RECORD_UNITS per
    record of the budget drawn and embedded."""
    return n_seeds * (steps * batch_size + RECORD_UNITS * budget)


def estimate(s: SampleEfficiencySettings) -> Any:
    """The closed forms (CLOSED_FORM_SECONDS per JEPA task, scaled by the captions against the default scene's;
    next-token prediction's is quick), then UNIT_SECONDS x :func:`run_units` of every run x max(1, Σ hidden / 128)."""
    from prhsim.experiments.sweeps._registry import Estimate

    tasks = list(dict.fromkeys(s.tasks))
    law = caption_law(s.world.build_scene())
    captions = law.n_states * law.modality.n_nuisance
    jepa = sum(x != "ntp" for x in tasks)
    closed = CLOSED_FORM_SECONDS * jepa * captions / DEFAULT_CAPTIONS if s.closed_forms else 0.0
    units = len(tasks) * sum(run_units(s.steps, s.batch_size, b, s.n_seeds) for b in s.budgets)
    width = max(1.0, sum(s.hidden) / 128)
    runs = len(tasks) * len(s.budgets)
    return Estimate(closed + UNIT_SECONDS * units * width,
                    f"{runs} runs of {s.n_seeds} seed(s) x {s.steps:,} steps of {s.batch_size:,} records"
                    + (f", after {jepa} closed forms of {captions:,} captions" if closed else ""))


def run(s: SampleEfficiencySettings, say: Progress | None = None) -> Any:
    """``prhsim sweep sample-efficiency`` from its settings; ``say`` reports progress (counted in :func:`run_units`)."""
    scene = s.world.build_scene()
    return sample_efficiency(scene, budgets=s.budgets, n_seeds=s.n_seeds, steps=s.steps,
                             batch_size=s.batch_size, lr=s.lr, hidden=s.hidden, min_span=s.min_span, pairs=s.pairs,
                             tasks=s.tasks, metric=s.metric, reference_budget=s.reference_budget, k=s.k,
                             n_fit=s.n_fit, closed_forms=s.closed_forms, name=s.world.describe(), rng=s.seed,
                             progress=say)


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    lines = [f"{r.world}: {r.n_states:,} states, k = {r.k}, {r.pairs} pairs; {r.metric} (chance {chance_level(r):.3g}) "
             f"at {', '.join(f'{b:,}' for b in r.budgets)} samples, mean over {len(r.seeds)} seeds:"]
    for c in r.curves:
        closed = r.closed_forms.get(c.task)
        tail = "" if closed is None else (f"; closed form {getattr(closed.alignment, r.metric):.3f}"
                                          + ("" if closed.unique else " (k splits a tie)"))
        lines.append(f"  {c.label} ({c.tokens_per_sample} tokens/sample): "
                     f"{', '.join(f'{m:.3f}' for m in c.mean)}{tail}; untrained {getattr(r.untrained[c.task], r.metric):.3f}")
    return lines + ratio_lines(r)
