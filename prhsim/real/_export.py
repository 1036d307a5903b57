"""A Flickr-format caption dataset exported from a prhsim world, with the answer the real pipeline should find.

``export_synthetic(scene, out)`` writes, into a folder created whole (a staged sibling renamed
into place):

* ``images/NNNNNN.png``: one image per record, gridscene's pixels renderer at a random lighting
  and background (``n ~ q``), each pixel blown up to a ``pixel_scale`` square (224 px for the 4x4
  grid, DINOv2's input size);
* ``dataset_synthetic.json``: the Karpathy-split JSON of Flickr30k (:mod:`.data._karpathy`): splits
  train / val / test, ``captions`` sentences per image from the caption renderer, each of its own
  wording drawn from q (independent); extra keys the readers ignore record the truth: the image's
  "state" and "lighting", each sentence's "wording";
* ``image_features.npy``: (N, k) float32, the pixel modality's closed-form representation
  (docs/theory.md §1.1) of each image in the JSON's order: the frozen image features whose
  geometry a text encoder should find (docs/theory.md §5.1);
* ``world.json``: the scene's settings, k, the closed form's eigenvalues and gap, the vocabulary.

States are distinct (drawn from p without replacement) when there are at most as many images as
states, so that retrieval has one right answer per query.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from prhsim import __version__
from prhsim._budget import ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim.io import check_free_space, json_text, staged_folder
from prhsim.optima import closed_form
from prhsim.worlds import GridScene, caption_law, good, pixels, view_world

JSON_NAME = "dataset_synthetic.json"
FEATURES_NAME = "image_features.npy"
IMAGE_DIR = "images"
#: The side in pixels an exported image is blown up to (DINOv2 reads 224 x 224).
TARGET_SIDE = 224
#: Memory of the plan per image and per caption (the Karpathy entries as Python objects: about 660 and 1,475
#: bytes measured with tracemalloc), doubled for the JSON text written from them.
PLAN_BYTES_PER_IMAGE, PLAN_BYTES_PER_CAPTION = 2 * 700, 2 * 1600
#: Disk per image (one PNG: under 1 kB of data, a 4 kB block) and per caption (its JSON sentence, about 330 bytes).
DISK_BYTES_PER_IMAGE, DISK_BYTES_PER_CAPTION = 4096, 400


def export_cost(images: int, captions: int) -> tuple[float, float]:
    """Estimated peak memory and disk bytes of an export of ``images`` records of ``captions`` captions
    (image features excluded: k floats per image, negligible beside the entries)."""
    memory = float(images) * (PLAN_BYTES_PER_IMAGE + captions * PLAN_BYTES_PER_CAPTION)
    disk = float(images) * (DISK_BYTES_PER_IMAGE + captions * DISK_BYTES_PER_CAPTION)
    return memory, disk


def check_export(images: int, captions: int, out: Path | str | None = None) -> None:
    """Refuse an export that cannot fit in memory (:class:`prhsim.ResourceError`) or, given ``out``, on its disk
    (:class:`prhsim.io.OutputError`), before anything is drawn."""
    memory, disk = export_cost(images, captions)
    ensure_fits(memory, f"the export's records ({images:,} images x {captions} captions)",
                "lower --images (or --captions)")
    if out is not None:
        check_free_space(Path(out), disk, f"the export of {images:,} images x {captions} captions")


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export_synthetic` wrote: the folder, the counts, k and the splits' sizes."""

    out: str
    images: int
    captions: int
    k: int
    side: int
    splits: dict[str, int]


@dataclass(frozen=True)
class ExportPlan:
    """Everything of an export but its files (:func:`plan_export`): the records, features and world.json."""

    scene: GridScene
    states: np.ndarray
    lighting: np.ndarray
    scale: int
    entries: list[dict[str, Any]]
    features: np.ndarray
    world: dict[str, Any]
    k: int
    side: int
    splits: dict[str, int]

    def summary(self, out: Path | str) -> "ExportSummary":
        """The :class:`ExportSummary` of this export written to ``out``."""
        return ExportSummary(str(out), self.world["images"], self.world["captions"], self.k, self.side * self.scale,
                             self.splits)


