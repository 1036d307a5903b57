"""Atomic writes: a result is written to a temporary file in its folder, then renamed."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable


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
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: Path, data: Any) -> Path:
    """Serialise ``data`` as indented JSON, atomically."""
    text = json.dumps(data, indent=2, allow_nan=True) + "\n"
    return write_atomic(path, lambda tmp: tmp.write_text(text))
