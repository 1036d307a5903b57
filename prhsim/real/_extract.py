"""``prhsim prh extract``: PRH feature files from a local Hugging Face checkpoint directory.

The model is read with transformers' ``AutoConfig``/``AutoModel`` (``AutoModelForCausalLM`` for a decoder with an
LM head) and its ``AutoTokenizer`` (language models) or ``AutoImageProcessor`` (vision models), all with
``local_files_only=True``: nothing is downloaded. Every hidden state the model returns with
``output_hidden_states=True`` is pooled into one row per input, so a file holds ``feats`` (N, L, D) float32,
the layout ``prhsim prh`` and :func:`prhsim.io.load_features` read. Model kinds, pooling and layers: :mod:`._pooling`.

Data: a caption dataset for language models (:func:`prhsim.real.data.read_texts`: the **first caption** of each
image of a Karpathy-split JSON, in file order; JSON lines with a ``"text"`` or ``"caption"`` field; parquet with a
``text`` or ``caption`` column, in row order); for vision models a folder of images (sorted file names) or a caption
dataset whose images are read in its order (:func:`prhsim.real.data.image_paths`: a Karpathy JSON's ``filename``, a
JSON line's ``"image"``; from ``images/`` beside the file, else its folder).

Language-model loss (decoders whose checkpoint has an LM head: ``AutoModelForCausalLM`` is loaded and its
``hidden_states``, the states ``AutoModel`` returns, are pooled), as the PRH code computes it (platonic-rep
``utils.cross_entropy_loss`` and ``utils.cross_entropy_to_bits_per_unit``, saved by ``extract_features.py`` as
``loss = stack(avg_loss).mean()`` and ``bpb = stack(bpb).mean()``): for text i with non-padding tokens
x_1..x_T (after truncation), ``nats_i = sum_{t<T} -log softmax(logits_t)[x_{t+1}]`` (float32 log-softmax of the
model's logits, summed in float64), ``loss_i = nats_i / (T - 1)``, ``bpb_i = nats_i * log2(e) /
len(text_i.encode("utf-8"))``; ``loss`` and ``bpb`` are the means over i. A prediction counts where both its input
and its target are non-padding (``mask[:, :-1] * mask[:, 1:]``); the PRH code's ``mask[:, :-1]`` alone is the same
under the left padding its ``load_tokenizer`` sets (under right padding it would also score each shorter text's
first pad). Differences from the PRH code: the scalars are Python floats (it saves 0-d tensors); a text of one
token has no prediction, so its ``loss_i`` and ``bpb_i`` are NaN and the means skip it (there ``loss`` would be
NaN and ``bpb_i`` 0); texts are truncated at the maximum length (it does not truncate) while ``bpb_i`` still
divides by the whole text's bytes, so a truncated text's bpb is low. As there, the first token is never predicted
but its bytes count. Decoders get ``position_ids = max(cumsum(mask) - 1, 0)`` (as transformers' ``generate``),
so a left-padding tokenizer gives the features and loss of the unpadded text (right padding: unchanged).
``num_params`` counts the loaded model (with an untied head, its V x D too, as the PRH code's causal-LM count).
Encoders (BERT family), vision models and decoder checkpoints without a head (an untied one missing from the
weights: ``AutoModel`` is loaded) have no next-token loss: nothing is saved for them.

Files by suffix: ``.pt`` a dict ``{"feats", "num_params", "mask" (N, T) int64 for language models as the
PRH code saves it, "layers", "pool"}`` plus, with a loss, ``"loss"``, ``"bpb"`` (floats) and
``"loss_per_sample"``, ``"bpb_per_sample"`` ((N,) float64); ``.npy`` the array ``feats`` only (no mask, no
loss); ``.safetensors`` the tensor ``feats`` (and ``mask``, ``loss_per_sample``, ``bpb_per_sample``; ``loss``
and ``bpb`` as strings in its metadata). Written whole or not at all (:func:`prhsim.io.atomic_file`). Every
problem is a :class:`prhsim.real.DataError` of one line naming the path (too little memory: the guard below).

Memory guard: before the model is loaded, :func:`._extract_cost.peak_bytes` estimates the peak (the weights, a
batch's hidden states and a decoder's logits, the kept features and the mask) and :func:`prhsim._budget.ensure_fits`
refuses it in one line (a :class:`prhsim.ResourceError` naming ``--batch-size``, ``--max-length``, ``--layers``)
above the memory limit (half the machine's memory unless :func:`prhsim.memory_limit` sets it).

Time (a rough class, for the note before a long extraction): :func:`prhsim.real.forward_flops` of the pooled
transformer over every text's tokens after truncation, or N times an image's tokens, at the device's rate
(:func:`prhsim.real.extraction_seconds`; :mod:`prhsim.real._forward_cost`). Where the estimate is minutes or hours,
``notes`` is called with the line (:func:`prhsim._budget.time_notes`) before the model is loaded.

Resuming (``shard_size=S``): every S rows are written as one shard into ``OUT.shards/`` beside the output and a
rerun reads back those of its key; caching (:func:`cached_features`): the features of a model and a dataset are
stored under a cache folder by the same key and reused (both: :mod:`._extract_cache`).
"""

