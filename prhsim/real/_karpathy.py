"""Caption datasets in the Karpathy-split JSON of Flickr30k and COCO: read and checked.

Format (``dataset_flickr30k.json``)::

    {"dataset": "flickr30k",
     "images": [{"filename": "1000092795.jpg", "imgid": 0, "split": "train" | "val" | "test" | "restval",
                 "sentids": [...], "sentences": [{"raw": "...", "tokens": [...], "imgid": 0, "sentid": 0}, ...]},
                ...]}

A generic JSON-lines format (:func:`read_jsonl`: one ``{"id", "texts", "image"?, "split"?}`` per
line) is read into the same records. The images live in a folder beside the JSON (``images/`` for prhsim's synthetic export, as
``--images`` names it). :func:`read_karpathy` returns one :class:`Record` per image; every
problem is a :class:`DataError` whose one-line message names the file and what was expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPLITS = ("train", "val", "test", "restval")


class DataError(ValueError):
    """A dataset file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Record:
    """One image and its captions.

    Attributes:
        id: the image's id (``imgid``).
        filename: the image file, relative to the dataset's image folder.
        split: "train", "val", "test" or "restval".
        texts: its captions (the ``raw`` sentences), at least one.
    """

    id: int
    filename: str
    split: str
    texts: tuple[str, ...]


@dataclass(frozen=True)
class CaptionDataset:
    """A Karpathy-split dataset: its name, the JSON it came from and its records in file order."""

    name: str
    path: Path
    records: tuple[Record, ...]

    def split(self, name: str) -> tuple[Record, ...]:
        """The records of one split ("train" includes "restval", as the Karpathy split is used)."""
        wanted = ("train", "restval") if name == "train" else (name,)
        return tuple(r for r in self.records if r.split in wanted)


def read_karpathy(path: Path | str) -> CaptionDataset:
    """Read and check a Karpathy-split JSON (module docstring).

    Raises:
        DataError: a missing or unreadable file, malformed JSON, no "images" list, an image without
            a filename, a known split or any caption, or two images with one id.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (expected a Karpathy-split JSON such as dataset_flickr30k.json)")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    images = document.get("images") if isinstance(document, dict) else None
    if not isinstance(images, list) or not images:
        raise DataError(f'{path}: expected an object with a non-empty "images" list (Karpathy split format)')
    records, seen = [], set()
    for i, image in enumerate(images):
        records.append(_record(path, i, image))
        if records[-1].id in seen:
            raise DataError(f"{path}: images[{i}]: imgid {records[-1].id} appears twice")
        seen.add(records[-1].id)
    return CaptionDataset(str(document.get("dataset", path.stem)), path, tuple(records))


def _record(path: Path, i: int, image: Any) -> Record:
    where = f"{path}: images[{i}]"
    if not isinstance(image, dict):
        raise DataError(f"{where}: expected an object, got {type(image).__name__}")
    filename = image.get("filename")
    if not isinstance(filename, str) or not filename:
        raise DataError(f'{where}: expected a "filename" string')
    split = image.get("split")
    if split not in SPLITS:
        raise DataError(f"{where} ({filename}): split must be one of {SPLITS}, got {split!r}")
    sentences = image.get("sentences")
    if not isinstance(sentences, list) or not sentences:
        raise DataError(f"{where} ({filename}): the image has no captions (expected a non-empty \"sentences\" list)")
    texts = []
    for j, sentence in enumerate(sentences):
        raw = sentence.get("raw") if isinstance(sentence, dict) else None
        if not isinstance(raw, str) or not raw.strip():
            raise DataError(f'{where} ({filename}): sentences[{j}] has no "raw" text')
        texts.append(raw.strip())
    imgid = image.get("imgid", i)
    if isinstance(imgid, bool) or not isinstance(imgid, int):
        raise DataError(f"{where} ({filename}): imgid must be an integer, got {imgid!r}")
    return Record(imgid, filename, split, tuple(texts))


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


def read_captions(path: Path | str) -> CaptionDataset:
    """A caption dataset by suffix: ``.jsonl`` (:func:`read_jsonl`) or Karpathy-split ``.json`` (:func:`read_karpathy`)."""
    return read_jsonl(path) if Path(path).suffix == ".jsonl" else read_karpathy(path)
