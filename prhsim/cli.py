"""The ``prhsim`` command line: a thin layer over :mod:`prhsim.experiments`.

Every command resolves its configuration once (defaults <- ``--config`` file <-
flags), runs a library function, prints a report and writes results atomically.
Bad flags, bad config keys and inputs the library rejects are usage errors
(exit 2, one line, no traceback).
"""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from pathlib import Path

import click
from rich.console import Console

from prhsim import __version__
from prhsim.jepa import TieWarning
from prhsim.config import WORLD_KINDS, ConfigError, RunConfig, read_config_file, resolve_run_config


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


def git_revision() -> str | None:
    """The git revision of the prhsim source tree, if it is a checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def _default_out(config: RunConfig) -> Path:
    stem = f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{config.world.kind}-{config.views}"
    out, i = Path(stem), 2
    while out.exists():
        out, i = Path(f"{stem}-{i}"), i + 1
    return out


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="prhsim")
def main() -> None:
    """prhsim: executable checks of the Platonic Representation Theorem for JEPAs."""


@main.command()
@click.option("--world", type=click.Choice(WORLD_KINDS), default=None, help="World over Z (default gridscene).")
@click.option("--modalities", type=int, default=None, help="Number of modalities (default 3).")
@click.option("--views", type=click.Choice(["good", "bad"]), default=None,
              help="good: nuisance resampled across the pair; bad: nuisance kept w.p. 1-eps.")
@click.option("--eps", type=float, default=None, help="Bad view's resampling probability (default 0.1).")
@click.option("--k", "k", callback=_parse_k, default=None, metavar="N|auto",
              help="Number of features, or auto: the largest gap of K_Z in 1..32 (default).")
@click.option("--uncentred", is_flag=True, default=False, help="Keep the constant eigenfunction (uncentred objective).")
@click.option("--seed", type=int, default=None, help="Seed for every random choice (default 0).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Output folder (default runs/<time>-<world>-<views>).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSON or TOML file of RunConfig settings; flags override it.")
@click.option("--no-figures", is_flag=True, default=False, help="Skip the PNG figures.")
@click.option("--strict", is_flag=True, default=False, help="Exit 1 if any check disagrees with the theory.")
def run(world, modalities, views, eps, k, uncentred, seed, out, config_file, no_figures, strict) -> None:
    """Solve every modality in closed form and check the theorem's predictions.

    Example: prhsim run --world gridscene --modalities 3 --views bad --eps 0.1
    """
    from prhsim.experiments import render_report, run_experiment, write_outputs

    try:
        file_data = read_config_file(config_file) if config_file else {}
        flags = {"world": world, "modalities": modalities, "views": views, "eps": eps, "k": k, "seed": seed,
                 "out": out, "centred": False if uncentred else None, "figures": False if no_figures else None}
        config = resolve_run_config(file_data, flags)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    console = Console()
    try:
        with console.status("prhsim run", spinner="dots") as status, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TieWarning)
            result = run_experiment(config, progress=lambda msg: status.update(f"prhsim run: {msg}"))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    for w in caught:
        console.print(f"[yellow]warning:[/] {w.message}")
    render_report(result, console)
    out_dir = config.out or _default_out(config)
    written = write_outputs(result, config, out_dir, git_revision=git_revision())
    console.print("wrote " + ", ".join(str(p) for p in written))
    if strict and result.failures:
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