from __future__ import annotations

import inspect
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from prhsim._budget import ensure_fits
from prhsim.io import OutputError, atomic_file, check_out_file
from prhsim.real._devices import torch_device
from prhsim.real._extract_cache import features_key, read_shard, save_shard, shard_folder
from prhsim.real._extract_cost import image_tokens, model_dims, peak_bytes, token_counts, weight_bytes
from prhsim.real._forward_cost import extraction_seconds, forward_flops, forward_notes
from prhsim.real._pooling import TOWERED, is_decoder, model_kind, parse_layers, pool_hidden, pooled_config, resolve_pool
from prhsim.real._weights import silent_transformers
from prhsim.real.data import DataError, image_paths, looks_like_images, read_texts

#: Suffixes of the feature files written.
OUT_SUFFIXES = (".pt", ".npy", ".safetensors")
#: The files a Hugging Face tokenizer is read from (one of them, or a pair as vocab.json + merges.txt); without any,
#: transformers builds an empty tokenizer that reads every word as its unknown token.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")
#: The share of a dataset's tokens (a sample of its texts) that may be the tokenizer's unknown token.
UNKNOWN_SHARE = 0.5
#: Texts of the dataset the unknown-token share is measured on.
UNKNOWN_SAMPLE = 256


@dataclass(frozen=True)
class ExtractSummary:
    """What :func:`extract_features` wrote: the file, its shape (N, L, D), the layers kept (hidden-state
    indices), the pooling used, the model kind ("text" or "vision") and type, its parameter count, the time, and
    the mean next-token loss (nats) and bits per byte (None without an LM head; module docstring), and the time
    estimated before the model loaded (:func:`extraction_seconds`)."""

    out: Path
    shape: tuple[int, int, int]
    layers: tuple[int, ...]
    pool: str
    kind: str
    model_type: str
    num_params: int
    seconds: float
    loss: float | None = None
    bpb: float | None = None
    estimated_seconds: float | None = None


