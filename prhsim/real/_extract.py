"""``prhsim prh extract``: PRH feature files from a local Hugging Face checkpoint directory.

The model is read with transformers' ``AutoConfig``/``AutoModel`` (``AutoModelForCausalLM`` for a decoder with an
LM head) and its ``AutoTokenizer`` (language models) or ``AutoImageProcessor`` (vision models), all with
``local_files_only=True``: nothing is downloaded. Every hidden state the model returns with
``output_hidden_states=True`` is pooled into one row per input, so a file holds ``feats`` (N, L, D) float32,
the layout ``prhsim prh`` and :func:`prhsim.io.load_features` read.

Model kinds and pooling (``pool="auto"``), as the public PRH code pools:

* **language models** (a config with a vocabulary and no image input: BERT-family encoders,
  GPT-2-style decoders): ``mean``, every hidden state averaged over the non-padding tokens (the
  attention mask). ``last-token`` (decoders only) takes the hidden state at the last non-padding
  token; ``cls`` the first token's.
* **vision encoders** (ViT, DINOv2, the CLIP and SigLIP vision towers, or a whole CLIP/SigLIP model,
  whose vision tower is used): ``cls``, the class token (position 0) of every hidden state; SigLIP
  has no class token, so its ``auto`` is ``mean`` over the patch tokens.
* anything else (an encoder-decoder such as T5 or BART, an audio model) is refused.

Layers: index i is ``hidden_states[i]`` as transformers returns it: 0 the embeddings, i the output of
block i (L + 1 states for L blocks). ``layers="all"`` keeps every one, ``"last"`` the last, or a list of
indices (negative ones count from the end).

Data: a caption dataset (a Karpathy-split JSON or prhsim's JSON lines, :func:`prhsim.real.read_captions`:
the **first caption** of each image, in file order; JSON lines with a ``"text"`` or ``"caption"`` field;
parquet with a ``text`` or ``caption`` column, in row order) for language models; for vision models a
folder of images (sorted file names) or a caption dataset whose images are read in its order (a
Karpathy JSON's ``filename``, a JSON line's ``"image"``; from ``images/`` beside the file, else its folder).

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

Memory guard: before the model is loaded, :func:`peak_bytes` estimates the peak (the weight files; per batch
``batch_size x T x D x S x 4`` bytes of hidden states, S = blocks + 1, T the longest text's tokens after
truncation or an image's tokens, plus ``(batch_size + 2) x T x V x 4`` of logits for a decoder; the kept features
``2 x N x len(layers) x D x 4`` and the mask ``N x T x 8``) and :func:`prhsim._budget.ensure_fits` refuses it in
one line (a :class:`prhsim.ResourceError` naming ``--batch-size``, ``--max-length``, ``--layers``) above the
memory limit (half the machine's memory unless :func:`prhsim.memory_limit` sets it).

Time (a rough class, for the note before a long extraction): :func:`prhsim.real.forward_flops` of the pooled
transformer over every text's tokens after truncation, or N times an image's tokens, at the device's rate
(:func:`prhsim.real.extraction_seconds`; :mod:`prhsim.real._forward_cost`). Where the estimate is minutes or hours,
``notes`` is called with the line (:func:`prhsim._budget.time_notes`) before the model is loaded.

Resuming (``shard_size=S``): every S rows are written as one shard (atomically) into ``OUT.shards/`` beside
the output; a rerun reads back the shards whose key (:func:`features_key`: the model, the data, the layers,
pooling, maximum length and :data:`KEY_VERSION`) matches and computes the rest; the finished file is written
atomically and the shard folder removed. With a loss a shard also holds its rows' ``nats_i`` and prediction
counts; one without them (an older version's) is computed again. Caching (:func:`cached_features`): the features
of a model and a dataset are stored under a cache folder by the same key and reused.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from prhsim._budget import ensure_fits, format_bytes
from prhsim.io import atomic_file
from prhsim.real._forward_cost import extraction_seconds, forward_flops, forward_notes
from prhsim.real._karpathy import DataError, read_captions
from prhsim.real._weights import silent_transformers

#: Pooling choices: ``auto`` picks by model kind (module docstring).
POOLS = ("auto", "mean", "cls", "last-token")
#: Suffixes of the feature files written.
OUT_SUFFIXES = (".pt", ".npy", ".safetensors")
#: Image file suffixes read from an image folder.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
#: Vision model types with a class token at position 0 of every hidden state.
CLS_VISION = ("vit", "dinov2", "dinov2_with_registers", "deit", "beit", "clip_vision_model", "clip", "data2vec-vision")
#: Vision model types without one (their ``auto`` pooling is ``mean``).
NO_CLS_VISION = ("siglip_vision_model", "siglip", "siglip2_vision_model", "siglip2")
#: Whole image-text models whose vision tower is used.
TOWERED = ("clip", "siglip", "siglip2")


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


def model_kind(config) -> str:
    """"text" or "vision" for a transformers config, or a DataError for a kind that cannot be pooled."""
    model_type = str(getattr(config, "model_type", ""))
    if getattr(config, "is_encoder_decoder", False):
        raise DataError(f"model type {model_type!r} is an encoder-decoder: prhsim prh extract pools encoders "
                        "(BERT, ViT, DINOv2, CLIP/SigLIP vision) and decoders (GPT-2 style), not seq2seq models")
    if model_type in CLS_VISION or model_type in NO_CLS_VISION:
        return "vision"
    if getattr(config, "vocab_size", None) and not hasattr(config, "num_channels"):
        return "text"
    raise DataError(f"model type {model_type!r} is neither a language model nor a known vision encoder "
                    f"({', '.join(CLS_VISION + NO_CLS_VISION)}): it cannot be pooled")


def is_decoder(config) -> bool:
    """Whether a language model attends causally (GPT-2 style, or a config with ``is_decoder``)."""
    if getattr(config, "is_decoder", False):
        return True
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

    kind = config.model_type
    return kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def resolve_pool(pool: str, kind: str, config) -> str:
    """The pooling ``pool`` means for this model (``auto`` by kind; module docstring), or a DataError."""
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
    no_cls = kind == "vision" and config.model_type in NO_CLS_VISION
    if pool == "auto":
        return "mean" if kind == "text" or no_cls else "cls"
    if pool == "last-token" and (kind == "vision" or not is_decoder(config)):
        raise DataError(f"--pool last-token is for decoders; {config.model_type!r} is a "
                        f"{'vision encoder' if kind == 'vision' else 'bidirectional encoder'} (use mean or cls)")
    if pool == "cls" and no_cls:
        raise DataError(f"{config.model_type!r} has no class token: use --pool mean (or auto)")
    return pool


def parse_layers(spec: str | Sequence[int], count: int) -> tuple[int, ...]:
    """Hidden-state indices of ``spec`` ("all", "last", "i,j,..." or a list; negative counts from the end) among
    ``count`` hidden states, in the order given."""
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text == "all":
            return tuple(range(count))
        if text == "last":
            return (count - 1,)
        try:
            wanted = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"--layers must be all, last or comma-separated integers, got {spec!r}") from None
    else:
        wanted = [int(x) for x in spec]
    if not wanted:
        raise ValueError(f"--layers names no layer: {spec!r}")
    out = []
    for i in wanted:
        if not -count <= i < count:
            raise ValueError(f"--layers: index {i} is out of range for {count} hidden states "
                             f"(0 the embeddings .. {count - 1} the last block)")
        out.append(i % count)
    if len(set(out)) != len(out):
        raise ValueError(f"--layers names a layer twice: {spec!r}")
    return tuple(out)


# ---------------------------------------------------------------- data


def read_texts(data: Path | str) -> list[str]:
    """The texts of a caption dataset, one per item in file order (module docstring), or a DataError."""
    path = Path(data)
    if path.is_dir():
        from prhsim.real._train import dataset_json

        path = dataset_json(path)
    if not path.is_file():
        raise DataError(f"{path}: no such dataset file (expected a Karpathy-split JSON, JSON lines or parquet)")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _parquet_texts(path)
    if suffix == ".jsonl":
        return _jsonl_texts(path)
    if suffix == ".json":
        return [r.texts[0] for r in read_captions(path).records]
    raise DataError(f"{path}: unknown dataset format {suffix or '(no suffix)'!r}; expected .json (Karpathy split), "
                    ".jsonl or .parquet")


def _first_text(value: object) -> str | None:
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    return value.strip() if isinstance(value, str) and value.strip() else None


def _jsonl_records(path: Path) -> Iterator[tuple[int, object]]:
    """``(line number, parsed record)`` of every non-blank line of a JSON-lines file; a DataError names a bad line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot be read: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: line {number}: malformed JSON: {exc.msg}") from None