def export_synthetic(scene: GridScene, out: Path | str, *, images: int = 2000, captions: int = 5,
                     val: float = 0.1, test: float = 0.1, pixel_scale: int | None = None,
                     k: int | Literal["auto"] = "auto", overwrite: bool = False, rng: RngLike = None,
                     meta: dict[str, Any] | None = None) -> ExportSummary:
    """Write the synthetic Flickr-format dataset of ``scene`` into ``out`` (module docstring), whole or not at all:
    :func:`plan_export`, then :func:`write_export` into a staged folder renamed into place.

    Args:
        scene: a gridscene (pixels and caption renderers).
        out: a new or empty folder (replaced whole with ``overwrite``).
        images: records; captions: sentences per image.
        val, test: the fractions of images in the val and test splits (each at least one image).
        pixel_scale: each pixel becomes a square of this side (default: ``224 // (4·size)``, at least 1).
        k: the pixel closed form's number of features ("auto": at its gap).
        meta: extra keys for world.json (the command adds its settings and git revision).

    Raises:
        ValueError: on a bad count or fraction; :class:`prhsim.ResourceError` when the records cannot fit in
            memory; :class:`prhsim.io.OutputError` on an unusable folder or too little free disk.
    """
    check_export(_count("images", images, 3), _count("captions", captions, 1), out)
    plan = plan_export(scene, images=images, captions=captions, val=val, test=test, pixel_scale=pixel_scale, k=k,
                       rng=rng, meta=meta)
    with staged_folder(Path(out), overwrite=overwrite) as stage:
        write_export(plan, stage)
    return plan.summary(out)


def plan_export(scene: GridScene, *, images: int = 2000, captions: int = 5, val: float = 0.1, test: float = 0.1,
                pixel_scale: int | None = None, k: int | Literal["auto"] = "auto", rng: RngLike = None,
                meta: dict[str, Any] | None = None) -> ExportPlan:
    """The export's records, splits, captions and image features (arguments of :func:`export_synthetic`); no file."""
    images, captions = _count("images", images, 3), _count("captions", captions, 1)
    check_export(images, captions)
    if not (0 < val < 1 and 0 < test < 1 and val + test < 1):
        raise ValueError(f"val and test must be fractions in (0, 1) summing below 1, got {val} and {test}")
    gen = check_rng(rng)
    law = caption_law(scene)
    modality = pixels(scene)
    side = 4 * scene.size
    scale = max(1, TARGET_SIDE // side) if pixel_scale is None else _count("pixel_scale", pixel_scale, 1)
    optimum = closed_form(view_world(scene.world, modality, good()), k)
    distinct = images <= law.n_states
    states = gen.choice(law.n_states, size=images, replace=not distinct, p=law.p)
    lighting = gen.choice(modality.n_nuisance, size=images, p=modality.nuisance)
    wording = gen.choice(law.modality.n_nuisance, size=(images, captions), p=law.q)
    n_val, n_test = max(1, round(val * images)), max(1, round(test * images))
    split = np.array(["train"] * (images - n_val - n_test) + ["val"] * n_val + ["test"] * n_test)
    split = split[gen.permutation(images)]
    features = optimum.features(states * modality.n_nuisance + lighting).astype(np.float32)
    tokens = law.captions(np.repeat(states, captions), wording.ravel()).reshape(images, captions, law.length)
    entries = []
    for i in range(images):
        sentences = []
        for c in range(captions):
            words = law.decode(tokens[i, c])[0]
            sentences.append({"raw": words, "tokens": words.split(), "imgid": i, "sentid": i * captions + c,
                              "wording": int(wording[i, c])})
        entries.append({"filename": f"{i:06d}.png", "imgid": i, "split": str(split[i]),
                        "sentids": [i * captions + c for c in range(captions)], "sentences": sentences,
                        "state": int(states[i]), "lighting": int(lighting[i])})
    world = {"prhsim_version": __version__, "world": "gridscene", "settings": asdict(scene) | {"n_states": law.n_states},
             "k": optimum.k, "eigenvalues": [float(x) for x in optimum.eigenvalues], "gap": float(optimum.gap),
             "vocabulary": list(law.vocabulary), "images": images, "captions": captions,
             "distinct_states": bool(distinct), "pixel_scale": scale, **(meta or {})}
    counts = {name: int(np.sum(split == name)) for name in ("train", "val", "test")}
    return ExportPlan(scene, states, lighting, scale, entries, features, world, optimum.k, side, counts)


def write_export(plan: ExportPlan, folder: Path) -> ExportSummary:
    """Write ``plan``'s images, caption JSON, image features and world.json into ``folder`` (new or empty)."""
    from PIL import Image

    modality = pixels(plan.scene)
    folder = Path(folder)
    (folder / IMAGE_DIR).mkdir()
    for i in range(len(plan.states)):
        pixels_i = modality.render(plan.states[i:i + 1], plan.lighting[i:i + 1])[0]
        big = np.repeat(np.repeat(pixels_i, plan.scale, axis=0), plan.scale, axis=1)
        Image.fromarray(big).save(folder / IMAGE_DIR / f"{i:06d}.png")
    (folder / JSON_NAME).write_text(json.dumps({"dataset": "prhsim-gridscene", "images": plan.entries}))
    np.save(folder / FEATURES_NAME, plan.features)
    (folder / "world.json").write_text(json_text(plan.world))
    return plan.summary(folder)


def _count(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer of at least {low}, got {value!r}")
    return int(value)