def extract_features(model: Path | str, data: Path | str, out: Path | str, *, layers: str | Sequence[int] = "all",
                     pool: str = "auto", batch_size: int = 32, max_length: int | None = None, device: str = "auto",
                     overwrite: bool = False, shard_size: int | None = None,
                     progress: Callable[..., None] | None = None,
                     notes: Callable[[str], None] | None = None) -> ExtractSummary:
    """Pool every hidden state of the checkpoint in ``model`` over the inputs of ``data``; write ``out`` (module docstring).

    ``progress(message, done, total)`` is called after every batch (and every shard read back); ``notes(line)``
    once before the model loads where the extraction may take minutes or hours (module docstring), and once where
    ``max_length`` is above the model's maximum length (texts are truncated at the model's). ``shard_size``:
    keep every that many rows as a shard in :func:`shard_folder` of ``out`` so an interrupted run resumes where
    it stopped (module docstring). A decoder with an LM head also gets its next-token ``loss`` and ``bpb``.

    Raises:
        DataError: not a checkpoint directory, a model kind that cannot be pooled, a dataset that cannot be read
            or that does not fit the model (texts for a vision model, images for a language model), an
            existing ``out`` without ``overwrite``, an unknown output suffix.
        ResourceError: the estimated peak memory (:func:`peak_bytes`) is above the memory limit; checked before
            the model is loaded.
        ValueError: a bad ``layers``, ``pool``, ``batch_size``, ``max_length`` or ``shard_size``; ``device="cuda"``
            without CUDA.
    """
    started = time.perf_counter()
    model, data, out = Path(model), Path(data), Path(out)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer of at least 1, got {batch_size!r}")
    if shard_size is not None and (isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1):
        raise ValueError(f"shard_size must be an integer of at least 1, got {shard_size!r}")
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2):
        raise ValueError(f"max_length must be an integer of at least 2, got {max_length!r}")
    if out.suffix.lower() not in OUT_SUFFIXES:
        raise DataError(f"{out}: the features file must end in {', '.join(OUT_SUFFIXES)}")
    if out.exists() and not overwrite:
        raise DataError(f"{out} exists; pass --overwrite to replace it")
    try:  # a folder that cannot take the file (read-only, or a file on the way) is refused before the model loads
        check_out_file(out, overwrite=overwrite)
    except OutputError as exc:
        raise DataError(str(exc)) from None
    import torch

    config, kind = _checkpoint(model, data)
    pool = resolve_pool(pool, kind, config)
    inputs = read_texts(data) if kind == "text" else image_paths(data)
    dev = torch_device(device)
    reader = _reader(model, kind)
    causal = kind == "text" and is_decoder(config)
    if kind == "text":
        check_known_tokens(reader, inputs, model)
        limit = _max_length(reader, config, max_length)
        if notes is not None and max_length is not None and limit < max_length:
            notes(f"--max-length {max_length} is above the model's maximum length ({limit} tokens): texts are "
                  f"truncated at {limit} tokens")
        pad_left = getattr(reader, "padding_side", "right") == "left"
        tokens, every_token = token_counts(reader, inputs, limit)
    else:
        tokens = image_tokens(reader, config)
        every_token = tokens * len(inputs)
    states = model_dims(config, kind)[0]
    try:
        kept_layers = len(parse_layers(layers, states)) if states else None
    except ValueError:  # reported against the hidden states the model returns, after its first batch
        kept_layers = None
    need, what = peak_bytes(config, kind, inputs=len(inputs), batch_size=batch_size, tokens=tokens,
                            kept_layers=kept_layers, logits=causal, weights=weight_bytes(model))
    ensure_fits(need, what, "lower --batch-size or --max-length, or keep fewer --layers" if kind == "text"
                else "lower --batch-size, or keep fewer --layers")
    noun = "texts" if kind == "text" else "images"
    pooled = pooled_config(config, kind)
    estimate = extraction_seconds(forward_flops(pooled, every_token, logits=causal), cuda=dev.type == "cuda")
    if notes is not None:
        for line in forward_notes("extraction", estimate, pooled, inputs=len(inputs), noun=noun, tokens=every_token,
                                  model_type=str(config.model_type)):
            notes(line)
    net, scored = _network(model, config, kind)
    net = net.to(dev).eval()
    num_params = int(sum(p.numel() for p in net.parameters()))
    positions = causal and "position_ids" in inspect.signature(net.forward).parameters

    say = progress or (lambda message, done=None, total=None: None)
    rows, lengths, nats, counts, chosen = [], [], [], [], None
    total = len(inputs)
    if dev.type == "cuda":
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        autocast = torch.autocast("cuda", dtype=dtype)
    else:
        autocast = torch.autocast("cpu", enabled=False)
    shards = shard_folder(out) if shard_size else None
    key = features_key(model, data, layers=layers, pool=pool, max_length=max_length) if shards else None
    step = shard_size or max(total, 1)
    looping, computed = time.perf_counter(), 0
    with torch.inference_mode(), autocast:
        for first in range(0, total, step):
            stop = min(first + step, total)
            shard = shards / f"rows-{first:09d}-{stop:09d}.pt" if shards else None
            kept = read_shard(shard, key, first, stop, scored) if shard else None
            if kept is not None:
                feats_kept, lengths_kept, layers_kept, scores_kept = kept
                rows.append(feats_kept)
                lengths.extend(lengths_kept)
                if scored:
                    nats.append(scores_kept[0])
                    counts.append(scores_kept[1])
                chosen = chosen or layers_kept
                say(f"{stop:,}/{total:,} {noun} (shard {first:,}..{stop - 1:,} read back)", stop, total)
                continue
            part, part_lengths, part_nats, part_counts = [], [], [], []
            for start in range(first, stop, batch_size):
                chunk = inputs[start:min(start + batch_size, stop)]
                if kind == "text":
                    batch = reader(list(chunk), padding=True, truncation=True, max_length=limit, return_tensors="pt")
                    mask = batch["attention_mask"]
                    part_lengths.extend(mask.sum(1).tolist())
                    feed = {k: v.to(dev) for k, v in batch.items()
                            if k in ("input_ids", "attention_mask", "token_type_ids")}
                    if positions:  # each text's own positions 0..T-1, whichever side it is padded on
                        feed["position_ids"] = (mask.long().cumsum(1) - 1).clamp_min(0).to(dev)
                    output = net(**feed, output_hidden_states=True)
                    hidden = output.hidden_states
                    mask = mask.to(dev)
                    if scored:
                        batch_nats, batch_counts = _next_token_nats(output.logits, feed["input_ids"], mask)
                        part_nats.append(batch_nats)
                        part_counts.append(batch_counts)
                else:
                    pixels = _pixels(reader, chunk).to(dev)
                    hidden = net(pixel_values=pixels, output_hidden_states=True).hidden_states
                    mask = None
                if chosen is None:
                    chosen = parse_layers(layers, len(hidden))
                part.append(pool_hidden(hidden, mask, pool, chosen).float().cpu())
                done = start + len(chunk)
                computed += len(chunk)
                say(f"{done:,}/{total:,} {noun}, {computed / (time.perf_counter() - looping):,.1f}/s", done, total)
            block = torch.cat(part)
            scores = (torch.cat(part_nats), torch.cat(part_counts)) if scored else None
            if shard:
                save_shard(shard, key, first, stop, block, part_lengths, chosen, scores)
            rows.append(block)
            lengths.extend(part_lengths)
            if scored:
                nats.append(scores[0])
                counts.append(scores[1])
    feats = torch.cat(rows).contiguous()
    if notes is not None and feats.shape[0] > 1 and bool(torch.all(feats == feats[:1])):
        notes(f"every one of the {feats.shape[0]:,} extracted rows is identical: the features cannot tell the "
              "inputs apart (check the tokenizer and the data)")
    mask_all = _mask(lengths, pad_left) if kind == "text" else None
    losses = _losses(torch.cat(nats), torch.cat(counts), inputs) if scored else None
    _write(out, feats, mask_all, num_params, chosen, pool, losses)
    shutil.rmtree(shard_folder(out), ignore_errors=True)  # its shards, or a stopped sharded run's: the output is whole
    return ExtractSummary(out, tuple(feats.shape), chosen, pool, kind, str(config.model_type), num_params,
                          time.perf_counter() - started, losses["loss"] if losses else None,
                          losses["bpb"] if losses else None, estimate)


