"""The convergence figure of ``prhsim run --learner``: distance to the closed form against step.

One panel per modality; in each, one curve per learner (the median ``s_Θ`` over
seeds) with a band from the smallest to the largest seed. ``s_Θ`` is the subspace
distance between the learned features, centred and whitened under p, and the
modality's closed-form optimum (docs/theory.md §2). A log scale, floored at 1e-16
(an exact run reaches rounding). A marker shows where each seed stopped on
convergence, and a dashed line the theory's rate for the preconditioned heavy-ball
method (``√β`` per step, docs/theory.md §1.5), drawn through the median's last point.
Minibatch hard whitening gets a dotted line at its final median s_Θ, labelled with its
batch size: batch whitening's expected loss is not the population loss, so the curve
stops at a bias that shrinks with B (docs/learning.md), not at rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments._results import RunResult
from prhsim.io import new_figure
from prhsim.learners import LEARNERS

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: Floor of the log axis.
FLOOR = 1e-16
#: gid prefix by which tests find each learner's median curve ("convergence-<learner>-<modality>"),
#: its stopping markers ("<prefix>-stop-…") and its predicted rate ("<prefix>-rate-…").
CURVE_GID = "convergence"
#: The predicted rate is drawn over this fraction of the logged steps, ending at the last one.
RATE_SPAN = 0.5


def convergence_figure(result: RunResult) -> Figure:
    """Median and min–max band over seeds of ``s_Θ`` to the closed form against step, per learner and modality."""
    if not result.learned:
        raise ValueError("this run trained no learner: there is no convergence to draw")
    names = [m.name for m in result.learned[0].modalities]
    fig = new_figure((3.6 * len(names) + 0.6, 3.4))
    axes = fig.subplots(1, len(names), squeeze=False, sharey=True)[0]
    for ax, name in zip(axes, names):
        for summary in result.learned:
            m = next(x for x in summary.modalities if x.name == name)
            steps = np.asarray(m.logged)
            d = np.maximum(np.asarray(m.distance, dtype=float), FLOOR)  # (seeds, logged)
            record = LEARNERS[summary.learner].objective if summary.learner in LEARNERS else None
            colour = "tab:gray" if record is None else record.colour  # stable across panels
            label = summary.learner if summary.lam is None else f"{summary.learner} (lam {summary.lam:g})"
            ax.fill_between(steps, d.min(axis=0), d.max(axis=0), color=colour, alpha=0.2, linewidth=0)
            median = np.median(d, axis=0)
            ax.plot(steps, median, color=colour, label=f"{label}, {m.data}, {m.method}",
                    gid=f"{CURVE_GID}-{summary.learner}-{name}")
            stops = [(t, d[s, list(steps).index(t)]) for s, t in enumerate(m.stopped_at)
                     if m.converged[s] and t in steps]
            if stops:
                ax.plot(*zip(*stops), linestyle="none", marker="o", markersize=5, markerfacecolor="none",
                        color=colour, gid=f"{CURVE_GID}-stop-{summary.learner}-{name}")
            if m.batch_size is not None and record is not None and record.eigen_residual:  # batch whitening's bias
                floor = float(median[-1])
                ax.axhline(max(floor, FLOOR), linestyle=":", linewidth=1, color=colour,
                           label=f"minibatch bias at B = {m.batch_size}: s_Theta {floor:.2g}",
                           gid=f"{CURVE_GID}-bias-{summary.learner}-{name}")
            if m.predicted_rate is not None and steps.size > 1:
                t = np.linspace(steps[-1] - RATE_SPAN * (steps[-1] - steps[0]), steps[-1], 20)
                rate = m.predicted_rate ** ((t - steps[-1]) / 100.0) * median[-1]
                ax.plot(t, np.maximum(rate, FLOOR), linestyle="--", linewidth=1, color=colour,
                        label=f"predicted rate ({m.predicted_rate:.2g} per 100 steps)",
                        gid=f"{CURVE_GID}-rate-{summary.learner}-{name}")
        ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    axes[0].set_ylabel(r"$s_\Theta$ to the closed form")
    seeds = len(result.learned[0].seeds)
    fig.suptitle(f"learned vs closed form: median over {seeds} seed(s), band min-max, "
                 "o where a seed stopped on convergence", fontsize="medium")
    return fig