def _jsonl_texts(path: Path) -> list[str]:
    texts = []
    for number, item in _jsonl_records(path):
        text = None
        if isinstance(item, dict):
            for key in ("text", "caption", "texts", "captions"):
                if key in item:
                    text = _first_text(item[key])
                    break
        if text is None:
            raise DataError(f'{path}: line {number}: expected an object with a non-empty "text" or "caption" '
                            '(or "texts") field')
        texts.append(text)
    if not texts:
        raise DataError(f"{path}: no records")
    return texts


def _parquet_texts(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # any pyarrow failure is the file's problem, in one line
        raise DataError(f"{path}: not a parquet file pyarrow can read ({type(exc).__name__})") from None
    column = next((c for c in ("text", "caption", "texts", "captions") if c in table.column_names), None)
    if column is None:
        raise DataError(f"{path}: no text or caption column (columns: {', '.join(table.column_names) or 'none'})")
    texts = []
    for row, value in enumerate(table.column(column).to_pylist()):
        text = _first_text(value)
        if text is None:
            raise DataError(f"{path}: row {row} has no {column}")
        texts.append(text)
    if not texts:
        raise DataError(f"{path}: no rows")
    return texts


def image_paths(data: Path | str) -> list[Path]:
    """The images of a folder (sorted file names) or of a caption dataset (in its order), or a DataError."""
    path = Path(data)
    if path.is_dir():
        images = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if images:
            return images
        try:
            from prhsim.real._train import dataset_json

            path = dataset_json(path)
        except DataError:
            raise DataError(f"{data}: no image files ({', '.join(IMAGE_SUFFIXES)}) and no caption dataset in "
                            "this folder") from None
    if not path.is_file():
        raise DataError(f"{path}: no such image folder or dataset file")
    if path.suffix.lower() not in (".json", ".jsonl"):
        raise DataError(f"{path}: a vision model reads a folder of images or a caption dataset (.json, .jsonl) "
                        "naming its images")
    from prhsim.real._image_features import image_folder

    if path.suffix.lower() == ".jsonl":
        names = _jsonl_images(path)
    else:
        names = [r.filename for r in read_captions(path).records]
    folder = image_folder(path, None)
    return [folder / name for name in names]


def _jsonl_images(path: Path) -> list[str]:
    """The ``"image"`` field of every line of a JSON-lines dataset, or a DataError naming the first line without one."""
    names = []
    for number, item in _jsonl_records(path):
        name = item.get("image") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise DataError(f'{path}: line {number} does not name an image (an "image" field): a vision model '
                            "needs images")
        names.append(name)
    if not names:
        raise DataError(f"{path}: no records")
    return names


def _looks_like_images(data: Path) -> bool:
    return data.is_dir() and any(p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES for p in data.iterdir())


# ---------------------------------------------------------------- pooling


def pool_hidden(hidden: Sequence, mask, pool: str, layers: Sequence[int]):
    """(B, len(layers), D) float32 from hidden states (each (B, T, D)) and the (B, T) attention mask (None: all
    tokens count)."""
    import torch

    states = [hidden[i].float() for i in layers]
    if pool == "cls":
        return torch.stack([h[:, 0] for h in states], dim=1)
    if mask is None:
        mask = torch.ones(states[0].shape[:2], dtype=torch.long, device=states[0].device)
    if pool == "mean":  # Σ_t m_t h_t / Σ_t m_t as one (1 x T)(T x D) product a row: no B x T x D temporary
        weight = mask.to(torch.float32)
        weight = (weight / weight.sum(1, keepdim=True).clamp_min(1.0)).unsqueeze(1)
        return torch.stack([torch.bmm(weight, h).squeeze(1) for h in states], dim=1)
    # last-token: the last position the mask keeps (works for left and right padding)
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    last = torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(1).values.clamp_min(0)
    rows = torch.arange(mask.shape[0], device=mask.device)
    return torch.stack([h[rows, last] for h in states], dim=1)


# ---------------------------------------------------------------- keys: resuming and caching

#: Bumped when what a key covers, or the features it names, change (2: shards and files carry the LM loss).
KEY_VERSION = 2


def model_fingerprint(model: Path | str) -> dict:
    """The resolved path of a checkpoint directory and the name, size and modification time (ns) of every file
    directly in it (config.json, the weights, the tokenizer or image processor): rewriting any of them changes it."""
    model = Path(model)
    files = []
    for path in sorted(p for p in model.iterdir() if p.is_file()):
        stat = path.stat()
        files.append([path.name, stat.st_size, stat.st_mtime_ns])
    return {"path": str(model.resolve()), "files": files}


def data_digest(data: Path | str) -> str:
    """The SHA-256 of a dataset file's bytes, or of a folder's files (their relative names and bytes, recursively,
    in sorted order; hidden files skipped)."""
    data = Path(data)
    digest = hashlib.sha256()
    if data.is_dir():
        paths = sorted(p for p in data.rglob("*") if p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(data).parts))
    else:
        paths = [data]
    for path in paths:
        if data.is_dir():
            digest.update(str(path.relative_to(data)).encode("utf-8") + b"\0")
        try:
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        except OSError as exc:
            raise DataError(f"{path}: cannot be read: {exc}") from None
        digest.update(b"\0")
    return digest.hexdigest()


