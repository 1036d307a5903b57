"""Sample efficiency of good views, bad views and next-token prediction in a world with a known answer (docs/theory.md §5.1, §5.4).

For every *task* (:data:`prhsim.learners.TEXT_TASKS`: the JEPA learner on good views, the JEPA
learner on bad views, and the next-token learner), every budget N (records in the training set)
and every seed: draw N records from the caption law (in the :class:`prhsim.worlds.CaptionStyle`
of the settings), then

* *learn*: train the token encoder for a fixed number of steps, embed every whole caption and score
  it against the pixel modality's closed form (:func:`prhsim.experiments._caption_alignment.caption_alignment`);
* *predict*: fit the task's objective exactly within linear encoders of the same input features on
  the same records (:mod:`prhsim.experiments._caption_prediction`: no training) and score it the same way.

Runs of different tasks and budgets share the cores from ``threads`` threads; every run's
randomness is keyed by (seed, task, budget, seed index), so the numbers do not depend on the order.

Records, by ``pairs``:

* "world" (default, the theorem's setting): a JEPA record is a positive pair ``(z, z') ~ π`` of
  the world — the pixel modality's own pair law — with one caption of each state: of independent
  wording for good views, of shared wording for bad views (the wording is copied across the pair,
  docs/theory.md §4);
* "same": both views describe one state: two captions of independent wording (good), one caption
  cut twice (bad); the text's pair law then differs from the image's, and the theorem no longer
  says the two meet.

Next-token prediction reads each caption alone: its record is one state with one caption, in
both modes. Token accounting: a record's tokens are every token of every caption it holds.

Beside the curves: each task's *closed form* on the same law (the span views' whitened optimum,
:func:`prhsim.optima.span_optimum`; correspondence analysis of the next-token law,
:func:`prhsim.optima.next_token_optimum`), the alignment a universal encoder reaches with
unlimited data; the *limit* of the prediction (the linear class on the law); and the *untrained*
encoder's alignment.

The ratios (:mod:`prhsim.experiments.sweeps._sample_ratios`), for the learners and for the prediction:
for bad views and next-token prediction, the samples each needs to reach ``target_fraction`` of
the alignment it reaches at the largest budget, against the samples good views need to reach the
same alignment, with a bootstrap interval over seeds; the token ratio scales it by the tokens a
record of each holds. A task below ``max(2 x chance, its untrained encoder)`` has no ratio.
"""

from __future__ import annotations

import concurrent.futures
import math
import time
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal, Sequence

import numpy as np
from pydantic import Field, model_validator

from prhsim import __version__
from prhsim._budget import ResourceError, ensure_fits
from prhsim._rng import CAPTION_CHECK, CAPTION_RECORDS, CAPTION_TARGET
from prhsim._types import Progress, as_progress
from prhsim.config import CaptionConfig, GridSceneWorld, Settings, WorldConfig
from prhsim.experiments._caption_alignment import (
    CaptionAlignment,
    CaptionTarget,
    caption_alignment,
    caption_target,
)
from prhsim.experiments._caption_prediction import predicted_alignment, predicted_limit
from prhsim.experiments.sweeps._sample_efficiency_results import (
    Agreement,
    Cell,
    ClosedForm,
    Curve,
    Ratio,
    SampleEfficiency,
    metric_chance,
    summary_lines,
)
from prhsim.experiments.sweeps._sample_ratios import bootstrap_ratio
from prhsim.learners import (
    TEXT_TASKS,
    TextConfig,
    check_text_batches,
    embed_captions,
    initial_text,
    train_text,
)
from prhsim.optima import next_token_optimum, span_optimum
from prhsim.worlds import CaptionStyle, GridScene, Records, SpanLaw, TooManySpans, caption_law

