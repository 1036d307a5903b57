"""What the command line prints where: reports on stdout, progress, notes and warnings on stderr.

Progress is ``say(message, done=None, total=None)`` (:func:`bar_reporter`): in a terminal a rich
bar with the elapsed and remaining time, pulsing while a stage gives no count; when stderr is not a
terminal, each call is one plain line on stderr, with ``, ETA N s`` where it gives ``done`` of ``total``.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Iterator

import click
from rich.console import Console
from rich.markup import escape

from prhsim._types import Progress

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


class _Count:
    """The ETA of the current count: its remaining work times the time per unit since the count began.

    A count begins at the first call that gives ``done`` and ``total``; a call with another ``total``,
    or with ``done`` below where the count began, begins a new one. Calls without a count leave it.
    """

    def __init__(self) -> None:
        self.total: int | None = None
        self.base = 0
        self.when = 0.0

    def update(self, done: int | None, total: int | None) -> bool:
        """Track ``done`` of ``total``; True when this call begins a new count."""
        if done is None or total is None:
            return False
        if self.total != total or done < self.base:
            self.total, self.base, self.when = total, done, time.perf_counter()
            return True
        return False

    def eta(self, done: int | None, total: int | None) -> float | None:
        """Seconds left: ``(total - done) * elapsed / (done - base)``, None before any work of the count is done."""
        if done is None or total is None or done <= self.base:
            return None
        return (total - done) * (time.perf_counter() - self.when) / (done - self.base)


@contextmanager
def bar_reporter(command: str, *, quiet: bool) -> Iterator[Progress]:
    """Yield ``say(message, done=None, total=None)``: in a terminal a rich bar of done/total with the elapsed time and
    the ETA (pulsing while no count is given), otherwise plain stderr lines ``command [elapsed s] message`` with
    ``, ETA N s`` appended; the ETA is :class:`_Count`'s (the rate since the count began)."""
    if quiet:
        yield lambda message, done=None, total=None: None
        return
    err = console(stderr=True)
    start = time.perf_counter()
    count = _Count()
    if not err.is_terminal:
        def plain(message: str, done: int | None = None, total: int | None = None) -> None:
            count.update(done, total)
            left = count.eta(done, total)
            eta = "" if left is None else f", ETA {left:.0f} s"
            print(f"{command} [{time.perf_counter() - start:6.1f} s] {message}{eta}", file=sys.stderr, flush=True)

        yield plain
        return
    from rich.progress import BarColumn, Progress as Bar, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    shown: dict[str, float] = {}  # the ETA of the last counted call and when it was made

    class Remaining(ProgressColumn):
        """The last call's ETA, counting down until the next call (blank before a count has a rate)."""

        def render(self, task) -> Text:
            if "eta" not in shown:
                return Text("")
            left = max(0.0, shown["eta"] - (time.perf_counter() - shown["at"]))
            return Text(f"ETA {left:.0f} s", style="progress.remaining")

    with Bar(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
             TextColumn("{task.fields[count]}"), TimeElapsedColumn(), Remaining(), TextColumn("{task.fields[status]}"),
             console=err, transient=True) as progress:
        task = progress.add_task(command, total=None, status="", count="")

        def bar(message: str, done: int | None = None, total: int | None = None) -> None:
            if count.update(done, total):  # a new count: its rate starts again
                shown.clear()
            left = count.eta(done, total)
            if left is not None:
                shown.update(eta=left, at=time.perf_counter())
            counted = {} if done is None or total is None else {"completed": done, "total": total,
                                                                 "count": f"{done:,}/{total:,}"}
            progress.update(task, status=escape(message), **counted)

        yield bar