def check_extractable(model: Path | str, data: Path | str) -> str:
    """What :func:`extract_features` checks of a checkpoint and its data before loading any weights, without
    loading them: a readable ``config.json``, a model kind that can be pooled, no image folder for a language
    model, and a text checkpoint's tokenizer files. Returns the kind ("text" or "vision"); raises a one-line
    DataError otherwise (so a command over several models refuses a bad one before extracting any)."""
    return _checkpoint(Path(model), Path(data))[1]


def _checkpoint(model: Path, data: Path) -> tuple[Any, str]:
    """The checkpoint's config and kind, after :func:`check_extractable`'s checks."""
    from transformers import AutoConfig

    if not (model / "config.json").is_file():
        raise DataError(f"{model}: not a Hugging Face checkpoint directory (expected config.json and weights)")
    if not data.exists():
        raise DataError(f"{data}: no such dataset file or image folder")
    with silent_transformers():
        try:
            config = AutoConfig.from_pretrained(str(model), local_files_only=True)
        except Exception as exc:  # a config transformers cannot read, in one line
            raise DataError(f"{model}/config.json: not a config transformers can read ({_line(exc)})") from None
    kind = model_kind(config)
    if kind == "text" and looks_like_images(data):
        raise DataError(f"{data}: a folder of images, but {model} is a language model ({config.model_type}): "
                        "give it a caption dataset")
    if kind == "text" and not any((model / name).is_file() for name in TOKENIZER_FILES):
        raise DataError(f"{model}: no tokenizer beside the weights (none of {', '.join(TOKENIZER_FILES)}): every "
                        "word would be read as unknown; save the checkpoint's tokenizer into the folder")
    return config, kind


