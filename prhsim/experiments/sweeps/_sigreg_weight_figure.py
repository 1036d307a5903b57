"""Presentation of the SIGReg weight sweep: a table per λ and a three-panel figure against λ.

Panels (log λ): ``s_Θ`` to the whitened closed form per modality; ``‖Cov_p f − I‖``
before whitening per modality; the learned cross-modal ``ρ_P`` per pair. Each curve is
the median over seeds with a min–max band; a λ where every seed of a modality
collapsed has no point, and is marked with an ✕ on the λ axis of the first panel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from prhsim.experiments._results import SweepResult
from prhsim.experiments.report._figures import COLOURS
from prhsim.experiments.report._terminal import seed_spread_text
from prhsim.io import new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: gid of each median curve: "sweep-<panel>-<name>" with panel s_theta, cov_error or rho_p.
CURVE_GID = "sweep"
COLLAPSE_GID = "sweep-collapsed"


def _stats(values: list[float | None]) -> tuple[float, float, float]:
    have = [v for v in values if v is not None]
    if not have:
        return (np.nan, np.nan, np.nan)
    return float(np.median(have)), float(min(have)), float(max(have))


def sweep_tables(result: SweepResult) -> list[Any]:
    """What the command prints: a heading, one row per λ and modality (medians [min, max] over seeds), then
    the cross-modal ρ_P per λ (rich renderables, in that order)."""
    out: list[Any] = [Text.from_markup(f"[bold]prhsim sweep sigreg-weight[/] {escape(result.world)}: "
                                       f"{result.n_states:,} states, k = {result.k}, views {', '.join(result.views)}; "
                                       f"convention {result.convention}")]
    table = Table(title="SIGReg against the whitened closed form (median \\[min, max] over seeds)", title_justify="left")
    for col in ("lam", "modality", "data", "collapsed", "s_Theta", "||Cov - I||", "loss / L*"):
        table.add_column(col, justify="left" if col in ("modality", "data") else "right")
    for lam, cell in zip(result.lams, result.cells):
        for m in cell.modalities:
            table.add_row(f"{lam:.3g}", escape(m.name), m.data, f"{sum(m.collapsed)}/{len(m.collapsed)}",
                          seed_spread_text(m.s_theta), seed_spread_text(m.cov_error), seed_spread_text(m.alignment_ratio, 4))
    out.append(table)
    if result.cells and result.cells[0].pairs:
        pairs = Table(title="learned cross-modal rho_P (closed form in the header)", title_justify="left")
        pairs.add_column("lam", justify="right")
        for p in result.cells[0].pairs:
            key = f"{p.a} vs {p.b}"
            pairs.add_column(escape(f"{key} ({result.closed_form_rho_p[key]:.2g})"), justify="right")
        for lam, cell in zip(result.lams, result.cells):
            pairs.add_row(f"{lam:.3g}", *[seed_spread_text(p.rho_p) for p in cell.pairs])
        out.append(pairs)
    return out


def render_sweep(result: SweepResult, console: Console) -> None:
    """Print :func:`sweep_tables` on ``console``, then the time."""
    for item in sweep_tables(result):
        console.print(item)
    console.print(f"{result.seconds:.1f} s")


def sweep_figure(result: SweepResult) -> Figure:
    """Three panels against λ: s_Θ to the closed form, ‖Cov − I‖, learned cross-modal ρ_P (see the module docstring)."""
    if not result.cells:
        raise ValueError("the sweep has no cells to draw")
    lams = np.asarray(result.lams)
    fig = new_figure((13.0, 3.8))
    axes = fig.subplots(1, 3)
    names = [m.name for m in result.cells[0].modalities]
    for i, name in enumerate(names):
        colour = COLOURS[i % len(COLOURS)]
        mods = [next(m for m in cell.modalities if m.name == name) for cell in result.cells]
        for ax, field in ((axes[0], "s_theta"), (axes[1], "cov_error")):
            stats = np.array([_stats(getattr(m, field)) for m in mods])
            ax.fill_between(lams, stats[:, 1], stats[:, 2], color=colour, alpha=0.2, linewidth=0)
            ax.plot(lams, stats[:, 0], "o-", color=colour, label=name, gid=f"{CURVE_GID}-{field}-{name}")
        dead = [lam for lam, m in zip(lams, mods) if all(m.collapsed)]
        if dead:
            axes[0].plot(dead, np.ones(len(dead)), "x", color=colour, markersize=9, clip_on=False,
                         gid=f"{COLLAPSE_GID}-{name}", label=f"{name}: collapsed")
    for j, pair in enumerate(result.cells[0].pairs):
        key = f"{pair.a} vs {pair.b}"
        colour = COLOURS[(len(names) + j) % len(COLOURS)]
        stats = np.array([_stats(cell.pairs[j].rho_p) for cell in result.cells])
        axes[2].fill_between(lams, stats[:, 1], stats[:, 2], color=colour, alpha=0.2, linewidth=0)
        axes[2].plot(lams, stats[:, 0], "o-", color=colour, label=key, gid=f"{CURVE_GID}-rho_p-{key}")
        axes[2].axhline(result.closed_form_rho_p[key], color=colour, linestyle=":", linewidth=1)
    titles = (r"$s_\Theta$ to the whitened closed form", r"$\|\mathrm{Cov}_p f - I\|_F$ (before whitening)",
              r"learned cross-modal $\rho_P$ (dotted: closed form)")
    for ax, title in zip(axes, titles):
        ax.set_xscale("log")
        ax.set_xlabel(r"SIGReg weight $\lambda$" + f" ({result.convention})")
        ax.set_title(title, fontsize="medium")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    axes[0].set_ylim(0.0, 1.05)
    seeds = len(result.cells[0].seeds)
    fig.suptitle(f"{result.world}, k = {result.k}: median over {seeds} seed(s), band min-max", fontsize="medium")
    return fig