DEFAULT_BUDGETS = (100, 300, 1000, 3000, 10000, 30000)
#: Seeds of one sweep: ``1000·rng + s`` for s < n_seeds, so sweeps of different ``rng`` never share one.
MAX_SEEDS = 1000
#: The time estimate's constants, measured on a shared 2-core CPU (docs/experiments/sample-efficiency.md):
#: a record seen in training (UNIT_SECONDS), a record drawn and fitted by the prediction (RECORD_UNITS units),
#: the closed forms of good and bad views on the default scene's 32,768 captions (CLOSED_FORM_SECONDS each,
#: scaled by the captions), and one scoring of every caption (SCORE_SECONDS per 32,768 captions).
UNIT_SECONDS, RECORD_UNITS, CLOSED_FORM_SECONDS, SCORE_SECONDS, DEFAULT_CAPTIONS = 2.0e-6, 20, 10.0, 0.3, 32_768
LABELS = {"good": "good-view JEPA", "bad": "bad-view JEPA", "ntp": "next-token prediction"}
SOURCES = ("learner", "prediction")
Metric = Literal["mutual_knn", "mutual_knn_mean", "r1", "r5"]
ALIGNMENT_SCORES: tuple[str, ...] = ("mutual_knn", "mutual_knn_mean", "r1", "r5")
def draw_records(scene: GridScene, target: CaptionTarget, task: str, count: int, pairs: str,
                 gen: np.random.Generator) -> Records:
    """A task's training records (module docstring)."""
    law = target.law
    if pairs == "world" and task != "ntp":
        return law.sample_pairs(scene.world, count, wording="independent" if task == "good" else "shared", rng=gen)
    return law.sample(count, 2 if task == "good" else 1, rng=gen)


def closed_form_alignment(target: CaptionTarget, task: str, spans: SpanLaw, pairs: str) -> ClosedForm | None:
    """The alignment of a task's closed form, or None when its law is too large to enumerate."""
    world = target.scene.world if pairs == "world" else None
    try:
        if task == "ntp":
            optimum = next_token_optimum(target.law, target.k)
        else:
            optimum = span_optimum(target.law, spans, task, target.k, world=world)
    except (ResourceError, TooManySpans):  # more than memory, or the enumeration limit, allows
        return None
    return ClosedForm(alignment=caption_alignment(target, optimum.captions), unique=optimum.unique, gap=optimum.gap)


def check_cost(scene: GridScene, configs, budget: int, n_seeds: int, k: int | Literal["auto"],
               style: CaptionStyle | None = None) -> None:
    """Refuse (ResourceError) a sweep that cannot fit, before any work: every task's learner and batches
    (:func:`prhsim.learners.check_text_batches`) and the records of the largest ``budget``, per seed."""
    law = caption_law(scene, style)
    for config in configs:
        check_text_batches(config, law.length, 1, n_ids=law.vocab_size + 1, k=None if k == "auto" else int(k))
    ensure_fits(n_seeds * law.records_bytes(budget, 2),
                f"the training records of the largest budget ({n_seeds} seed(s) x {budget:,} samples)", "lower budgets")


def sample_efficiency(scene: GridScene, *, budgets: Sequence[int] = DEFAULT_BUDGETS, n_seeds: int = 5,
                      steps: int = 3000, batch_size: int = 512, lr: float = 1e-2, hidden: Sequence[int] = (128,),
                      min_span: int = 9, pairs: Literal["world", "same"] = "world",
                      tasks: Sequence[str] = TEXT_TASKS, metric: Metric = "mutual_knn",
                      k: int | Literal["auto"] = "auto", n_fit: int = 1000, closed_forms: bool = True,
                      learn: bool = True, predict: bool = True, ridge: float = 0.0, target_fraction: float = 1.0,
                      style: CaptionStyle | None = None, threads: int = 1, name: str = "gridscene", rng: int = 0,
                      progress: Callable[..., None] | None = None) -> SampleEfficiency:
    """Run the sample-efficiency sweep (module docstring) and compute the ratios.

    ``progress(message, done, total)``: the closed forms (uncounted), then once per finished run, counted in
    :func:`run_units` (the training's records seen, and the records drawn and fitted).

    Raises:
        ValueError: on a bad argument (the message names it).
    """
    start = time.perf_counter()
    say = as_progress(progress)
    plan = _Plan.of(scene, budgets=budgets, n_seeds=n_seeds, steps=steps, batch_size=batch_size, lr=lr, hidden=hidden,
                    min_span=min_span, pairs=pairs, tasks=tasks, metric=metric, k=k, n_fit=n_fit,
                    closed_forms=closed_forms, learn=learn, predict=predict, ridge=ridge,
                    target_fraction=target_fraction, style=style, name=name, rng=rng)
    say("the pixel closed form and the evaluation set")
    forms = {}
    for x in plan.tasks:
        say(f"closed form and the prediction's limit of {LABELS[x]}")
        forms[x] = plan.forms(x)
    runs = [(x, b) for x in plan.tasks for b in plan.budgets]
    units = {b: run_units(int(steps) if learn else 0, int(batch_size), b, len(plan.seeds), predict)
             for b in plan.budgets}
    total, done = sum(units[b] for _, b in runs), 0
    found: dict[tuple[str, int], list[Cell]] = {}
    say(f"{len(runs)} runs of {len(plan.seeds)} seeds", done=0, total=total)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, int(threads))) as pool:
        futures = {pool.submit(plan.run, x, b): (x, b) for x, b in runs}
        for future in concurrent.futures.as_completed(futures):
            x, b = futures[future]
            found[x, b] = future.result()
            done += units[b]
            say(f"{LABELS[x]}: {b:,} samples x {len(plan.seeds)} seeds ({len(found)}/{len(runs)} runs done)",
                done=done, total=total)
    return plan.result(forms, [c for x, b in runs for c in found[x, b]], time.perf_counter() - start)


