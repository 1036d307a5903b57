"""The figure of a ``prhsim real`` run: training loss and learning rate against the step, from metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gids of the two curves.
LOSS_CURVE = "real-loss"
LR_CURVE = "real-lr"


def run_figure(metrics: Path | str, title: str = "") -> Figure:
    """Loss (left axis, log scale when positive) and learning rate (right axis) against the step."""
    lines = [json.loads(x) for x in Path(metrics).read_text().splitlines() if x.strip()]
    if not lines:
        raise ValueError(f"{metrics}: no metric line to draw")
    steps = [x["step"] for x in lines]
    fig = new_figure((6.4, 3.6))
    ax = fig.subplots()
    ax.plot(steps, [x["loss"] for x in lines], color="tab:blue", lw=1.2, gid=LOSS_CURVE)
    if all(x["loss"] > 0 for x in lines):
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss", color="tab:blue")
    ax.grid(True, alpha=0.3)
    twin = ax.twinx()
    twin.plot(steps, [x["lr"] for x in lines], color="tab:gray", lw=1, ls="--", gid=LR_CURVE)
    twin.set_ylabel("learning rate", color="tab:gray")
    ax.set_title(title, fontsize="medium")
    return fig
