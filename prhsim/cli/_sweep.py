"""``prhsim sweep``: one experiment over a grid of one setting, written to one folder.

The theorem sweeps (bad-view, kernel-mismatch, gap-sensitivity, restricted-encoder,
metric-bridge) are registered from :mod:`prhsim.cli._theorem_sweeps`.
``prhsim sweep sigreg-weight`` trains SIGReg at every weight λ of a grid on every
modality of one world and charts collapse, the distance to the whitened closed form
and the cross-modal alignment against λ. It follows ``prhsim run``'s conventions: the
same world and training settings (flags, ``--set``, ``--config``), every usage error
one line and exit 2 before any work, progress on stderr, the folder written whole or
not at all.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.markup import escape

from prhsim._budget import ResourceError
from prhsim.io import OutputError, check_out_folder, json_text, staged_folder
from prhsim.cli._console import UsageProblem, console, stage_reporter
from prhsim.cli._run import _parse_out, _parse_shape, _resolve, git_revision, read_own_config
from prhsim.config import WORLD_KINDS, ConfigError

#: The sweep's world when none is named: the 30-state random world of docs/theory.md §7, two modalities, k = 2.
DEFAULT_WORLD = {"kind": "random", "n": 30}
DEFAULT_MODALITIES = 2
DEFAULT_K = 2


def _parse_lams(ctx: click.Context, param: click.Parameter, value: str | None) -> list[float] | None:
    if value is None:
        return None
    try:
        return [float(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected numbers like 1e-3,0.01,0.1, got {value!r}") from None


@click.group()
def sweep() -> None:
    """Experiments over a grid of one setting (one folder, one figure)."""


@sweep.command("sigreg-weight")
@click.option("--lam", "lams", callback=_parse_lams, default=None, metavar="A,B,..",
              help="Weights λ to train at (default: 9 log-spaced from 1e-4 to 0.5).")
@click.option("--world", type=click.Choice(WORLD_KINDS), default=None,
              help="World over Z (default: random with 30 states, two modalities, k = 2, as in docs/theory.md §7).")
@click.option("--modalities", type=int, default=None, help="Number of modalities (default 2 on the default world, else 3).")
@click.option("--views", type=click.Choice(["good", "bad"]), default=None, help="good or bad views (default good).")
@click.option("--eps", type=float, default=None, help="Bad view's resampling probability (bad views only).")
@click.option("--k", "k", type=int, default=None, help="Number of features (default 2 on the default world, else auto).")
@click.option("--seed", type=int, default=None, help="Seed for every random choice (default 0).")
@click.option("--size", type=int, default=None, help="gridscene: grid side.")
@click.option("--objects", type=int, default=None, help="gridscene: number of objects.")
@click.option("--n", "n_states", type=int, default=None, help="ring, random: number of states.")
@click.option("--shape", callback=_parse_shape, default=None, metavar="A,B,..", help="torus, grid: size per axis.")
@click.option("--steps", type=int, default=None, help="SGD steps per λ and modality (training.steps, default 1000).")
@click.option("--seeds", type=int, default=None, help="Seeds per λ and modality (training.seeds, default 2).")
@click.option("--encoder", type=click.Choice(["tabular", "mlp"]), default=None, help="training.encoder.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Any setting, e.g. --set training.convention=additive (repeatable).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSON or TOML file of settings; --set and flags override it.")
@click.option("--out", callback=_parse_out, default=None, metavar="DIR",
              help="Output folder (default runs/<time>-sigreg-weight); must be new or empty.")
@click.option("--overwrite", is_flag=True, default=False, help="Replace an existing --out folder holding results.json.")
@click.option("--memory-limit", "memory_gb", type=float, default=None, metavar="GB",
              help="Refuse a sweep whose estimated peak memory exceeds GB.")
@click.option("--no-figures", is_flag=True, default=False, help="Skip the PNG figure.")
@click.option("--json", "as_json", is_flag=True, default=False, help="Print results.json to stdout instead of tables.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
def sigreg_weight(lams, world, modalities, views, eps, k, seed, size, objects, n_states, shape, steps, seeds,
                  encoder, sets, config_file, out, overwrite, memory_gb, no_figures, as_json, quiet) -> None:
    """SIGReg at every weight λ: collapse, distance to the closed form, cross-modal alignment.

    \b
    Examples:
      prhsim sweep sigreg-weight
      prhsim sweep sigreg-weight --lam 1e-3,1e-2,0.1 --steps 2000 --seeds 4
      prhsim sweep sigreg-weight --world ring --n 16 --set training.convention=additive --lam 0.1,1,10
    """
    from prhsim.experiments import DEFAULT_LAMS, plan_run, sigreg_weight_sweep
    from prhsim.experiments.report import render_sweep
    from prhsim.experiments._learning import LearnerError
    from prhsim.experiments._sigreg_sweep import check_lams

    err = console(stderr=True)
    notes: list[str] = []
    flags = {"world": world, "modalities": modalities, "views": views, "eps": eps, "k": k, "seed": seed,
             "out": out, "figures": False if no_figures else None, "memory_limit_gb": memory_gb, "learner": "sigreg"}
    world_flags = {"size": size, "objects": objects, "n": n_states, "shape": shape}
    training_flags = {"steps": steps, "seeds": seeds, "encoder": encoder}
    try:
        file_data = read_own_config(config_file, out, notes)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from None
    file_lams = file_data.pop("lams", None)  # a sweep's own config.json holds its grid
    names_world = world is not None or "world" in file_data or any(
        s.partition("=")[0].strip() in ("world", "world.kind") for s in sets)
    if not names_world:  # the default world, under any world.* / --n setting given
        file_data["world"] = dict(DEFAULT_WORLD)
        file_data.setdefault("modalities", DEFAULT_MODALITIES)
        file_data.setdefault("k", DEFAULT_K)
    try:
        config = _resolve(config_file, flags, world_flags, training_flags, sets, notes, file_data=file_data)
        grid = check_lams(lams if lams is not None else file_lams if file_lams is not None else DEFAULT_LAMS,
                          config.training.convention)
        plan = plan_run(config.model_copy(update={"learner": "sigreg"}))
        out_dir = config.out or Path(f"runs/{time.strftime('%Y%m%d-%H%M%S')}-sigreg-weight")
        check_out_folder(out_dir, overwrite=overwrite)
    except (ConfigError, ResourceError, OutputError, ValueError) as exc:
        raise UsageProblem(str(exc)) from None
    notes.append(f"{len(grid)} weights; each trains like one run of: {plan.summary()}")
    if not quiet:
        for note in notes:
            err.print(f"[cyan]note:[/] {escape(note)}", highlight=False)
    revision = git_revision()
    try:
        with stage_reporter("prhsim sweep sigreg-weight", quiet=quiet) as say:
            result = sigreg_weight_sweep(config, grid, progress=say)
            say(f"writing {out_dir}")
            document = {"git_revision": revision, **result.model_dump(mode="json")}
            with staged_folder(out_dir, overwrite=overwrite) as stage:
                (stage / "results.json").write_text(json_text(document))
                (stage / "config.json").write_text(json_text({**config.model_dump(mode="json"),
                                                              "out": str(out_dir), "lams": list(grid)}))
                if config.figures:
                    from prhsim.experiments.report import sweep_figure
                    from prhsim.io import save_png

                    save_png(sweep_figure(result), stage / "sigreg_weight.png")
    except (ResourceError, OutputError, LearnerError) as exc:
        raise UsageProblem(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("prhsim sweep: interrupted; nothing was written", err=True)
        sys.exit(130)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    elif not quiet:
        out_console = console()
        render_sweep(result, out_console)
        files = ", ".join(p.name for p in sorted(Path(out_dir).iterdir()))
        out_console.print(escape(f"wrote {out_dir}/ ({files})"), highlight=False)
