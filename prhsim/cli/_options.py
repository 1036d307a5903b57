"""Options and their parsing shared by the commands: output folders, sizes, k, config files, the memory limit,
the git revision."""

from __future__ import annotations

import contextlib
import functools
import math
import subprocess
import time
from pathlib import Path
from typing import Iterator

import click

from prhsim.config import is_run_folder_config, read_config_file


def memory_limit_option(fn):
    """``--memory-limit GB``: the command runs under :func:`memory_limit_of` (work whose estimated peak memory
    exceeds GB is refused up front); the wrapped function does not see the option."""
    @functools.wraps(fn)
    def wrapper(*args, memory_gb: float | None = None, **kwargs):
        with memory_limit_of(memory_gb):
            return fn(*args, **kwargs)

    return click.option("--memory-limit", "memory_gb", type=click.FloatRange(min=0, min_open=True), default=None,
                        callback=_finite_gigabytes, metavar="GB", help="Refuse work whose estimated peak memory exceeds GB (default: half of "
                                           "this machine's).")(wrapper)


def _finite_gigabytes(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A memory limit is a finite number of GB (FloatRange lets inf and nan through)."""
    if value is not None and not math.isfinite(value * 1e9):
        raise click.BadParameter(f"must be a finite number of GB, got {value}")
    return value


@contextlib.contextmanager
def memory_limit_of(memory_gb: float | None) -> Iterator[None]:
    """The block under a memory limit of ``memory_gb`` GB (:func:`prhsim.memory_limit`); None: the default."""
    if memory_gb is None:
        yield
        return
    from prhsim import memory_limit

    with memory_limit(memory_gb * 1e9):
        yield


def new_run_folder(name: str) -> Path:
    """The default output folder ``runs/YYYYmmdd-HHMMSS-NAME``, with ``-2``, ``-3``, ... where one of that name
    exists (two commands in one second would otherwise share it, and the second be refused)."""
    stem = f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{name}"
    out, i = Path(stem), 2
    while out.exists():
        out, i = Path(f"{stem}-{i}"), i + 1
    return out


def git_revision() -> str | None:
    """The git revision of the prhsim source tree, if it is a checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def parse_k(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    if value is None or value == "auto":
        return value
    try:
        k = int(value)
    except ValueError:
        raise click.BadParameter(f"expected a positive integer or 'auto', got {value!r}") from None
    if k < 1:
        raise click.BadParameter(f"expected a positive integer or 'auto', got {k}")
    return k


def parse_shape(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(part) for part in value.replace("x", ",").split(",")]
    except ValueError:
        raise click.BadParameter(f"expected sizes like 8,12 or 8x12, got {value!r}") from None


def parse_out(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
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
