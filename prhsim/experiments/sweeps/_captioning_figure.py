"""Figure of the captioning curve (docs/theory.md §5.1, §9): accuracy and CIDEr against the (image, caption) pairs.

Two panels against N_fit on a log axis: the exact attribute accuracy (and, lighter, the mean
per-attribute accuracy) on the left, CIDEr-D on the right. Each shows the mean over seeds (line)
and their range (band), the level of the true map (dashed), chance (grey) and N_fit = k (dotted
vertical: fewer pairs than dimensions leave part of the rotation undetermined). A pair-free map
(N_fit = 0) is drawn as a separate marker half a step left of the smallest N_fit.

Drawn on a standalone figure (no pyplot); matplotlib is imported only when drawing. Every series
carries a gid (the constants below, then ``-<metric>``) so tests can find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import COLOURS
from prhsim.experiments.sweeps._captioning import CaptioningCurve, curve_summary
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gids: "<prefix>-<metric>".
CURVE = "captioning-curve"
TRUE_MAP = "captioning-true-map"
CHANCE = "captioning-chance"
PAIR_FREE = "captioning-pair-free"
K_LINE = "captioning-k"
LABELS = {"exact": "exact attribute accuracy", "attribute_mean": "per-attribute accuracy (mean)",
          "cider": "CIDEr-D", "bleu": "BLEU-4", "grammatical": "grammatical captions"}


def captioning_figure(curve: CaptioningCurve) -> Figure:
    """Accuracy (left) and CIDEr (right) against N_fit; true map dashed, chance grey, k dotted (module docstring)."""
    if not curve.points:
        raise ValueError("the captioning curve has no point to draw")
    from matplotlib.ticker import NullFormatter

    fig = new_figure((11.0, 4.4))
    left, right = fig.subplots(1, 2)
    positive = [n for n in curve.n_fits if n > 0]
    x_free = (min(positive) / 2.0) if positive else 1.0
    panels = ((left, ("exact", "attribute_mean")), (right, ("cider",)))
    for ax, metrics in panels:
        for j, metric in enumerate(metrics):
            colour = COLOURS[j % len(COLOURS)]
            s = curve_summary(curve, metric)
            idx = [i for i, n in enumerate(s["n_fits"]) if n > 0]
            x = np.array([s["n_fits"][i] for i in idx], dtype=float)
            mean, low, high = (np.array([s[key][i] for i in idx]) for key in ("mean", "low", "high"))
            if x.size:
                ax.fill_between(x, low, high, color=colour, alpha=0.2, lw=0)
                ax.plot(x, mean, "o-", color=colour, ms=4, label=LABELS[metric], gid=f"{CURVE}-{metric}")
            if 0 in s["n_fits"]:
                i = s["n_fits"].index(0)
                ax.errorbar([x_free], [s["mean"][i]], yerr=[[s["mean"][i] - s["low"][i]], [s["high"][i] - s["mean"][i]]],
                            fmt="D", color=colour, ms=6, mfc="white", gid=f"{PAIR_FREE}-{metric}",
                            label="pair-free map (N_fit = 0)" if j == 0 else None)
            ax.axhline(s["true_map"], color=colour, ls="--", lw=1, gid=f"{TRUE_MAP}-{metric}",
                       label="true map" if j == 0 else None)
            ax.axhline(s["chance"], color="tab:gray", ls=":" if j else "-", lw=1, gid=f"{CHANCE}-{metric}",
                       label="chance (caption of a random state)" if j == 0 else None)
        ax.axvline(curve.k, color="black", ls=":", lw=1, gid=f"{K_LINE}-{metrics[0]}", label=f"N_fit = k = {curve.k}")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("(image, caption) pairs N_fit" + ("; ◇ at left: pair-free" if 0 in curve.n_fits else ""))
        ax.set_ylabel(" / ".join(LABELS[m] for m in metrics))
        ax.grid(True, alpha=0.3)
    left.set_ylim(-0.03, 1.03)
    left.legend(fontsize="small", loc="lower right")
    noise = f", image noise σ = {curve.noise:g}" if curve.noise else ""
    fig.suptitle(f"{curve.world}: {curve.n_states:,} states, k = {curve.k}, text: {curve.text} closed form; "
                 f"{curve.images} held-out images, {len(curve.seeds)} seeds{noise}", fontsize="medium")
    return fig
