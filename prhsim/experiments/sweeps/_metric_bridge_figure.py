"""The metric-bridge figure: each PRH sample metric against the theory's ρ_P, one curve per family."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import COLOURS
from prhsim.experiments.sweeps._metric_bridge import FAMILIES, MetricBridge
from prhsim.io import new_figure
from prhsim.metrics import PRH_METRICS

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gid of each curve: "bridge-<metric>-<family>"; the chance lines: "bridge-chance-<metric>-<j>".
CURVE_GID, CHANCE_GID = "bridge", "bridge-chance"


def metric_bridge_figure(result: MetricBridge) -> Figure:
    """One panel per metric scored (``result.metrics``) against ρ_P (x), with its chance levels where known."""
    fig = new_figure((3.5 * len(result.metrics), 3.8))
    axes = np.atleast_1d(fig.subplots(1, len(result.metrics), sharex=True))
    for ax, name in zip(axes, result.metrics):
        for i, family in enumerate(FAMILIES):
            cells = [c for c in result.cells if c.family == family]
            x = np.array([c.rho_p for c in cells])
            y = np.array([c.metrics.get(name, np.nan) for c in cells], dtype=float)
            ax.plot(x, y, "o-", color=COLOURS[i], label=family, markersize=4, gid=f"{CURVE_GID}-{name}-{family}")
        levels = {f: c[name] for f, c in result.chance.items() if name in c}
        for j, chance in enumerate(sorted(set(levels.values()))):
            families = ", ".join(f for f, c in levels.items() if c == chance)
            ax.axhline(chance, color="black", linestyle=":" if j == 0 else "--", linewidth=1,
                       gid=f"{CHANCE_GID}-{name}-{j}", label=f"chance {chance:.3g} ({families})")
        record = PRH_METRICS.get(name)
        label = name if record is None else record.heading
        ax.set_xlabel(r"$\rho_P$ (theory, p-weighted)")
        ax.set_title(label, fontsize="medium")
        ax.set_ylim(-0.02, 1.05)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    rows = ", ".join(f"{f} {r}" for f, r in result.rows.items())
    fig.suptitle(f"{result.world}, k = {result.k}: PRH metrics on sampled states ({rows}; k-NN k = {result.knn_k}) "
                 "against the theory's distance", fontsize="medium")
    return fig
