"""``prhsim sweep NAME``: one command per entry of :data:`prhsim.experiments.sweeps.SWEEPS`.

Every sweep follows one pattern: its settings model resolved from defaults <- ``--config``
<- ``--set`` <- its shorthand flags, the output folder checked, the sweep's own notes (its
cost on its ``--workers``, each running cell under its share of ``--memory-limit``; a refusal before any
work; ``this sweep may take minutes: …`` where its time class, estimated from its settings, is minutes or
hours), then
:func:`prhsim.cli._driver.drive`: the sweep's cells run with progress (counted in cells, with an
ETA; in this process, on ``--workers N`` processes or on Ray with ``--executor ray``:
:func:`prhsim.experiments.sweeps.run_sweep`), each finished cell kept in ``DIR.cells`` until the
folder is written (``--resume DIR``, or the same ``--out``, computes only the missing ones);
``results.json``, ``config.json``, ``cells.csv``, ``cells.parquet`` and the figure written into a
folder renamed whole into place, and its summary printed (or the results document with
``--json``). Usage errors are one line and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.markup import escape

from prhsim._extras import missing, require
from prhsim.cli._console import UsageProblem
from prhsim.cli._driver import drive, print_notes
from prhsim.cli._options import git_revision, memory_limit_option, new_run_folder, parse_out, read_own_config
from prhsim.cli._run_flags import run_flag_options, run_flag_values
from prhsim.config import ConfigError, format_validation_error, resolve_settings
from prhsim.io import OutputError, check_out_folder, json_text, save_png


class SweepGroup(click.Group):
    """The sweeps as subcommands, made from the registry when listed or invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from prhsim.experiments.sweeps import SWEEPS

        return list(SWEEPS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        from prhsim.experiments.sweeps import SWEEPS

        return _command(SWEEPS[name]) if name in SWEEPS else None


@click.group(cls=SweepGroup)
def sweep() -> None:
    """Experiments over a grid of one setting (one folder, one figure)."""


def _shorthand(sweep: Any, flags: dict[str, Any]) -> list[str]:
    """The ``--set`` assignments of the sweep's shorthand flags that were given."""
    out = []
    for flag in sweep.flags:
        value = flags.get(flag.name.replace("-", "_"))
        if value is None:
            continue
        try:
            assigned = flag.to_set(str(value))
        except ValueError as exc:
            raise UsageProblem(f"--{flag.name}: {exc}") from None
        if assigned is not None:
            out.append(f"{flag.key}={assigned}")
    return out


def _report(sweep: Any, result: Any, out: Console) -> None:
    for item in sweep.summary(result):
        if isinstance(item, str):
            out.print(escape(item), highlight=False)
        else:
            out.print(item)
    out.print(f"{result.seconds:.2f} s", highlight=False)


def _common_options(sweep: Any, model: type[BaseModel]):
    """The options every sweep takes, then the click command of the function they decorate."""
    from prhsim.experiments.sweeps import EXECUTORS

    def decorate(fn):
        for option in reversed((
            click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
                         help="JSON or TOML file of this sweep's settings; --set overrides it."),
            click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                         help="Any setting (values as in TOML; repeatable)."),
            click.option("--out", callback=parse_out, default=None, metavar="DIR",
                         help=f"Output folder (default runs/<time>-{sweep.name}); must be new or empty."),
            click.option("--overwrite", is_flag=True, default=False,
                         help="Replace an existing --out folder holding results.json."),
            click.option("--no-figures", is_flag=True, default=False, help="Skip the PNG figure."),
            click.option("--json", "as_json", is_flag=True, default=False, help="Print results.json to stdout instead."),
            click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors."),
            click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
                         help="Cells computed at once: N local worker processes (with --executor ray, the CPUs of "
                              "the Ray started for the sweep)."),
            click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
                         help="Where the cells run: this machine's processes, or Ray (pip install 'prhsim[ray]')."),
            click.option("--address", default=None, metavar="HOST:PORT",
                         help="A running Ray cluster to send the cells to (with --executor ray)."),
            click.option("--insist", is_flag=True, default=False,
                         help="Run a sweep whose estimate is beyond the week-long horizon (refused otherwise)."),
            click.option("--resume", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
                         help="Finish the sweep of --out DIR that stopped: its settings, and only the cells not "
                              "yet in DIR.cells."),
        )):
            fn = option(fn)
        return click.command(sweep.name, help=f"{sweep.help}\n\nSettings: {', '.join(model.model_fields)} "
                                              "(--config FILE, --set key=value).")(fn)
    return decorate


