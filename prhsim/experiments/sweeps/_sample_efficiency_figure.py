"""Figure of the sample-efficiency sweep (docs/theory.md §5.1): alignment against samples and against tokens.

Two panels share the y axis (the sweep's metric): against training samples (left) and against the
text tokens those samples hold (right), both on log axes. Per task: the mean over seeds (line),
the range over seeds (band), its closed form's alignment (dashed line: where unlimited data and a
universal encoder would take it) and its untrained encoder's (dotted); the chance level in grey.
The sample and token ratios at the reference budget are printed on the right panel.

Drawn on a standalone figure (no pyplot); matplotlib is imported only when drawing. Every series
carries a gid (the constants below, then ``-<task>``) so tests can find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import COLOURS
from prhsim.experiments.sweeps._sample_efficiency import SampleEfficiency, chance_level, ratio_lines
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gids: "<prefix>-<task>" for the curves, closed forms and untrained levels; the ratio text box.
CURVE = "sample-efficiency-curve"
CLOSED_FORM = "sample-efficiency-closed-form"
UNTRAINED = "sample-efficiency-untrained"
RATIO_TEXT = "sample-efficiency-ratios"
METRIC_LABELS = {"mutual_knn": "mutual 10-NN with the pixels (one caption)",
                 "mutual_knn_mean": "mutual 10-NN with the pixels (mean caption)",
                 "r1": "R@1 text → image (one rotation)", "r5": "R@5 text → image (one rotation)"}


def sample_efficiency_figure(result: SampleEfficiency) -> Figure:
    """Alignment against samples (left) and tokens (right), bands over seeds, closed forms dashed, ratios printed."""
    if not result.curves:
        raise ValueError("the sweep has no task to draw")
    from matplotlib.ticker import NullFormatter

    fig = new_figure((11.5, 4.6))
    left, right = fig.subplots(1, 2, sharey=True)
    budgets = np.asarray(result.budgets, dtype=float)
    chance = chance_level(result)
    for i, curve in enumerate(result.curves):
        colour = COLOURS[i % len(COLOURS)]
        for ax, x in ((left, budgets), (right, budgets * curve.tokens_per_sample)):
            ax.fill_between(x, curve.low, curve.high, color=colour, alpha=0.2, lw=0)
            ax.plot(x, curve.mean, "o-", color=colour, ms=4, label=curve.label, gid=f"{CURVE}-{curve.task}")
            closed = result.closed_forms.get(curve.task)
            if closed is not None:
                ax.axhline(getattr(closed.alignment, result.metric), color=colour, ls="--" if closed.unique else "-.",
                           lw=1, gid=f"{CLOSED_FORM}-{curve.task}")
            untrained = result.untrained.get(curve.task)
            if untrained is not None:
                ax.axhline(getattr(untrained, result.metric), color=colour, ls=":", lw=1,
                           gid=f"{UNTRAINED}-{curve.task}")
    for ax, xlabel in ((left, "training samples (records)"), (right, "text tokens in those samples")):
        ax.axhline(chance, color="tab:gray", lw=1, label="chance")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels collide
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
    left.set_ylabel(METRIC_LABELS.get(result.metric, result.metric))
    left.plot([], [], color="black", ls="--", lw=1, label="closed form (same colour)")
    if any(c is not None and not c.unique for c in result.closed_forms.values()):
        left.plot([], [], color="black", ls="-.", lw=1, label="closed form at a tie (one of a continuum)")
    left.plot([], [], color="black", ls=":", lw=1, label="untrained encoder")
    left.legend(fontsize="small", loc="upper left")
    right.text(0.02, 0.65, "\n".join(ratio_lines(result)), transform=right.transAxes, ha="left", va="center",
              fontsize="small", gid=RATIO_TEXT, bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "0.7"})
    fig.suptitle(f"{result.world}: {result.n_states:,} states, k = {result.k}, {result.pairs} pairs, spans of "
                 f"≥ {result.min_span} tokens; {result.steps} steps of {result.batch_size}, {len(result.seeds)} seeds",
                 fontsize="medium")
    return fig
