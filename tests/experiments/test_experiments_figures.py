"""The run's figures: drawn on standalone Figures (no pyplot), readable in the cases that broke them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from prhsim.experiments.report._figures import (
    GAP_LABEL_GID,
    K_LINE_GID,
    WORLD_CURVE_GID,
    residual_figure,
    spectrum_figure,
)
from prhsim.io import save_png
from prhsim.experiments._results import (
    InjectivitySummary,
    ModalitySummary,
    PairSummary,
    RunResult,
    WorldSummary,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: The default gridscene run's centred K_Z head (k = 10, gap 0.087 between μ_10 and μ_11).
GRIDSCENE_HEAD = [0.795, 0.78, 0.78, 0.7657, 0.76, 0.75, 0.75, 0.7364, 0.72, 0.7071, 0.6201, 0.6201, 0.6087,
                  0.6042, 0.5972, 0.5972, 0.5962, 0.5962, 0.5928, 0.5928, 0.5854, 0.585, 0.585, 0.585]
GRIDSCENE_NUISANCE = {"pixels": 4, "caption": 8, "symbolic": 3}


# ---------------------------------------------------------------- building RunResult records

def _modality(name: str, view: str, eigenvalues, n_nuisance: int = 3) -> ModalitySummary:
    eigenvalues = [float(v) for v in eigenvalues]
    return ModalitySummary(
        name=name, description=name, view=view, eps=0.1 if view.startswith("bad") else 1.0, n_nuisance=n_nuisance,
        n_states=100 * n_nuisance, eigenvalues=eigenvalues, predicted_eigenvalues=eigenvalues,
        value=2 * sum(1 - v for v in eigenvalues[:-1]), loss_via_operator=0.0, whitening_error=0.0,
        gap=eigenvalues[-2] - eigenvalues[-1], unique=eigenvalues[-2] - eigenvalues[-1] > 1e-9,
        nuisance_free_predicted=len(eigenvalues) - 1, nuisance_free_observed=len(eigenvalues) - 1,
        injectivity=InjectivitySummary(checked=100, exhaustive=True, injective=True))


def _result(name: str, head, k: int, modalities: list[ModalitySummary], rho=None, *, gap=None) -> RunResult:
    """A RunResult with every pair of modalities; ``rho(a, b)`` gives (rho_p, predicted)."""
    head = [float(v) for v in head]
    if gap is None:
        gap = head[k - 1] - head[k]
    pairs = []
    for i, a in enumerate(modalities):
        for b in modalities[i + 1:]:
            obs, pred = rho(a, b) if rho else (1e-15, 0.0)
            pairs.append(PairSummary(a=a.name, b=b.name, rho_p=obs, s_theta=obs, mean_correlation=1.0, det_q=1.0,
                                     predicted_rho_p=pred))
    world = WorldSummary(name=name, n_states=1000, factor_sizes=[1000], k=k, k_auto=True, gap=float(gap),
                         spectrum_head=head)
    return RunResult(prhsim_version="test", world=world, centred=True, modalities=modalities, pairs=pairs,
                     checks=[], seconds=0.0)


def gridscene_good(k: int = 10) -> RunResult:
    mods = [_modality(n, "good", GRIDSCENE_HEAD[: k + 1], nn) for n, nn in GRIDSCENE_NUISANCE.items()]
    return _result("gridscene", GRIDSCENE_HEAD, k, mods)


def gridscene_bad(eps: float = 0.1) -> RunResult:
    """Bad views: each modality's |N| − 1 nuisance eigenvalues 1 − ε sit above the slow features (merge rule)."""
    k = 10
    mods = []
    for name, nn in GRIDSCENE_NUISANCE.items():
        merged = sorted([1 - eps] * (nn - 1) + GRIDSCENE_HEAD, reverse=True)[: k + 1]
        mods.append(_modality(name, f"bad({eps:g})", merged, nn))
    k_z = {m.name: k - (GRIDSCENE_NUISANCE[m.name] - 1) for m in mods}

    def rho(a, b):
        value = float(np.sqrt(2 * (k - min(k_z[a.name], k_z[b.name])) / k))
        return value, value

    return _result("gridscene", GRIDSCENE_HEAD, k, mods, rho)


def ring_result(n: int = 64, k: int = 30, modalities: int = 8, head_len: int = 24) -> RunResult:
    """A lazy ring: spectrum head shorter than k + 1, modalities' μ_1..μ_{k+1} beyond it."""
    spectrum = np.sort(0.5 + 0.5 * np.cos(2 * np.pi * np.arange(1, n) / n))[::-1]
    mods = [_modality(f"code{i + 1}", "good", spectrum[: k + 1], i + 2) for i in range(modalities)]
    return _result("ring", spectrum[:head_len], k, mods, gap=spectrum[k - 1] - spectrum[k])


CASES = {
    "default": gridscene_good,
    "bad-views": gridscene_bad,
    "ring-k30-8-modalities": ring_result,
    "k2-tie": lambda: gridscene_good(k=2),
    "k-at-right-edge": lambda: gridscene_good(k=22),
    "one-modality": lambda: ring_result(n=16, k=8, modalities=1, head_len=14),
}


