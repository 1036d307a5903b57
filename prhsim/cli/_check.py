"""``prhsim check``: the theorem's property suite through hypothesis, for a user without a pytest set-up."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator

import click
from rich.markup import escape
from rich.table import Table

from prhsim.cli._console import UsageProblem, bar_reporter, console
from prhsim.cli._driver import print_notes


#: Seconds per example and claim, measured on a shared 2-core CPU (7 claims x 100 examples: 7.5 s); the time note
#: before the check counts examples x claims at this rate.
EXAMPLE_SECONDS = 0.011


@contextlib.contextmanager
def _interrupt_ends_the_check() -> Iterator[None]:
    """Ctrl-C ends the check at once: exit 130 with one line (nothing is written). hypothesis runs collection
    callbacks, and a KeyboardInterrupt raised inside one is swallowed ("Exception ignored in gc_callback"): the
    check ran on after Ctrl-C. So the signal is handled here, not raised (main thread only; restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame) -> None:
        sys.stderr.write("\nprhsim check: interrupted; nothing was written\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(130)

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@click.command()
@click.option("--examples", type=click.IntRange(min=1, max=100_000), default=100, show_default=True, metavar="N",
              help="Examples per claim.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of hypothesis' draws.")
@click.option("--world-file", default=None, metavar="FILE|MODULE:FUNCTION",
              help="Your own world over Z: an .npz with arrays p and Pi, or a Python function returning a World; "
                   "every claim is checked on it and on modal worlds built from it.")
@click.option("--json", "as_json", is_flag=True, default=False, help="Print the outcomes as JSON.")
def check(examples: int, seed: int, world_file: str | None, as_json: bool) -> None:
    """Check every claim of the theorem (docs/theory.md) on drawn worlds, or on your own.

    Exits 1 when a claim fails; the table shows the shrunk counterexample and the predicate's message.

    \b
    Examples:
      prhsim check
      prhsim check --examples 500 --seed 3
      prhsim check --world-file my_world.npz
      prhsim check --world-file mypackage.worlds:office
    """
    try:
        from prhsim.testing import check_theorem, load_world
    except ImportError as exc:
        raise UsageProblem(str(exc)) from None
    world = None
    if world_file is not None:
        if "" not in sys.path:  # module:function of the current folder, as python -m would find it
            sys.path.insert(0, "")
        try:
            world = load_world(world_file)
        except ValueError as exc:
            raise UsageProblem(str(exc)) from None
    from prhsim._budget import time_notes
    from prhsim.testing import CLAIMS

    claims = len(CLAIMS)
    seconds = EXAMPLE_SECONDS * examples * claims
    print_notes(time_notes("check", seconds, f"{claims} claims x {examples:,} examples"), quiet=False)
    out = console(stderr=as_json)
    started: list[str] = []
    with bar_reporter("prhsim check", quiet=False) as say, _interrupt_ends_the_check():
        def progress(message: str) -> None:
            say(f"checking {message}", done=len(started), total=claims)
            started.append(message)

        outcomes = check_theorem(examples=examples, seed=seed, world=world, progress=progress)
        say(f"{claims} claims checked", done=claims, total=claims)
    failed = [o for o in outcomes if o.status == "failed"]
    if as_json:
        click.echo(json.dumps({"examples": examples, "seed": seed, "world_file": world_file,
                               "claims": [o.__dict__ for o in outcomes]}, indent=2))
    else:
        title = f"the theorem's claims, {examples:,} examples each (seed {seed})" + (
            f" on {world_file} and its modal worlds" if world_file else "")
        view = Table(title=title, title_justify="left")
        for column in ("claim", "section", "predicate", "examples", "result", "time"):
            view.add_column(column, justify="right" if column in ("examples", "time") else "left")
        for o in outcomes:
            result = {"passed": "[green]passed[/]", "failed": "[red]FAILED[/]"}.get(o.status, "[yellow]n/a[/]")
            view.add_row(escape(o.claim), o.section, o.predicate, f"{o.examples:,}", result, f"{o.seconds:.1f} s")
        out.print(view)
        for o in outcomes:
            if o.status == "not applicable":
                out.print(escape(f"n/a: {o.claim}: {o.message}"), highlight=False)
        for o in failed:
            out.print(escape(f"FAILED: {o.message}"), highlight=False)
            if o.counterexample:
                out.print(escape(o.counterexample), highlight=False)
    if failed:
        raise SystemExit(1)
