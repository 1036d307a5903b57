"""``prhsim real features``: frozen image features of a caption dataset from a local DINOv2 checkpoint.

transformers' ``Dinov2Model`` is loaded from a local Hugging Face checkpoint directory (any size:
S/14, B/14, L/14; nothing is downloaded). Each image of the dataset JSON, in its order, is read
from the image folder, converted to RGB, resized so its shorter side is ``image_size`` (bicubic),
centre-cropped to ``image_size`` x ``image_size`` and normalised with the ImageNet mean and
standard deviation (what DINOv2's image processor does), then encoded; the feature is the
model's pooled output (the layer-normed class token), (N, D) float32. Written atomically to
``.npy`` or ``.safetensors`` (tensor "feats"), the formats ``prhsim real eval`` and ``prhsim prh``
read. bf16 autocast on CUDA.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from prhsim._io import atomic_file
from prhsim.experiments.real._karpathy import DataError, read_captions

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def preprocess(path: Path, image_size: int) -> np.ndarray:
    """One image as the model reads it: (3, image_size, image_size) float32 (module docstring)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image = image.convert("RGB")
            w, h = image.size
            scale = image_size / min(w, h)
            image = image.resize((max(image_size, round(w * scale)), max(image_size, round(h * scale))),
                                 Image.Resampling.BICUBIC)
            w, h = image.size
            left, top = (w - image_size) // 2, (h - image_size) // 2
            image = image.crop((left, top, left + image_size, top + image_size))
            array = np.asarray(image, dtype=np.float32) / 255.0
    except FileNotFoundError:
        raise DataError(f"{path}: no such image (named in the dataset JSON)") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise DataError(f"{path}: not an image PIL can read ({exc})") from None
    return ((array - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)


def image_folder(json_path: Path, images: Path | str | None) -> Path:
    """The folder the dataset's image files are in: ``images`` if given, else ``images/`` beside the JSON, else its folder."""
    if images is not None:
        folder = Path(images)
        if not folder.is_dir():
            raise DataError(f"{folder}: no such image folder")
        return folder
    beside = json_path.parent / "images"
    return beside if beside.is_dir() else json_path.parent


def encode_images(data: Path | str, weights: Path | str, out: Path | str, *, images: Path | str | None = None,
                   image_size: int = 224, batch_size: int = 64, device: str = "auto",
                   progress: Callable[[str], None] | None = None) -> np.ndarray:
    """Encode every image of the dataset with the DINOv2 checkpoint in ``weights``; write and return (N, D) float32.

    Raises:
        DataError: a missing dataset, weights directory or image file (one line, naming the path).
    """
    import torch
    from transformers import Dinov2Model

    from prhsim.experiments.real._train import _device, dataset_json

    json_path = dataset_json(data)
    dataset = read_captions(json_path)
    weights = Path(weights)
    if not (weights / "config.json").is_file():
        raise DataError(f"{weights}: not a Hugging Face checkpoint directory (expected config.json and "
                        "model.safetensors of a DINOv2 model)")
    out = Path(out)
    if out.suffix not in (".npy", ".safetensors"):
        raise DataError(f"{out}: the features file must end in .npy or .safetensors")
    folder = image_folder(json_path, images)
    dev = _device(device)
    model = Dinov2Model.from_pretrained(str(weights), local_files_only=True).to(dev).eval()
    say = progress or (lambda message: None)
    rows = []
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else torch.autocast("cpu",
                                                                                                       enabled=False)
    with torch.no_grad(), autocast:
        for start in range(0, len(dataset.records), batch_size):
            chunk = dataset.records[start:start + batch_size]
            pixels = np.stack([preprocess(folder / r.filename, image_size) for r in chunk])
            pooled = model(pixel_values=torch.from_numpy(pixels).to(dev)).pooler_output
            rows.append(pooled.float().cpu().numpy())
            say(f"{start + len(chunk):,}/{len(dataset.records):,} images")
    feats = np.concatenate(rows).astype(np.float32)
    with atomic_file(out) as tmp:
        if out.suffix == ".npy":
            np.save(tmp, feats)
        else:
            from safetensors.numpy import save_file

            save_file({"feats": feats}, str(tmp))
    return feats
