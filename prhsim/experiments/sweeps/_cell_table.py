"""A sweep's tidy table: one row per cell, its coordinates and numbers as columns (``cells.csv``, ``cells.parquet``).

A row is the cell's index, its coordinates, and its record flattened: nested mappings become
dotted column names (``pairs.0.rho_p`` is not made: a list is one column holding its JSON text).
A sweep of one cell has one row, of its whole result. ``pandas.read_csv`` / ``pandas.read_parquet``
or ``polars.read_parquet`` read either file in one line.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from prhsim.experiments.sweeps._cells import SweepCell


def flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A record's leaves as ``{dotted.name: value}``; a list or tuple is one value, its JSON text."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, allow_nan=True)
        else:
            out[name] = value
    return out


def cell_rows(cells: Sequence[SweepCell], records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per cell: ``cell`` (its index), its coordinates, and its record flattened."""
    return [{"cell": cell.index, **dict(cell.coordinates), **flatten(record)} for cell, record in zip(cells, records)]


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    return list(names)


def csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as CSV (every column in the order first seen; a missing value is empty)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=_columns(rows), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def write_parquet(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """The rows as a parquet table (pyarrow); a column mixing kinds of value (text beside numbers) is stored as text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {}
    for name in _columns(rows):
        values = [row.get(name) for row in rows]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns[name] = pa.array([None if v is None else str(v) for v in values])
    pq.write_table(pa.table(columns), path)
