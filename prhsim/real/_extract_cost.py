"""The memory an extraction (``prhsim prh extract``) needs at its peak, estimated before the model is loaded.

:func:`peak_bytes` adds the weight files (:func:`weight_bytes`); per batch ``batch_size x T x D x S x 4`` bytes of
hidden states, S = blocks + 1, T the longest text's tokens after truncation (:func:`token_counts`) or an image's
tokens (:func:`image_tokens`), plus ``(batch_size + 2) x T x V x 4`` of logits for a decoder; the kept features
``2 x N x len(layers) x D x 4`` and the mask ``N x T x 8``. :func:`prhsim.real.extract_features` hands it to
:func:`prhsim._budget.ensure_fits`, which refuses it in one line (a :class:`prhsim.ResourceError` naming
``--batch-size``, ``--max-length``, ``--layers``) above the memory limit (half the machine's memory unless
:func:`prhsim.memory_limit` sets it). The time of the same forward pass: :mod:`._forward_cost`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from prhsim._budget import format_bytes
from prhsim.real._pooling import NO_CLS_VISION, TOWERED, pooled_config
from prhsim.real._weights import silent_transformers

#: Suffixes of weight files counted in the memory estimate.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def model_dims(config, kind: str) -> tuple[int, int, int]:
    """(hidden states returned, hidden size, vocabulary size; 0 where the config does not say) of the model pooled."""
    inner = pooled_config(config, kind)
    blocks = getattr(inner, "num_hidden_layers", None)
    width = getattr(inner, "hidden_size", None)
    vocab = getattr(inner, "vocab_size", None) if kind == "text" else 0
    number = [v if isinstance(v, int) and v > 0 else 0 for v in (blocks, width, vocab)]
    return (number[0] + 1 if number[0] else 0), number[1], number[2]


def image_tokens(processor, config) -> int:
    """Tokens of one image: (H / patch) x (W / patch) patches, plus the class token and any registers, H x W the
    processor's crop (or resize) size, else the config's ``image_size``; 0 where neither says."""
    inner = config.vision_config if config.model_type in TOWERED else config
    patch = getattr(inner, "patch_size", None)
    side = None
    for name in (("crop_size",) if getattr(processor, "do_center_crop", False) else ()) + ("size",):
        spec = getattr(processor, name, None)
        if spec is None:
            continue
        get = spec.get if isinstance(spec, dict) else (lambda k, s=spec: getattr(s, k, None))
        if isinstance(spec, int):
            side = (spec, spec)
        elif get("height") and get("width"):
            side = (int(get("height")), int(get("width")))
        elif get("shortest_edge"):
            side = (int(get("shortest_edge")),) * 2  # the longer edge may be longer: a lower bound
        if side:
            break
    if side is None and isinstance(getattr(inner, "image_size", None), int):
        side = (inner.image_size, inner.image_size)
    if not side or not isinstance(patch, int) or patch < 1:
        return 0
    extra = (0 if config.model_type in NO_CLS_VISION else 1) + int(getattr(inner, "num_register_tokens", 0) or 0)
    return (side[0] // patch) * (side[1] // patch) + extra


def peak_bytes(config, kind: str, *, inputs: int, batch_size: int, tokens: int, kept_layers: int | None = None,
               logits: bool = False, weights: int = 0) -> tuple[float, str]:
    """The estimated peak bytes of an extraction and what they are, in words: ``weights`` (bytes of the weight files)
    + per batch ``batch_size x tokens x D x S x 4`` (S hidden states of width D; ``tokens``: a text's padded length or
    an image's tokens) + with ``logits`` ``(batch_size + 2) x tokens x V x 4`` (a batch's logits and one row's
    float32 log-softmax) + the kept features ``2 x inputs x kept_layers x D x 4`` (the parts and their concatenation)
    + for text the mask ``inputs x tokens x 8``."""
    states, width, vocab = model_dims(config, kind)
    kept = kept_layers if kept_layers is not None else states
    hidden = float(batch_size) * tokens * width * states * 4
    head = float(batch_size + 2) * tokens * vocab * 4 if logits else 0.0
    feats = 2.0 * inputs * kept * width * 4
    mask = float(inputs) * tokens * 8 if kind == "text" else 0.0
    unit = "tokens" if kind == "text" else "tokens per image"
    parts = [f"weights {format_bytes(weights)}",
             f"hidden states {batch_size:,} x {tokens:,} {unit} x {states} states x {width} = {format_bytes(hidden)}"]
    if logits:
        parts.append(f"logits {batch_size:,} x {tokens:,} x {vocab:,} = {format_bytes(head)}")
    parts.append(f"kept features {inputs:,} x {kept} layers x {width} = {format_bytes(feats)}")
    what = f"extracting {inputs:,} {'texts' if kind == 'text' else 'images'} ({'; '.join(parts)})"
    return weights + hidden + head + feats + mask, what


def token_counts(tokenizer, texts: Sequence[str], limit: int, chunk: int = 4096) -> tuple[int, int]:
    """The most tokens of any text after truncation at ``limit`` (a batch's padded length at most) and the tokens of
    all texts after truncation, tokenized in chunks."""
    longest = every = 0
    with silent_transformers():
        for start in range(0, len(texts), chunk):
            ids = tokenizer(list(texts[start:start + chunk]), truncation=True, max_length=limit)["input_ids"]
            lengths = list(map(len, ids))
            longest = max(longest, *lengths)
            every += sum(lengths)
    return longest, every


def weight_bytes(model: Path) -> int:
    """The bytes of the weight files (:data:`WEIGHT_SUFFIXES`) directly in a checkpoint directory."""
    return sum(p.stat().st_size for p in model.iterdir() if p.is_file() and p.suffix.lower() in WEIGHT_SUFFIXES)
