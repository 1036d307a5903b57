"""``prhsim run``: settings -> cost plan -> output check -> build -> solve -> run folder, in that order.

Everything a user can get wrong is checked before the computation starts, and
refused with one line and exit 2: the settings (strict types, ranges, keys),
the cost (memory the run would need), the output folder, and the world's
construction. What fails after that is a bug and surfaces as one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import click
from rich.markup import escape

from prhsim._budget import ResourceError
from prhsim.io import OutputError, check_out_folder, staged_folder
from prhsim.cli._console import UsageProblem, console, stage_reporter
from prhsim.config import (
    LEARNER_CHOICES,
    WORLD_KINDS,
    ConfigError,
    RunConfig,
    is_run_folder_config,
    read_config_file,
    resolve_run_config,
)
from prhsim.optima import TieWarning

#: The world settings that have a flag of their own, and the flag's name.
WORLD_FLAGS = {"size": "--size", "objects": "--objects", "n": "--n", "shape": "--shape"}


def git_revision() -> str | None:
    """The git revision of the prhsim source tree, if it is a checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def _default_out(config: RunConfig) -> Path:
    views = "mixed" if config.modality_views else config.views
    stem = f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{config.world.kind}-{views}"
    out, i = Path(stem), 2
    while out.exists():
        out, i = Path(f"{stem}-{i}"), i + 1
    return out


