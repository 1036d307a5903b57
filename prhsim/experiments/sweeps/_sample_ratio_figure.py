"""Figure of the sample-ratio map (docs/theory.md §5.4): predicted ratios and closed-form shares over two settings.

Top row: the predicted sample ratio of next-token prediction and of bad views against good views in
every cell (log colour scale), with the paper's 14x (dashed) and 42x as contours through the exact ratios;
a cell whose ratio is a bound is hatched, one with no ratio (no alignment above twice chance) is grey.
Bottom row: each closed form's mutual 10-NN over good views' closed form's (without closed forms: the
prediction's limits, the linear class on the law), with the paper's shares (WIT: next-token 0.60,
bad 0.48) as contours and the cells in the band 0.3–0.8 outlined. Cells the
learners confirmed carry the learners' ratio in text.

Drawn on a standalone figure (no pyplot); gids: the constants below, then ``-<task>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.sweeps._sample_ratio import SampleRatioMap
from prhsim.experiments.sweeps._sample_ratios import RATIO_SIGNS
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

RATIO = "sample-ratio-ratio"
SHARE = "sample-ratio-share"
PAPER_SHARES = {"ntp": 0.111 / 0.184, "bad": 0.088 / 0.184}
PAPER_RATIOS = (14.0, 42.0)
LABELS = {"ntp": "next-token prediction", "bad": "bad views"}
POSSESSIVE = {"ntp": "next-token prediction's", "bad": "bad views'"}


def _grid(result: SampleRatioMap, value) -> np.ndarray:
    table = np.full((len(result.y_values), len(result.x_values)), np.nan)
    for c in result.cells:
        table[result.y_values.index(c.y), result.x_values.index(c.x)] = value(c)
    return table


def sample_ratio_figure(result: SampleRatioMap) -> Figure:
    """The predicted ratios (top) and the closed forms' shares (bottom), next-token prediction left, bad views right."""
    from matplotlib.colors import LogNorm

    fig = new_figure((11.5, 9.0))
    axes = fig.subplots(2, 2)
    xs, ys = np.arange(len(result.x_values)), np.arange(len(result.y_values))
    for col, task in enumerate(("ntp", "bad")):
        ratio_of = {(c.x, c.y): next(m for m in c.ratios if m.task == task) for c in result.cells}
        exact = _grid(result, lambda c: ratio_of[c.x, c.y].ratio if ratio_of[c.x, c.y].kind == "exact" else np.nan)
        ax = axes[0, col]
        finite = exact[np.isfinite(exact)]
        low, high = (finite.min(), finite.max()) if finite.size else (1.0, 100.0)
        image = ax.imshow(exact, origin="lower", cmap="viridis", norm=LogNorm(vmin=min(low, 1.0), vmax=max(high, 50.0)),
                          aspect="auto", gid=f"{RATIO}-{task}")
        fig.colorbar(image, ax=ax, label="samples over good views' (exact ratios)")
        masked = np.ma.masked_invalid(exact)  # contours through the exact ratios only
        if masked.count() >= 4 and masked.max() >= PAPER_RATIOS[0] and masked.min() <= PAPER_RATIOS[-1]:
            ax.contour(xs, ys, masked, levels=list(PAPER_RATIOS), colors="white", linewidths=1.2,
                       linestyles=["--", "-"])
        for c in result.cells:
            j, i = result.x_values.index(c.x), result.y_values.index(c.y)
            m = ratio_of[c.x, c.y]
            if m.kind == "exact":
                text, colour = f"{m.ratio:.2g}", "white"
            else:
                ax.add_patch(_box(j, i, "0.85" if m.kind != "none" else "0.6", "///" if m.kind != "none" else None))
                if m.kind in ("undetermined", "none"):
                    text = "?" if m.kind == "undetermined" else "never"
                else:  # a bound
                    text = RATIO_SIGNS[m.kind] + ("" if m.ratio is None else f"{m.ratio:.2g}")
                colour = "black"
            if c.confirmed is not None:
                learned = next((r for r in c.confirmed if r.task == task), None)
                text += "\nSGD " + ("never" if learned is None or learned.ratio is None else f"{learned.ratio:.2g}")
            ax.text(j, i, text, ha="center", va="center", fontsize="x-small", color=colour)
        ax.set_title(f"predicted: {POSSESSIVE[task]} samples over good views' (paper: 42x)\n"
                     "grey: a bound (≥, ≤) or undetermined (?: both at it from the first budget)", fontsize="small")
        closed = any(c.share(task) is not None for c in result.cells)
        share_of = (lambda c: c.share(task)) if closed else (lambda c: c.limit_share(task))
        share = _grid(result, lambda c: share_of(c) if share_of(c) is not None else np.nan)
        ax = axes[1, col]
        image = ax.imshow(share, origin="lower", cmap="magma", vmin=0.0, vmax=1.0, aspect="auto",
                          gid=f"{SHARE}-{task}")
        what = "closed forms" if closed else "the prediction's limits (the linear class on the law)"
        fig.colorbar(image, ax=ax, label="mutual 10-NN over good views'")
        if np.isfinite(share).sum() >= 4:
            ax.contour(xs, ys, np.nan_to_num(share), levels=[PAPER_SHARES[task]], colors="cyan", linewidths=1.2)
        for (i, j), v in np.ndenumerate(share):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize="x-small",
                        color="black" if v > 0.5 else "white")
                if 0.3 <= v <= 0.8:
                    ax.add_patch(_box(j, i, "none", None, edge="cyan"))
        ax.set_title(f"{what}: {LABELS[task]} over good views\n(cyan: the paper's {PAPER_SHARES[task]:.2f}; "
                     "boxed: 0.3-0.8)", fontsize="small")
    for ax in axes.ravel():
        ax.set_xticks(xs, [f"{v:g}" for v in result.x_values])
        ax.set_yticks(ys, [f"{v:g}" for v in result.y_values])
        ax.set_xlabel(result.x)
        ax.set_ylabel(result.y)
    closed = any(c.share("bad") is not None for c in result.cells)
    fig.suptitle(f"{result.world} ({result.captions}), k = {result.k}: the linear class fitted on "
                 f"{result.budgets[0]:,}-{result.budgets[-1]:,} records ({result.n_draws} draws)"
                 + (", and the closed forms" if closed else ""), fontsize="medium")
    return fig


def _box(x: float, y: float, face, hatch, edge: str = "white"):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1.0, 1.0, facecolor=face, hatch=hatch, edgecolor=edge, lw=1.0, fill=face != "none")
