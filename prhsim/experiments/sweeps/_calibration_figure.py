"""The calibration figure: raw against permutation-calibrated scores where the answer is known.

Top row: (a) the empirical CDF of the null p-values against the diagonal (uniform); (b) raw and
calibrated scores against the width d, for isotropic noise and for the embedded signal of fixed
population CKA; (c) the raw max over L x L layer pairs of noise and its calibrated score (the null
of the max) against the number of pairs. Bottom row: (d) raw and calibrated scores of the null,
good and bad views; (e) the noise's rejection rate (calibrated > 0) against the width; (f) the
rejection rate of the null of the max and of the best pair calibrated alone against the pairs.

Drawn on a standalone figure (no pyplot); every series carries a gid ``calibration-<panel>-...``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments.report._figures import COLOURS
from prhsim.experiments.sweeps._calibration import CalibrationSweep
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

GID = "calibration"


def calibration_figure(result: CalibrationSweep) -> Figure:
    """Six panels (module docstring)."""
    fig = new_figure((15.0, 8.2))
    axes = fig.subplots(2, 3)
    colour = {m: COLOURS[i % len(COLOURS)] for i, m in enumerate(result.metrics)}

    ax = axes[0, 0]  # (a) null p-values
    for c in result.null:
        p = np.sort(np.asarray(c.p_values))
        ax.step(p, np.arange(1, p.size + 1) / p.size, where="post", color=colour[c.metric], gid=f"{GID}-a-{c.metric}",
                label=f"{c.metric}: KS D = {c.ks_statistic:.3f}, p = {c.ks_p_value:.2g}")
    ax.plot([0, 1], [0, 1], color="black", linestyle=":", linewidth=1, label="U(0, 1)", gid=f"{GID}-a-diagonal")
    ax.set_xlabel("p-value")
    ax.set_ylabel("fraction of draws with a smaller p-value")
    ax.set_title(f"(a) null: independent states, {result.n_seeds} draws", fontsize="medium")
    ax.legend(fontsize="small", loc="upper left")

    widths = sorted({c.width for c in result.widths})
    ax = axes[0, 1]  # (b) width
    for metric in result.metrics:
        for kind, marker in (("null", "o"), ("signal", "s")):
            cells = [result.find("widths", metric, width=d, kind=kind) for d in widths]
            ax.plot(widths, [c.raw_mean for c in cells], marker + "-", color=colour[metric], markersize=4,
                    gid=f"{GID}-b-raw-{kind}-{metric}")
            ax.plot(widths, [c.calibrated_mean for c in cells], marker + "--", color=colour[metric], markersize=4,
                    markerfacecolor="white", gid=f"{GID}-b-calibrated-{kind}-{metric}")
    d = np.geomspace(min(widths), max(widths), 50)
    n = result.samples - 1
    ax.plot(d, d / (n + d), color="grey", linestyle=":", linewidth=1, gid=f"{GID}-b-approximation")
    ax.axhline(result.signal_cka, color="black", linestyle=":", linewidth=1, gid=f"{GID}-b-population")
    from matplotlib.lines import Line2D

    key = [Line2D([], [], color=colour[m], label=m) for m in result.metrics]
    key += [Line2D([], [], color="black", marker="o", linestyle="none", markersize=4, label="isotropic noise (null)"),
            Line2D([], [], color="black", marker="s", linestyle="none", markersize=4, label="embedded signal"),
            Line2D([], [], color="black", linestyle="-", label="raw"),
            Line2D([], [], color="black", linestyle="--", label="calibrated"),
            Line2D([], [], color="grey", linestyle=":", label="d/(N - 1 + d)"),
            Line2D([], [], color="black", linestyle=":", label=f"signal's population CKA {result.signal_cka:g}")]
    ax.legend(handles=key, fontsize="x-small", ncol=2, loc="upper left")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width d")
    ax.set_ylabel(f"mean score ({result.n_seeds_confounders} draws)")
    ax.set_ylim(-0.02, 1.3)
    ax.set_title("(b) width: raw grows, calibrated does not", fontsize="medium")

    depths = sorted({c.depth for c in result.depths})
    ax = axes[0, 2]  # (c) depth
    for metric in result.metrics:
        cells = [result.find("depths", metric, depth=L) for L in depths]
        pairs = [c.pairs for c in cells]
        ax.plot(pairs, [c.raw_mean for c in cells], "o-", color=colour[metric], markersize=4,
                gid=f"{GID}-c-raw-{metric}", label=f"{metric}: raw max")
        ax.plot(pairs, [c.calibrated_mean for c in cells], "o--", color=colour[metric], markersize=4,
                markerfacecolor="white", gid=f"{GID}-c-calibrated-{metric}", label=f"{metric}: calibrated (max)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(r"layer pairs searched $L_a \times L_b$")
    ax.set_ylabel(f"mean score ({result.n_seeds_confounders} draws)")
    ax.set_title(f"(c) depth: noise layers of width {result.depth_width}", fontsize="medium")
    ax.legend(fontsize="small")

    ax = axes[1, 0]  # (d) views
    groups = ("null", "good", "bad")
    step = 1.0 / (2 * len(result.metrics) + 1)
    for i, metric in enumerate(result.metrics):
        null = result.find("null", metric)
        good, bad = result.find("views", metric, view="good"), result.find("views", metric, view="bad")
        for j, (what, hatch) in enumerate((("raw", None), ("calibrated", "//"))):
            values = [getattr(c, f"{what}_mean") for c in (null, good, bad)]
            x = np.arange(len(groups)) + (2 * i + j - len(result.metrics) + 0.5) * step
            ax.bar(x, values, width=step, color=colour[metric], alpha=1.0 if what == "raw" else 0.55, hatch=hatch,
                   edgecolor="black", linewidth=0.5, gid=f"{GID}-d-{what}-{metric}", label=f"{metric}: {what}")
            for xi, value in zip(x, values):
                ax.text(xi, value + 0.01, f"{value:.2f}", ha="center", va="bottom", fontsize="x-small", rotation=90)
        for g, c in enumerate((None, good, bad)):
            if c is not None and c.population is not None:
                left = g + (2 * i - len(result.metrics)) * step
                ax.hlines(c.population, left, left + 2 * step, color="black", linewidth=2,
                          gid=f"{GID}-d-population-{metric}-{groups[g]}")
    ax.set_xticks(range(len(groups)), ["null\n(independent states)", "good views", f"bad({result.eps:g}) views"])
    ax.set_ylabel("mean score")
    ax.set_ylim(0, 1.25)
    ax.set_title("(d) null, good and bad views (black: population linear CKA)", fontsize="medium")
    ax.legend(fontsize="x-small", loc="upper left", ncol=2)

    ax = axes[1, 1]  # (e) width: rejection rate of the noise
    for metric in result.metrics:
        cells = [result.find("widths", metric, width=d, kind="null") for d in widths]
        ax.errorbar(widths, [c.rejection_rate for c in cells], yerr=[c.rejection_se for c in cells], fmt="o-",
                    color=colour[metric], markersize=4, capsize=3, gid=f"{GID}-e-{metric}", label=metric)
    ax.axhline(result.alpha, color="black", linestyle=":", linewidth=1, gid=f"{GID}-e-alpha",
               label=f"alpha = {result.alpha:g}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width d")
    ax.set_ylabel("rejected: calibrated > 0 (+- s.e.)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("(e) width: the noise's rejection rate", fontsize="medium")
    ax.legend(fontsize="small")

    ax = axes[1, 2]  # (f) depth: rejection rates
    for metric in result.metrics:
        cells = [result.find("depths", metric, depth=L) for L in depths]
        pairs = [c.pairs for c in cells]
        ax.errorbar(pairs, [c.rejection_rate for c in cells], yerr=[c.rejection_se for c in cells], fmt="o-",
                    color=colour[metric], markersize=4, capsize=3, gid=f"{GID}-f-max-{metric}",
                    label=f"{metric}: null of the max")
        ax.errorbar(pairs, [c.naive_rejection_rate for c in cells], yerr=[c.naive_rejection_se for c in cells],
                    fmt="s--", color=colour[metric], markersize=4, capsize=3, markerfacecolor="white",
                    gid=f"{GID}-f-naive-{metric}", label=f"{metric}: best pair alone")
    cells = [result.find("depths", result.metrics[0], depth=L) for L in depths]
    ax.plot([c.pairs for c in cells], [c.naive_predicted for c in cells], color="grey", linestyle=":", linewidth=1,
            gid=f"{GID}-f-predicted", label="1 - (1 - level)^pairs")
    ax.axhline(result.alpha, color="black", linestyle=":", linewidth=1, gid=f"{GID}-f-alpha",
               label=f"alpha = {result.alpha:g}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(r"layer pairs searched $L_a \times L_b$")
    ax.set_ylabel("rejected: calibrated > 0 (+- s.e.)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("(f) depth: the search is part of the null", fontsize="medium")
    ax.legend(fontsize="small")

    fig.suptitle(f"{result.world}, {' and '.join(result.modalities)}: raw and permutation-calibrated scores "
                 f"(N = {result.samples}, K = {result.permutations}, alpha = {result.alpha:g}, knn_k = {result.knn_k})",
                 fontsize="medium")
    return fig
