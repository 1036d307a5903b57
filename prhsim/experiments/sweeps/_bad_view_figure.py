"""The figure of ``prhsim sweep bad-view``: per pair, the predicted ``ρ_P`` step curve and the observed points
against ε, and a panel of predicted and observed k_Z per modality (docs/theory.md §4).

Drawn on a standalone figure (no pyplot); matplotlib is imported only when drawing. Every
predicted or median curve carries a gid (the constants below) so tests can find it; a
None prediction (undetermined, or an infinite bound) is drawn as a gap (NaN).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import COLOURS, nan_gaps, panels
from prhsim.experiments.sweeps._bad_view import BadViewSweep
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gids: "<prefix>-<pair or modality>" for the bad-view curves.
BAD_VIEW_PREDICTED = "bad-view-predicted"
BAD_VIEW_OBSERVED = "bad-view-observed"
BAD_VIEW_KZ_PREDICTED = "bad-view-kz-predicted"
BAD_VIEW_KZ_OBSERVED = "bad-view-kz-observed"


def bad_view_figure(result: BadViewSweep) -> Figure:
    """Per pair: predicted ρ_P (step curve) and observed ρ_P (points) against ε; last panel: k_Z per modality."""
    if not result.pairs:
        raise ValueError("the sweep has no pair of modalities to draw")
    eps = np.asarray(result.eps_grid)
    count = len(result.pairs) + 1
    cols = min(count, 4)
    fig = new_figure((3.6 * cols + 0.4, 3.3 * -(-count // cols) + 0.4))
    axes = panels(fig, count)
    for ax, pair in zip(axes, result.pairs):
        key = f"{pair.a} vs {pair.b}"
        ax.plot(eps, nan_gaps(pair.predicted_rho_p), drawstyle="steps-mid", color="black", lw=1.5,
                label="predicted", gid=f"{BAD_VIEW_PREDICTED}-{key}")
        ax.plot(eps, pair.observed_rho_p, "o", mfc="none", color="tab:red", ms=5, label="closed form",
                gid=f"{BAD_VIEW_OBSERVED}-{key}")
        undetermined = [e for e, p in zip(eps, pair.predicted_rho_p) if p is None]
        if undetermined:
            ax.plot(undetermined, np.zeros(len(undetermined)), "|", color="tab:gray", ms=10, clip_on=False,
                    label="undetermined (tie)")
        ax.set_ylim(-0.05, np.sqrt(2) + 0.1)
        ax.set_title(key, fontsize="medium")
        ax.set_xlabel(r"$\varepsilon$ (1 = good view)")
        ax.set_ylabel(r"$\rho_P$")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    ax = axes[-1]
    for i, m in enumerate(result.modalities):
        colour = COLOURS[i % len(COLOURS)]
        ax.plot(eps, nan_gaps(m.predicted_kz), drawstyle="steps-mid", color=colour, lw=1.2,
                label=f"{m.name} (|N| = {m.n_nuisance})", gid=f"{BAD_VIEW_KZ_PREDICTED}-{m.name}")
        ax.plot(eps, m.observed_kz, "o", mfc="none", color=colour, ms=4, gid=f"{BAD_VIEW_KZ_OBSERVED}-{m.name}")
    ax.set_ylim(-0.3, result.k + 0.3)
    ax.set_title(r"$k_Z$: merge rule (line), closed form (points)", fontsize="medium")
    ax.set_xlabel(r"$\varepsilon$")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    err = "n/a" if result.max_error is None else f"{result.max_error:.1e}"
    fig.suptitle(f"{result.world}, k = {result.k}: bad(ε) views of every modality; "
                 f"max |observed − predicted| = {err}", fontsize="medium")
    return fig
