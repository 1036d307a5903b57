"""The metric-bridge figure: each PRH sample metric against the theory's ρ_P, one curve per family."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import COLOURS
from prhsim.experiments.sweeps._metric_bridge import FAMILIES, MetricBridge
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: The panels: record field and axis label.
PANELS = (("mutual_knn", "mutual k-NN"), ("linear_cka", "linear CKA"), ("cknna", "CKNNA"), ("r1", "R@1 (mean of both ways)"))
#: gid of each curve: "bridge-<field>-<family>"; the chance lines: "bridge-chance-<j>".
CURVE_GID, CHANCE_GID = "bridge", "bridge-chance"


def metric_bridge_figure(result: MetricBridge) -> Figure:
    """Four panels against ρ_P (x): mutual k-NN (with its chance level), linear CKA, CKNNA, R@1."""
    fig = new_figure((14.0, 3.8))
    axes = fig.subplots(1, len(PANELS), sharex=True)
    for ax, (field, label) in zip(axes, PANELS):
        for i, family in enumerate(FAMILIES):
            cells = [c for c in result.cells if c.family == family]
            x = np.array([c.rho_p for c in cells])
            y = np.array([np.nan if getattr(c, field) is None else getattr(c, field) for c in cells], dtype=float)
            ax.plot(x, y, "o-", color=COLOURS[i], label=family, markersize=4, gid=f"{CURVE_GID}-{field}-{family}")
        if field == "mutual_knn":
            for j, chance in enumerate(sorted(set(result.knn_chance.values()))):
                families = ", ".join(f for f, c in result.knn_chance.items() if c == chance)
                ax.axhline(chance, color="black", linestyle=":" if j == 0 else "--", linewidth=1,
                           gid=f"{CHANCE_GID}-{j}", label=f"chance {chance:.3g} ({families})")
        ax.set_xlabel(r"$\rho_P$ (theory, p-weighted)")
        ax.set_title(label, fontsize="medium")
        ax.set_ylim(-0.02, 1.05)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    rows = ", ".join(f"{f} {r}" for f, r in result.rows.items())
    fig.suptitle(f"{result.world}, k = {result.k}: PRH metrics on sampled states ({rows}; k-NN k = {result.knn_k}) "
                 "against the theory's distance", fontsize="medium")
    return fig