def features_key(model: Path | str, data: Path | str, *, layers: str | Sequence[int] = "all", pool: str = "auto",
                 max_length: int | None = None, digest: str | None = None) -> str:
    """A hex key of the features :func:`extract_features` would write: the model (:func:`model_fingerprint`), the
    data (its resolved path and :func:`data_digest`, or ``digest`` if already computed) and the layers, pooling and
    maximum length asked for. The batch size and device are not part of it."""
    data = Path(data)
    doc = {"version": KEY_VERSION, "model": model_fingerprint(model), "data": str(data.resolve()),
           "data_sha256": digest or data_digest(data),
           "layers": layers.strip().lower() if isinstance(layers, str) else [int(i) for i in layers],
           "pool": pool, "max_length": max_length}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


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


def shard_folder(out: Path | str) -> Path:
    """The folder beside ``out`` where :func:`extract_features` keeps its shards: ``OUT.shards``."""
    out = Path(out)
    return out.with_name(out.name + ".shards")


def _read_shard(path: Path, key: str, start: int, stop: int, scored: bool = False):
    """(feats, lengths, layers, scores) of a shard written for ``key`` and rows start..stop, or None (absent, stale,
    unreadable, or, when ``scored``, without its rows' next-token nats and prediction counts: ``scores``)."""
    import torch

    if not path.is_file():
        return None
    try:
        doc = torch.load(path, weights_only=True)
    except Exception:  # a damaged shard is computed again
        return None
    if not isinstance(doc, dict) or doc.get("key") != key or doc.get("start") != start or doc.get("stop") != stop:
        return None
    feats = doc.get("feats")
    if feats is None or feats.shape[0] != stop - start:
        return None
    scores = None
    if scored:
        nats, counts = doc.get("nats"), doc.get("predicted")
        if not all(isinstance(t, torch.Tensor) and tuple(t.shape) == (stop - start,) for t in (nats, counts)):
            return None  # written without the loss (an older version): computed again
        scores = (nats.double(), counts.long())
    return feats, list(doc.get("lengths") or []), tuple(doc["layers"]), scores


