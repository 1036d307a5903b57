"""The files of a run: results.json, config.json and the figures, written into its staging folder."""

from __future__ import annotations

from pathlib import Path

from prhsim.io import json_text, save_png
from prhsim.config import RunConfig
from prhsim.experiments._results import RunResult


def results_document(result: RunResult, *, git_revision: str | None) -> dict:
    """The results.json document: the run's result with the source revision."""
    return {"git_revision": git_revision, **result.model_dump(mode="json")}


def write_outputs(result: RunResult, config: RunConfig, folder: Path, *, git_revision: str | None) -> list[Path]:
    """Write results.json, config.json and (if asked) the PNG figures into ``folder`` (convergence.png with learners).

    ``folder`` is a run's staging folder (:func:`prhsim.io._files.staged_folder`), renamed into
    place whole once every file is written; the files are written directly.
    """
    folder = Path(folder)
    written = [folder / "results.json", folder / "config.json"]
    written[0].write_text(json_text(results_document(result, git_revision=git_revision)))
    written[1].write_text(json_text(config.model_dump(mode="json")))
    if config.figures:
        from prhsim.experiments.report._figures import residual_figure, spectrum_figure

        written.append(save_png(spectrum_figure(result), folder / "spectrum.png"))
        written.append(save_png(residual_figure(result), folder / "residuals.png"))
        if result.learned:
            from prhsim.experiments.report._convergence import convergence_figure

            written.append(save_png(convergence_figure(result), folder / "convergence.png"))
    return written