@dataclass(frozen=True)
class _Plan:
    """The sweep's checked arguments, the pixel target every run is scored against, and its three pieces of work:
    a task's closed forms (:meth:`forms`), one run (:meth:`run`: a task at a budget, every seed) and the result
    (:meth:`result`). Each piece depends on the arguments and its own coordinates alone."""

    scene: GridScene
    args: dict[str, Any]
    budgets: list[int]
    tasks: list[str]
    seeds: tuple[int, ...]
    configs: dict[str, TextConfig]
    target: CaptionTarget
    spans: SpanLaw

    @classmethod
    def of(cls, scene: GridScene, **args: Any) -> "_Plan":
        budgets = sorted({int(b) for b in args["budgets"]})
        if not budgets or budgets[0] < 1:
            raise ValueError(f"budgets must be positive integers, got {budgets}")
        if args["pairs"] not in ("world", "same"):
            raise ValueError(f"pairs must be 'world' or 'same', got {args['pairs']!r}")
        if args["metric"] not in ALIGNMENT_SCORES:
            raise ValueError(f"metric must be one of {ALIGNMENT_SCORES}, got {args['metric']!r}")
        tasks = list(dict.fromkeys(args["tasks"]))
        if "good" not in tasks or any(x not in TEXT_TASKS for x in tasks):
            raise ValueError(f"tasks must include 'good' and be among {TEXT_TASKS}, got {tasks}")
        n_seeds = args["n_seeds"]
        if isinstance(n_seeds, bool) or int(n_seeds) != n_seeds or not 1 <= n_seeds <= MAX_SEEDS:
            raise ValueError(f"n_seeds must be an integer in 1..{MAX_SEEDS}, got {n_seeds!r}")
        if not (args["learn"] or args["predict"]):
            raise ValueError("learn and predict are both off: nothing to measure")
        if not 0 < args["target_fraction"] <= 1:
            raise ValueError(f"target_fraction must lie in (0, 1], got {args['target_fraction']}")
        args = {**args, "style": args["style"] or CaptionStyle()}
        rng = int(args["rng"])
        seeds = tuple(rng * 1000 + s for s in range(int(n_seeds)))
        configs = {x: TextConfig.for_task(x, steps=int(args["steps"]), batch_size=int(args["batch_size"]),
                                          lr=float(args["lr"]), hidden=tuple(args["hidden"]),
                                          min_span=int(args["min_span"])) for x in tasks}
        check_cost(scene, configs.values(), budgets[-1], len(seeds), args["k"], args["style"])  # before any work
        target = caption_target(scene, k=args["k"], n_fit=args["n_fit"], style=args["style"],
                                rng=np.random.default_rng([rng, CAPTION_TARGET]))
        return cls(scene, args, budgets, tasks, seeds, configs, target, SpanLaw(int(args["min_span"])))

    def records(self, x: str, budget: int, s: int) -> Records:
        """Seed index s's training records of task x at ``budget`` (``[rng, CAPTION_RECORDS + task, budget, s]``)."""
        stream = CAPTION_RECORDS + TEXT_TASKS.index(x)  # a task's records do not depend on which others run
        return draw_records(self.scene, self.target, x, budget, self.args["pairs"],
                            np.random.default_rng([int(self.args["rng"]), stream, budget, s]))

    def forms(self, x: str) -> tuple[ClosedForm | None, ClosedForm | None]:
        """Task x's closed form (with ``closed_forms``) and the prediction's limit (with ``predict``)."""
        args = self.args
        ceiling = closed_form_alignment(self.target, x, self.spans, args["pairs"]) if args["closed_forms"] else None
        limit = None
        if args["predict"]:
            world = self.scene.world if args["pairs"] == "world" else None
            limit = ClosedForm(alignment=predicted_limit(self.target, x, self.spans, self.target.k, world=world,
                                                         ridge=args["ridge"]), unique=True, gap=0.0)
        return ceiling, limit

    def run(self, x: str, budget: int) -> list[Cell]:
        """Task x at ``budget``: every seed's records, learner (with ``learn``) and prediction (with ``predict``)."""
        args, target = self.args, self.target
        records = [self.records(x, budget, s) for s in range(len(self.seeds))]
        learned: list[tuple[float | None, CaptionAlignment | None]] = [(None, None)] * len(self.seeds)
        if args["learn"]:
            result = train_text(target.law, records, target.k, self.configs[x], seeds=self.seeds)
            features = embed_captions(result, target.law, target.captions)
            learned = [(float(result.loss[s, -1]), caption_alignment(target, features[s]))
                       for s in range(len(self.seeds))]
        cells = []
        for s, seed in enumerate(self.seeds):
            guess = predicted_alignment(target, x, self.spans, target.k, records[s], ridge=args["ridge"]) \
                if args["predict"] else None
            cells.append(Cell(task=x, budget=budget, seed=seed, tokens=records[s].tokens_seen(),
                              final_loss=learned[s][0], alignment=learned[s][1], predicted=guess))
        return cells

    def result(self, forms: dict[str, tuple[ClosedForm | None, ClosedForm | None]], cells: list[Cell],
               seconds: float) -> SampleEfficiency:
        """The record: the untrained encoders' alignment, the curves, the ratios and the agreement, from the runs."""
        args, target, budgets, tasks = self.args, self.target, self.budgets, self.tasks
        learn, predict, metric = args["learn"], args["predict"], args["metric"]
        untrained = {}
        if learn:
            for x in tasks:
                init = initial_text(target.law, target.k, self.configs[x], seeds=self.seeds[:1],
                                    records=[self.records(x, budgets[0], 0)])
                untrained[x] = caption_alignment(target, embed_captions(init, target.law, target.captions)[0])
        sources = [s for s, on in zip(SOURCES, (learn, predict)) if on]
        curves = [_curve(x, src, cells, budgets, metric) for src in sources for x in tasks]
        chance = metric_chance(metric, target.knn_chance, target.r1_chance)
        ratios = []
        for src in sources:
            good = _rows(cells, "good", src, budgets, metric)
            for x in tasks:
                if x == "good":
                    continue
                floor = 2.0 * chance
                if src == "learner":
                    floor = max(floor, getattr(untrained[x], metric))
                ratios.append(_ratio(x, src, budgets, good, _rows(cells, x, src, budgets, metric), curves, floor,
                                     args["target_fraction"], args["rng"]))
        agreement = _agreement(cells, tasks, budgets, metric) if learn and predict else []
        law = target.law
        return SampleEfficiency(
            prhsim_version=__version__, world=args["name"], captions=_describe(args["style"]), n_states=law.n_states,
            k=target.k, pairs=args["pairs"], min_span=int(args["min_span"]), steps=int(args["steps"]),
            batch_size=int(args["batch_size"]), lr=float(args["lr"]), hidden=[int(h) for h in args["hidden"]],
            seeds=list(self.seeds), budgets=budgets, metric=metric, knn_k=target.knn_k,
            knn_chance=target.knn_chance, r1_chance=target.r1_chance, n_fit=int(np.sum(target.fit)),
            target_fraction=float(args["target_fraction"]),
            closed_forms={x: forms[x][0] for x in tasks if args["closed_forms"]},
            limits={x: forms[x][1] for x in tasks if predict}, untrained=untrained,
            cells=cells, curves=curves, ratios=ratios, agreement=agreement, seconds=seconds)


