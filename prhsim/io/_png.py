"""Figures as files: a standalone matplotlib figure (no pyplot, no global backend) and its PNG.

matplotlib (about a second to import) is imported only when a figure is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: Resolution of the written PNGs.
DPI = 120


def new_figure(figsize: tuple[float, float]) -> Figure:
    """A standalone figure with an Agg canvas attached (no pyplot, no global backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_png(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as a PNG to exactly ``path`` and return it (no temporary file, no rename)."""
    path = Path(path)
    fig.savefig(path, dpi=DPI, format="png")
    return path