def _save_shard(path: Path, key: str, start: int, stop: int, feats, lengths: list[int], layers: tuple[int, ...],
                scores=None) -> None:
    """Write a shard; ``scores``: (nats (n,), prediction counts (n,)) of its rows, or None without an LM head."""
    import torch

    doc = {"key": key, "start": start, "stop": stop, "feats": feats.contiguous(), "lengths": list(lengths),
           "layers": list(layers)}
    if scores is not None:
        doc["nats"], doc["predicted"] = scores[0].contiguous(), scores[1].contiguous()
    with atomic_file(path) as tmp:
        torch.save(doc, tmp)


# ---------------------------------------------------------------- the memory guard

#: Suffixes of weight files counted in the memory estimate.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def _inner(config, kind: str):
    """The config of the transformer that is pooled: a towered model's vision tower, a text model's text config."""
    inner = config.vision_config if kind == "vision" and config.model_type in TOWERED else config
    if kind == "text" and hasattr(inner, "get_text_config"):
        inner = inner.get_text_config()
    return inner


def _dims(config, kind: str) -> tuple[int, int, int]:
    """(hidden states returned, hidden size, vocabulary size; 0 where the config does not say) of the model pooled."""
    inner = _inner(config, kind)
    blocks = getattr(inner, "num_hidden_layers", None)
    width = getattr(inner, "hidden_size", None)
    vocab = getattr(inner, "vocab_size", None) if kind == "text" else 0
    number = [v if isinstance(v, int) and v > 0 else 0 for v in (blocks, width, vocab)]
    return (number[0] + 1 if number[0] else 0), number[1], number[2]


def _image_tokens(processor, config) -> int:
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
    states, width, vocab = _dims(config, kind)
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


def _token_counts(tokenizer, texts: Sequence[str], limit: int, chunk: int = 4096) -> tuple[int, int]:
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


def _weight_bytes(model: Path) -> int:
    return sum(p.stat().st_size for p in model.iterdir() if p.is_file() and p.suffix.lower() in WEIGHT_SUFFIXES)


# ---------------------------------------------------------------- extraction


def extract_features(model: Path | str, data: Path | str, out: Path | str, *, layers: str | Sequence[int] = "all",
                     pool: str = "auto", batch_size: int = 32, max_length: int | None = None, device: str = "auto",
                     overwrite: bool = False, shard_size: int | None = None,
                     progress: Callable[..., None] | None = None,
                     notes: Callable[[str], None] | None = None) -> ExtractSummary:
    """Pool every hidden state of the checkpoint in ``model`` over the inputs of ``data``; write ``out`` (module docstring).

    ``progress(message, done, total)`` is called after every batch (and every shard read back); ``notes(line)``
    once before the model loads where the extraction may take minutes or hours (module docstring). ``shard_size``:
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
    if not (model / "config.json").is_file():
        raise DataError(f"{model}: not a Hugging Face checkpoint directory (expected config.json and weights)")
    if not data.exists():
        raise DataError(f"{data}: no such dataset file or image folder")

    import torch
    from transformers import AutoConfig

    from prhsim.real._train import _device

    with silent_transformers():
        try:
            config = AutoConfig.from_pretrained(str(model), local_files_only=True)
        except Exception as exc:  # a config transformers cannot read, in one line
            raise DataError(f"{model}/config.json: not a config transformers can read ({_line(exc)})") from None
    kind = model_kind(config)
    pool = resolve_pool(pool, kind, config)
    if kind == "text" and _looks_like_images(data):
        raise DataError(f"{data}: a folder of images, but {model} is a language model ({config.model_type}): "
                        "give it a caption dataset")
    inputs = read_texts(data) if kind == "text" else image_paths(data)
    dev = _device(device)
    reader = _reader(model, kind)
    causal = kind == "text" and is_decoder(config)
    if kind == "text":
        limit = _max_length(reader, config, max_length)
        pad_left = getattr(reader, "padding_side", "right") == "left"
        tokens, every_token = _token_counts(reader, inputs, limit)
    else:
        tokens = _image_tokens(reader, config)
        every_token = tokens * len(inputs)
    states = _dims(config, kind)[0]
    try:
        kept_layers = len(parse_layers(layers, states)) if states else None
    except ValueError:  # reported against the hidden states the model returns, after its first batch
        kept_layers = None
    need, what = peak_bytes(config, kind, inputs=len(inputs), batch_size=batch_size, tokens=tokens,
                            kept_layers=kept_layers, logits=causal, weights=_weight_bytes(model))
    ensure_fits(need, what, "lower --batch-size or --max-length, or keep fewer --layers" if kind == "text"
                else "lower --batch-size, or keep fewer --layers")
    noun = "texts" if kind == "text" else "images"
    pooled = _inner(config, kind)
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
            kept = _read_shard(shard, key, first, stop, scored) if shard else None
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
                _save_shard(shard, key, first, stop, block, part_lengths, chosen, scores)
            rows.append(block)
            lengths.extend(part_lengths)
            if scored:
                nats.append(scores[0])
                counts.append(scores[1])
    feats = torch.cat(rows).contiguous()
    mask_all = _mask(lengths, pad_left) if kind == "text" else None
    losses = _losses(torch.cat(nats), torch.cat(counts), inputs) if scored else None
    _write(out, feats, mask_all, num_params, chosen, pool, losses)
    if shards is not None:
        shutil.rmtree(shards, ignore_errors=True)
    return ExtractSummary(out, tuple(feats.shape), chosen, pool, kind, str(config.model_type), num_params,
                          time.perf_counter() - started, losses["loss"] if losses else None,
                          losses["bpb"] if losses else None, estimate)


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
    or image processor, or a one-line DataError."""
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
