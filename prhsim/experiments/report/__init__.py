"""Presentation of a run, apart from the experiment logic: the terminal report, the figures and the files.

Figures are drawn on ``matplotlib.figure.Figure`` objects (no backend is chosen,
pyplot is never imported) and matplotlib is imported only when a figure is drawn.
"""

from prhsim.experiments.report._convergence import convergence_figure as convergence_figure
from prhsim.experiments.report._figures import (
    residual_figure as residual_figure,
    spectrum_figure as spectrum_figure,
)
from prhsim.experiments.report._files import results_document as results_document, write_outputs as write_outputs
from prhsim.experiments.report._sweep import render_sweep as render_sweep, sweep_figure as sweep_figure
from prhsim.experiments.report._terminal import render_report as render_report
from prhsim.experiments.report._theorem_figures import (
    bad_view_figure as bad_view_figure,
    gap_figure as gap_figure,
    kernel_mismatch_figure as kernel_mismatch_figure,
    restricted_figure as restricted_figure,
)
