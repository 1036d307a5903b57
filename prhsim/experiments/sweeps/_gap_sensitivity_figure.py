"""The figure of ``prhsim sweep gap-sensitivity``: ``s_Θ`` perturbed vs unperturbed, solver vs solver and start vs
start against the gap δ, with the δ^{-1} bounds; the tie drawn apart at the left (docs/theory.md §1.2, §3).

Drawn on a standalone figure (no pyplot); matplotlib is imported only when drawing. Every
predicted or median curve carries a gid (the constants below) so tests can find it; a
None prediction (undetermined, or an infinite bound) is drawn as a gap (NaN).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import FLOOR, nan_gaps
from prhsim.experiments.sweeps._gap_sensitivity import GapSensitivity
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gids of the gap figure: "gap-<perturbed|solver|starts>" and "gap-bound-<yws|dk>".
GAP_CURVE = "gap"
GAP_BOUND = "gap-bound"


def gap_figure(result: GapSensitivity) -> Figure:
    """s_Θ against the gap δ (log-log): perturbed vs unperturbed, solver vs solver, start vs start, with bounds."""
    fig = new_figure((7.5, 4.8))
    ax = fig.subplots()
    gapped = [c for c in result.cells if not c.tie]
    ties = [c for c in result.cells if c.tie]
    x = np.array([c.gap for c in gapped])
    curves = (("perturbed", "perturbed_s_theta", "tab:red", "perturbed vs unperturbed"),
              ("solver", "solver_s_theta", "tab:blue", "dense eigh vs Lanczos"),
              ("starts", "start_s_theta", "tab:purple", "Lanczos, two random starts"))
    for key, field, colour, label in curves:
        ax.plot(x, np.maximum([getattr(c, field) for c in gapped], FLOOR), "o-", color=colour, ms=4,
                label=label, gid=f"{GAP_CURVE}-{key}")
    ax.plot(x, nan_gaps([c.yws_bound for c in gapped]), "--", color="black", label=r"Yu–Wang–Samworth $2\|E\|/\delta$",
            gid=f"{GAP_BOUND}-yws")
    ax.plot(x, nan_gaps([c.dk_bound for c in gapped]), ":", color="tab:green", label=r"Davis–Kahan $\|EU_2\|/\delta'$",
            gid=f"{GAP_BOUND}-dk")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if ties:  # δ = 0 has no place on a log axis: drawn a decade left of the smallest gap, behind a rule
        x_tie = (x.min() if x.size else 1.0) / 10
        for shift, (key, field, colour, _) in zip((0.7, 1.0, 1.4), curves):
            ax.plot(np.full(len(ties), x_tie * shift), np.maximum([getattr(c, field) for c in ties], FLOOR), "*",
                    color=colour, ms=10)
        ax.axvline(x_tie * 3, color="tab:gray", lw=0.8)
        ax.annotate("tie\n(δ = 0)", (x_tie, 1.0), xytext=(0, 8), textcoords="offset points", ha="center",
                    fontsize="small", color="tab:gray")
    ax.axhline(1.0, color="tab:gray", lw=0.8, ls="-.")
    ax.set_ylim(1e-16, 30.0)
    ax.set_xlabel(r"gap $\delta = \mu_1 - \mu_2$")
    ax.set_ylabel(r"$s_\Theta$ (k = 1)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="lower left")
    ax.set_title(f"path({result.n}) ⊗ path({result.n}), perturbation t = {result.perturbation:g}", fontsize="medium")
    return fig
