"""``prhsim run``: settings -> cost plan -> output check -> build -> solve -> run folder, in that order.

Everything a user can get wrong is checked before the computation starts, and
refused with one line and exit 2: the settings (strict types, ranges, keys),
the cost (memory the run would need), the output folder, and the world's
construction. What fails after that is a bug and surfaces as one.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import click

from prhsim._budget import LONG_CLASSES, ResourceError, beyond_horizon
from prhsim._extras import JAX_MODULES, require
from prhsim.cli._console import UsageProblem
from prhsim.cli._driver import drive, print_notes
from prhsim.cli._options import git_revision, new_run_folder, parse_out, read_own_config
from prhsim.cli._run_flags import RUN_FLAGS, flag_of, run_flag_options, run_flag_values
from prhsim.config import LEARNER_CHOICES, ConfigError, RunConfig, resolve_run_config
from prhsim.io import OutputError, check_out_folder

def _default_out(config: RunConfig) -> Path:
    views = "mixed" if config.modality_views else config.views
    return new_run_folder(f"{config.world.kind}-{views}")


def _resolve(config_file: Path | None, flags: dict, sets: tuple[str, ...], notes: list[str],
             file_data: dict | None = None) -> RunConfig:
    """Defaults <- ``file_data`` (default: read from ``config_file``) <- ``sets`` <- flags (settings by key), with a
    world option that does not apply to the world named."""
    if file_data is None:
        file_data = read_own_config(config_file, flags.get("out"), notes)
    try:
        return resolve_run_config(file_data, flags, sets, notes)
    except ConfigError as exc:
        for key, value in flags.items():
            if value is not None and key.startswith("world.") and key in exc.unknown_keys:
                raise ConfigError(f"{flag_of(key)} does not apply to this world ({exc}); "
                                  "`prhsim worlds` lists each world's settings") from None
        raise


@click.command()
@run_flag_options(RUN_FLAGS, RunConfig())
@click.option("--uncentred", is_flag=True, default=False, help="Keep the constant eigenfunction (uncentred objective).")
@click.option("--learner", type=click.Choice(LEARNER_CHOICES), default=None,
              help="closed: the closed form only (default); whiten, sigreg, all: also train by SGD and "
                   "compare with it (training.* settings; see docs/learning.md).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Any setting, e.g. --set world.laziness=0.3 (values as in TOML; repeatable).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSON or TOML file of settings; --set and flags override it.")
@click.option("--out", callback=parse_out, default=None, metavar="DIR",
              help="Output folder (default runs/<time>-<world>-<views>); must be new or empty.")
@click.option("--overwrite", is_flag=True, default=False, help="Replace an existing --out run folder (one holding results.json) whole.")
@click.option("--no-figures", is_flag=True, default=False, help="Skip the PNG figures.")
@click.option("--tables", is_flag=True, default=False,
              help="Compute the closed form's checks from full tables over every modal state (slow; small worlds).")
@click.option("--calibrate", "permutations", type=int, default=None, metavar="K",
              help="Calibrate the PRH sample metrics against K row permutations (calibrate; default 0: off).")
@click.option("--json", "as_json", is_flag=True, default=False,
              help="Print the results document to stdout instead of the report.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
@click.option("--strict", is_flag=True, default=False, help="Exit 1 if any check disagrees with the theory.")
@click.option("--insist", is_flag=True, default=False,
              help="Run even where the plan's time is beyond the week-long horizon (refused otherwise).")
def run(uncentred, learner, sets, config_file, out, overwrite, no_figures, tables, permutations, as_json, quiet,
        strict, insist, **run_flags) -> None:
    """Solve every modality in closed form and check the theorem's predictions.

    \b
    Examples:
      prhsim run --world gridscene --modalities 3
      prhsim run --views bad --eps 0.1
      prhsim run --world torus --shape 8,12 --k 2
      prhsim run --world ring --n 64 --learner all --steps 1000
      prhsim run --config my.toml --set world.size=5 --out runs/mine
    `prhsim worlds` lists every world kind with its settings, defaults and ranges.
    """
    from prhsim.experiments import (
        LearnerError,
        WorldBuildError,
        plan_run,
        render_report,
        results_document,
        run_experiment,
        write_outputs,
    )
    from prhsim.optima import TieWarning

    notes: list[str] = []
    flags = {**run_flag_values(RUN_FLAGS, run_flags), "out": out, "centred": False if uncentred else None,
             "figures": False if no_figures else None, "learner": learner, "tables": True if tables else None,
             "calibrate": permutations}
    try:
        config = _resolve(config_file, flags, sets, notes)
        if config.sgd_learners:
            require(f"prhsim run --learner {config.learner}", JAX_MODULES, "jax")
        plan = plan_run(config)
        refusal = beyond_horizon("run", plan.seconds, plan.summary())
        if refusal and not insist:
            raise ValueError(refusal)
        out_dir = config.out or _default_out(config)
        check_out_folder(out_dir, overwrite=overwrite)
    except (ConfigError, ResourceError, OutputError, ValueError) as exc:
        raise UsageProblem(str(exc).splitlines()[0]) from None
    long = plan.time_class in LONG_CLASSES
    if long:
        notes.append(f"this run may take {plan.time_class}: {plan.summary()}")

    print_notes(notes, quiet=quiet)
    revision = git_revision()
    caught: list[str] = []

    def compute(say):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", TieWarning)
            if not long:
                say(f"plan: {plan.summary()}")
            result = run_experiment(config, progress=say)
        caught.extend(str(w.message) for w in seen)
        return result

    def write(result, stage):
        write_outputs(result, config.model_copy(update={"out": out_dir}), stage, git_revision=revision)
        return results_document(result, git_revision=revision)

    result = drive("prhsim run", out_dir, overwrite=overwrite, quiet=quiet, as_json=as_json, compute=compute,
                   write=write, report=render_report, errors=(WorldBuildError, LearnerError), warnings=caught)
    if strict and result.failures:
        sys.exit(1)
