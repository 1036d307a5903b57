"""Presentation of a run, apart from the experiment logic: the terminal report, the figures and the files.

Figures are drawn on ``matplotlib.figure.Figure`` objects (no backend is chosen,
pyplot is never imported) and matplotlib is imported only when a figure is drawn. The
sweeps' figures live beside their sweeps (:mod:`prhsim.experiments.sweeps`).
"""

from prhsim.experiments.report._convergence import convergence_figure as convergence_figure
from prhsim.experiments.report._figures import residual_figure as residual_figure, spectrum_figure as spectrum_figure
from prhsim.experiments.report._files import results_document as results_document, write_outputs as write_outputs
from prhsim.experiments.report._prh_figure import prh_table_figure as prh_table_figure
from prhsim.experiments.report._terminal import render_report as render_report

__all__ = ["convergence_figure", "prh_table_figure", "render_report", "residual_figure", "results_document",
           "spectrum_figure", "write_outputs"]
