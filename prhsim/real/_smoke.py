"""``prhsim real smoke``: the whole real pipeline once, at Flickr30k's size, with its throughput measured.

1. a synthetic Flickr-format export (default 29,000 images, 5 captions each: Flickr30k's size),
   reused when the folder already holds one of that size;
2. DINOv2 image features of every image through :func:`encode_images` (a local checkpoint, or a
   randomly initialised ViT-S/14 when none is given: the same arithmetic, meaningless features),
   from the end of the first batch to the end of the last (loading and start-up left out), beside
   the model alone on random pixels of the same batch size: the pipeline's share of the model's
   throughput is what decoding and resizing cost;
3. one epoch (by default) of good-view BERT-S at batch 256 through :func:`train_real`, its
   steady-state samples/s (images; each carries 8 views, so 8 sequences), tokens/s and the real
   tokens' share of the packed positions (the logged intervals after the first, which holds the
   start-up), peak GPU memory, and model FLOPs utilisation: ``6 · P · tokens/s / peak``, with P
   the parameters outside the embedding tables and the real (unpadded) tokens, the usual count
   (attention adds ``12 · layers · width · length`` per token, under 3 % at 64 tokens, left out);
4. :func:`evaluate_run` against the export's closed-form image features (the known answer).

Everything goes under the smoke folder (``data/``, ``dinov2-s-random/``, ``dinov2.npy``, ``run/``)
and the figures into ``smoke.json``. The folder must be new, empty or an earlier smoke folder
(marked by ``.prhsim-smoke``): smoke replaces what it holds.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from prhsim.io import OutputError, json_text, write_text_atomic
from prhsim.real._export import FEATURES_NAME, JSON_NAME, export_synthetic

#: Dense bf16 peak TFLOP/s by device name (NVIDIA's data sheets), the first name the device's contains.
PEAK_TFLOPS = {"H100 PCIe": 756.0, "H100 NVL": 835.0, "H200 NVL": 835.0, "H200": 989.4, "H100": 989.4,
               "A100": 312.0}
#: The file that marks a folder as prhsim real smoke's own (it may replace what it holds).
MARKER = ".prhsim-smoke"
#: A randomly initialised DINOv2 ViT-S/14 (transformers' Dinov2Config).
VIT_S14 = dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536, patch_size=14,
               image_size=518)
SMOKE_NAME = "smoke.json"


def default_workers() -> int:
    """One data-loader worker per CPU this process may use, less one for the training process, at most 16.

    Decoding a 224 px PNG takes about a millisecond of one core, so DINOv2-S/14's 12,000 images/s on
    an H200 need a dozen workers."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(16, cpus - 1))


def peak_tflops(device) -> float | None:
    """The dense bf16 peak of a CUDA device by its name, or None (CPU, or a device not in the table)."""
    import torch

    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_TFLOPS.items() if key in name), None)


def model_flops_utilisation(parameters: int, tokens_per_s: float, peak: float | None) -> float | None:
    """``6 · parameters · tokens/s / (peak · 10¹²)``, or None without a peak."""
    return None if peak is None else 6.0 * parameters * tokens_per_s / (peak * 1e12)


def steady_rates(metrics: Path, batch_size: int) -> tuple[float, float, float | None]:
    """Samples/s, tokens/s and the real tokens' share of the packed positions over the logged intervals after the
    first (which holds the start-up).

    Interval i runs from the previous logged step to step ``s_i``: ``n_i`` steps in
    ``d_i = n_i · batch_size / samples_per_s_i`` seconds and ``T_i = tokens_per_s_i · d_i`` real tokens;
    the rates are ``Σ n_i · batch_size / Σ d_i`` and ``Σ T_i / Σ d_i``, the share ``Σ T_i / Σ (T_i / share_i)``
    (None for lines without one; the first interval alone when it is the only one).
    """
    lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    if not lines:
        raise ValueError(f"{metrics}: no metric lines")
    counts = [lines[0]["step"]] + [b["step"] - a["step"] for a, b in zip(lines, lines[1:])]
    pairs = list(zip(counts, lines))[1:] or list(zip(counts, lines))
    seconds = [n * batch_size / x["samples_per_s"] for n, x in pairs]
    tokens = [x["tokens_per_s"] * d for (_, x), d in zip(pairs, seconds)]
    shares = [x.get("real_token_share") for _, x in pairs]
    share = None if None in shares else sum(tokens) / sum(t / q for t, q in zip(tokens, shares))
    return sum(n for n, _ in pairs) * batch_size / sum(seconds), sum(tokens) / sum(seconds), share


def _steady_images_per_s(batches: list[tuple[int, float]], images: int, seconds: float) -> float:
    """Images/s from the end of the first batch to the end of the last (the whole call's when there is one batch)."""
    if len(batches) < 2:
        return images / seconds
    (first, start), (last, end) = batches[0], batches[-1]
    return (last - first) / max(end - start, 1e-9)


def _export(data: Path, images: int, captions: int, say) -> float:
    start = time.perf_counter()
    world = data / "world.json"
    if world.is_file():
        saved = json.loads(world.read_text())
        if saved.get("images") == images and saved.get("captions") == captions and (data / JSON_NAME).is_file():
            say(f"reusing the export in {data}")
            return 0.0
    from prhsim.real._settings import ExportSettings

    say(f"exporting {images:,} images with {captions} captions each")
    scene = ExportSettings(images=images, captions=captions).world.build_scene()
    export_synthetic(scene, data, images=images, captions=captions, overwrite=True, rng=0)
    return time.perf_counter() - start


