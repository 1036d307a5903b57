"""Figures of the theorem sweeps: prediction and observation together, one figure per experiment.

* :func:`bad_view_figure`: per pair, the predicted ``ρ_P`` step curve and the observed points
  against ε, and a panel of predicted and observed k_Z per modality (docs/theory.md §4).
* :func:`kernel_mismatch_figure`: observed ``‖sinΘ‖_F`` and residual against ``‖E‖_op`` beside the
  Yu–Wang–Samworth and Davis–Kahan bounds, log axes (§3).
* :func:`gap_figure`: ``s_Θ`` perturbed vs unperturbed, solver vs solver and start vs start against
  the gap δ, with the δ^{-1} bounds; the tie drawn apart at the left (§1.2, §3).
* :func:`restricted_figure`: ``ρ_P`` per pair, restricted vs unrestricted, and per modality ``s_Θ``
  to the unrestricted optimum and the Ky Fan fraction (§0, §1.1).

Drawn on standalone figures (no pyplot); matplotlib is imported only when drawing. Every
predicted or median curve carries a gid (the constants below) so tests can find it; a
None prediction (undetermined, or an infinite bound) is drawn as a gap (NaN).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments._sweep_bad_view import BadViewSweep
from prhsim.experiments._sweep_gap import GapSensitivity
from prhsim.experiments._sweep_kernel_mismatch import KernelMismatchSweep
from prhsim.experiments._sweep_restricted import RestrictedEncoder
from prhsim.experiments.report._figures import COLOURS
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: Log axes are floored here (an exact agreement is 0).
FLOOR = 1e-17
#: gids: "<prefix>-<pair or modality>" for the bad-view curves.
BAD_VIEW_PREDICTED = "bad-view-predicted"
BAD_VIEW_OBSERVED = "bad-view-observed"
BAD_VIEW_KZ_PREDICTED = "bad-view-kz-predicted"
BAD_VIEW_KZ_OBSERVED = "bad-view-kz-observed"
#: gids: "mismatch-observed-<sin_theta|residual>" and "mismatch-bound-<bound>" (medians over worlds).
MISMATCH_OBSERVED = "mismatch-observed"
MISMATCH_BOUND = "mismatch-bound"
#: gids of the gap figure: "gap-<perturbed|solver|starts>" and "gap-bound-<yws|dk>".
GAP_CURVE = "gap"
GAP_BOUND = "gap-bound"
#: gids of the restricted-encoder bars (one per rectangle) and the predicted ρ_P markers.
RESTRICTED_RHO = "restricted-rho-restricted"
UNRESTRICTED_RHO = "restricted-rho-unrestricted"
PREDICTED_RHO = "restricted-rho-predicted"
RESTRICTED_S_THETA = "restricted-s_theta"
RESTRICTED_KY_FAN = "restricted-ky-fan"


def _nan(values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _panels(fig, count: int, cols_max: int = 4):
    cols = min(count, cols_max)
    rows = -(-count // cols)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[count:]:
        ax.set_visible(False)
    return axes[:count]


def bad_view_figure(result: BadViewSweep) -> Figure:
    """Per pair: predicted ρ_P (step curve) and observed ρ_P (points) against ε; last panel: k_Z per modality."""
    if not result.pairs:
        raise ValueError("the sweep has no pair of modalities to draw")
    eps = np.asarray(result.eps)
    count = len(result.pairs) + 1
    cols = min(count, 4)
    fig = new_figure((3.6 * cols + 0.4, 3.3 * -(-count // cols) + 0.4))
    axes = _panels(fig, count)
    for ax, pair in zip(axes, result.pairs):
        key = f"{pair.a} vs {pair.b}"
        ax.plot(eps, _nan(pair.predicted_rho_p), drawstyle="steps-mid", color="black", lw=1.5,
                label="predicted", gid=f"{BAD_VIEW_PREDICTED}-{key}")
        ax.plot(eps, pair.observed_rho_p, "o", mfc="none", color="tab:red", ms=5, label="closed form",
                gid=f"{BAD_VIEW_OBSERVED}-{key}")
        undetermined = [e for e, p in zip(eps, pair.predicted_rho_p) if p is None]
        if undetermined:
            ax.plot(undetermined, np.zeros(len(undetermined)), "|", color="tab:gray", ms=10, clip_on=False,
                    label="undetermined (tie)")
        ax.set_ylim(-0.05, np.sqrt(2) + 0.1)
        ax.set_title(key, fontsize="medium")
        ax.set_xlabel(r"$\varepsilon$ (1 = good view)")
        ax.set_ylabel(r"$\rho_P$")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    ax = axes[-1]
    for i, m in enumerate(result.modalities):
        colour = COLOURS[i % len(COLOURS)]
        ax.plot(eps, _nan(m.predicted_kz), drawstyle="steps-mid", color=colour, lw=1.2,
                label=f"{m.name} (|N| = {m.n_nuisance})", gid=f"{BAD_VIEW_KZ_PREDICTED}-{m.name}")
        ax.plot(eps, m.observed_kz, "o", mfc="none", color=colour, ms=4, gid=f"{BAD_VIEW_KZ_OBSERVED}-{m.name}")
    ax.set_ylim(-0.3, result.k + 0.3)
    ax.set_title(r"$k_Z$: merge rule (line), closed form (points)", fontsize="medium")
    ax.set_xlabel(r"$\varepsilon$")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    err = "n/a" if result.max_error is None else f"{result.max_error:.1e}"
    fig.suptitle(f"{result.world}, k = {result.k}: bad(ε) views of every modality; "
                 f"max |observed − predicted| = {err}", fontsize="medium")
    return fig


def kernel_mismatch_figure(result: KernelMismatchSweep) -> Figure:
    """Observed drift against ‖E‖_op (every cell, and the median over worlds) beside the medians of the bounds."""
    fig = new_figure((11.0, 4.2))
    axes = fig.subplots(1, 2)
    flat = [c for row in result.cells for c in row]
    x = np.asarray(result.median_e_op)
    panels = ((axes[0], "sin_theta", r"$\|\sin\Theta\|_F$", ("yws_sin", "dk_sin", "weyl_sin")),
              (axes[1], "residual", r"$\min_Q \|F_1^* - F_2^* Q\|_D$", ("yws_residual",)))
    labels = {"yws_sin": "Yu–Wang–Samworth", "yws_residual": "Yu–Wang–Samworth", "dk_sin": "Davis–Kahan",
              "weyl_sin": "Davis–Kahan + Weyl"}
    styles = {"yws_sin": "tab:blue", "yws_residual": "tab:blue", "dk_sin": "tab:green", "weyl_sin": "tab:olive"}
    for ax, field, ylabel, bounds in panels:
        ax.plot([c.e_op for c in flat], np.maximum([getattr(c, field) for c in flat], FLOOR), ".",
                color="tab:red", alpha=0.35, ms=4)
        ax.plot(x, np.maximum(getattr(result, f"median_{field}"), FLOOR), "o-", color="tab:red",
                label="observed (median)", gid=f"{MISMATCH_OBSERVED}-{field}")
        for name in bounds:
            worst = result.worst_ratio[name]
            ratio = "" if worst is None else f", worst ratio {worst:.2g}"
            ax.plot(x, _nan(result.median_bound[name]), "--", color=styles[name],
                    label=f"{labels[name]} (median{ratio})", gid=f"{MISMATCH_BOUND}-{name}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(r"$\|E\|_{op}$")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"kernel mismatch: {result.worlds} random worlds of {result.n} states, k = {result.k}; "
                 r"$\Pi_t = (1-t)\Pi + t\Pi'$", fontsize="medium")
    return fig


def gap_figure(result: GapSensitivity) -> Figure:
    """s_Θ against the gap δ (log-log): perturbed vs unperturbed, solver vs solver, start vs start, with bounds."""
    fig = new_figure((7.5, 4.8))
    ax = fig.subplots()
    gapped = [c for c in result.cells if not c.tie]
    ties = [c for c in result.cells if c.tie]
    x = np.array([c.gap for c in gapped])
    curves = (("perturbed", "perturbed_s_theta", "tab:red", "perturbed vs unperturbed"),
              ("solver", "solver_s_theta", "tab:blue", "dense eigh vs Lanczos"),
              ("starts", "start_s_theta", "tab:purple", "Lanczos, two random starts"))
    for key, field, colour, label in curves:
        ax.plot(x, np.maximum([getattr(c, field) for c in gapped], FLOOR), "o-", color=colour, ms=4,
                label=label, gid=f"{GAP_CURVE}-{key}")
    ax.plot(x, _nan([c.yws_bound for c in gapped]), "--", color="black", label=r"Yu–Wang–Samworth $2\|E\|/\delta$",
            gid=f"{GAP_BOUND}-yws")
    ax.plot(x, _nan([c.dk_bound for c in gapped]), ":", color="tab:green", label=r"Davis–Kahan $\|EU_2\|/\delta'$",
            gid=f"{GAP_BOUND}-dk")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if ties:  # δ = 0 has no place on a log axis: drawn a decade left of the smallest gap, behind a rule
        x_tie = (x.min() if x.size else 1.0) / 10
        for shift, (key, field, colour, _) in zip((0.7, 1.0, 1.4), curves):
            ax.plot(np.full(len(ties), x_tie * shift), np.maximum([getattr(c, field) for c in ties], FLOOR), "*",
                    color=colour, ms=10)
        ax.axvline(x_tie * 3, color="tab:gray", lw=0.8)
        ax.annotate("tie\n(δ = 0)", (x_tie, 1.0), xytext=(0, 8), textcoords="offset points", ha="center",
                    fontsize="small", color="tab:gray")
    ax.axhline(1.0, color="tab:gray", lw=0.8, ls="-.")
    ax.set_ylim(1e-16, 30.0)
    ax.set_xlabel(r"gap $\delta = \mu_1 - \mu_2$")
    ax.set_ylabel(r"$s_\Theta$ (k = 1)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="lower left")
    ax.set_title(f"path({result.n}) ⊗ path({result.n}), perturbation t = {result.size:g}", fontsize="medium")
    return fig


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
    ax.plot(x + 0.2, _nan([p.predicted_rho_p for p in result.pairs]), "_", color="black", ms=18, mew=2,
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
    bars.append(axes[2].bar(xm, _nan([m.ky_fan_fraction for m in result.modalities]), 0.6, color="tab:green",
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
