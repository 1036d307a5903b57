"""Caption datasets in JSON lines: one JSON object per line, in two readings.

* :func:`read_jsonl`, prhsim's caption dataset: ``{"id": ..., "texts": [...], "image": ..., "split": ...}`` per line,
  read into the records of a Karpathy-split JSON (``image`` and ``split`` optional, "train" by default).
* :func:`jsonl_texts` and :func:`jsonl_images`, one item per line as ``prhsim prh extract`` reads it: the text of
  a ``"text"``, ``"caption"``, ``"texts"`` or ``"captions"`` field (the first that is there; of a list, its first
  item), or the image file of an ``"image"`` field; no id or split is needed.

Blank lines are skipped; every problem is a :class:`~._records.DataError` naming the file and the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from prhsim.real.data._records import SPLITS, TEXT_FIELDS, CaptionDataset, DataError, Record, first_text


def read_jsonl(path: Path | str) -> CaptionDataset:
    """A generic caption dataset: one JSON object per line, ``{"id": ..., "texts": [...], "image": ..., "split": ...}``.

    ``image`` (a file name) and ``split`` (default "train") are optional; ``id`` is an integer and
    ``texts`` a non-empty list of strings. Errors name the file and the line.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (expected JSON lines of {{id, texts, image?, split?}})")
    records, seen = [], set()
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}: line {number}"
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: malformed JSON: {exc.msg}") from None
            if not isinstance(item, dict):
                raise DataError(f"{where}: expected an object, got {type(item).__name__}")
            ident, texts = item.get("id"), item.get("texts")
            if isinstance(ident, bool) or not isinstance(ident, int):
                raise DataError(f"{where}: id must be an integer, got {ident!r}")
            if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t.strip() for t in texts):
                raise DataError(f'{where}: id {ident} has no captions (expected a non-empty "texts" list of strings)')
            split = item.get("split", "train")
            if split not in SPLITS:
                raise DataError(f"{where}: split must be one of {SPLITS}, got {split!r}")
            if ident in seen:
                raise DataError(f"{where}: id {ident} appears twice")
            seen.add(ident)
            image = item.get("image", "")
            records.append(Record(ident, str(image) if image is not None else "", split, tuple(t.strip() for t in texts)))
    if not records:
        raise DataError(f"{path}: no records")
    return CaptionDataset(path.stem, path, tuple(records))


def jsonl_records(path: Path) -> Iterator[tuple[int, object]]:
    """``(line number, parsed record)`` of every non-blank line of a JSON-lines file; a DataError names a bad line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot be read: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: line {number}: malformed JSON: {exc.msg}") from None


def jsonl_texts(path: Path) -> list[str]:
    """One text per line (of its first :data:`~._records.TEXT_FIELDS` field, module docstring), or a DataError
    naming the first line without one."""
    texts = []
    for number, item in jsonl_records(path):
        text = None
        if isinstance(item, dict):
            for key in TEXT_FIELDS:
                if key in item:
                    text = first_text(item[key])
                    break
        if text is None:
            raise DataError(f'{path}: line {number}: expected an object with a non-empty "text" or "caption" '
                            '(or "texts") field')
        texts.append(text)
    if not texts:
        raise DataError(f"{path}: no records")
    return texts


def jsonl_images(path: Path) -> list[str]:
    """The ``"image"`` field of every line of a JSON-lines dataset, or a DataError naming the first line without one."""
    names = []
    for number, item in jsonl_records(path):
        name = item.get("image") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise DataError(f'{path}: line {number} does not name an image (an "image" field): a vision model '
                            "needs images")
        names.append(name)
    if not names:
        raise DataError(f"{path}: no records")
    return names
