"""Figure of the next-token sweep (docs/theory.md §5): deviation from CA against the dependence strength σ_1.

* left: ``s_Θ`` of the whitened log-bilinear optimum and of the PMI proxy to the CA context features,
  against ``σ_1`` (log-log, one colour per world), with the reference line ``0.76 σ_1`` of docs/theory.md §5;
* right: which closed form is the better proxy of the trained optimum: ``s_Θ`` of CA and of the PMI
  proxy to the whitened log-bilinear optimum.

Drawn on a standalone figure (no pyplot); matplotlib is imported only when drawing. Every series
carries a gid (the constants below, then ``-<world>``) so tests can find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import COLOURS
from prhsim.experiments.sweeps._ntp_ca import NtpCaResult
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: Log axes are floored here (an exact agreement is 0).
FLOOR = 1e-17
#: The slope of docs/theory.md §5's measurement: ``s_Θ ≈ 0.76 σ_1`` as ``σ_1 → 0``.
REFERENCE_SLOPE = 0.76
#: gids: "<prefix>-<world>" per world, and the reference line.
NTP_FIT = "ntp-fit"
NTP_PMI = "ntp-pmi"
NTP_PMI_FIT = "ntp-pmi-fit"
NTP_CA_FIT = "ntp-ca-fit"
NTP_REFERENCE = "ntp-reference"


def ntp_ca_figure(result: NtpCaResult) -> Figure:
    """Log-log ``s_Θ`` against ``σ_1``: optimum and PMI proxy vs CA (left), CA and PMI vs the optimum (right)."""
    if not result.cells or not any(result.cells):
        raise ValueError("the sweep has no cell to draw")
    fig = new_figure((11.0, 4.4))
    left, right = fig.subplots(1, 2, sharex=True)
    sigmas = np.array([c.sigma_1 for row in result.cells for c in row])
    for w, row in enumerate(result.cells):
        colour = COLOURS[w % len(COLOURS)]
        x = np.array([c.sigma_1 for c in row])
        left.plot(x, np.maximum([c.s_theta for c in row], FLOOR), "o-", color=colour, ms=4, lw=1,
                  label=f"world {w}: log-bilinear optimum", gid=f"{NTP_FIT}-{w}")
        left.plot(x, np.maximum([c.pmi_s_theta for c in row], FLOOR), "s", mfc="none", color=colour, ms=6,
                  label=f"world {w}: PMI proxy", gid=f"{NTP_PMI}-{w}")
        right.plot(x, np.maximum([c.s_theta for c in row], FLOOR), "o-", color=colour, ms=4, lw=1,
                   label=f"world {w}: CA", gid=f"{NTP_CA_FIT}-{w}")
        right.plot(x, np.maximum([c.pmi_fit_s_theta for c in row], FLOOR), "s--", mfc="none", color=colour, ms=5,
                   lw=0.8, label=f"world {w}: PMI proxy", gid=f"{NTP_PMI_FIT}-{w}")
    positive = sigmas[sigmas > 0]
    if positive.size:
        line = np.geomspace(positive.min(), positive.max(), 50)
        left.plot(line, REFERENCE_SLOPE * line, "--", color="black", lw=1.2,
                  label=rf"docs/theory.md §5: ${REFERENCE_SLOPE}\,\sigma_1$", gid=NTP_REFERENCE)
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(r"dependence strength $\sigma_1$ (top canonical correlation)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper left")
    left.set_ylabel(r"$s_\Theta$ to the CA context features")
    ratio = result.median_small_ratio
    left.set_title(f"distance to CA; median $s_\\Theta/\\sigma_1$ at small $\\sigma_1$ = {ratio:.2f}",
                   fontsize="medium")
    right.set_ylabel(r"$s_\Theta$ to the whitened log-bilinear optimum")
    right.set_title("which closed form is closer to the trained optimum", fontsize="medium")
    fig.suptitle(f"next-token prediction, {result.n_states} states, {result.vocab} tokens, "
                 f"{result.context}-token contexts, k = {result.k}", fontsize="medium")
    return fig
