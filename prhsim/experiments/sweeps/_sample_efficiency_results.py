"""The sample-efficiency sweep's result (:class:`SampleEfficiency`, its cells, curves, ratios and the learners'
agreement with the prediction) and how it reads: its chance level and the lines ``prhsim sweep sample-efficiency``
prints beside the paper's numbers (docs/experiments/sample-efficiency.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from prhsim.experiments._caption_alignment import CaptionAlignment
from prhsim.experiments._record import Record
from prhsim.experiments.sweeps._sample_ratios import RATIO_SIGNS

#: The paper's numbers (Balestriero & LeCun 2026): R@1 on Flickr30k after one rotation, mutual 10-NN on WIT-1024,
#: and the samples and tokens good views need fewer than next-token prediction to reach its alignment.
PAPER = {"r1": {"good": 0.246, "bad": 0.133, "ntp": 0.118}, "mutual_knn": {"good": 0.184, "bad": 0.088, "ntp": 0.111},
         "samples": 42.0, "tokens": 14.0}


class Cell(Record):
    """One task, budget and seed: the learner's alignment and the prediction's on the same records."""

    task: str
    budget: int
    seed: int
    tokens: int
    final_loss: float | None
    alignment: CaptionAlignment | None
    predicted: CaptionAlignment | None


class ClosedForm(Record):
    """An alignment with unlimited data: a task's closed form (``unique`` False when k splits a tie: the features
    are then one subspace of a continuum), or the limit of its prediction (the linear class on the law)."""

    alignment: CaptionAlignment
    unique: bool
    gap: float


class Curve(Record):
    """A task's chosen metric over the budgets, from the learners or the prediction: mean and range over seeds."""

    task: str
    source: str
    label: str
    tokens_per_sample: float
    mean: list[float]
    low: list[float]
    high: list[float]


class Ratio(Record):
    """Samples (and tokens) a task needs against good views to reach the alignment it reaches (module docstring).

    ``kind``: "exact", a bound ("at_least", "at_most", "undetermined") or "none" (no alignment above the floor:
    the samples and the ratio are then None); ``low``/``high``: the bootstrap interval of the sample ratio (None for
    an infinite end); ``exact_share``: the share of resamples that gave an exact ratio.
    """

    task: str
    source: str
    target: float
    task_samples: float | None
    good_samples: float | None
    ratio: float | None
    kind: str
    low: float | None
    high: float | None
    exact_share: float
    token_ratio: float | None
    token_low: float | None
    token_high: float | None


class Agreement(Record):
    """The learners against the prediction at one budget: means, their difference, and whether the prediction's
    mean lies within the learners' range over seeds."""

    task: str
    budget: int
    learner: float
    predicted: float
    difference: float
    within: bool


class SampleEfficiency(Record):
    """The result of :func:`sample_efficiency`."""

    prhsim_version: str
    world: str
    captions: str
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
    target_fraction: float
    closed_forms: dict[str, ClosedForm | None]
    limits: dict[str, ClosedForm]
    untrained: dict[str, CaptionAlignment]
    cells: list[Cell]
    curves: list[Curve]
    ratios: list[Ratio]
    agreement: list[Agreement]
    seconds: float


def metric_chance(metric: str, knn_chance: float, r1_chance: float) -> float:
    """The chance level of an alignment score: mutual k-NN's ``k/(N − 1)``, or ``r/|held out|`` for R@r."""
    if metric.startswith("mutual"):
        return knn_chance
    return min(1.0, (5 if metric == "r5" else 1) * r1_chance)


def chance_level(result: SampleEfficiency) -> float:
    """The chance level of the sweep's metric: ``k/(N − 1)`` for mutual k-NN, ``r/|held out|`` for R@r."""
    return metric_chance(result.metric, result.knn_chance, result.r1_chance)


