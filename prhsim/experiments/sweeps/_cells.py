"""A sweep as independent cells: what a cell is, its key, its record on disk, and the reduce into the sweep's result.

A *cell* is the unit of a sweep that can run anywhere (in this process, in a worker process, on a
Ray worker): one grid point, or one seed of it. Every sweep module declares its cells with three
functions beside ``run`` (a test checks every record of the registry):

* ``cells(settings) -> list[dict]``: each cell's coordinates (JSON values: its settings columns);
* ``cell(settings, coordinates) -> dict``: the cell's record (JSON values), computed from the
  settings and the coordinates alone (its randomness keyed by them, never by its place in the grid);
* ``reduce(settings, records) -> result``: the sweep's result from the records, in the order of ``cells``.

Each finished cell is written as it finishes, atomically, into the sweep's *cell folder*
(``DIR.cells`` beside the output folder ``DIR``), named by its key: the hash of the sweep's name,
its settings, the cell's coordinates, prhsim's version and the git revision of its source when
known. A later run with the same ``--out`` (or ``--resume DIR``) reads every cell whose key matches
and computes only the others; a file that does not parse, or whose key differs, is never read as a
result.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel

from prhsim import __version__
from prhsim.io import OutputError, write_text_atomic

#: The suffix of a sweep's cell folder beside its output folder, and the file in it that records the settings.
CELL_FOLDER_SUFFIX = ".cells"
SETTINGS_FILE = "settings.json"


@dataclass(frozen=True)
class SweepCell:
    """One cell of a sweep: its place in the sweep's order and its coordinates (JSON values)."""

    index: int
    coordinates: Mapping[str, Any]

    def describe(self) -> str:
        """``cell 3 (eps=0.25)``."""
        return f"cell {self.index} ({', '.join(f'{k}={v}' for k, v in self.coordinates.items())})"


def settings_document(settings: BaseModel) -> dict[str, Any]:
    """The settings as JSON values (what config.json records and what the cell keys hash)."""
    return settings.model_dump(mode="json")


def sweep_cells(module: Any, settings: BaseModel) -> list[SweepCell]:
    """The cells ``module`` declares for ``settings``, numbered in its order."""
    cells = [SweepCell(i, dict(coordinates)) for i, coordinates in enumerate(module.cells(settings))]
    if not cells:
        raise ValueError("the sweep's settings give no cells to compute")
    return cells


def compute_cell(module: Any, settings: BaseModel, cell: SweepCell) -> dict[str, Any]:
    """One cell's record (JSON values): the module's ``cell`` at the cell's coordinates."""
    return module.cell(settings, dict(cell.coordinates))


def cell_key(sweep: str, settings: Mapping[str, Any], cell: SweepCell, revision: str | None = None) -> str:
    """The cell's key: a hash of the sweep's name, its settings, the cell's coordinates, prhsim's version and the
    source's git revision when known (a development checkout keeps one version across changes of its code)."""
    text = json.dumps({"sweep": sweep, "settings": settings, "cell": dict(cell.coordinates), "version": __version__,
                       "revision": revision}, sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class CellStore:
    """A sweep's cell folder: one JSON file per finished cell, named by its key and written atomically."""

    def __init__(self, folder: Path, sweep: str, settings: Mapping[str, Any], revision: str | None = None) -> None:
        self.folder, self.sweep, self.settings, self.revision = Path(folder), sweep, dict(settings), revision

    @classmethod
    def beside(cls, out: Path, sweep: str, settings: Mapping[str, Any], revision: str | None = None) -> "CellStore":
        """The cell folder of the output folder ``out``: ``out.cells`` beside it."""
        out = Path(out).resolve()
        return cls(out.with_name(out.name + CELL_FOLDER_SUFFIX), sweep, settings, revision)

    def start(self) -> None:
        """Create the cell folder and record the sweep's settings in it (what ``--resume`` reads back)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.folder / SETTINGS_FILE, json.dumps({"sweep": self.sweep, "settings": self.settings},
                                                                  indent=2, allow_nan=True))

    def path(self, cell: SweepCell) -> Path:
        return self.folder / f"{cell_key(self.sweep, self.settings, cell, self.revision)}.json"

    def load(self, cell: SweepCell) -> dict[str, Any] | None:
        """The cell's record when a file with its key holds it whole; None when missing, cut short or of another key."""
        path = self.path(cell)
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(document, dict) or document.get("key") != path.stem or "record" not in document:
            return None
        return document["record"]

    def save(self, cell: SweepCell, record: Mapping[str, Any]) -> None:
        """Write the cell's record (temporary file, then rename: a kill leaves the old state or the whole file)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(cell)
        document = {"key": path.stem, "sweep": self.sweep, "version": __version__, "index": cell.index,
                    "coordinates": dict(cell.coordinates), "record": dict(record)}
        try:
            write_text_atomic(path, json.dumps(document, allow_nan=True))
        except OSError as exc:
            raise OutputError(f"cannot keep {cell.describe()} in {self.folder}: {exc.strerror or exc}") from None

    def count(self) -> int:
        """How many cell files the folder holds (whole or not)."""
        return sum(1 for p in self.folder.glob("*.json") if not p.name.startswith(".") and p.name != SETTINGS_FILE) \
            if self.folder.is_dir() else 0

    def remove(self) -> None:
        """Remove the cell folder (once the sweep's folder is written whole)."""
        shutil.rmtree(self.folder, ignore_errors=True)


def resumed_settings(out: Path, sweep: str) -> dict[str, Any]:
    """The settings of the stopped sweep of output folder ``out`` (from its cell folder), or a one-line ValueError."""
    folder = CellStore.beside(out, sweep, {}).folder
    try:
        document = json.loads((folder / SETTINGS_FILE).read_text())
    except FileNotFoundError:
        raise ValueError(f"--resume {out}: no stopped sweep there ({folder} holds no {SETTINGS_FILE})") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"--resume {out}: cannot read {folder / SETTINGS_FILE}: {exc}") from None
    if not isinstance(document, dict) or document.get("sweep") != sweep or not isinstance(document.get("settings"), dict):
        found = document.get("sweep") if isinstance(document, dict) else None
        raise ValueError(f"--resume {out}: its cells are of sweep {found!r}, not {sweep!r}")
    return document["settings"]