def _describe(style: CaptionStyle) -> str:
    return CaptionConfig(wording=list(style.wording), omission=style.omission,
                         redundancy=style.redundancy).describe() or "the template grammar"


def _score(cell: Cell, source: str, metric: str) -> float:
    alignment = cell.alignment if source == "learner" else cell.predicted
    return float(getattr(alignment, metric))


def _rows(cells: list[Cell], task: str, source: str, budgets: list[int], metric: str) -> np.ndarray:
    """(seeds, budgets): the metric of each seed at each budget."""
    seeds = sorted({c.seed for c in cells})
    table = {(c.seed, c.budget): _score(c, source, metric) for c in cells if c.task == task}
    return np.array([[table[s, b] for b in budgets] for s in seeds])


def _curve(task: str, source: str, cells: list[Cell], budgets: list[int], metric: str) -> Curve:
    rows = _rows(cells, task, source, budgets, metric)
    tokens = np.mean([c.tokens / c.budget for c in cells if c.task == task])
    return Curve(task=task, source=source, label=LABELS[task], tokens_per_sample=float(tokens),
                 mean=rows.mean(axis=0).tolist(), low=rows.min(axis=0).tolist(), high=rows.max(axis=0).tolist())


def _ratio(task: str, source: str, budgets: list[int], good: np.ndarray, mine: np.ndarray, curves: list[Curve],
           floor: float, fraction: float, rng: int) -> Ratio:
    found = bootstrap_ratio(budgets, good, mine, fraction=fraction, floor=floor,
                            rng=np.random.default_rng([int(rng), CAPTION_CHECK, TEXT_TASKS.index(task), SOURCES.index(source)]))
    per = {c.task: c.tokens_per_sample for c in curves if c.source == source}
    tokens = per[task] / per["good"]
    e = found.estimate

    def finite(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None

    return Ratio(task=task, source=source, target=e.target, task_samples=finite(e.task_samples),
                 good_samples=finite(e.good_samples), ratio=finite(e.ratio), kind=e.kind, low=finite(found.low),
                 high=finite(found.high), exact_share=found.exact_share, token_ratio=finite(e.ratio * tokens),
                 token_low=finite(found.low * tokens), token_high=finite(found.high * tokens))


def _agreement(cells: list[Cell], tasks: list[str], budgets: list[int], metric: str) -> list[Agreement]:
    out = []
    for x in tasks:
        learned, predicted = _rows(cells, x, "learner", budgets, metric), _rows(cells, x, "prediction", budgets, metric)
        for i, b in enumerate(budgets):
            a, p = float(learned[:, i].mean()), float(predicted[:, i].mean())
            out.append(Agreement(task=x, budget=b, learner=a, predicted=p, difference=a - p,
                                 within=bool(learned[:, i].min() <= p <= learned[:, i].max())))
    return out


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
#: Named settings (``preset``): each a dict of settings that the explicitly given ones override.
#: "paper-proportions": the world found with ``prhsim sweep sample-ratio`` and the closed forms
#: (docs/experiments/sample-efficiency.md) where bad views' and next-token prediction's closed forms reach 0.33 and
#: 0.37 of good views' mutual 10-NN (the paper's WIT shares: 0.48 and 0.60): 3x3 grid, 2 objects, 2 shapes,
#: 2 colours, each colour following its shape w.p. 0.7, a synonym per word, k = 15 (the pixels' gap there 0.0053).
PRESETS: dict[str, dict[str, Any]] = {
    "paper-proportions": {
        "world": {"kind": "gridscene", "size": 3, "objects": 2, "shapes": 2, "colours": 2, "dependence": 0.7},
        "captions": {"wording": ["word_synonyms"]},
        "k": 15,
        "budgets": [10, 30, 100, 300, 1000, 3000, 10000],
    },
}


class SampleEfficiencySettings(Settings):
    """``prhsim sweep sample-efficiency``: good views, bad views and next-token prediction from finite samples.

    Attributes:
        preset: a named setting of :data:`PRESETS` (the settings given beside it override its values).
        world: a world with a caption renderer (gridscene; default 4x4 grid, 2 objects, 2 shapes, 2 colours;
            ``world.dependence`` makes an object's colour follow its shape).
        captions: the captions' wording, omission and redundancy (:class:`prhsim.config.CaptionConfig`).
        budgets: training samples (records) per run.
        n_seeds: seeds per budget.
        steps, batch_size, lr, hidden: the learners' optimisation (the same for every task and budget).
        min_span: the shortest span a JEPA view cuts.
        pairs: "world" (views of a positive pair of states, the pixels' pair law) or "same" (one state).
        tasks: which tasks: "good" and "bad" (the JEPA learner on those views), "ntp" (next-token
            prediction); good is required: the ratios are against it.
        metric: the alignment the curves and ratios use.
        target_fraction: the ratios compare samples at this fraction of what each task reaches at the largest
            budget (1: the paper's definition).
        k: features of the image and of the text (default: the pixel closed form's gap).
        n_fit: states the retrieval map is fitted on.
        closed_forms: also score each task's closed form (enumerates every span and prefix).
        learn, predict: train the learners; fit the linear class on the same records (no training).
        ridge: the prediction's ridge (0: the observed span of the features).
        threads: runs computed at once.
        seed: seeds the records, the initialisations and the evaluation draws.
    """

    grids = ('budgets', 'tasks')

    renamed = {"seeds": "n_seeds", "learners": "tasks"}

    preset: str | None = None
    world: WorldConfig = Field(default_factory=lambda: GridSceneWorld(size=4, objects=2, shapes=2, colours=2))
    captions: CaptionConfig = Field(default_factory=CaptionConfig)
    budgets: list[Annotated[int, Field(ge=2)]] = Field(default_factory=lambda: list(DEFAULT_BUDGETS), min_length=1)
    n_seeds: int = Field(5, ge=1, le=32)
    steps: int = Field(3000, ge=20)
    batch_size: int = Field(512, ge=2)
    lr: float = Field(1e-2, gt=0)
    hidden: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [128])
    min_span: int = Field(9, ge=1)
    pairs: Literal["world", "same"] = "world"
    tasks: list[Literal["good", "bad", "ntp"]] = Field(default_factory=lambda: ["good", "bad", "ntp"])
    metric: Literal["mutual_knn", "mutual_knn_mean", "r1", "r5"] = "mutual_knn"
    target_fraction: float = Field(1.0, gt=0, le=1)
    k: int | Literal["auto"] = "auto"
    n_fit: int = Field(1000, ge=2)
    closed_forms: bool = True
    learn: bool = True
    predict: bool = True
    ridge: float = Field(0.0, ge=0)
    threads: int = Field(2, ge=1, le=64)
    seed: int = Field(0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("preset") is None:
            return data
        name = data["preset"]
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
        return _merged(PRESETS[name], data)

    @model_validator(mode="after")
    def _captioned(self) -> "SampleEfficiencySettings":
        if self.world.kind != "gridscene":
            raise ValueError(f"sample-efficiency needs a world with a caption renderer (gridscene), got {self.world.kind}")
        if "good" not in self.tasks:
            raise ValueError("tasks must include good: the ratios are measured against good views")
        if not (self.learn or self.predict):
            raise ValueError("learn and predict are both false: nothing to measure")
        return self


def _merged(base: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``given`` on top, nested dicts merged key by key."""
    out = dict(base)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _configs(s: SampleEfficiencySettings) -> list[TextConfig]:
    return [TextConfig.for_task(x, steps=s.steps, batch_size=s.batch_size, lr=s.lr, hidden=tuple(s.hidden),
                                min_span=s.min_span) for x in dict.fromkeys(s.tasks)]


def notes(s: SampleEfficiencySettings) -> list[str]:
    """What cannot fit is refused before any work (:func:`check_cost`); no note otherwise."""
    check_cost(s.world.build_scene(), _configs(s), max(s.budgets), s.n_seeds, s.k, s.captions.build())
    return []


def run_units(steps: int, batch_size: int, budget: int, n_seeds: int, predict: bool = True) -> int:
    """Work units of one run: per seed, the records its training sees (steps x batch_size), and RECORD_UNITS per
    record of the budget drawn, embedded and (with ``predict``) fitted."""
    return n_seeds * (steps * batch_size + (RECORD_UNITS if predict else 1) * budget)


def estimate(s: SampleEfficiencySettings) -> Any:
    """The closed forms (CLOSED_FORM_SECONDS per JEPA task, scaled by the captions against the default scene's),
    the runs (UNIT_SECONDS x :func:`run_units` x max(1, Σ hidden / 128), over the threads), and the scoring of every
    caption per seed, run and source (SCORE_SECONDS per 32,768 captions)."""
    from prhsim.experiments.sweeps._registry import Estimate

    tasks = list(dict.fromkeys(s.tasks))
    law = caption_law(s.world.build_scene(), s.captions.build())
    captions = law.n_states * law.modality.n_nuisance
    scale = captions / DEFAULT_CAPTIONS
    jepa = sum(x != "ntp" for x in tasks)
    closed = CLOSED_FORM_SECONDS * jepa * scale if s.closed_forms else 0.0
    steps = s.steps if s.learn else 0
    units = len(tasks) * sum(run_units(steps, s.batch_size, b, s.n_seeds, s.predict) for b in s.budgets)
    width = max(1.0, sum(s.hidden) / 128)
    runs = len(tasks) * len(s.budgets)
    scores = SCORE_SECONDS * scale * runs * s.n_seeds * (int(s.learn) + int(s.predict))
    seconds = closed + (UNIT_SECONDS * units * width + scores) / min(s.threads, 2)
    what = "learned and predicted" if s.learn and s.predict else ("learned" if s.learn else "predicted")
    return Estimate(seconds, f"{runs} runs of {s.n_seeds} seed(s), {what}"
                    + (f" ({s.steps:,} steps of {s.batch_size:,} records)" if s.learn else "")
                    + (f", after {jepa} closed forms of {captions:,} captions" if closed else ""))


def run(s: SampleEfficiencySettings, say: Progress | None = None) -> Any:
    """``prhsim sweep sample-efficiency`` from its settings; ``say`` reports progress (counted in :func:`run_units`)."""
    scene = s.world.build_scene()
    return sample_efficiency(scene, budgets=s.budgets, n_seeds=s.n_seeds, steps=s.steps,
                             batch_size=s.batch_size, lr=s.lr, hidden=s.hidden, min_span=s.min_span, pairs=s.pairs,
                             tasks=s.tasks, metric=s.metric, k=s.k, n_fit=s.n_fit, closed_forms=s.closed_forms,
                             learn=s.learn, predict=s.predict, ridge=s.ridge, target_fraction=s.target_fraction,
                             style=s.captions.build(), threads=s.threads, name=s.world.describe(), rng=s.seed,
                             progress=say)


def _plan(s: SampleEfficiencySettings) -> _Plan:
    return _Plan.of(s.world.build_scene(), budgets=s.budgets, n_seeds=s.n_seeds, steps=s.steps,
                    batch_size=s.batch_size, lr=s.lr, hidden=s.hidden, min_span=s.min_span, pairs=s.pairs,
                    tasks=s.tasks, metric=s.metric, k=s.k, n_fit=s.n_fit, closed_forms=s.closed_forms, learn=s.learn,
                    predict=s.predict, ridge=s.ridge, target_fraction=s.target_fraction, style=s.captions.build(),
                    name=s.world.describe(), rng=s.seed)


def cells(s: SampleEfficiencySettings) -> list[dict[str, Any]]:
    """Each task's closed forms, then each run (a task at a budget, every seed: the seeds share one vmapped
    training), tasks in order and budgets ascending."""
    tasks, budgets = list(dict.fromkeys(s.tasks)), sorted(set(s.budgets))
    return [{"part": "forms", "task": x} for x in tasks] + \
        [{"part": "run", "task": x, "budget": b} for x in tasks for b in budgets]


def cell(s: SampleEfficiencySettings, coordinates: dict[str, Any]) -> dict[str, Any]:
    """One part: a task's closed form and the prediction's limit, or one run's records (each seed's own streams)."""
    start = time.perf_counter()
    plan = _plan(s)
    x = coordinates["task"]
    if coordinates["part"] == "forms":
        ceiling, limit = plan.forms(x)
        record = {"closed_form": None if ceiling is None else ceiling.model_dump(mode="json"),
                  "limit": None if limit is None else limit.model_dump(mode="json")}
    else:
        record = {"cells": [c.model_dump(mode="json") for c in plan.run(x, int(coordinates["budget"]))]}
    return {**record, "seconds": time.perf_counter() - start}


def reduce(s: SampleEfficiencySettings, records: list[dict[str, Any]]) -> SampleEfficiency:
    """The sweep's result from its parts (seconds summed over the cells)."""
    plan = _plan(s)
    forms, runs = {}, []
    for coordinates, record in zip(cells(s), records):
        if coordinates["part"] == "forms":
            forms[coordinates["task"]] = tuple(None if record[key] is None else ClosedForm.model_validate(record[key])
                                               for key in ("closed_form", "limit"))
        else:
            runs += [Cell.model_validate(c) for c in record["cells"]]
    return plan.result(forms, runs, sum(r["seconds"] for r in records))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep (:func:`summary_lines`)."""
    return summary_lines(r)
