"""A caption dataset named by a path: the dataset file of a folder, and the reader its suffix picks.

:func:`dataset_json` finds a folder's one dataset file (``dataset_*.json`` or ``*.jsonl``). :func:`read_captions`
reads a caption dataset's records (``.jsonl``: :func:`~._jsonl.read_jsonl`, else a Karpathy-split JSON:
:func:`~._karpathy.read_karpathy`). :func:`read_texts` reads one text per item, as ``prhsim prh extract`` feeds
a language model: a Karpathy-split JSON's **first caption** of each image, in file order; JSON lines with a
``"text"`` or ``"caption"`` field (:func:`~._jsonl.jsonl_texts`); parquet with a ``text`` or ``caption`` column, in
row order (:func:`~._parquet.parquet_texts`).
"""

from __future__ import annotations

from pathlib import Path

from prhsim.real.data._jsonl import jsonl_texts, read_jsonl
from prhsim.real.data._karpathy import read_karpathy
from prhsim.real.data._parquet import parquet_texts
from prhsim.real.data._records import CaptionDataset, DataError


def dataset_json(data: Path | str) -> Path:
    """The dataset file of a folder (its one ``dataset_*.json`` or ``*.jsonl``), or ``data`` itself when it is a file."""
    data = Path(data)
    if data.is_file():
        return data
    if not data.is_dir():
        raise DataError(f"{data}: no such dataset folder (expected a folder holding dataset_*.json, or the file)")
    found = sorted([*data.glob("dataset_*.json"), *data.glob("*.jsonl")])
    if len(found) != 1:
        what = "no dataset_*.json or *.jsonl" if not found else f"{len(found)} dataset files"
        raise DataError(f"{data}: {what} in this folder (expected exactly one Karpathy-split JSON or JSON lines)")
    return found[0]


def read_captions(path: Path | str) -> CaptionDataset:
    """A caption dataset by suffix: ``.jsonl`` (:func:`read_jsonl`) or Karpathy-split ``.json`` (:func:`read_karpathy`)."""
    return read_jsonl(path) if Path(path).suffix == ".jsonl" else read_karpathy(path)


def read_texts(data: Path | str) -> list[str]:
    """The texts of a caption dataset (a file, or a folder's :func:`dataset_json`), one per item in file order
    (module docstring), or a DataError."""
    path = Path(data)
    if path.is_dir():
        path = dataset_json(path)
    if not path.is_file():
        raise DataError(f"{path}: no such dataset file (expected a Karpathy-split JSON, JSON lines or parquet)")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return parquet_texts(path)
    if suffix == ".jsonl":
        return jsonl_texts(path)
    if suffix == ".json":
        return [r.texts[0] for r in read_captions(path).records]
    raise DataError(f"{path}: unknown dataset format {suffix or '(no suffix)'!r}; expected .json (Karpathy split), "
                    ".jsonl or .parquet")
