"""The figure of ``prhsim sweep kernel-mismatch``: observed ``‖sinΘ‖_F`` and residual against ``‖E‖_op`` beside
the Yu–Wang–Samworth and Davis–Kahan bounds, log axes (docs/theory.md §3).

Drawn on a standalone figure (no pyplot); matplotlib is imported only when drawing. Every
predicted or median curve carries a gid (the constants below) so tests can find it; a
None prediction (undetermined, or an infinite bound) is drawn as a gap (NaN).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import FLOOR, nan_gaps
from prhsim.experiments.sweeps._kernel_mismatch import KernelMismatchSweep
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gids: "mismatch-observed-<sin_theta|residual>" and "mismatch-bound-<bound>" (medians over worlds).
MISMATCH_OBSERVED = "mismatch-observed"
MISMATCH_BOUND = "mismatch-bound"


def kernel_mismatch_figure(result: KernelMismatchSweep) -> Figure:
    """Observed drift against ‖E‖_op (every cell, and the median over worlds) beside the medians of the bounds."""
    fig = new_figure((11.0, 4.2))
    axes = fig.subplots(1, 2)
    flat = [c for row in result.cells for c in row]
    x = np.asarray(result.median_e_op)
    panels = ((axes[0], "sin_theta", r"$\|\sin\Theta\|_F$", ("yws_sin", "dk_sin", "weyl_sin")),
              (axes[1], "residual", r"$\min_Q \|F_1^* - F_2^* Q\|_D$", ("yws_residual",)))
    labels = {"yws_sin": "Yu–Wang–Samworth", "yws_residual": "Yu–Wang–Samworth", "dk_sin": "Davis–Kahan",
              "weyl_sin": "Davis–Kahan + Weyl"}
    styles = {"yws_sin": "tab:blue", "yws_residual": "tab:blue", "dk_sin": "tab:green", "weyl_sin": "tab:olive"}
    for ax, field, ylabel, bounds in panels:
        ax.plot([c.e_op for c in flat], np.maximum([getattr(c, field) for c in flat], FLOOR), ".",
                color="tab:red", alpha=0.35, ms=4)
        ax.plot(x, np.maximum(getattr(result, f"median_{field}"), FLOOR), "o-", color="tab:red",
                label="observed (median)", gid=f"{MISMATCH_OBSERVED}-{field}")
        for name in bounds:
            worst = result.worst_ratio[name]
            ratio = "" if worst is None else f", worst ratio {worst:.2g}"
            ax.plot(x, nan_gaps(result.median_bound[name]), "--", color=styles[name],
                    label=f"{labels[name]} (median{ratio})", gid=f"{MISMATCH_BOUND}-{name}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(r"$\|E\|_{op}$")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"kernel mismatch: {result.worlds} random worlds of {result.n} states, k = {result.k}; "
                 r"$\Pi_t = (1-t)\Pi + t\Pi'$", fontsize="medium")
    return fig
