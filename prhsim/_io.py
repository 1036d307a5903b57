"""Writing results whole or not at all.

* :func:`write_atomic`: one file, written to a temporary file beside it, then renamed.
* :func:`check_out_folder` and :func:`staged_folder`: a run's whole output folder is
  checked before any work, written into a temporary sibling folder, and renamed
  into place at the end; an interrupted or failed run leaves nothing behind.

Files get the permissions of ordinary files under the process's umask (0644 under
the usual 022), not mkstemp's private 0600.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator


class OutputError(ValueError):
    """An output folder cannot be used; the message says why."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _normal_mode(path: Path, *, folder: bool) -> None:
    os.chmod(path, (0o777 if folder else 0o666) & ~_umask())


def write_atomic(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it onto ``path``.

    A failure leaves any previous file at ``path`` untouched and no partial file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        _normal_mode(Path(tmp), folder=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def json_text(data: Any) -> str:
    """Indented JSON with a final newline."""
    return json.dumps(data, indent=2, allow_nan=True) + "\n"


def write_json_atomic(path: Path, data: Any) -> Path:
    """Serialise ``data`` as indented JSON, atomically."""
    text = json_text(data)
    return write_atomic(path, lambda tmp: tmp.write_text(text))


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(".")  # pragma: no cover - a relative path's parents end at "."


def check_out_folder(out: Path, *, overwrite: bool = False) -> None:
    """Refuse an output folder that cannot be written, before any work is done.

    ``out`` may exist only as an empty folder, or as any folder when ``overwrite``
    (it is then replaced whole at the end). Its nearest existing ancestor must be
    a writable folder: this is tried by creating and removing a probe folder there,
    so nothing is left behind.

    Raises:
        OutputError: naming the path and the reason.
    """
    if str(out).strip() == "":
        raise OutputError("--out must not be empty")
    out = Path(out)
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise OutputError(f"--out {out} exists and is not a folder")
        if any(out.iterdir()) and not overwrite:
            raise OutputError(f"--out {out} exists and is not empty; pass --overwrite to replace it, "
                              "or choose another folder")
        parent = out.parent
    else:
        parent = _nearest_existing(out.parent)
        if not parent.is_dir():
            raise OutputError(f"--out {out} cannot be created: {parent} is a file, not a folder")
    try:
        probe = tempfile.mkdtemp(prefix=".prhsim-probe-", dir=parent)
    except OSError as exc:
        raise OutputError(f"--out {out} cannot be written: {parent}: {exc.strerror}") from None
    os.rmdir(probe)


@contextmanager
def staged_folder(out: Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder of ``out``; on success rename it to ``out``.

    On any exception (KeyboardInterrupt included) the temporary folder is removed
    and ``out`` is left as it was. With ``overwrite`` an existing ``out`` is
    replaced whole (no stale file of an earlier run stays beside the new ones).
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        _normal_mode(stage, folder=True)
        yield stage
        if out.exists():
            if not overwrite and any(out.iterdir()):
                raise OutputError(f"--out {out} was filled while the run was computing; the results stay in {stage}")
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / out.name)
            os.replace(stage, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(stage, out)
    except OutputError:
        raise
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