def _parse_k(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    if value is None or value == "auto":
        return value
    try:
        k = int(value)
    except ValueError:
        raise click.BadParameter(f"expected a positive integer or 'auto', got {value!r}") from None
    if k < 1:
        raise click.BadParameter(f"expected a positive integer or 'auto', got {k}")
    return k


def _parse_shape(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(part) for part in value.replace("x", ",").split(",")]
    except ValueError:
        raise click.BadParameter(f"expected sizes like 8,12 or 8x12, got {value!r}") from None


def _parse_out(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    if value is None:
        return None
    if value.strip() == "":
        raise click.BadParameter("must not be empty")
    return Path(value)


def read_own_config(config_file: Path | None, out_flag: Path | None, notes: list[str]) -> dict:
    """The config file's settings; a run's own config.json (results.json beside it) loses its ``out``, with a note."""
    file_data = read_config_file(config_file) if config_file else {}
    if config_file and is_run_folder_config(config_file) and "out" in file_data and out_flag is None:
        del file_data["out"]
        notes.append(f"{config_file} is a run's own config: this run writes a new folder (use --out to choose)")
    return file_data


def _resolve(config_file: Path | None, flags: dict, world_flags: dict, training_flags: dict,
             sets: tuple[str, ...], notes: list[str], file_data: dict | None = None) -> RunConfig:
    """Defaults <- ``file_data`` (default: read from ``config_file``) <- ``sets`` <- flags, with world-flag errors named."""
    if file_data is None:
        file_data = read_own_config(config_file, flags.get("out"), notes)
    world_sets = {f"world.{key}": value for key, value in world_flags.items() if value is not None}
    training_sets = {f"training.{key}": value for key, value in training_flags.items() if value is not None}
    try:
        return resolve_run_config(file_data, {**flags, **world_sets, **training_sets}, sets, notes)
    except ConfigError as exc:
        for key, value in world_flags.items():
            if value is not None and f"world.{key}" in exc.unknown_keys:
                raise ConfigError(f"{WORLD_FLAGS[key]} does not apply to this world ({exc}); "
                                  "`prhsim worlds` lists each world's settings") from None
        raise


@click.command()
@click.option("--world", type=click.Choice(WORLD_KINDS), default=None,
              help="World over Z (default gridscene); `prhsim worlds` lists each kind's settings.")
@click.option("--modalities", type=int, default=None, help="Number of modalities (default 3).")
@click.option("--views", type=click.Choice(["good", "bad"]), default=None,
              help="good: nuisance resampled across the pair; bad: nuisance kept w.p. 1-eps.")
@click.option("--eps", type=float, default=None, help="Bad view's resampling probability (default 0.1; bad views only).")
@click.option("--k", "k", callback=_parse_k, default=None, metavar="N|auto",
              help="Number of features, or auto: the largest relative gap of K_Z in 1..32 (default).")
@click.option("--uncentred", is_flag=True, default=False, help="Keep the constant eigenfunction (uncentred objective).")
@click.option("--seed", type=int, default=None, help="Seed for every random choice (default 0).")
@click.option("--size", type=int, default=None, help="gridscene: grid side (world.size).")
@click.option("--objects", type=int, default=None, help="gridscene: number of objects (world.objects).")
@click.option("--n", "n_states", type=int, default=None, help="ring, random: number of states (world.n).")
@click.option("--shape", callback=_parse_shape, default=None, metavar="A,B,..",
              help="torus, grid: size per axis (world.shape).")
@click.option("--learner", type=click.Choice(LEARNER_CHOICES), default=None,
              help="closed: the closed form only (default); whiten, sigreg, all: also train by SGD and "
                   "compare with it (training.* settings; see docs/learning.md).")
@click.option("--steps", type=int, default=None, help="SGD steps per learner and modality (training.steps, default 1000).")
@click.option("--seeds", type=int, default=None, help="SGD seeds per learner and modality (training.seeds, default 2).")
@click.option("--encoder", type=click.Choice(["tabular", "mlp"]), default=None,
              help="SGD encoder: one vector per state, or an MLP on the observation (training.encoder).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Any setting, e.g. --set world.laziness=0.3 (values as in TOML; repeatable).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSON or TOML file of settings; --set and flags override it.")
@click.option("--out", callback=_parse_out, default=None, metavar="DIR",
              help="Output folder (default runs/<time>-<world>-<views>); must be new or empty.")
@click.option("--overwrite", is_flag=True, default=False, help="Replace an existing --out run folder (one holding results.json) whole.")
@click.option("--memory-limit", "memory_gb", type=float, default=None, metavar="GB",
              help="Refuse a run whose estimated peak memory exceeds GB (default: half of this machine's).")
@click.option("--no-figures", is_flag=True, default=False, help="Skip the PNG figures.")
@click.option("--tables", is_flag=True, default=False,
              help="Compute the closed form's checks from full tables over every modal state (slow; small worlds).")
@click.option("--json", "as_json", is_flag=True, default=False,
              help="Print the results document to stdout instead of the report.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
@click.option("--strict", is_flag=True, default=False, help="Exit 1 if any check disagrees with the theory.")
def run(world, modalities, views, eps, k, uncentred, seed, size, objects, n_states, shape, learner, steps, seeds,
        encoder, sets, config_file, out, overwrite, memory_gb, no_figures, tables, as_json, quiet, strict) -> None:
    """Solve every modality in closed form and check the theorem's predictions.

    \b
    Examples:
      prhsim run --world gridscene --modalities 3
      prhsim run --views bad --eps 0.1
      prhsim run --world torus --shape 8,12 --k 2
      prhsim run --world ring --n 64 --learner all --steps 1000
      prhsim run --config my.toml --set world.laziness=0.3 --out runs/mine
    `prhsim worlds` lists every world kind with its settings, defaults and ranges.
    """
    from prhsim.experiments import WorldBuildError, plan_run, render_report, results_document, run_experiment
    from prhsim.experiments._learning import LearnerError
    from prhsim.experiments import write_outputs

    err = console(stderr=True)
    notes: list[str] = []
    flags = {"world": world, "modalities": modalities, "views": views, "eps": eps, "k": k, "seed": seed,
             "out": out, "centred": False if uncentred else None, "figures": False if no_figures else None,
             "memory_limit_gb": memory_gb, "learner": learner, "tables": True if tables else None}
    training_flags = {"steps": steps, "seeds": seeds, "encoder": encoder}
    world_flags = {"size": size, "objects": objects, "n": n_states, "shape": shape}
    try:
        config = _resolve(config_file, flags, world_flags, training_flags, sets, notes)
        plan = plan_run(config)
        out_dir = config.out or _default_out(config)
        check_out_folder(out_dir, overwrite=overwrite)
    except (ConfigError, ResourceError, OutputError) as exc:
        raise UsageProblem(str(exc)) from None
    if plan.time_class in ("minutes", "hours"):
        notes.append(f"this run may take {plan.time_class}: {plan.summary()}")
    if not quiet:
        for note in notes:
            err.print(f"[cyan]note:[/] {escape(note)}", highlight=False)
    revision = git_revision()
    try:
        with stage_reporter("prhsim run", quiet=quiet) as say, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TieWarning)
            if plan.time_class not in ("minutes", "hours"):
                say(f"plan: {plan.summary()}")
            result = run_experiment(config, progress=say)
            say(f"writing {out_dir}")
            with staged_folder(out_dir, overwrite=overwrite) as stage:
                write_outputs(result, config.model_copy(update={"out": out_dir}), stage, git_revision=revision)
    except (WorldBuildError, ResourceError, OutputError, LearnerError) as exc:
        raise UsageProblem(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("prhsim run: interrupted; nothing was written", err=True)
        sys.exit(130)
    if not quiet:
        for w in caught:
            err.print(f"[yellow]warning:[/] {escape(str(w.message))}", highlight=False)
    if as_json:
        click.echo(json.dumps(results_document(result, git_revision=revision), indent=2))
    elif not quiet:
        out_console = console()
        render_report(result, out_console)
        files = ", ".join(p.name for p in sorted(Path(out_dir).iterdir()))
        out_console.print(escape(f"wrote {out_dir}/ ({files})"), highlight=False)
    if strict and result.failures:
        sys.exit(1)
