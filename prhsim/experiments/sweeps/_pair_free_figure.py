"""Figure of the pair-free sweep (docs/theory.md §9): success and retrieval against the gap, S and ε.

Top row: the fraction of seeds whose map was recovered (map error below the sweep's threshold),
for the spectral estimator (each modality's own pairs) and the iterative one (features only),
with the spectral estimator's predicted rate ``erf(SUCCESS·gap·√S/√2)`` (gap and S axes) and the
bad view's threshold ``ε = 1 − μ_2`` (ε axis). Bottom row: mean top-1 retrieval of held-out states
through each estimated map, through the best map, and chance.

Drawn on a standalone figure (no pyplot); every series carries a gid ``<kind>-<axis>`` so tests can find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import COLOURS
from prhsim.experiments.sweeps._pair_free import (
    METHODS,
    PairFreeResult,
    predicted_success,
)
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

AXES = ("gap", "samples", "eps")
LABELS = {"gap": r"gap $\mu_1 - \mu_2$", "samples": "samples S per modality (states and pairs)",
          "eps": r"bad-view $\varepsilon$ of modality b"}
PREDICTED = "predicted"
THRESHOLD = "eps-threshold"


def _values(result: PairFreeResult, axis: str) -> list:
    return {"gap": result.gaps, "samples": result.sample_sizes, "eps": result.eps_grid}[axis]


def pair_free_figure(result: PairFreeResult) -> Figure:
    """Success rate (top) and top-1 retrieval (bottom) against the gap, S and ε (module docstring)."""
    if not result.cells:
        raise ValueError("the sweep has no cell to draw")
    fig = new_figure((13.0, 7.0))
    axes = fig.subplots(2, 3)
    for col, axis in enumerate(AXES):
        x = np.asarray(_values(result, axis), dtype=float)
        top, bottom = axes[0, col], axes[1, col]
        if not x.size:
            top.set_visible(False)
            bottom.set_visible(False)
            continue
        for m, method in enumerate(METHODS):
            colour = COLOURS[m]
            rates = [result.rate(axis, method, v) for v in _values(result, axis)]
            top.plot(x, rates, "o-", color=colour, lw=1.2, ms=5, label=method, gid=f"{method}-{axis}")
            r1 = [np.mean([c.r1 for c in result.cells if c.axis == axis and c.method == method
                           and getattr(c, axis) == v]) for v in _values(result, axis)]
            bottom.plot(x, r1, "o-", color=colour, lw=1.2, ms=5, label=method, gid=f"r1-{method}-{axis}")
        truth = [np.mean([c.r1_true for c in result.cells if c.axis == axis and getattr(c, axis) == v])
                 for v in _values(result, axis)]
        bottom.plot(x, truth, "k--", lw=1, label="best map", gid=f"r1-true-{axis}")
        bottom.axhline(result.chance_r1, color="grey", ls=":", lw=1, label="chance")
        if axis in ("gap", "samples"):
            line = np.linspace(x.min(), x.max(), 200) if axis == "gap" else np.geomspace(x.min(), x.max(), 200)
            gap = line if axis == "gap" else result.base_gap
            size = result.base_samples if axis == "gap" else line
            top.plot(line, predicted_success(gap, size), "--", color=COLOURS[0], lw=1, alpha=0.7,
                     label="spectral, predicted", gid=f"{PREDICTED}-{axis}")
        else:
            for ax in (top, bottom):
                ax.axvline(result.eps_threshold, color="black", ls=":", lw=1, gid=THRESHOLD)
            top.text(result.eps_threshold, 0.5, r" $1-\mu_2$", fontsize="small")
        fixed = {"gap": f"S = {result.base_samples:,}", "samples": f"gap {result.base_gap:g}",
                 "eps": f"gap {result.base_gap:g}, S = {result.base_samples:,}"}[axis]
        top.set_title(f"against the {axis} ({fixed})", fontsize="medium")
        for ax in (top, bottom):
            if axis == "samples":
                ax.set_xscale("log")
            ax.set_xlabel(LABELS[axis])
            ax.grid(True, alpha=0.3)
        top.set_ylim(-0.05, 1.05)
        bottom.set_ylim(0, 1.05)
        if col == 0:
            top.set_ylabel(f"map recovered (error < {result.success_threshold:g}), fraction of seeds")
            bottom.set_ylabel("top-1 retrieval of held-out states")
        top.legend(fontsize="x-small", loc="best")
        bottom.legend(fontsize="x-small", loc="best")
    fig.suptitle(f"alignment without cross-modal pairs: {result.n_states} states, k = {result.k}, "
                 f"$\\mu_2$ = {result.mu_2:g}, $\\mu_3$ = {result.mu_3:g}, {result.n_seeds} seeds", fontsize="medium")
    return fig