def _image_model(out: Path, weights: Path | str | None) -> Path:
    if weights is not None:
        return Path(weights)
    folder = out / "dinov2-s-random"
    if not (folder / "config.json").is_file():
        import torch
        from transformers import Dinov2Config, Dinov2Model

        torch.manual_seed(0)
        Dinov2Model(Dinov2Config(**VIT_S14)).save_pretrained(folder)
    return folder


def _model_alone(weights: Path, batch: int, image_size: int, device, repeats: int) -> float:
    """Images/s of the DINOv2 model alone on random pixels (bf16 autocast on CUDA)."""
    import torch
    from transformers import Dinov2Model

    model = Dinov2Model.from_pretrained(str(weights), local_files_only=True).to(device).eval()
    pixels = torch.randn(batch, 3, image_size, image_size, device=device)
    cuda = device.type == "cuda"
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
        model(pixel_values=pixels)  # warm-up
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            model(pixel_values=pixels)
        if cuda:
            torch.cuda.synchronize(device)
    return batch * repeats / (time.perf_counter() - start)


def smoke(out: Path | str, *, images: int = 29_000, captions: int = 5, model: str = "bert-s", views: str = "good",
          learner: str = "jepa",
          batch_size: int = 256, epochs: int = 1, weights: Path | str | None = None, image_size: int = 224,
          workers: int | None = None, device: str = "auto", compile: str = "none",
          progress: Callable[..., None] | None = None) -> dict[str, Any]:
    """Run the pipeline once (module docstring); write and return the figures of ``out/smoke.json``.

    ``workers``: data-loader processes decoding images and building batches (None: :func:`default_workers`)."""
    import torch

    from prhsim.real._settings import RealTrainSettings
    from prhsim.real._eval import evaluate_run
    from prhsim.real._image_features import encode_images
    from prhsim.real._devices import torch_device
    from prhsim.real._train import METRICS_NAME, train_real
    from prhsim.real._views import ViewLaw
    from prhsim.real.data import read_captions

    from prhsim.real._text_models import quiet_transformers

    quiet_transformers()
    say = progress or (lambda message, done=None, total=None: None)
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise OutputError(f"--out {out} exists, is not empty and is not a smoke folder (no {MARKER}): "
                          "smoke replaces what its folder holds; choose a new folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).touch()
    dev = torch_device(device)
    workers = default_workers() if workers is None else workers
    started = time.perf_counter()
    data = out / "data"
    export_s = _export(data, images, captions, say)

    image_weights = _image_model(out, weights)
    say("image features")
    tick = time.perf_counter()
    batches: list[tuple[int, float]] = []  # (images done, time) after each batch: the rate leaves out the start-up

    def features_progress(message, done=None, total=None):
        batches.append((done, time.perf_counter()))
        say(message, done, total)

    feats = encode_images(data, image_weights, out / "dinov2.npy", image_size=image_size, batch_size=batch_size,
                          num_workers=workers, device=str(dev.type), progress=features_progress)
    features_s = time.perf_counter() - tick
    pipeline = _steady_images_per_s(batches, feats.shape[0], features_s)
    alone = _model_alone(image_weights, batch_size, image_size, dev, repeats=10 if dev.type == "cuda" else 1)

    train_images = len(read_captions(data / JSON_NAME).split("train"))
    steps = max(1, epochs * (train_images // batch_size))
    run = out / "run"
    shutil.rmtree(run, ignore_errors=True)
    settings = RealTrainSettings(data=str(data), learner=learner, views=views, model=model, steps=steps, batch_size=batch_size,
                                 num_workers=workers, device=str(dev.type), log_every=max(1, steps // 10),
                                 checkpoint_every=steps, tensorboard=False, compile=compile)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    tick = time.perf_counter()
    train_real(settings, run, progress=say)
    train_s = time.perf_counter() - tick
    peak_memory = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None
    samples_per_s, tokens_per_s, token_share = steady_rates(run / METRICS_NAME, batch_size)
    views_per_image = ViewLaw().views_per_image(settings.task)
    parameters = _non_embedding_parameters(run)
    peak = peak_tflops(dev)

    say("evaluating")
    result = evaluate_run(run, features=data / FEATURES_NAME, n_fit=1000)
    report = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "images": images, "captions": captions, "model": model, "learner": settings.learner, "views": settings.views_used, "label": settings.label,
        "batch_size": batch_size,
        "steps": steps, "export_s": export_s,
        "features": {"images_per_s": pipeline, "model_alone_images_per_s": alone, "share": pipeline / alone,
                     "seconds": features_s, "workers": workers, "weights": str(image_weights)},
        "train": {"seconds": train_s, "samples_per_s": samples_per_s,
                  "sequences_per_s": samples_per_s * views_per_image, "tokens_per_s": tokens_per_s,
                  "real_token_share": token_share, "compile": compile,
                  "parameters_outside_embeddings": parameters, "peak_tflops": peak,
                  "mfu": model_flops_utilisation(parameters, tokens_per_s, peak), "peak_memory_gib": peak_memory},
        "eval": {key: result[key] for key in ("r1_text_to_image", "r5_text_to_image")} | result["metrics"]
        | {"chance_r1": result["chance"]["r1"], "n_test": result["n_test"]},
        "total_s": time.perf_counter() - started,
    }
    write_text_atomic(out / SMOKE_NAME, json_text(_finite(report)))
    return report


def _non_embedding_parameters(run: Path) -> int:
    """Parameters of the run's model outside its embedding tables (word, position, token type)."""
    from safetensors import safe_open

    total = 0
    with safe_open(str(run / "checkpoint" / "model.safetensors"), framework="pt") as f:
        for key in f.keys():
            if "embeddings" not in key and "decoder" not in key:  # an LM head's decoder is the tied word table
                shape = f.get_slice(key).get_shape()
                total += math.prod(shape)
    return total


def _finite(value):
    """NaN and infinities as None (JSON has neither)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
