"""``prhsim real features``: frozen image features of a caption dataset from a local DINOv2 checkpoint.

transformers' ``Dinov2Model`` is loaded from a local Hugging Face checkpoint directory (any size:
S/14, B/14, L/14; nothing is downloaded). Each image of the dataset JSON, in its order, is read
from the image folder, converted to RGB, resized so its shorter side is ``image_size`` (bicubic),
centre-cropped to ``image_size`` x ``image_size`` and normalised with the ImageNet mean and
standard deviation (what DINOv2's image processor does), then encoded; the feature is the
model's pooled output (the layer-normed class token), (N, D) float32. Written atomically to
``.npy`` or ``.safetensors`` (tensor "feats"), the formats ``prhsim real eval`` and ``prhsim prh``
read. Images are decoded by a torch ``DataLoader`` with ``num_workers`` worker processes (0: in the
calling process), so decoding overlaps the model; batches come in dataset order, as uint8 pixels (a
quarter of float32's bytes through the workers' shared memory and the host-to-device copy), in
pinned memory on CUDA, and are normalised on the device. bf16 autocast on CUDA.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from prhsim.io import atomic_file
from prhsim.real._devices import torch_device
from prhsim.real.data import DataError, dataset_json, image_folder, read_captions

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def preprocess(path: Path, image_size: int) -> np.ndarray:
    """One image as the model reads it: (3, image_size, image_size) float32 (module docstring)."""
    array = load_pixels(path, image_size).astype(np.float32) / 255.0
    return (array - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]


def normalise(pixels):
    """uint8 pixels (B, 3, S, S), on any device, as the model reads them: ``(x / 255 − mean) / std``, float32."""
    import torch

    mean = torch.as_tensor(IMAGENET_MEAN, device=pixels.device)[:, None, None]
    std = torch.as_tensor(IMAGENET_STD, device=pixels.device)[:, None, None]
    return (pixels.to(torch.float32) / 255.0 - mean) / std


def load_pixels(path: Path, image_size: int) -> np.ndarray:
    """One image resized (shorter side ``image_size``, bicubic) and centre-cropped: (3, image_size, image_size) uint8."""
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
            return np.ascontiguousarray(np.asarray(image, dtype=np.uint8).transpose(2, 0, 1))
    except FileNotFoundError:
        raise DataError(f"{path}: no such image (named in the dataset JSON)") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise DataError(f"{path}: not an image PIL can read ({exc})") from None


class _Images:
    """The images ``folder / filenames[i]`` as uint8 pixels (:func:`load_pixels`), in order (a map-style torch dataset).

    A ``DataError`` is returned as its message, not raised, so that it crosses a worker process unchanged
    (the DataLoader would wrap it with the worker's traceback); :func:`_collate` and the caller raise it.
    """

    def __init__(self, folder: Path, filenames: list[str], image_size: int):
        self.folder, self.filenames, self.image_size = folder, filenames, image_size

    def __len__(self) -> int:
        return len(self.filenames)

    def __getitem__(self, index: int):
        import torch

        try:
            return torch.from_numpy(load_pixels(self.folder / self.filenames[index], self.image_size))
        except DataError as exc:
            return str(exc)


def _collate(items: list):
    """A batch (B, 3, S, S) of uint8 pixels, or the message of the first image that could not be read."""
    import torch

    errors = [x for x in items if isinstance(x, str)]
    return errors[0] if errors else torch.stack(items)


def encode_images(data: Path | str, weights: Path | str, out: Path | str, *, images: Path | str | None = None,
                   image_size: int = 224, batch_size: int = 64, num_workers: int = 0, device: str = "auto",
                   progress: Callable[..., None] | None = None,
                   notes: Callable[[str], None] | None = None) -> np.ndarray:
    """Encode every image of the dataset with the DINOv2 checkpoint in ``weights``; write and return (N, D) float32.

    ``num_workers`` processes decode images (0: the calling process does). ``progress(message, done, total)``
    is called after every batch; ``notes(line)`` once before the model loads where the work may take minutes or
    hours (the estimate of :func:`prhsim.real.extraction_seconds` over N x ((image_size / patch)² + 1 + registers)
    tokens).

    Raises:
        DataError: a missing dataset, weights directory or image file (one line, naming the path).
        ValueError: ``num_workers`` is not an int >= 0.
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(f"num_workers must be an int >= 0 (0: decode images in this process), not {num_workers!r}")
    import torch
    from torch.utils.data import DataLoader
    from transformers import Dinov2Model

    from prhsim.real._batches import worker_context
    from prhsim.real._text_models import quiet_transformers

    quiet_transformers()

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
    dev = torch_device(device)
    if notes is not None:
        _estimate_notes(weights, len(dataset.records), image_size, dev.type == "cuda", notes)
    model = Dinov2Model.from_pretrained(str(weights), local_files_only=True).to(dev).eval()
    say = progress or (lambda message, done=None, total=None: None)
    loader = DataLoader(_Images(folder, [r.filename for r in dataset.records], image_size), batch_size=batch_size,
                        shuffle=False, num_workers=num_workers, collate_fn=_collate, pin_memory=dev.type == "cuda",
                        persistent_workers=False, prefetch_factor=4 if num_workers else None,
                        multiprocessing_context=worker_context() if num_workers else None)
    rows, done, total = [], 0, len(dataset.records)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else torch.autocast("cpu",
                                                                                                       enabled=False)
    started = time.perf_counter()
    with torch.no_grad(), autocast:
        for pixels in loader:
            if isinstance(pixels, str):
                raise DataError(pixels)
            pooled = model(pixel_values=normalise(pixels.to(dev, non_blocking=True))).pooler_output
            rows.append(pooled.float())  # kept on the device: no host synchronisation per batch
            done += len(pixels)
            say(f"{done:,}/{total:,} images, {done / (time.perf_counter() - started):,.0f} images/s", done, total)
    feats = torch.cat(rows).cpu().numpy().astype(np.float32)
    with atomic_file(out) as tmp:
        if out.suffix == ".npy":
            np.save(tmp, feats)
        else:
            from safetensors.numpy import save_file

            save_file({"feats": feats}, str(tmp))
    return feats


def _estimate_notes(weights: Path, images: int, image_size: int, cuda: bool, notes: Callable[[str], None]) -> None:
    """The time note of :func:`encode_images`, from the checkpoint's config alone."""
    from transformers import AutoConfig

    from prhsim.real._forward_cost import extraction_seconds, forward_flops, forward_notes

    config = AutoConfig.from_pretrained(str(weights), local_files_only=True)
    patch = int(getattr(config, "patch_size", 14) or 14)
    tokens = images * ((image_size // patch) ** 2 + 1 + int(getattr(config, "num_register_tokens", 0) or 0))
    seconds = extraction_seconds(forward_flops(config, tokens), cuda=cuda)
    for line in forward_notes("encoding", seconds, config, inputs=images, noun="images", tokens=tokens):
        notes(line)
