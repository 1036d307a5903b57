"""The figure of ``prhsim sweep restricted-encoder``: ``ρ_P`` per pair, restricted vs unrestricted, and per modality
``s_Θ`` to the unrestricted optimum and the Ky Fan fraction (docs/theory.md §0, §1.1).

Drawn on a standalone figure (no pyplot); matplotlib is imported only when drawing. Every
predicted or median curve carries a gid (the constants below) so tests can find it; a
None prediction (undetermined, or an infinite bound) is drawn as a gap (NaN).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import nan_gaps
from prhsim.experiments.sweeps._restricted_encoder import RestrictedEncoder
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gids of the restricted-encoder bars (one per rectangle) and the predicted ρ_P markers.
RESTRICTED_RHO = "restricted-rho-restricted"
UNRESTRICTED_RHO = "restricted-rho-unrestricted"
PREDICTED_RHO = "restricted-rho-predicted"
RESTRICTED_S_THETA = "restricted-s_theta"
RESTRICTED_KY_FAN = "restricted-ky-fan"


def restricted_figure(result: RestrictedEncoder) -> Figure:
    """ρ_P per pair (restricted vs unrestricted, predicted marked); per modality s_Θ to the optimum and Σν/Σμ."""
    fig = new_figure((13.0, 4.0))
    axes = fig.subplots(1, 3)
    keys = [f"{p.a} vs {p.b}" for p in result.pairs]
    x = np.arange(len(keys))
    ax = axes[0]
    bars = [ax.bar(x - 0.2, [p.rho_p for p in result.pairs], 0.4, color="tab:orange", label="restricted (linear)",
                   gid=RESTRICTED_RHO),
            ax.bar(x + 0.2, [p.unrestricted_rho_p for p in result.pairs], 0.4, color="tab:blue",
                   label="unrestricted (closed form)", gid=UNRESTRICTED_RHO)]
    ax.plot(x + 0.2, nan_gaps([p.predicted_rho_p for p in result.pairs]), "_", color="black", ms=18, mew=2,
            label="predicted (unrestricted)", gid=PREDICTED_RHO)
    ax.set_xticks(x, keys, rotation=15, fontsize="small")
    ax.set_ylim(0, np.sqrt(2) + 0.1)
    ax.set_ylabel(r"cross-modal $\rho_P$")
    ax.legend(fontsize="small")
    names = [m.name for m in result.modalities]
    xm = np.arange(len(names))
    labels = [f"{m.name}\n({m.inputs}, rank {m.rank})" for m in result.modalities]
    bars.append(axes[1].bar(xm, [m.s_theta for m in result.modalities], 0.6, color="tab:orange",
                            gid=RESTRICTED_S_THETA))
    axes[1].set_ylim(0, 1.05)
    axes[1].set_ylabel(r"$s_\Theta$ to the unrestricted optimum")
    bars.append(axes[2].bar(xm, nan_gaps([m.ky_fan_fraction for m in result.modalities]), 0.6, color="tab:green",
                            gid=RESTRICTED_KY_FAN))
    axes[2].axhline(1.0, color="black", lw=0.8)
    axes[2].set_ylim(0, 1.1)
    axes[2].set_ylabel(r"Ky Fan fraction $\Sigma_{i \leq k}\,\nu_i \,/\, \Sigma_{i \leq k}\,\mu_i$")
    for ax in axes[1:]:
        ax.set_xticks(xm, labels, fontsize="small")
    for container in bars:
        container[0].axes.bar_label(container, fmt="%.2g", fontsize="x-small")
    for ax in axes:
        ax.grid(True, axis="y", alpha=0.3)
    views = ", ".join(sorted({m.view for m in result.modalities}))
    fig.suptitle(f"{result.world}, k = {result.k}, views {views}: encoders linear in the inputs vs the closed form",
                 fontsize="medium")
    return fig