def cached_features(model: Path | str, data: Path | str, cache: Path | str, *, layers: str | Sequence[int] = "all",
                    pool: str = "auto", batch_size: int = 32, max_length: int | None = None, device: str = "auto",
                    shard_size: int | None = None, digest: str | None = None,
                    progress: Callable[..., None] | None = None,
                    notes: Callable[[str], None] | None = None) -> tuple[Path, bool]:
    """The feature file of ``model`` over ``data`` under the folder ``cache`` and whether it was there already.

    The file is ``cache/<model folder name>-<key>.pt`` (key: :func:`features_key`, first 16 hex digits): if it
    exists it is returned as it is, else :func:`extract_features` writes it (resumable by ``shard_size``; ``progress``
    and ``notes`` as there). Entries of a model whose files changed are left in the folder (a new key, a new file);
    delete the folder to clear it.
    """
    model = Path(model)
    if not (model / "config.json").is_file():
        raise DataError(f"{model}: not a Hugging Face checkpoint directory (expected config.json and weights)")
    if not Path(data).exists():
        raise DataError(f"{data}: no such dataset file or image folder")
    key = features_key(model, data, layers=layers, pool=pool, max_length=max_length, digest=digest)
    path = Path(cache) / f"{model.name}-{key[:16]}.pt"
    if path.is_file():
        return path, True
    extract_features(model, data, path, layers=layers, pool=pool, batch_size=batch_size, max_length=max_length,
                     device=device, overwrite=True, shard_size=shard_size, progress=progress, notes=notes)
    return path, False


def _next_token_nats(logits, ids, mask):
    """(B,) float64 summed next-token cross-entropy (nats) and (B,) int64 prediction counts of a batch: position t
    predicts token t + 1 where both are non-padding (module docstring); float32 log-softmax, one row at a time."""
    import torch

    keep = (mask[:, :-1] * mask[:, 1:]).bool()
    nats = []
    for row in range(ids.shape[0]):
        chosen = keep[row]
        nll = torch.nn.functional.cross_entropy(logits[row, :-1][chosen].float(), ids[row, 1:][chosen],
                                                reduction="none")
        nats.append(nll.double().sum())
    return torch.stack(nats).cpu(), keep.sum(1).long().cpu()


