"""What every reader of caption data returns or raises: :class:`Record`, :class:`CaptionDataset`, :class:`DataError`.

A record is one image and its captions; a dataset is a file's records in file order. Every problem with a data
file is a :class:`DataError` whose one-line message names the file and what was expected. :func:`first_text` is
the caption a field holds where one text per item is read (a string, or the first of a list; the field: the first
of :data:`TEXT_FIELDS` there is).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The splits of a record (the Karpathy split's; "restval" is trained on).
SPLITS = ("train", "val", "test", "restval")
#: Where one text per item is read (:func:`first_text`): the first of these fields (JSON lines) or columns (parquet).
TEXT_FIELDS = ("text", "caption", "texts", "captions")


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


def first_text(value: object) -> str | None:
    """The stripped text of a caption field (a string, or the first item of a list or tuple); None if it is empty
    or not a string."""
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    return value.strip() if isinstance(value, str) and value.strip() else None