def _fmt_ratio(r: Ratio) -> str:
    if r.kind == "none":
        return "never (no alignment above its floor)"
    sign = RATIO_SIGNS[r.kind] + (" " if r.kind != "exact" else "")
    low = "∞" if r.low is None else f"{r.low:.3g}"
    interval = f" [{low}, {r.high:.3g}]" if r.high is not None else f" [{low}, ∞)"
    return (f"{sign}{r.ratio:.3g}x samples{interval}, {sign}{r.token_ratio:.3g}x tokens "
            f"(at {r.target:.3g}: {r.task_samples:,.0f} against good views' {r.good_samples:,.0f})")


def ratio_lines(result: SampleEfficiency) -> list[str]:
    """One line per task and source: the samples and tokens it needs against good views, with the interval."""
    lines = [f"samples to reach {result.target_fraction:g} x what each reaches at {result.budgets[-1]:,}, "
             "over good views' (95% bootstrap over seeds):"]
    for r in result.ratios:
        lines.append(f"  {r.task} ({r.source}): {_fmt_ratio(r)}")
    return lines


def agreement_lines(result: SampleEfficiency) -> list[str]:
    """Where the learners and the prediction disagree, and by how much."""
    lines = []
    for x in dict.fromkeys(a.task for a in result.agreement):
        rows = [a for a in result.agreement if a.task == x]
        within = sum(a.within for a in rows)
        worst = max(rows, key=lambda a: abs(a.difference))
        side = "above" if worst.difference > 0 else "below"
        lines.append(f"  {x}: prediction within the learners' seed range at {within} of {len(rows)} budgets; "
                     f"largest gap {worst.difference:+.3f} at {worst.budget:,} (learners {side})")
    return (["learners against the prediction (linear class, same records):"] + lines) if lines else []


def paper_lines(result: SampleEfficiency) -> list[str]:
    """The paper's numbers beside the simulation's at the largest budget (closed forms in brackets)."""
    b = result.budgets[-1]
    lines = [f"beside the paper (at {b:,} samples; closed form in brackets):"]
    for metric, label in (("r1", "R@1 (paper: Flickr30k)"), ("mutual_knn", "mutual 10-NN (paper: WIT)")):
        paper = PAPER[metric]
        here = []
        for x in ("good", "bad", "ntp"):
            mine = [getattr(c.alignment or c.predicted, metric) for c in result.cells if c.task == x and c.budget == b]
            if not mine:
                continue
            closed = result.closed_forms.get(x)
            tail = f" [{getattr(closed.alignment, metric):.3f}]" if closed is not None else ""
            here.append(f"{x} {np.mean(mine):.3f}{tail} (paper {paper[x]:.3f})")
        lines.append(f"  {label}: " + ", ".join(here))
    ntp = [r for r in result.ratios if r.task == "ntp"]
    if ntp:
        r = ntp[0]
        lines.append(f"  next-token prediction against good views: {_fmt_ratio(r)}; the paper: {PAPER['samples']:g}x "
                     f"samples, {PAPER['tokens']:g}x tokens")
    return lines


def summary_lines(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    lines = [f"{r.world} ({r.captions}): {r.n_states:,} states, k = {r.k}, {r.pairs} pairs; {r.metric} "
             f"(chance {chance_level(r):.3g}) at {', '.join(f'{b:,}' for b in r.budgets)} samples, mean over "
             f"{len(r.seeds)} seeds:"]
    for c in r.curves:
        closed = r.closed_forms.get(c.task) if c.source == "learner" else r.limits.get(c.task)
        what = "closed form" if c.source == "learner" else "limit"
        tail = "" if closed is None else (f"; {what} {getattr(closed.alignment, r.metric):.3f}"
                                          + ("" if closed.unique else " (k splits a tie)"))
        untrained = r.untrained.get(c.task) if c.source == "learner" else None
        tail += "" if untrained is None else f"; untrained {getattr(untrained, r.metric):.3f}"
        lines.append(f"  {c.label}, {c.source} ({c.tokens_per_sample:.3g} tokens/sample): "
                     f"{', '.join(f'{m:.3f}' for m in c.mean)}{tail}")
    return lines + ratio_lines(r) + agreement_lines(r) + paper_lines(r)