# ---------------------------------------------------------------- helpers

def _renderer(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _by_gid(ax, gid, kind="lines"):
    found = [a for a in getattr(ax, kind) if a.get_gid() == gid]
    assert len(found) == 1, f"expected one artist with gid {gid!r}, found {len(found)}"
    return found[0]


def _modality_lines(fig, result):
    ax = fig.axes[0]
    labels = {f"{m.name} ({m.view})" for m in result.modalities}
    return [line for line in ax.lines if line.get_label() in labels]


# ---------------------------------------------------------------- no pyplot, no backend, lazy import

def test_import_is_lazy_and_drawing_neither_imports_pyplot_nor_chooses_a_backend(tmp_path):
    """In a fresh interpreter: importing loads no matplotlib at all; drawing and saving load no pyplot."""
    (tmp_path / "result.json").write_text(CASES["one-modality"]().model_dump_json())
    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        import prhsim.experiments
        import prhsim.experiments.report._figures
        loaded = sorted(m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib."))
        assert not loaded, f"importing prhsim.experiments loaded {loaded}"
        import matplotlib
        before = dict.__getitem__(matplotlib.rcParams, "backend")
        from prhsim.experiments.report._figures import residual_figure, spectrum_figure
        from prhsim.io import save_png
        from prhsim.experiments._results import RunResult
        out = Path(sys.argv[1])
        r = RunResult.model_validate_json((out / "result.json").read_text())
        save_png(spectrum_figure(r), out / "s.png")
        save_png(residual_figure(r), out / "r.png")
        assert "matplotlib.pyplot" not in sys.modules, "pyplot was imported"
        assert dict.__getitem__(matplotlib.rcParams, "backend") == before, "a backend was chosen"
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG_SIGNATURE
    assert (tmp_path / "r.png").read_bytes()[:8] == PNG_SIGNATURE


def test_figures_are_standalone_and_leave_no_pyplot_figures_open():
    from matplotlib.figure import Figure

    result = gridscene_good()
    figs = [spectrum_figure(result), residual_figure(result)]
    assert all(isinstance(fig, Figure) for fig in figs)
    if "matplotlib.pyplot" in sys.modules:  # someone else imported pyplot: we must not have registered figures
        assert sys.modules["matplotlib.pyplot"].get_fignums() == []


# ---------------------------------------------------------------- the spectrum figure

@pytest.mark.parametrize("case", list(CASES))
def test_gap_label_sits_inside_the_axes_clear_of_every_plotted_point(case):
    result = CASES[case]()
    fig = spectrum_figure(result)
    renderer = _renderer(fig)
    ax = fig.axes[0]
    label = _by_gid(ax, GAP_LABEL_GID, "texts")
    box = label.get_bbox_patch().get_window_extent(renderer)
    axes_box = ax.get_window_extent(renderer)
    assert axes_box.x0 <= box.x0 and box.x1 <= axes_box.x1 and axes_box.y0 <= box.y0 and box.y1 <= axes_box.y1
    k_x = ax.transData.transform((result.world.k + 0.5, 0))[0]
    assert not box.x0 < k_x < box.x1, "the gap label must not straddle the k line"
    for line in ax.lines:
        if line.get_marker() in (None, "None", "none", ""):
            continue
        r = line.get_markersize() / 2 * fig.dpi / 72
        pts = ax.transData.transform(line.get_xydata())
        inside = ((pts[:, 0] > box.x0 - r) & (pts[:, 0] < box.x1 + r)
                  & (pts[:, 1] > box.y0 - r) & (pts[:, 1] < box.y1 + r))
        assert not inside.any(), f"{line.get_label()} has points under the gap label: {pts[inside]}"


def test_k_beyond_the_spectrum_head_is_still_marked_and_said():
    result = ring_result(k=30, head_len=24)
    fig = spectrum_figure(result)
    ax = fig.axes[0]
    k_line = _by_gid(ax, K_LINE_GID)
    x = k_line.get_xdata()[0]
    lo, hi = ax.get_xlim()
    assert x == pytest.approx(30.5) and lo < x < hi
    assert hi >= 32, "the x axis reaches at least k + 2"
    text = _by_gid(ax, GAP_LABEL_GID, "texts").get_text()
    assert "beyond" in text and "24" in text and "30" in text
    world = _by_gid(ax, WORLD_CURVE_GID)
    assert len(world.get_xdata()) == 24
    for line in _modality_lines(fig, result):  # each modality's μ_1..μ_{k+1}, all of them within the axes
        xs = np.asarray(line.get_xdata())
        assert xs.size == 31 and xs.min() > lo and xs.max() < hi


def test_head_long_enough_says_nothing_about_beyond():
    fig = spectrum_figure(gridscene_good())
    text = _by_gid(fig.axes[0], GAP_LABEL_GID, "texts").get_text()
    assert "beyond" not in text and "0.087" in text


def test_tie_is_named_in_the_gap_label():
    fig = spectrum_figure(CASES["k2-tie"]())
    assert "tie" in _by_gid(fig.axes[0], GAP_LABEL_GID, "texts").get_text()


def test_legend_of_eight_modalities_lies_outside_the_data_area():
    fig = spectrum_figure(ring_result())
    renderer = _renderer(fig)
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend is not None and len(legend.get_texts()) == 9  # the world and eight modalities
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    fig_box = fig.bbox
    leg = legend.get_window_extent(renderer)
    assert fig_box.x0 <= leg.x0 and leg.x1 <= fig_box.x1, "the legend is not cut off"


@pytest.mark.parametrize("case", ["default", "bad-views", "ring-k30-8-modalities"])
def test_each_modality_has_its_own_marker_colour_and_offset(case):
    from matplotlib.colors import to_hex

    result = CASES[case]()
    fig = spectrum_figure(result)
    lines = _modality_lines(fig, result)
    n = len(result.modalities)
    assert len(lines) == n
    assert len({line.get_marker() for line in lines}) == n
    assert len({to_hex(line.get_markeredgecolor()) for line in lines}) == n
    assert all(line.get_alpha() is not None and line.get_alpha() < 1 for line in lines)
    first_x = [line.get_xdata()[0] for line in lines]
    assert len(set(np.round(first_x, 6))) == n, "stacked eigenvalues are offset apart"
    assert max(first_x) - min(first_x) < 1.0, "offsets stay within one index slot"


def test_bad_views_show_the_nuisance_eigenvalues():
    result = gridscene_bad()
    fig = spectrum_figure(result)
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo < 0.585 and hi > 0.9
    for line, m in zip(_modality_lines(fig, result), result.modalities):
        np.testing.assert_allclose(line.get_ydata(), m.eigenvalues)


# ---------------------------------------------------------------- the residual heatmap

@pytest.mark.parametrize("case", ["default", "bad-views", "ring-k30-8-modalities", "one-modality"])
def test_heatmap_titles_labels_and_readable_annotations(case):
    from matplotlib.colors import to_rgba

    result = CASES[case]()
    fig = residual_figure(result)
    ax = fig.axes[0]
    assert "ρ_P" in ax.get_title() and f"k = {result.world.k}" in ax.get_title()
    assert ax.get_xlabel() == "modality" and ax.get_ylabel() == "modality"
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"{m.name}\n{m.view}" for m in result.modalities]
    image = ax.images[0]
    cells = image.get_array()
    n = len(result.modalities)
    assert cells.shape == (n, n) and len(ax.texts) == n * n
    for text in ax.texts:  # text colour contrasts with the cell below it
        j, i = (int(round(v)) for v in text.get_position())
        r, g, b, _ = image.cmap(image.norm(cells[i, j]))
        cell_lum = 0.299 * r + 0.587 * g + 0.114 * b
        tr, tg, tb, _ = to_rgba(text.get_color())
        assert abs(cell_lum - (0.299 * tr + 0.587 * tg + 0.114 * tb)) > 0.4, text.get_text()


def test_heatmap_annotates_observed_and_predicted_values():
    fig = residual_figure(gridscene_bad())
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("1.18\n(pred 1.18)") == 4 and texts.count("0.775\n(pred 0.775)") == 2


def test_heatmap_of_one_modality_says_there_are_no_pairs():
    fig = residual_figure(CASES["one-modality"]())
    assert "no pairs" in fig.axes[0].texts[0].get_text()


def test_heatmap_fonts_shrink_for_eight_modalities_and_labels_do_not_collide():
    small, large = residual_figure(gridscene_good()), residual_figure(ring_result())
    assert large.axes[0].texts[0].get_fontsize() < small.axes[0].texts[0].get_fontsize()
    renderer = _renderer(large)
    boxes = [t.get_window_extent(renderer) for t in large.axes[0].get_xticklabels()]
    assert all(not a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


# ---------------------------------------------------------------- writing

def test_save_png_writes_exactly_the_path(tmp_path):
    path = tmp_path / "sub" / "spectrum.png"
    path.parent.mkdir()
    assert save_png(spectrum_figure(gridscene_good()), path) == path
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert [p.name for p in path.parent.iterdir()] == ["spectrum.png"], "no temporary files beside it"
    out = save_png(residual_figure(gridscene_good()), str(tmp_path / "residuals.png"))
    assert out == tmp_path / "residuals.png" and out.read_bytes()[:8] == PNG_SIGNATURE


def test_figures_of_a_real_small_run(tmp_path):
    from prhsim.config import RunConfig
    from prhsim.experiments import run_experiment

    result = run_experiment(RunConfig.model_validate({"world": {"kind": "ring", "n": 64}, "modalities": 8, "k": 30,
                                                      "figures": False}))
    assert result.world.k == 30 and len(result.world.spectrum_head) >= 31  # the run's head always reaches mu_k+1
    fig = spectrum_figure(result)
    assert "beyond" not in _by_gid(fig.axes[0], GAP_LABEL_GID, "texts").get_text()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert lo < _by_gid(ax, K_LINE_GID).get_xdata()[0] < hi
    assert len({line.get_marker() for line in _modality_lines(fig, result)}) == 8
    assert save_png(residual_figure(result), tmp_path / "r.png").read_bytes()[:8] == PNG_SIGNATURE
