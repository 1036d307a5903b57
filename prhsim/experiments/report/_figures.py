"""Figures of a run: the spectrum with the gap at k, and the cross-modal residual heatmap.

The figures are drawn on standalone :class:`matplotlib.figure.Figure` objects: no
backend is chosen for the user and ``matplotlib.pyplot`` is never imported, so no
global figure state is touched. matplotlib itself (about a second to import) is
imported only when a figure is drawn, never when this module is imported.

Typical use (the caller takes care of atomicity)::

    save_png(spectrum_figure(result), out / "spectrum.png")
    save_png(residual_figure(result), out / "residuals.png")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from prhsim.experiments._results import RunResult
from prhsim.io import DPI, new_figure

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib is imported lazily
    from matplotlib.figure import Figure

#: A gap at or below this is a tie (as in the report).
TIE_TOL = 1e-9
#: Distinct marker shapes for the modalities (hollow, so stacked markers stay visible).
MARKERS = ("s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p", "d")
#: Modality colours: tab10 without red (the k line) and black (the world's curve).
COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown",
           "tab:pink", "tab:olive", "tab:cyan", "tab:gray")
#: gids by which tests and callers find the k line and the gap label.
K_LINE_GID = "k-line"
GAP_LABEL_GID = "gap-label"
WORLD_CURVE_GID = "world-spectrum"


def _modality_style(i: int) -> tuple[str, str]:
    return MARKERS[i % len(MARKERS)], COLOURS[i % len(COLOURS)]


def _gap_text(result: RunResult) -> str:
    w, k = result.world, result.world.k
    n_head = len(w.spectrum_head)
    lines = [f"k = {k}" + (" (auto: largest relative gap)" if w.k_auto else "")]
    gap = rf"K_Z gap $\mu_{{{k}}} - \mu_{{{k + 1}}}$ = {w.gap:.3g}"
    if w.gap <= TIE_TOL:
        gap += " (tie: no unique optimum)"
    lines.append(gap)
    if n_head < k + 1:
        lines.append(rf"K_Z head shows $\mu_1..\mu_{{{n_head}}}$; k = {k} beyond it")
    return "\n".join(lines)


def spectrum_figure(result: RunResult) -> Figure:
    """K_Z's top eigenvalues (centred unless stated) with k and its gap marked; each modality's μ_1..μ_{k+1}.

    The x axis always reaches k + 2, even when the world's spectrum head is shorter
    than k + 1 (the label then says so). The legend sits outside the axes, the gap
    label in a band above every plotted point, on whichever side of the k line it fits.
    """
    from matplotlib.transforms import offset_copy

    w, k = result.world, result.world.k
    mods = result.modalities
    n_mod = len(mods)
    head = np.asarray(w.spectrum_head, dtype=float)
    mod_vals = [np.asarray(m.eigenvalues if m.eigenvalues is not None else [], dtype=float) for m in mods]
    n_idx = max([head.size, k + 2, *(v.size for v in mod_vals)])

    # Width: enough room per index for every modality's marker side by side, within bounds.
    slot_px = max(16.0, 6.0 * n_mod)
    axes_w = float(np.clip((n_idx + 0.5) * slot_px / DPI, 5.5, 12.0))
    fig = new_figure((axes_w + 3.2, 4.8 if axes_w <= 8 else 5.4))
    ax = fig.subplots()

    if head.size:
        ax.plot(np.arange(1, head.size + 1), head, "o-", color="black", lw=1, ms=4, zorder=3,
                label=rf"world K_Z ($\mu_1..\mu_{{{head.size}}}$)", gid=WORLD_CURVE_GID)
    spread = min(0.42, 0.11 * (n_mod - 1))
    offsets = np.linspace(-spread, spread, n_mod) if n_mod > 1 else np.zeros(n_mod)
    ms = 6.0 if n_mod <= 3 else 4.0
    for i, (off, m, mu) in enumerate(zip(offsets, mods, mod_vals)):
        marker, colour = _modality_style(i)
        ax.plot(np.arange(1, mu.size + 1) + off, mu, linestyle="none", marker=marker, ms=ms, mfc="none",
                mec=colour, mew=1.3 if n_mod <= 3 else 1.1, alpha=0.85, zorder=4, label=f"{m.name} ({m.view})")

    x_k = k + 0.5
    ax.axvline(x_k, color="tab:red", ls="--", lw=1, zorder=2, gid=K_LINE_GID)
    if head.size >= k + 1:  # the gap itself, as a thick segment on the k line
        ax.plot([x_k, x_k], [head[k], head[k - 1]], color="tab:red", lw=4, alpha=0.45,
                solid_capstyle="butt", zorder=2)
    ax.set_xlim(0.4, n_idx + 0.6)
    if n_idx <= 40:
        ax.set_xticks(np.arange(1, n_idx + 1, 1 if n_idx <= 16 else 2))

    values = np.concatenate([head, *mod_vals]) if (head.size or mod_vals) else np.zeros(1)
    lo, hi = float(values.min()), float(values.max())
    span = max(hi - lo, 1e-3)
    y_lo = lo - 0.06 * span

    ax.set_xlabel("index i" + (" (centred: trivial eigenvalue 1 removed)" if result.centred else ""))
    ax.set_ylabel(r"eigenvalue $\mu_i$")
    ax.set_title(f"{w.name}: spectrum of the kernel ({w.n_states:,} states)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              title=r"$\mu_1..\mu_{k+1}$ per modality" if mods else None, title_fontsize=8)
    ax.grid(alpha=0.3)

    label = ax.text(x_k, 0.97, _gap_text(result), color="tab:red", fontsize=9, va="top", ha="left",
                    transform=offset_copy(ax.get_xaxis_transform(), fig=fig, x=7, units="points"),
                    bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="tab:red", lw=0.8, alpha=0.95),
                    zorder=5, gid=GAP_LABEL_GID)
    _place_gap_label(fig, ax, label, hi, y_lo, span)
    return fig


def _place_gap_label(fig, ax, label, data_top: float, y_lo: float, span: float) -> None:
    """Put the label in a band above every data point, right of the k line or, if it does not fit, left of it.

    The band is made by raising the top y limit until the label's box (measured
    after the constrained layout has run) ends above the highest point.
    """
    from matplotlib.transforms import offset_copy

    ax.set_ylim(y_lo, data_top + 0.1 * span)
    for _ in range(4):  # the layout settles in one or two passes; a flip takes one more
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        box = ax.get_window_extent(renderer)
        text = label.get_bbox_patch().get_window_extent(renderer)  # the white box, padding included
        if label.get_ha() == "left" and text.x1 > box.x1 - 4:
            label.set_ha("right")
            label.set_transform(offset_copy(ax.get_xaxis_transform(), fig=fig, x=-7, units="points"))
            continue
        # band: from the top of the axes down to below the label, plus a margin for the markers
        need = (box.y1 - text.y0 + 10) / box.height
        y_lo_now, y_hi_now = ax.get_ylim()
        fraction_free = (y_hi_now - data_top) / (y_hi_now - y_lo_now)
        if fraction_free >= need:
            break
        need = min(need, 0.8)
        ax.set_ylim(y_lo, (data_top - need * y_lo) / (1 - need))
    # no eigenvalue ticks in the label's band: keep those up to the first one at or above the data
    y_lo_now, y_hi_now = ax.get_ylim()
    ticks = [t for t in ax.get_yticks() if y_lo_now <= t <= y_hi_now]
    above = [t for t in ticks if t >= data_top - 1e-12]
    ticks = [t for t in ticks if t < data_top - 1e-12] + above[:1]
    if len(ticks) >= 2:
        ax.set_yticks(ticks)
        ax.set_ylim(y_lo_now, y_hi_now)


def _text_colour(rgba) -> str:
    r, g, b = rgba[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def residual_figure(result: RunResult) -> Figure:
    """Heatmap of ρ_P for every modality pair, annotated with observed and predicted values."""
    from matplotlib.colors import Normalize

    mods = result.modalities
    names = [m.name for m in mods]
    n = len(names)
    R = np.zeros((n, n))
    P = np.full((n, n), np.nan)
    for pair in result.pairs:
        i, j = names.index(pair.a), names.index(pair.b)
        R[i, j] = R[j, i] = pair.rho_p
        if pair.predicted_rho_p is not None:
            P[i, j] = P[j, i] = pair.predicted_rho_p
    np.fill_diagonal(P, 0.0)

    cell = 1.3 if n <= 3 else max(0.8, 1.3 - 0.1 * (n - 3))
    fontsize = 9.0 if n <= 3 else max(6.5, 9.0 - 0.3 * (n - 3))
    fig = new_figure((max(5.6, cell * n + 2.8), max(3.6, cell * n + 1.9)))
    ax = fig.subplots()
    norm = Normalize(vmin=0.0, vmax=max(float(np.sqrt(2)), float(R.max(initial=0.0))))
    im = ax.imshow(R, norm=norm, cmap="viridis")
    cmap = im.get_cmap()
    for i in range(n):
        for j in range(n):
            colour = _text_colour(cmap(norm(R[i, j])))
            if i == j:
                text = "no pairs\n(one modality)" if n == 1 else "0"
            else:
                pred = "n/a" if np.isnan(P[i, j]) else f"{P[i, j]:.3g}"
                text = f"{R[i, j]:.3g}\n(pred {pred})"
            ax.text(j, i, text, ha="center", va="center", fontsize=fontsize, color=colour)
    labels = [f"{m.name}\n{m.view}" for m in mods]
    ax.set_xticks(range(n), labels, fontsize=fontsize)
    ax.set_yticks(range(n), labels, fontsize=fontsize)
    ax.set_xlabel("modality")
    ax.set_ylabel("modality")
    fig.colorbar(im, ax=ax, label="ρ_P", shrink=0.9)
    ax.set_title(f"cross-modal ρ_P = min_Q ‖f_a − f_b Q‖_D / √k (k = {result.world.k})", fontsize=10)
    return fig


#: Log axes are floored here (an exact agreement is 0).
FLOOR = 1e-17


def nan_gaps(values) -> np.ndarray:
    """The values as a float array, None as NaN (a gap in a plotted line)."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def panels(fig, count: int, cols_max: int = 4):
    """``count`` axes in a grid of at most ``cols_max`` columns (the grid's spare cells hidden)."""
    cols = min(count, cols_max)
    rows = -(-count // cols)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[count:]:
        ax.set_visible(False)
    return axes[:count]
