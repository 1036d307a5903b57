"""Caption datasets in the Karpathy-split JSON of Flickr30k and COCO: read and checked.

Format (``dataset_flickr30k.json``)::

    {"dataset": "flickr30k",
     "images": [{"filename": "1000092795.jpg", "imgid": 0, "split": "train" | "val" | "test" | "restval",
                 "sentids": [...], "sentences": [{"raw": "...", "tokens": [...], "imgid": 0, "sentid": 0}, ...]},
                ...]}

The images live in a folder beside the JSON (``images/`` for prhsim's synthetic export, as ``--images`` names
it: :func:`prhsim.real.data.image_folder`). :func:`read_karpathy` returns one :class:`~._records.Record` per
image; every problem is a :class:`~._records.DataError` whose one-line message names the file and what was
expected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prhsim.real.data._records import SPLITS, CaptionDataset, DataError, Record


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
