"""The one driver of every command that writes a folder: compute with progress, stage the folder, report.

A command resolves and checks its settings and its output folder first (usage errors are one
line, exit 2, before any work), then hands :func:`drive` three functions: ``compute(say)``,
``write(result, stage)`` (the files, into a temporary sibling renamed into place whole; it
returns the results document) and ``report(result, console)``. The driver shows progress on
stderr (``say(message, done=None, total=None)`` of :func:`prhsim.cli._console.bar_reporter`: a
bar with the time remaining in a terminal, plain lines with ``, ETA N s`` otherwise), turns the
library's refusals into one-line usage errors, leaves nothing behind on failure or Ctrl-C (exit
130), and prints the report, or the results document with ``--json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import click
from rich.console import Console
from rich.markup import escape

from prhsim._budget import ResourceError
from prhsim._types import Progress
from prhsim.cli._console import UsageProblem, bar_reporter, console
from prhsim.io import OutputError, staged_folder


def print_notes(notes: list[str], *, quiet: bool, kind: str = "note", colour: str = "cyan") -> None:
    """Each note on stderr as ``note: …`` (nothing when quiet)."""
    if quiet or not notes:
        return
    err = console(stderr=True)
    for note in notes:
        err.print(f"[{colour}]{kind}:[/] {escape(note)}", highlight=False)


def drive(command: str, out_dir: Path, *, overwrite: bool, quiet: bool, as_json: bool,
          compute: Callable[[Progress], Any], write: Callable[[Any, Path], dict],
          report: Callable[[Any, Console], None], errors: tuple[type[Exception], ...] = (),
          warnings: list[str] | None = None, kept: Callable[[], str | None] | None = None) -> Any:
    """Run ``compute``, write the folder, report (module docstring); returns the result.

    ``errors``: exceptions of the library that are the user's (a one-line usage error, the
    first line of the message), beside ResourceError and OutputError. ``warnings``: filled by
    ``compute``, printed on stderr after it (unless quiet). ``kept``: after a failure or an
    interrupt, what the command keeps for a later run (appended to the one line), or None.
    """
    def also() -> str:
        note = kept() if kept is not None else None
        return f"; {note}" if note else ""

    try:
        with bar_reporter(command, quiet=quiet) as say:
            result = compute(say)
            say(f"writing {out_dir}")
            with staged_folder(out_dir, overwrite=overwrite) as stage:
                document = write(result, stage)
    except (ResourceError, OutputError, *errors) as exc:
        raise UsageProblem((str(exc).splitlines()[0] if str(exc) else type(exc).__name__) + also()) from None
    except KeyboardInterrupt:
        click.echo(f"{command}: interrupted; nothing was written{also()}", err=True)
        sys.exit(130)
    print_notes(warnings or [], quiet=quiet, kind="warning", colour="yellow")
    if as_json:
        click.echo(json.dumps(document, indent=2))
    elif not quiet:
        out = console()
        report(result, out)
        files = ", ".join(p.name for p in sorted(Path(out_dir).iterdir()))
        out.print(escape(f"wrote {out_dir}/ ({files})"), highlight=False)
    return result