def _losses(nats, counts, texts: Sequence[str]) -> dict:
    """The PRH code's ``loss`` and ``bpb`` (means over texts) and the per-text values (module docstring): loss_i =
    nats_i / count_i, bpb_i = nats_i * log2(e) / UTF-8 bytes_i; NaN (and skipped by the means) where count_i = 0."""
    import torch

    nbytes = torch.tensor([len(t.encode("utf-8")) for t in texts], dtype=torch.float64)
    has = counts > 0
    nan = torch.full_like(nats, math.nan)
    loss = torch.where(has, nats / counts.clamp_min(1).double(), nan)
    bpb = torch.where(has, nats * math.log2(math.e) / nbytes, nan)
    mean = (lambda v: float(v[has].mean())) if bool(has.any()) else (lambda v: math.nan)
    return {"loss": mean(loss), "bpb": mean(bpb), "loss_per_sample": loss, "bpb_per_sample": bpb}


def _line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _reader(model: Path, kind: str):
    """The checkpoint's tokenizer (padding with its end-of-sequence or unknown token if it has no padding token)
    or image processor, or a one-line DataError (a text checkpoint without tokenizer files was refused before, by
    :func:`check_extractable`'s checks)."""
    from transformers import AutoImageProcessor, AutoTokenizer

    with silent_transformers():
        try:
            if kind == "text":
                reader = AutoTokenizer.from_pretrained(str(model), local_files_only=True)
            else:
                reader = AutoImageProcessor.from_pretrained(str(model), local_files_only=True)
        except Exception as exc:
            what = "tokenizer (tokenizer.json or tokenizer_config.json)" if kind == "text" else \
                "image processor (preprocessor_config.json)"
            raise DataError(f"{model}: no {what} beside the weights ({_line(exc)})") from None
    if kind == "text" and reader.pad_token is None:
        fallback = reader.eos_token or reader.unk_token
        if fallback is None:
            raise DataError(f"{model}: the tokenizer has no padding, end-of-sequence or unknown token to pad with")
        reader.pad_token = fallback  # padded positions are masked out: which token pads does not matter
    return reader


def check_known_tokens(reader, texts: Sequence[str], model: Path) -> None:
    """Refuse (DataError) a tokenizer that reads more than :data:`UNKNOWN_SHARE` of the tokens of a sample of
    ``texts`` as its unknown token: its features would not tell the texts apart."""
    unknown = getattr(reader, "unk_token_id", None)
    if unknown is None or not texts:
        return
    # every token of the sample, untruncated: verbose=False keeps transformers from warning that a text is longer
    # than the model reads (the extraction itself truncates)
    ids = reader(list(texts[:UNKNOWN_SAMPLE]), add_special_tokens=False, verbose=False)["input_ids"]
    total = sum(len(row) for row in ids)
    share = sum(row.count(unknown) for row in ids) / total if total else 0.0
    if share > UNKNOWN_SHARE:
        raise DataError(f"{model}: its tokenizer reads {share:.0%} of the data's tokens as unknown "
                        f"({reader.unk_token!r}): not this model's tokenizer, or not its language")


def _head_loaded(net, info: dict) -> bool:
    """Whether the output embeddings (the LM head) of a loaded causal LM came from the checkpoint (or are tied to
    its input embeddings), not newly initialised: none of their parameters is a missing or mismatched key."""
    head = net.get_output_embeddings()
    if head is None:
        return False
    names = {f"{prefix}.{name}" if prefix else name for prefix, module in net.named_modules() if module is head
             for name, _ in module.named_parameters()}
    fresh = set(info.get("missing_keys") or ())
    fresh |= {m[0] if isinstance(m, (tuple, list)) else m for m in info.get("mismatched_keys") or ()}
    return not names & fresh


def _network(model: Path, config, kind: str):
    """(the model, whether it has an LM head): ``AutoModelForCausalLM`` for a decoder whose checkpoint holds (or
    ties) the head, else ``AutoModel`` (for a whole CLIP/SigLIP its vision tower); a one-line DataError."""
    from transformers import AutoModel, AutoModelForCausalLM

    with silent_transformers():
        if kind == "text" and is_decoder(config):
            try:
                net, info = AutoModelForCausalLM.from_pretrained(str(model), local_files_only=True,
                                                                 output_loading_info=True)
            except Exception:  # no causal-LM class for this config, or unloadable: AutoModel below says which
                net = None
            if net is not None and _head_loaded(net, info):
                return net, True
            del net
        try:
            net = AutoModel.from_pretrained(str(model), local_files_only=True)
        except Exception as exc:  # missing weights, an unknown architecture: one line
            raise DataError(f"{model}: the checkpoint cannot be loaded ({_line(exc)})") from None
    if kind == "vision" and config.model_type in TOWERED:
        net = net.vision_model
    return net, False


def _max_length(tokenizer, config, given: int | None) -> int:
    limits = [n for n in (getattr(tokenizer, "model_max_length", None), getattr(config, "max_position_embeddings", None),
                          getattr(config, "n_positions", None)) if isinstance(n, int) and 0 < n < 10**7]
    cap = min(limits) if limits else None
    if given is None:
        if cap is None:
            raise DataError("the model states no maximum length: pass --max-length")
        return cap
    return given if cap is None else min(given, cap)


def _pixels(processor, paths: Sequence[Path]):
    from PIL import Image, UnidentifiedImageError

    images = []
    for path in paths:
        try:
            with Image.open(path) as image:
                images.append(image.convert("RGB"))
        except FileNotFoundError:
            raise DataError(f"{path}: no such image") from None
        except (UnidentifiedImageError, OSError) as exc:
            raise DataError(f"{path}: not an image PIL can read ({exc})") from None
    return processor(images=images, return_tensors="pt")["pixel_values"]


def _mask(lengths: list[int], pad_left: bool):
    """The (N, T) attention mask of the whole dataset padded to its longest text, as the PRH code saves it."""
    import torch

    lengths_t = torch.as_tensor(lengths, dtype=torch.long)
    width = int(lengths_t.max())
    positions = torch.arange(width).expand(len(lengths), width)
    if pad_left:
        return (positions >= width - lengths_t[:, None]).long()
    return (positions < lengths_t[:, None]).long()


def _write(out: Path, feats, mask, num_params: int, layers: tuple[int, ...], pool: str,
           losses: dict | None = None) -> None:
    """Write the file of ``out``'s suffix (module docstring); ``losses``: :func:`_losses` of a decoder's LM head."""
    import torch

    with atomic_file(out) as tmp:
        suffix = out.suffix.lower()
        if suffix == ".pt":
            doc = {"feats": feats, "num_params": num_params, "layers": list(layers), "pool": pool}
            if mask is not None:
                doc["mask"] = mask
            if losses is not None:
                doc.update(losses)
            torch.save(doc, tmp)
        elif suffix == ".npy":
            np.save(tmp, feats.numpy())
        else:
            from safetensors.torch import save_file

            tensors = {"feats": feats}
            metadata = {"pool": pool, "layers": ",".join(map(str, layers)), "num_params": str(num_params)}
            if mask is not None:
                tensors["mask"] = mask.contiguous()
            if losses is not None:
                tensors["loss_per_sample"] = losses["loss_per_sample"].contiguous()
                tensors["bpb_per_sample"] = losses["bpb_per_sample"].contiguous()
                metadata.update(loss=repr(losses["loss"]), bpb=repr(losses["bpb"]))
            save_file(tensors, str(tmp), metadata=metadata)
