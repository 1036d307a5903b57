"""Figure of the sample-efficiency sweep (docs/theory.md §5.1, §5.4): alignment against samples and against tokens.

One panel per source against training samples, sharing the y axis (the sweep's metric): the
learners (mean over seeds, range as a band; each task's closed form dashed, its untrained encoder
dotted) and the prediction (the linear class fitted on the same records; its limit on the law
dashed). The last panel holds both sources' means against the text tokens those samples hold
(learners solid, prediction dash-dot) and the ratios. Log x axes; the chance level in grey.

Drawn on a standalone figure (no pyplot); matplotlib is imported only when drawing. Every series
carries a gid (the constants below, then ``-<task>``, and ``-prediction`` for the prediction's) so
tests can find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import COLOURS
from prhsim.experiments.sweeps._sample_efficiency_results import SampleEfficiency, chance_level
from prhsim.experiments.sweeps._sample_ratios import RATIO_SIGNS
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gids: "<prefix>-<task>" (and "-prediction") for the curves, closed forms, limits and untrained levels; the ratios.
CURVE = "sample-efficiency-curve"
CLOSED_FORM = "sample-efficiency-closed-form"
LIMIT = "sample-efficiency-limit"
UNTRAINED = "sample-efficiency-untrained"
RATIO_TEXT = "sample-efficiency-ratios"
METRIC_LABELS = {"mutual_knn": "mutual 10-NN with the pixels (one caption)",
                 "mutual_knn_mean": "mutual 10-NN with the pixels (mean caption)",
                 "r1": "R@1 text → image (one rotation)", "r5": "R@5 text → image (one rotation)"}
TITLES = {"learner": "learners (SGD)", "prediction": "prediction: the linear class fitted exactly (no SGD)"}


def sample_efficiency_figure(result: SampleEfficiency) -> Figure:
    """Alignment against samples (a panel per source) and tokens (both), bands over seeds, ratios printed."""
    if not result.curves:
        raise ValueError("the sweep has no task to draw")
    from matplotlib.ticker import NullFormatter

    sources = list(dict.fromkeys(c.source for c in result.curves))
    fig = new_figure((5.2 * (len(sources) + 1), 4.8))
    axes = fig.subplots(1, len(sources) + 1, sharey=True)
    budgets = np.asarray(result.budgets, dtype=float)
    colour = {x: COLOURS[i % len(COLOURS)] for i, x in enumerate(dict.fromkeys(c.task for c in result.curves))}
    tokens_ax = axes[-1]
    for ax, source in zip(axes, sources):
        suffix = "" if source == "learner" else "-prediction"
        for curve in (c for c in result.curves if c.source == source):
            c = colour[curve.task]
            ax.fill_between(budgets, curve.low, curve.high, color=c, alpha=0.2, lw=0)
            ax.plot(budgets, curve.mean, "o-" if source == "learner" else "x-", color=c, ms=4, label=curve.label,
                    gid=f"{CURVE}-{curve.task}{suffix}")
            tokens_ax.plot(budgets * curve.tokens_per_sample, curve.mean, "-" if source == "learner" else "-.",
                           color=c, lw=1.5 if source == "learner" else 1.0)
            if source == "learner":
                closed = result.closed_forms.get(curve.task)
                if closed is not None:
                    ax.axhline(getattr(closed.alignment, result.metric), color=c, ls="--" if closed.unique else "-.",
                               lw=1, gid=f"{CLOSED_FORM}-{curve.task}")
                untrained = result.untrained.get(curve.task)
                if untrained is not None:
                    ax.axhline(getattr(untrained, result.metric), color=c, ls=":", lw=1,
                               gid=f"{UNTRAINED}-{curve.task}")
            else:
                limit = result.limits.get(curve.task)
                if limit is not None:
                    ax.axhline(getattr(limit.alignment, result.metric), color=c, ls="--", lw=1,
                               gid=f"{LIMIT}-{curve.task}")
        ax.set_title(TITLES[source], fontsize="medium")
        ax.set_xlabel("training samples (records)")
    tokens_ax.set_xlabel("text tokens in those samples")
    tokens_ax.set_title("both against tokens (prediction dash-dot)", fontsize="medium")
    for ax in axes:
        ax.axhline(chance_level(result), color="tab:gray", lw=1, label="chance" if ax is axes[0] else None)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels collide
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel(METRIC_LABELS.get(result.metric, result.metric))
    first = axes[0]
    if "learner" in sources:
        first.plot([], [], color="black", ls="--", lw=1, label="closed form (same colour)")
        if any(c is not None and not c.unique for c in result.closed_forms.values()):
            first.plot([], [], color="black", ls="-.", lw=1, label="closed form at a tie (one of a continuum)")
        first.plot([], [], color="black", ls=":", lw=1, label="untrained encoder")
    else:
        first.plot([], [], color="black", ls="--", lw=1, label="the prediction's limit (the law)")
    first.legend(fontsize="small", loc="upper left")
    tokens_ax.text(0.02, 0.98, "\n".join(_short_ratios(result)), transform=tokens_ax.transAxes, ha="left", va="top",
                   fontsize="x-small", gid=RATIO_TEXT, bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "0.7"})
    fig.suptitle(f"{result.world} ({result.captions}): {result.n_states:,} states, k = {result.k}, {result.pairs} "
                 f"pairs, spans of ≥ {result.min_span} tokens; {result.steps} steps of {result.batch_size}, "
                 f"{len(result.seeds)} seeds", fontsize="medium")
    return fig


def _short_ratios(result: SampleEfficiency) -> list[str]:
    """The ratios in a few words each: samples over good views' (interval), tokens."""
    lines = [f"samples over good views' to reach {result.target_fraction:g} x what each reaches"]
    for r in result.ratios:
        if r.kind == "none" or r.ratio is None:
            lines.append(f"{r.task} ({r.source}): never")
            continue
        sign = RATIO_SIGNS[r.kind] + (" " if r.kind != "exact" else "")
        low = "∞" if r.low is None else f"{r.low:.3g}"
        high = "∞" if r.high is None else f"{r.high:.3g}"
        lines.append(f"{r.task} ({r.source}): {sign}{r.ratio:.3g}x [{low}, {high}], tokens {r.token_ratio:.3g}x")
    return lines
