"""The keys and shards of a resumable, cached ``prhsim prh extract``: what names a set of features, and its parts.

A key (:func:`features_key`) is a hash of the model (:func:`model_fingerprint`: its files' names, sizes and
modification times), the data (its path and :func:`data_digest`), the layers, pooling, maximum length asked for and
:data:`KEY_VERSION`. Resuming (``shard_size=S``): every S rows are written as one shard (atomically,
:func:`save_shard`) into ``OUT.shards/`` beside the output (:func:`shard_folder`); a rerun reads back the shards
whose key matches (:func:`read_shard`) and computes the rest; the finished file is written atomically and the shard
folder removed. With a loss a shard also holds its rows' ``nats_i`` and prediction counts; one without them (an
older version's) is computed again. Caching (:func:`prhsim.real.cached_features`): the features of a model and a
dataset are stored under a cache folder by the same key and reused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

from prhsim.io import atomic_file
from prhsim.real.data import DataError

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
    """A hex key of the features :func:`prhsim.real.extract_features` would write: the model
    (:func:`model_fingerprint`), the data (its resolved path and :func:`data_digest`, or ``digest`` if already
    computed) and the layers, pooling and maximum length asked for. The batch size and device are not part of it."""
    data = Path(data)
    doc = {"version": KEY_VERSION, "model": model_fingerprint(model), "data": str(data.resolve()),
           "data_sha256": digest or data_digest(data),
           "layers": layers.strip().lower() if isinstance(layers, str) else [int(i) for i in layers],
           "pool": pool, "max_length": max_length}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


def shard_folder(out: Path | str) -> Path:
    """The folder beside ``out`` where :func:`prhsim.real.extract_features` keeps its shards: ``OUT.shards``."""
    out = Path(out)
    return out.with_name(out.name + ".shards")


def read_shard(path: Path, key: str, start: int, stop: int, scored: bool = False):
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


def save_shard(path: Path, key: str, start: int, stop: int, feats, lengths: list[int], layers: tuple[int, ...],
               scores=None) -> None:
    """Write a shard; ``scores``: (nats (n,), prediction counts (n,)) of its rows, or None without an LM head."""
    import torch

    doc = {"key": key, "start": start, "stop": stop, "feats": feats.contiguous(), "lengths": list(lengths),
           "layers": list(layers)}
    if scores is not None:
        doc["nats"], doc["predicted"] = scores[0].contiguous(), scores[1].contiguous()
    with atomic_file(path) as tmp:
        torch.save(doc, tmp)
