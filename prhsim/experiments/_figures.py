"""Figures of a run: the spectrum with the gap at k, and the cross-modal residual heatmap."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from prhsim._io import write_atomic  # noqa: E402
from prhsim.experiments._results import RunResult  # noqa: E402


def _save(fig, path: Path) -> Path:
    try:
        return write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    finally:
        plt.close(fig)


def spectrum_figure(result: RunResult, path: Path) -> Path:
    """K_Z's top eigenvalues (centred unless stated) with k and its gap marked; each modality's μ_1..μ_{k+1}."""
    w, k = result.world, result.world.k
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    head = np.array(w.spectrum_head)
    idx = np.arange(1, head.size + 1)
    ax.plot(idx, head, "o-", color="black", lw=1, ms=5, label="world K_Z")
    offsets = np.linspace(-0.25, 0.25, max(len(result.modalities), 1))
    for off, m in zip(offsets, result.modalities):
        mu = np.array(m.eigenvalues)
        ax.plot(np.arange(1, mu.size + 1) + off, mu, "x", ms=6, label=f"{m.name} ({m.view})")
    ax.axvline(k + 0.5, color="tab:red", ls="--", lw=1)
    ax.text(k + 1.5, 0.55, f"k = {k}\nK_Z gap $\\mu_k - \\mu_{{k+1}}$ = {w.gap:.3g}", color="tab:red", fontsize=9,
            transform=ax.get_xaxis_transform(), va="center")
    ax.set_xlabel("index i" + (" (centred: trivial eigenvalue 1 removed)" if result.centred else ""))
    ax.set_ylabel(r"eigenvalue $\mu_i$")
    ax.set_title(f"{w.name}: spectrum of the kernel ({w.n_states} states)")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def residual_figure(result: RunResult, path: Path) -> Path:
    """Heatmap of ρ_P for every modality pair, annotated with observed and predicted values."""
    names = [m.name for m in result.modalities]
    n = len(names)
    R = np.zeros((n, n))
    P = np.full((n, n), np.nan)
    for pair in result.pairs:
        i, j = names.index(pair.a), names.index(pair.b)
        R[i, j] = R[j, i] = pair.rho_p
        if pair.predicted_rho_p is not None:
            P[i, j] = P[j, i] = pair.predicted_rho_p
    np.fill_diagonal(P, 0.0)
    fig, ax = plt.subplots(figsize=(1.6 * n + 2.5, 1.4 * n + 1.5))
    im = ax.imshow(R, vmin=0, vmax=np.sqrt(2), cmap="viridis")
    for i in range(n):
        for j in range(n):
            pred = "n/a" if np.isnan(P[i, j]) else f"{P[i, j]:.3g}"
            ax.text(j, i, f"{R[i, j]:.3g}\n(pred {pred})", ha="center", va="center", fontsize=8,
                    color="white" if R[i, j] < 0.9 else "black")
    labels = [f"{m.name}\n{m.view}" for m in result.modalities]
    ax.set_xticks(range(n), labels, fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    fig.colorbar(im, ax=ax, label=r"$\rho_P = \min_Q \|f_a - f_b Q\| / \sqrt{k}$")
    ax.set_title(f"cross-modal residual (k = {result.world.k})")
    fig.tight_layout()
    return _save(fig, path)
