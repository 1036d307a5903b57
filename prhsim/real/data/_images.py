"""The image files of a dataset: a folder of images, or the images a caption dataset names, in its order.

:func:`image_paths` lists the images ``prhsim prh extract`` feeds a vision model: a folder's image files
(:data:`IMAGE_SUFFIXES`, sorted by name), or a caption dataset's (a Karpathy JSON's ``filename``, a JSON line's
``"image"``: :func:`~._jsonl.jsonl_images`), read from :func:`image_folder` (``images/`` beside the file, else its
folder). Every problem is a :class:`~._records.DataError` naming the path.
"""

from __future__ import annotations

from pathlib import Path

from prhsim.real.data._datasets import dataset_json, read_captions
from prhsim.real.data._jsonl import jsonl_images
from prhsim.real.data._records import DataError

#: Image file suffixes read from an image folder.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


def image_folder(json_path: Path, images: Path | str | None) -> Path:
    """The folder the dataset's image files are in: ``images`` if given, else ``images/`` beside the JSON, else its folder."""
    if images is not None:
        folder = Path(images)
        if not folder.is_dir():
            raise DataError(f"{folder}: no such image folder")
        return folder
    beside = json_path.parent / "images"
    return beside if beside.is_dir() else json_path.parent


def image_paths(data: Path | str) -> list[Path]:
    """The images of a folder (sorted file names) or of a caption dataset (in its order), or a DataError."""
    path = Path(data)
    if path.is_dir():
        images = sorted(p for p in path.iterdir() if _is_image(p))
        if images:
            return images
        try:
            path = dataset_json(path)
        except DataError:
            raise DataError(f"{data}: no image files ({', '.join(IMAGE_SUFFIXES)}) and no caption dataset in "
                            "this folder") from None
    if not path.is_file():
        raise DataError(f"{path}: no such image folder or dataset file")
    if path.suffix.lower() not in (".json", ".jsonl"):
        raise DataError(f"{path}: a vision model reads a folder of images or a caption dataset (.json, .jsonl) "
                        "naming its images")
    if path.suffix.lower() == ".jsonl":
        names = jsonl_images(path)
    else:
        names = [r.filename for r in read_captions(path).records]
    folder = image_folder(path, None)
    return [folder / name for name in names]


def looks_like_images(data: Path) -> bool:
    """Whether ``data`` is a folder holding an image file (:data:`IMAGE_SUFFIXES`)."""
    return data.is_dir() and any(_is_image(p) for p in data.iterdir())


def _is_image(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES
