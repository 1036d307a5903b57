"""Local Hugging Face text checkpoints of ``prhsim real train --weights DIR``: what is read from the directory.

* ``config.json`` (a BERT checkpoint: ``model_type`` "bert") sets the model: hidden size, layers,
  heads, intermediate size, vocabulary, positions; its ``architectures`` and the directory's name
  make the run's label, e.g. "all-MiniLM-L6-v2 (BertModel, 6 layers, 384)".
* The tokenizer: ``DIR/tokenizer.json`` (else ``DIR/vocab.txt``) when no other is given.
* A sentence-transformers directory (``modules.json``, or ``1_Pooling/config.json`` alone): the
  Transformer module's path (the checkpoint, usually the directory itself), the Pooling module's
  ``config.json`` (only ``pooling_mode_mean_tokens``, the platonic-representation protocol's
  pooling, is accepted; any other mode is an error) and whether a Normalize module is listed (the
  pooled embedding evaluation reads is then L2-normalised; the JEPA projector reads the raw mean).
  Any other module (Dense, …) is an error: prhsim would not apply it.
* Loading is silent (transformers' load report is not printed): weights the checkpoint has but the
  model does not use (BERT's pooler) are dropped; a weight the model needs and the checkpoint lacks
  is a one-line error naming the first few. The next-token learner's LM head (``cls.*``) is new
  when the checkpoint has none.

The run folder keeps what evaluation needs in ``weights.json`` (:data:`RECORD_NAME`): the checkpoint's
path, label and pooling, so ``prhsim real eval`` rebuilds the model without the directory.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from prhsim.real.data import DataError

#: The run folder's record of the checkpoint it started from.
RECORD_NAME = "weights.json"
#: sentence-transformers' pooling modes (``pooling_mode_<mode>`` in the Pooling module's config.json).
POOLING_MODES = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")
#: Missing weights named in the error.
NAMED = 3


@dataclass(frozen=True)
class Checkpoint:
    """What ``read_checkpoint`` found in a checkpoint directory (module docstring)."""

    path: Path  # the directory given
    model_dir: Path  # the Hugging Face checkpoint (config.json and weights): ``path`` or its Transformer module's
    config: dict
    label: str
    pooling: str  # "mean"
    normalize: bool
    sentence_transformers: bool
    tokenizer: Path | None

    @property
    def size(self) -> tuple[int, int, int, int]:
        """(hidden size, layers, heads, intermediate size), as :data:`._text_models.SIZES`."""
        c = self.config
        return (c.get("hidden_size"), c.get("num_hidden_layers"), c.get("num_attention_heads"),
                c.get("intermediate_size"))

    def record(self) -> dict:
        """What the run folder keeps (:data:`RECORD_NAME`)."""
        return {"weights": str(self.path), "label": self.label, "pooling": self.pooling, "normalize": self.normalize,
                "sentence_transformers": self.sentence_transformers,
                "architecture": (self.config.get("architectures") or [None])[0]}


def _json(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot be read as JSON ({str(exc).splitlines()[0]})") from None


def _modules(path: Path) -> tuple[Path, bool, bool]:
    """(checkpoint directory, sentence-transformers?, normalise?) of ``path``; the pooling checked to be the mean."""
    listed = path / "modules.json"
    if listed.is_file():
        modules = _json(listed)
        if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
            raise DataError(f"{listed}: expected a list of modules")
    elif (path / "1_Pooling" / "config.json").is_file():
        modules = [{"type": "sentence_transformers.models.Transformer", "path": ""},
                   {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}]
    else:
        return path, False, False
    model_dir, pooled, normalize = path, False, False
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        where = path / str(module.get("path", ""))
        if kind == "Transformer":
            model_dir = where
        elif kind == "Pooling":
            config = _json(where / "config.json")
            modes = [m for m in POOLING_MODES if config.get(f"pooling_mode_{m}")]
            if modes != ["mean_tokens"]:
                raise DataError(f"{where / 'config.json'}: pooling {' + '.join(modes) or 'none'}; prhsim pools by the "
                                "mean over the tokens (pooling_mode_mean_tokens) only")
            pooled = True
        elif kind == "Normalize":
            normalize = True
        else:
            raise DataError(f"{listed}: a {module.get('type')} module, which prhsim does not apply (it reads "
                            "Transformer, Pooling with mean tokens, and Normalize)")
    if not pooled:
        raise DataError(f"{path}: a sentence-transformers directory without a Pooling module")
    return model_dir, True, normalize


def read_checkpoint(path: Path | str) -> Checkpoint:
    """The checkpoint in ``path`` (module docstring); a DataError, one line naming the file, when it is not one."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: no such checkpoint directory")
    model_dir, st, normalize = _modules(path)
    if not (model_dir / "config.json").is_file():
        raise DataError(f"{model_dir}: not a Hugging Face checkpoint directory (expected config.json and weights)")
    config = _json(model_dir / "config.json")
    if not isinstance(config, dict) or config.get("model_type") != "bert":
        kind = config.get("model_type") if isinstance(config, dict) else None
        raise DataError(f"{model_dir / 'config.json'}: model_type {kind!r}; prhsim real trains BERT checkpoints "
                        "(model_type 'bert') only")
    architecture = (config.get("architectures") or ["BertModel"])[0]
    name = path.resolve().name
    label = f"{name} ({architecture}, {config.get('num_hidden_layers')} layers, {config.get('hidden_size')})"
    tokenizer = next((p for d in dict.fromkeys((path, model_dir)) for p in (d / "tokenizer.json", d / "vocab.txt")
                      if p.is_file()), None)
    return Checkpoint(path=path, model_dir=model_dir, config=config, label=label, pooling="mean", normalize=normalize,
                      sentence_transformers=st, tokenizer=tokenizer)


@contextlib.contextmanager
def silent_transformers():
    """transformers' warnings (the load report among them) and progress bars off inside; its verbosity restored."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(level)


def load_pretrained(cls, checkpoint: Checkpoint, *, new: tuple[str, ...] = (), **kwargs):
    """``cls.from_pretrained`` on the checkpoint, silently; missing weights (except those starting with one of
    ``new``, a head the checkpoint may not have) are a one-line DataError naming the first few."""
    where = checkpoint.model_dir
    try:
        with silent_transformers():
            model, info = cls.from_pretrained(str(where), local_files_only=True, output_loading_info=True, **kwargs)
    except (OSError, RuntimeError, ValueError) as exc:
        raise DataError(f"{where}: the checkpoint cannot be loaded ({str(exc).strip().splitlines()[0]})") from None
    missing = sorted(k for k in info.get("missing_keys", ()) if not k.startswith(new))
    mismatched = list(info.get("mismatched_keys", ()))
    if missing:
        more = f" and {len(missing) - NAMED} more" if len(missing) > NAMED else ""
        raise DataError(f"{where}: the checkpoint lacks {len(missing)} weight(s) the model needs: "
                        f"{', '.join(missing[:NAMED])}{more}")
    if mismatched:
        raise DataError(f"{where}: weights of another shape than the configuration's: {mismatched[0]}")
    return model


def run_record(run: Path | str) -> dict | None:
    """The run folder's record of its checkpoint (:data:`RECORD_NAME`), or None for a randomly initialised run."""
    path = Path(run) / RECORD_NAME
    return _json(path) if path.is_file() else None
