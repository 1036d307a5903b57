"""The heatmap of ``prhsim prh table``: the protocol's best score for every pair of feature files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gid of the heatmap image.
HEATMAP_GID = "prh-table"


def prh_table_figure(scores: np.ndarray, rows: Sequence[str], cols: Sequence[str], *, metric: str,
                     chance: float | None = None) -> Figure:
    """Rows x columns of best layer-pair scores, annotated; the chance level in the title when known."""
    scores = np.asarray(scores, dtype=float)
    if scores.shape != (len(rows), len(cols)) or scores.size == 0:
        raise ValueError(f"scores must be {len(rows)} x {len(cols)}, got {scores.shape}")
    fig = new_figure((1.2 + 0.9 * len(cols), 1.0 + 0.55 * len(rows)))
    ax = fig.subplots()
    image = ax.imshow(scores, cmap="viridis", aspect="auto", gid=HEATMAP_GID)
    ax.set_xticks(range(len(cols)), labels=list(cols), rotation=45, ha="right", fontsize="small")
    ax.set_yticks(range(len(rows)), labels=list(rows), fontsize="small")
    finite = scores[np.isfinite(scores)]
    middle = float(finite.mean()) if finite.size else 0.0
    for i in range(len(rows)):
        for j in range(len(cols)):
            value = scores[i, j]
            ax.text(j, i, "-" if not np.isfinite(value) else f"{value:.3f}", ha="center", va="center",
                    fontsize="x-small", color="black" if value > middle else "white")
    fig.colorbar(image, ax=ax, label=metric)
    title = f"{metric}: best layer pair per file pair"
    if chance is not None:
        title += f" (chance {chance:.3g})"
    ax.set_title(title, fontsize="medium")
    return fig
