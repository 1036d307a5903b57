"""Writing a run's folder, or one file, whole or not at all.

:func:`check_out_folder` refuses an output folder that cannot be used before any
work is done; :func:`staged_folder` has the run written into a temporary sibling
folder and renames it into place at the end, so an interrupted or failed run
leaves nothing behind; :func:`atomic_file` does the same for one file. Files and folders get the permissions of ordinary ones
under the process's umask (0644 and 0755 under the usual 022), not mkdtemp's
private 0700. A writer that fails because the disk is full (``ENOSPC``/``EDQUOT`` anywhere in
the exception's chain, or any failure while less than :data:`FULL_BELOW` bytes are free, which
catches libraries that hide the errno) raises one :class:`OutputError` naming the path, what was
written before the disk filled, and the space free; :func:`check_free_space` refuses a write
whose size is known up front.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from prhsim._budget import format_bytes

#: A folder holding this file is a run folder, which ``overwrite`` may replace.
RUN_MARKER = "results.json"


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The process's umask, read once at import (reading it means setting it).
UMASK = _read_umask()


class OutputError(ValueError):
    """An output folder cannot be used; the message says why."""


#: A failed write while fewer bytes than this are free on the device is taken for a full disk.
FULL_BELOW = 1 << 20
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def free_bytes(path: Path) -> int | None:
    """Bytes free on the device holding ``path`` (its nearest existing ancestor); None when it cannot be read."""
    try:
        return int(shutil.disk_usage(_nearest_existing(Path(path).resolve())).free)
    except OSError:
        return None


def check_free_space(path: Path, nbytes: float, what: str) -> None:
    """Refuse (OutputError) writing about ``nbytes`` bytes of ``what`` under ``path`` when its device has less free."""
    free = free_bytes(path)
    if free is not None and nbytes > free:
        raise OutputError(f"{what} needs about {format_bytes(nbytes)} on the device of {path}, which has "
                          f"{format_bytes(free)} free; free some space or write elsewhere")


def _size(path: Path) -> int:
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    except OSError:
        return 0


def full_disk_error(exc: BaseException, target: Path, written: Path) -> OutputError | None:
    """The one-line error of a write of ``target`` (``written``: what it had written so far) that failed because
    its device is full (module docstring), else None."""
    chain, seen = [], exc
    while seen is not None and len(chain) < 16:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    free = free_bytes(target.parent)
    full = any(isinstance(e, OSError) and e.errno in _FULL_ERRNOS for e in chain)
    if not full and not (isinstance(exc, Exception) and free is not None and free < FULL_BELOW):
        return None
    return OutputError(f"no space left on the device of {target}: {format_bytes(_size(written))} were written before "
                       f"it filled ({format_bytes(free or 0)} free) and more is needed; free some space or write "
                       "elsewhere (nothing was written)")


def json_text(data: Any) -> str:
    """Indented JSON with a final newline."""
    return json.dumps(data, indent=2, allow_nan=True) + "\n"


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")  # pragma: no cover - an absolute path's parents end at "/"


def _creatable_parent(out: Path, given: Path, flag: str) -> Path:
    """The nearest existing ancestor of a path to be created; an OutputError when it is a file."""
    parent = _nearest_existing(out.parent)
    if not parent.is_dir():
        raise OutputError(f"{flag} {given} cannot be created: {parent} is a file, not a folder")
    return parent


def _probe(parent: Path, given: Path, flag: str) -> None:
    """Whether ``parent`` takes a new entry: a probe folder is created there and removed at once."""
    try:
        probe = tempfile.mkdtemp(prefix=".prhsim-probe-", dir=parent)
    except OSError as exc:
        raise OutputError(f"{flag} {given} cannot be written: {parent}: {exc.strerror}") from None
    os.rmdir(probe)


def check_out_folder(out: Path, *, overwrite: bool = False) -> None:
    """Refuse an output folder that cannot be written, before any work is done.

    ``out`` may exist only as an empty folder, or with ``overwrite`` as a run folder
    (one holding results.json), which is then replaced whole at the end. It may not
    be the current folder or one of its ancestors. Its nearest existing ancestor must
    be a writable folder: this is tried by creating and removing a probe folder there,
    so nothing is left behind. A symbolic link is followed to its target.

    Raises:
        OutputError: naming the path and the reason.
    """
    if str(out).strip() == "":
        raise OutputError("--out must not be empty")
    given, out = out, Path(out).resolve()
    if out == Path.cwd().resolve() or out in Path.cwd().resolve().parents:
        raise OutputError(f"--out {given} is the current folder or one of its ancestors; choose a new folder")
    if out.exists():
        if not out.is_dir():
            raise OutputError(f"--out {given} exists and is not a folder")
        if any(out.iterdir()):
            if not overwrite:
                raise OutputError(f"--out {given} exists and is not empty; pass --overwrite to replace it, "
                                  "or choose another folder")
            if not (out / RUN_MARKER).is_file():
                raise OutputError(f"--out {given} is not a prhsim run folder (no {RUN_MARKER}); --overwrite "
                                  "replaces only run folders")
            if not os.access(out, os.W_OK | os.X_OK):
                raise OutputError(f"--out {given} is read-only: --overwrite cannot replace it (moving a folder "
                                  "needs write permission on it)")
        _probe(out.parent, given, "--out")
    else:
        _probe(_creatable_parent(out, given, "--out"), given, "--out")


def check_out_file(out: Path, *, overwrite: bool = False, flag: str = "--out") -> None:
    """Refuse an output file that cannot be written, before any work is done.

    ``out`` may exist only as a file and only with ``overwrite``; its nearest existing ancestor must be a
    writable folder (tried with a probe, removed at once).

    Raises:
        OutputError: naming the path and the reason.
    """
    if str(out).strip() == "":
        raise OutputError(f"{flag} must not be empty")
    given, out = out, Path(out).resolve()
    if out.exists():
        if out.is_dir():
            raise OutputError(f"{flag} {given} is a folder; give a file name")
        if not overwrite:
            raise OutputError(f"{flag} {given} exists; pass --overwrite to replace it")
        _probe(out.parent, given, flag)
    else:
        _probe(_creatable_parent(out, given, flag), given, flag)


@contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """Yield a hidden temporary sibling of ``path`` (same suffix) to write; on success rename it onto ``path``.

    On any exception (KeyboardInterrupt included) the temporary file is removed and ``path`` is left as it was;
    a failure of that clean-up never hides the exception.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        full = full_disk_error(exc, path, tmp)
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # a read-only or vanished folder: the original error is the one to report
            pass
        if full is not None:
            raise full from None
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_file`."""
    with atomic_file(path) as tmp:
        tmp.write_text(text)


@contextmanager
def staged_folder(out: Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder of ``out``; on success rename it to ``out``.

    On any exception (KeyboardInterrupt included) the temporary folder is removed
    and ``out`` is left as it was. With ``overwrite`` an existing ``out`` is
    replaced whole (no stale file of an earlier run stays beside the new ones).
    A symbolic link is followed: its target is what is replaced.
    """
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        os.chmod(stage, 0o777 & ~UMASK)
        yield stage
        if out.exists() and any(out.iterdir()):
            if not overwrite:
                raise OutputError(f"--out {out} was filled while the run was computing; nothing was written")
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            try:
                os.replace(out, old / out.name)
            except OSError as exc:  # e.g. a read-only out: moving a folder rewrites its '..'
                old.rmdir()
                kept = Path(tempfile.mkdtemp(prefix=f"{out.name}.new-", dir=out.parent))
                os.replace(stage, kept / out.name)
                raise OutputError(f"cannot replace --out {out} ({exc.strerror or exc}); it is left as it was, and "
                                  f"the new results are in {kept / out.name}") from None
            os.replace(stage, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            if out.exists():
                out.rmdir()
            os.replace(stage, out)
    except BaseException as exc:
        full = None if isinstance(exc, OutputError) else full_disk_error(exc, out, stage)
        shutil.rmtree(stage, ignore_errors=True)
        if full is not None:
            raise full from None
        raise