def _command(sweep: Any) -> click.Command:
    from prhsim.experiments.sweeps import (
        CellError,
        CellStore,
        cell_rows,
        csv_text,
        resumed_settings,
        run_sweep,
        settings_document,
        write_parquet,
    )

    model = sweep.settings_model()

    def command(config_file, sets, out, overwrite, no_figures, as_json, quiet, workers, executor, address, insist,
                resume, **flags) -> None:
        notes: list[str] = []
        try:
            sweep.check_requirements()
            if address is not None and executor != "ray":
                raise ValueError("--address names a Ray cluster: add --executor ray")
            if executor == "ray":
                require("prhsim sweep --executor ray", ("ray",), "ray")
            if resume is not None and out is not None and Path(out).resolve() != resume.resolve():
                raise ValueError(f"--resume {resume} finishes the sweep of that folder; drop --out {out}")
            out_dir = resume or out or new_run_folder(sweep.name)
            file_data = read_own_config(config_file, None, notes)
            if resume is not None:  # the stopped sweep's settings, under --config and --set
                file_data = {**resumed_settings(resume, sweep.name), **(file_data or {})}
            settings = resolve_settings(model, file_data, [*sets, *_shorthand(sweep, flags)],
                                        run_flag_values(sweep.run_flags, flags), notes)
            check_out_folder(out_dir, overwrite=overwrite)
            notes += sweep.notes(settings, 1 if address is not None else workers,  # a cluster's machines: its own
                                 insist=insist)
        except (ConfigError, OutputError, ValueError) as exc:
            raise UsageProblem(str(exc).splitlines()[0]) from None
        print_notes(notes, quiet=quiet)
        revision = git_revision()
        store = CellStore.beside(out_dir, sweep.name, settings_document(settings), revision)

        def compute(say):
            say("computing")
            try:
                store.start()
                return run_sweep(sweep, settings, store, workers=workers, executor=executor, address=address,
                                 threads=getattr(settings, "threads", 1), say=say)
            except ValidationError as exc:  # settings a world model refuses (e.g. too many modalities)
                raise ConfigError(format_validation_error(exc)) from None

        def write(run, stage):
            document = {"git_revision": revision, **run.result.model_dump(mode="json")}
            (stage / "results.json").write_text(json_text(document))
            (stage / "config.json").write_text(json_text({**settings.model_dump(mode="json"), "out": str(out_dir)}))
            rows = cell_rows(run.cells, run.records)
            (stage / "cells.csv").write_text(csv_text(rows))
            if not missing(("pyarrow",)):
                write_parquet(rows, stage / "cells.parquet")
            if not no_figures:
                save_png(sweep.draw(run.result), stage / sweep.png)
            return document

        def report(run, console):
            if run.reused:
                console.print(f"reused {run.reused} of {len(run.cells)} cells from {store.folder}", highlight=False)
            _report(sweep, run.result, console)

        def kept():
            count = store.count()
            if not count:  # stopped before its first cell: nothing to keep
                store.remove()
            return (f"its {count} computed cell(s) stay in {store.folder}: the same command (or --resume {out_dir}) "
                    "computes only the others") if count else None

        drive(f"prhsim sweep {sweep.name}", out_dir, overwrite=overwrite, quiet=quiet, as_json=as_json,
              compute=compute, write=write, report=report, errors=(ConfigError, ValueError, CellError), kept=kept)
        store.remove()  # the folder is written whole: its cells are in results.json and cells.csv

    if "memory-limit" not in sweep.run_flags:  # a sweep over the run's settings sets it in its settings
        command = memory_limit_option(command)
    command = run_flag_options(sweep.run_flags, model() if sweep.run_flags else None)(command)
    for flag in reversed(sweep.flags):
        command = click.option(f"--{flag.name}", flag.name.replace("-", "_"), type=flag.type, default=None,
                               metavar=flag.metavar, help=f"{flag.help} Shorthand for --set {flag.key}=….")(command)
    return _common_options(sweep, model)(command)
