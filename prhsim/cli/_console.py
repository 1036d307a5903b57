"""What the command line prints where: reports on stdout, progress, notes and warnings on stderr.

In a terminal, long stages show a rich spinner with the elapsed time; when stderr
is not a terminal, each stage is one plain line on stderr.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import click
from rich.console import Console
from rich.markup import escape

#: Width of a report that is not printed to a terminal (files and pipes are not wrapped at 80 columns).
PIPE_WIDTH = 160


class UsageProblem(click.ClickException):
    """A usage error printed as one line (``Error: …``), exit status 2, no usage header."""

    exit_code = 2


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout or stderr; wide and unwrapped when not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    probe = Console(file=stream)
    if probe.is_terminal:
        return Console(file=stream, stderr=stderr, soft_wrap=False)
    return Console(file=stream, stderr=stderr, width=PIPE_WIDTH, soft_wrap=True)


@contextmanager
def stage_reporter(command: str, *, quiet: bool) -> Iterator[Callable[[str], None]]:
    """Yield ``say(message)``: a spinner with elapsed time in a terminal, plain stderr lines otherwise."""
    if quiet:
        yield lambda message: None
        return
    err = console(stderr=True)
    start = time.perf_counter()
    if not err.is_terminal:
        def plain(message: str) -> None:
            print(f"{command} [{time.perf_counter() - start:6.1f} s] {message}", file=sys.stderr, flush=True)

        yield plain
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        task = progress.add_task(command, total=None)
        yield lambda message: progress.update(task, description=escape(f"{command}: {message}"))


@contextmanager
def bar_reporter(command: str, *, quiet: bool) -> Iterator[Callable[..., None]]:
    """Yield ``say(message, done=None, total=None)``: a progress bar of done/total with its ETA in a terminal,
    plain stderr lines (the ETA appended) otherwise. The ETA is the rate since the first call of the same count
    (a new ``total``, or ``done`` going back, starts a new count)."""
    if quiet:
        yield lambda message, done=None, total=None: None
        return
    err = console(stderr=True)
    start = time.perf_counter()
    first: dict[str, tuple[int, int, float]] = {}  # the (total, done, time) a count started from

    def eta(done: int | None, total: int | None) -> str:
        if done is None or total is None:
            return ""
        if "count" not in first or first["count"][0] != total or done < first["count"][1]:  # a new count
            first["count"] = (total, done, time.perf_counter())
        _, base, when = first["count"]
        if done <= base:
            return ""
        return f", ETA {(total - done) * (time.perf_counter() - when) / (done - base):.0f} s"

    if not err.is_terminal:
        def plain(message: str, done: int | None = None, total: int | None = None) -> None:
            print(f"{command} [{time.perf_counter() - start:6.1f} s] {message}{eta(done, total)}", file=sys.stderr,
                  flush=True)

        yield plain
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                  console=err, transient=True) as progress:
        task = progress.add_task(command, total=None, status="")

        def bar(message: str, done: int | None = None, total: int | None = None) -> None:
            progress.update(task, status=escape(message), completed=done, total=total)

        yield bar
