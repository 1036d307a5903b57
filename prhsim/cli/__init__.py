"""The ``prhsim`` command line: a thin layer over the library.

Commands: ``prhsim run`` (solve, compare, check, write a run folder; ``--learner`` trains SGD
learners beside the closed form), ``prhsim sweep NAME`` (one experiment over a grid, one folder;
the sweeps come from :data:`prhsim.experiments.sweeps.SWEEPS`), ``prhsim prh`` (the PRH alignment
protocol on feature files), ``prhsim worlds`` (every world kind with its settings) and ``prhsim
real`` (real caption and image data). Each command's module is imported only when that command
runs, so ``prhsim run`` never imports the sweeps, ``prhsim.real``, JAX or torch. Usage errors are one
line and exit 2 (a full disk too, naming the path); an unexpected exception is a bug and ends with its traceback (exit 1); Ctrl-C
exits 130 with one line on stderr, every command alike (a command that keeps something says what, others that nothing
was written). The console script and ``python -m prhsim`` (:func:`entry`) then end the process at once
(``os._exit(130)`` after flushing): an interpreter shutting down while JAX's runtime threads were interrupted can
crash (it did, about one run in four, with a segmentation fault after the message).

Before a command imports numpy, the command line lets OpenBLAS's idle worker threads sleep after 2^20
cycles instead of spinning for 2^28 (``OPENBLAS_THREAD_TIMEOUT``, unless the environment sets it): at
start-up their spinning cost a default run about 0.2 s of CPU time and no wall time
(benchmarks/bench_run.py). Thread counts and numbers are unchanged.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys

import click

from prhsim import __version__

#: Each command: the module and attribute that define it, and its one-line help for ``prhsim --help``.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("prhsim.cli._run", "run", "Solve every modality in closed form and check the theorem's predictions."),
    "sweep": ("prhsim.cli._sweep", "sweep", "Experiments over a grid of one setting (one folder, one figure)."),
    "prh": ("prhsim.cli._prh", "prh", "The PRH alignment protocol on feature files."),
    "worlds": ("prhsim.cli._worlds", "worlds", "Every world kind with its settings, defaults and ranges."),
    "check": ("prhsim.cli._check", "check", "Check the theorem's claims through hypothesis, on drawn worlds or your own."),
    "real": ("prhsim.cli._real", "real", "Real caption and image data: export, features, train, eval, align, smoke."),
}


#: OpenBLAS's worker threads wait 2^n CPU cycles for work before they sleep (OpenBLAS's own default: n = 28).
OPENBLAS_THREAD_TIMEOUT = "20"


def quiet_idle_blas_threads(environ=os.environ) -> None:
    """Let idle OpenBLAS threads sleep soon (:data:`OPENBLAS_THREAD_TIMEOUT`) if numpy is not loaded yet and the
    environment does not choose; OpenBLAS reads the variable once, when it loads."""
    if "numpy" not in sys.modules:
        environ.setdefault("OPENBLAS_THREAD_TIMEOUT", OPENBLAS_THREAD_TIMEOUT)


#: Where :class:`LazyGroup` keeps the invoked command's path in ``click.Context.meta``.
COMMAND_PATH = "prhsim.command_path"


class LazyGroup(click.Group):
    """A group whose commands are imported when invoked (``--help`` lists them from :data:`COMMANDS`)."""

    def main(self, *args, **kwargs):
        quiet_idle_blas_threads()
        return super().main(*args, **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)

    def invoke(self, ctx: click.Context):
        """Run the command; a full disk that a writer did not name itself is still one line, exit 2; Ctrl-C that no
        command caught itself is one line, exit 130 (its outputs are written whole or not at all)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo(f"{ctx.meta.get(COMMAND_PATH, 'prhsim')}: interrupted; nothing was written", err=True)
            sys.exit(130)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            from prhsim.cli._console import UsageProblem

            where = f" writing {exc.filename}" if exc.filename else ""
            raise UsageProblem(f"no space left on the device{where}; free some space or write elsewhere") from None

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """The command, and its path (``prhsim prh score``) kept in ``ctx.meta`` for the interrupt's line."""
        name, command, rest = super().resolve_command(ctx, args)
        sub = rest[0] if isinstance(command, click.Group) and rest and not rest[0].startswith("-") else None
        ctx.meta[COMMAND_PATH] = " ".join(word for word in ("prhsim", name, sub) if word)
        return name, command, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, _, short) in COMMANDS.items()])


def entry() -> None:
    """The console script and ``python -m prhsim``: :func:`main`; after Ctrl-C (exit 130) the process ends at once."""
    try:
        main(prog_name="prhsim")
    except SystemExit as exc:
        if exc.code == 130:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        raise


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="prhsim")
def main() -> None:
    """prhsim: executable checks of the Platonic Representation Theorem for JEPAs."""
