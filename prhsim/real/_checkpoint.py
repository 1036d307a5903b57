"""Checkpoints of a torch training loop, so that a killed run resumes exactly where it was saved.

Format (version 1), one folder ``<folder>/checkpoint/``:

* ``model.safetensors``: the model's ``state_dict`` (parameters and persistent buffers), contiguous.
  A tensor shared by several keys (tied weights) is stored once, under its first key; the others
  are listed in ``state.json`` as aliases of it.
* ``optimizer.safetensors``: every tensor of the optimiser's ``state_dict``: ``state.{i}.{name}``
  for parameter i's state entry ``name`` (``state.0.exp_avg``), ``param_groups.{g}.{name}`` for a
  tensor-valued hyperparameter of group g.
* ``rng.safetensors``: torch's CPU generator state ``cpu`` (uint8) and, when CUDA is available,
  one ``cuda.{d}`` per device.
* ``state.json``, written last::

      {"format": 1,
       "step": 4,                                  # optimiser steps taken
       "model": {"aliases": {"head.weight": "embed.weight"}},
       "optimizer": {"class": "AdamW", "param_groups": [...], "state": {"0": {...}}},  # non-tensor entries
       "scheduler": {"class": "LambdaLR", "state": {...}},
       "generator": {"bit_generator": "PCG64", "state": {"state": ..., "inc": ...}, ...},  # or null
       "extra": {...}}

  Values JSON has no type for are tagged: ``{"__tuple__": [...]}``, ``{"__items__": [[key, value], ...]}``
  (a dict whose keys are not all strings), ``{"__counter__": [[key, count], ...]}`` and
  ``{"__ndarray__": [...], "dtype": "uint64"}`` (a numpy bit generator's state arrays).

:func:`save_checkpoint` builds the new checkpoint in a hidden sibling ``.checkpoint.new-*`` and
swaps it in with two renames (``checkpoint`` to ``.checkpoint.old``, the new one to
``checkpoint``); an exception at any point leaves the previous checkpoint in place, and a process
killed between the two renames leaves it as ``.checkpoint.old``, which :func:`load_checkpoint`
then reads and the next save moves back first. One process saves into a folder at a time.

:func:`load_checkpoint` checks everything before changing anything, then restores the model,
optimiser, scheduler and torch's generators in place and returns the step, the numpy data
generator (None if none was saved) and ``extra``. Every problem is a :class:`CheckpointError` whose one-line message names
the file (or folder) and what is wrong.
"""

from __future__ import annotations

import json
import operator
import os
import secrets
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from prhsim.io import full_disk_error

#: The version written to ``state.json`` and the only one read.
FORMAT_VERSION = 1
#: The checkpoint's folder inside the run's folder, and its files.
CHECKPOINT_DIR = "checkpoint"
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
RNG_FILE = "rng.safetensors"
STATE_FILE = "state.json"
FILES = (MODEL_FILE, OPTIMIZER_FILE, RNG_FILE, STATE_FILE)
#: A checkpoint being written, and the previous one while the new one is swapped in.
_NEW_PREFIX = ".checkpoint.new-"
_OLD_NAME = ".checkpoint.old"
#: The numpy bit generators whose state can be restored by name.
_BIT_GENERATORS = {cls.__name__: cls for cls in (np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937,
                                                 np.random.Philox, np.random.SFC64)}
_TAGS = ("__tuple__", "__items__", "__counter__", "__ndarray__")


class CheckpointError(ValueError):
    """A checkpoint that cannot be written or restored; the one-line message names the file and the problem."""


@dataclass(frozen=True)
class Resumed:
    """What :func:`load_checkpoint` returns besides the objects it restores in place.

    Attributes:
        step: the optimiser steps taken when the checkpoint was saved.
        generator: the data generator, restored to its saved state (None if none was saved).
        extra: the JSON-serialisable dict given to :func:`save_checkpoint` (``{}`` if none was).
    """

    step: int
    generator: np.random.Generator | None
    extra: dict


# ---------------------------------------------------------------------------------------------- saving


def save_checkpoint(folder: Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler, generator: np.random.Generator | None,
                    step: int, extra: dict | None = None) -> Path:
    """Save the training state into ``folder/checkpoint/``, replacing the previous checkpoint atomically.

    Args:
        folder: the run's folder (created if missing).
        model: the model; its ``state_dict`` is saved.
        optimizer: the optimiser, with its per-parameter state and parameter groups.
        scheduler: the learning-rate scheduler.
        generator: the numpy generator that draws the data; its bit generator's state is saved
            (None: the data is a function of the step, nothing to save).
        step: the optimiser steps taken so far (at least 0).
        extra: anything else to resume with (JSON-serialisable: dicts, lists, tuples, numbers, strings).

    Returns:
        The checkpoint's folder, ``folder/checkpoint``.

    Raises:
        CheckpointError: when something cannot be stored (a value JSON cannot hold, a non-tensor
            model entry); the previous checkpoint is left as it was.
        ValueError: on a negative step.
        OutputError: the disk is full (one line naming the checkpoint); the previous checkpoint is kept.
        OSError: when the folder cannot be written.
    """
    step = operator.index(step)
    if step < 0:
        raise ValueError(f"step must be at least 0, got {step}")
    folder = Path(folder)
    final = folder / CHECKPOINT_DIR
    state_path = final / STATE_FILE
    extra = {} if extra is None else extra
    if not isinstance(extra, dict):
        raise CheckpointError(f"{state_path}: extra must be a dict, got {type(extra).__name__}")
    folder.mkdir(parents=True, exist_ok=True)
    _recover(folder)
    _remove_unfinished(folder)
    building = folder / f"{_NEW_PREFIX}{secrets.token_hex(4)}"
    building.mkdir()
    try:
        _write_checkpoint(building, state_path, model=model, optimizer=optimizer, scheduler=scheduler,
                          generator=generator, step=step, extra=extra)
        _swap_in(folder, building)
    except BaseException as exc:
        full = full_disk_error(exc, final, building)
        shutil.rmtree(building, ignore_errors=True)
        if full is not None:
            raise full from None
        raise
    return final


def _write_checkpoint(directory: Path, state_path: Path, *, model, optimizer, scheduler, generator,
                      step: int, extra: dict) -> None:
    """Write the four files into ``directory``, ``state.json`` last (errors name ``state_path``)."""
    model_tensors, aliases = _model_tensors(model, state_path.with_name(MODEL_FILE))
    optimizer_tensors, optimizer_json = _split_optimizer(optimizer.state_dict())
    document = {
        "format": FORMAT_VERSION,
        "step": step,
        "model": {"aliases": aliases},
        "optimizer": {"class": type(optimizer).__name__, **_encode(optimizer_json, "optimizer", state_path)},
        "scheduler": {"class": type(scheduler).__name__,
                      "state": _encode(scheduler.state_dict(), "scheduler", state_path)},
        "generator": None if generator is None else _encode(generator.bit_generator.state, "generator", state_path),
        "extra": _encode(extra, "extra", state_path),
    }
    text = json.dumps(document, indent=1)
    _write_tensors(directory / MODEL_FILE, model_tensors)
    _write_tensors(directory / OPTIMIZER_FILE, optimizer_tensors)
    _write_tensors(directory / RNG_FILE, _torch_rng_states())
    _write_text(directory / STATE_FILE, text)
    _fsync_dir(directory)


def _model_tensors(model: torch.nn.Module, path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The model's tensors to store, each shared tensor once, and the aliases of the ones left out."""
    tensors: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    first_of: dict[tuple, str] = {}
    for name, tensor in model.state_dict().items():
        if not isinstance(tensor, torch.Tensor):
            raise CheckpointError(f"{path}: the model's state entry {name!r} is a {type(tensor).__name__}, "
                                  "not a tensor")
        view = _view_key(tensor)
        if view is not None and view in first_of:
            aliases[name] = first_of[view]
            continue
        if view is not None:
            first_of[view] = name
        tensors[name] = tensor
    return tensors, aliases


def _view_key(tensor: torch.Tensor) -> tuple | None:
    """What makes two tensors the same memory seen the same way (None for an empty tensor)."""
    if tensor.numel() == 0 or tensor.untyped_storage().data_ptr() == 0:
        return None
    return (tensor.device, tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
            tensor.stride(), tensor.dtype)


def _split_optimizer(state_dict: dict) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The optimiser state's tensors under flat keys, and the rest (non-tensor entries, parameter groups)."""
    tensors: dict[str, torch.Tensor] = {}
    entries: dict[str, dict[str, Any]] = {}
    for index, values in state_dict["state"].items():
        for name, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{name}"] = value
            else:
                entries.setdefault(str(index), {})[name] = value
    groups = []
    for g, group in enumerate(state_dict["param_groups"]):
        groups.append({name: value for name, value in group.items() if not isinstance(value, torch.Tensor)})
        tensors.update({f"param_groups.{g}.{name}": value for name, value in group.items()
                        if isinstance(value, torch.Tensor)})
    return tensors, {"param_groups": groups, "state": entries}


def _torch_rng_states() -> dict[str, torch.Tensor]:
    """torch's CPU generator state and, when CUDA is available, each device's."""
    states = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        states.update({f"cuda.{d}": state for d, state in enumerate(torch.cuda.get_rng_state_all())})
    return states


def _storable(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Detached contiguous tensors of which no two share memory (safetensors refuses shared memory)."""
    out: dict[str, torch.Tensor] = {}
    storages: set[tuple] = set()
    for name, tensor in tensors.items():
        tensor = tensor.detach()
        storage = (tensor.device, tensor.untyped_storage().data_ptr())
        if tensor.numel() and storage in storages:
            tensor = tensor.clone()
        storages.add(storage)
        out[name] = tensor.contiguous()
    return out


def _write_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """One safetensors file, flushed to disk."""
    save_file(_storable(tensors), str(path))
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def _write_text(path: Path, text: str) -> None:
    """One UTF-8 text file, flushed to disk."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_dir(directory: Path) -> None:
    """Flush a folder's entries to disk (where the system allows opening a folder)."""
    if os.name != "posix":  # pragma: no cover - Windows cannot open a folder
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_in(folder: Path, building: Path) -> None:
    """Replace ``folder/checkpoint`` by ``building``; on an exception the previous checkpoint is put back."""
    final, old = folder / CHECKPOINT_DIR, folder / _OLD_NAME
    if old.exists():  # left by a save killed after its swap (_recover has run: checkpoint exists)
        shutil.rmtree(old)
    previous = final.exists()
    if previous:
        os.replace(final, old)
    try:
        os.replace(building, final)
    except BaseException:
        if previous:
            os.replace(old, final)
        raise
    _fsync_dir(folder)
    shutil.rmtree(old, ignore_errors=True)


def _recover(folder: Path) -> None:
    """Put back a previous checkpoint that a save killed between its two renames left as ``.checkpoint.old``."""
    final, old = folder / CHECKPOINT_DIR, folder / _OLD_NAME
    if not final.exists() and old.is_dir():
        os.replace(old, final)


def _remove_unfinished(folder: Path) -> None:
    """Delete checkpoints that killed saves left half written."""
    for path in folder.glob(_NEW_PREFIX + "*"):
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- loading


def has_checkpoint(folder: Path) -> bool:
    """Whether ``folder`` holds a checkpoint with all its files (:func:`load_checkpoint` may still find it corrupt)."""
    directory = _checkpoint_dir(Path(folder))
    return directory is not None and all((directory / name).is_file() for name in FILES)


def load_checkpoint(folder: Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler) -> Resumed:
    """Restore the model, optimiser, scheduler and torch's generators in place from ``folder/checkpoint/``.

    Everything is read and checked before anything is changed, so a checkpoint that does not fit
    leaves the objects as they were.

    Args:
        folder: the run's folder, as given to :func:`save_checkpoint`.
        model: a model of the saved architecture (same keys, shapes and dtypes).
        optimizer: an optimiser of the saved class over the same parameters, grouped the same way.
        scheduler: a scheduler of the saved class on ``optimizer``.

    Returns:
        The saved step, the data generator in its saved state and the saved ``extra``.

    Raises:
        CheckpointError: no checkpoint, a missing, unreadable or corrupt file, an unknown format
            version, or a model, optimiser or scheduler that does not match the checkpoint.
    """
    folder = Path(folder)
    directory = _checkpoint_dir(folder)
    if directory is None:
        raise CheckpointError(f"{folder}: no checkpoint (expected a {CHECKPOINT_DIR}/ folder from save_checkpoint)")
    try:
        loaded = _read_checkpoint(directory, model, optimizer, scheduler)
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a hand-edited state.json
        raise CheckpointError(f"{directory / STATE_FILE}: malformed checkpoint: {_one_line(exc)}") from None
    document, model_state, optimizer_state, scheduler_state, rng_states, generator = loaded
    _apply(directory, model.load_state_dict, model_state, "the model")
    _apply(directory, scheduler.load_state_dict, scheduler_state, "the scheduler")
    _apply(directory, optimizer.load_state_dict, optimizer_state, "the optimizer")
    _apply(directory, _set_torch_rng_states, rng_states, "torch's generators")
    return Resumed(step=document["step"], generator=generator, extra=document["extra"])


def _read_checkpoint(directory: Path, model, optimizer, scheduler) -> tuple:
    """Read and check every file: the document, the states to restore and the numpy generator."""
    state_path = directory / STATE_FILE
    document = _read_state(state_path)
    model_state = _read_model(directory / MODEL_FILE, document["model"]["aliases"], model)
    optimizer_state = _read_optimizer(directory / OPTIMIZER_FILE, state_path, document["optimizer"], optimizer)
    scheduler_state = _scheduler_state(state_path, document["scheduler"], scheduler)
    rng_states = _read_rng(directory / RNG_FILE)
    saved = document["generator"]
    generator = None if saved is None else _restore_generator(state_path, saved)
    return document, model_state, optimizer_state, scheduler_state, rng_states, generator


def _checkpoint_dir(folder: Path) -> Path | None:
    """``folder/checkpoint``, or the previous checkpoint a save killed mid-swap left, or None."""
    for directory in (folder / CHECKPOINT_DIR, folder / _OLD_NAME):
        if directory.is_dir():
            return directory
    return None


def _read_state(path: Path) -> dict[str, Any]:
    """``state.json``, decoded and checked for its format version and fields."""
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (the checkpoint is incomplete)")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: cannot be read: {_one_line(exc)}") from None
    if not isinstance(document, dict) or "format" not in document:
        raise CheckpointError(f'{path}: expected an object with a "format" version (a prhsim checkpoint)')
    if document["format"] != FORMAT_VERSION:
        raise CheckpointError(f"{path}: unknown checkpoint format {document['format']!r} "
                              f"(this version of prhsim reads format {FORMAT_VERSION})")
    step = document.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f'{path}: "step" must be an integer of at least 0, got {step!r}')
    for key, kind in (("model", dict), ("optimizer", dict), ("scheduler", dict), ("generator", (dict, type(None))),
                      ("extra", dict)):
        if not isinstance(document.get(key), kind):
            raise CheckpointError(f'{path}: expected an object under "{key}"')
    if not isinstance(document["model"].get("aliases"), dict):
        raise CheckpointError(f'{path}: expected an object under "model": "aliases"')
    return {key: _decode(value) for key, value in document.items()}


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """All tensors of one safetensors file, on the CPU."""
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (the checkpoint is incomplete)")
    try:
        return load_file(str(path), device="cpu")
    except (OSError, ValueError, SafetensorError) as exc:
        raise CheckpointError(f"{path}: cannot be read: {_one_line(exc)}") from None


def _read_model(path: Path, aliases: dict[str, str], model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The saved model state, aliases filled in, checked against the model's keys, shapes and dtypes."""
    tensors = _read_tensors(path)
    for alias, source in aliases.items():
        if source not in tensors:
            raise CheckpointError(f"{path}: {alias!r} is tied to {source!r}, which the file does not hold")
        tensors[alias] = tensors[source]
    _check_model(path, model.state_dict(), tensors)
    return tensors


def _check_model(path: Path, expected: dict[str, Any], saved: dict[str, torch.Tensor]) -> None:
    """Raise on the first key the model and the checkpoint disagree on (in the model's order, then the file's)."""
    for name, tensor in expected.items():
        if name not in saved:
            raise CheckpointError(f"{path}: the model's {name!r} (shape {_shape(tensor)}) is not in the checkpoint")
        if tuple(tensor.shape) != tuple(saved[name].shape):
            raise CheckpointError(f"{path}: {name!r} has shape {_shape(tensor)} in the model "
                                  f"but {_shape(saved[name])} in the checkpoint")
        if tensor.dtype != saved[name].dtype:
            raise CheckpointError(f"{path}: {name!r} is {tensor.dtype} in the model "
                                  f"but {saved[name].dtype} in the checkpoint")
    for name, tensor in saved.items():
        if name not in expected:
            raise CheckpointError(f"{path}: the checkpoint's {name!r} (shape {_shape(tensor)}) is not in the model")


def _shape(tensor: torch.Tensor) -> list[int]:
    """A tensor's shape as a plain list, for messages."""
    return list(tensor.shape)


def _read_optimizer(path: Path, state_path: Path, saved: dict[str, Any],
                    optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimiser's saved ``state_dict``, rebuilt from both files and checked against ``optimizer``."""
    if saved.get("class") != type(optimizer).__name__:
        raise CheckpointError(f"{state_path}: the optimizer is a {type(optimizer).__name__} "
                              f"but the checkpoint's is a {saved.get('class')}")
    groups, entries = saved.get("param_groups"), saved.get("state")
    if not isinstance(groups, list) or not all(isinstance(g, dict) and isinstance(g.get("params"), list)
                                               for g in groups) or not isinstance(entries, dict):
        raise CheckpointError(f'{state_path}: expected "param_groups" (a list of groups with "params") '
                              'and "state" under "optimizer"')
    mine = [len(group["params"]) for group in optimizer.param_groups]
    theirs = [len(group["params"]) for group in groups]
    if mine != theirs:
        raise CheckpointError(f"{state_path}: the optimizer has {sum(mine)} parameters (groups of {mine}) "
                              f"but the checkpoint's has {sum(theirs)} (groups of {theirs})")
    state: dict[int, dict[str, Any]] = {int(index): dict(values) for index, values in entries.items()}
    for key, tensor in _read_tensors(path).items():
        where, index, name = _split_key(path, key)
        if where == "state":
            state.setdefault(index, {})[name] = tensor
        elif index < len(groups):
            groups[index][name] = tensor
        else:
            raise CheckpointError(f"{path}: {key!r} names parameter group {index} of {len(groups)}")
    return {"state": state, "param_groups": groups}


def _split_key(path: Path, key: str) -> tuple[str, int, str]:
    """``state.3.exp_avg`` as ("state", 3, "exp_avg")."""
    parts = key.split(".", 2)
    if len(parts) != 3 or parts[0] not in ("state", "param_groups") or not parts[1].isdigit():
        raise CheckpointError(f"{path}: unexpected tensor {key!r} (expected state.<i>.<name> or "
                              "param_groups.<g>.<name>)")
    return parts[0], int(parts[1]), parts[2]


def _scheduler_state(path: Path, saved: dict[str, Any], scheduler) -> dict[str, Any]:
    """The scheduler's saved ``state_dict``, checked to be of the scheduler's class."""
    if saved.get("class") != type(scheduler).__name__:
        raise CheckpointError(f"{path}: the scheduler is a {type(scheduler).__name__} "
                              f"but the checkpoint's is a {saved.get('class')}")
    if not isinstance(saved.get("state"), dict):
        raise CheckpointError(f'{path}: expected an object under "scheduler": "state"')
    return saved["state"]


def _read_rng(path: Path) -> dict[str, torch.Tensor]:
    """torch's saved generator states, checked to be uint8 vectors with a CPU one among them."""
    states = _read_tensors(path)
    if "cpu" not in states:
        raise CheckpointError(f"{path}: no 'cpu' generator state")
    for name, state in states.items():
        if state.dtype != torch.uint8 or state.dim() != 1:
            raise CheckpointError(f"{path}: generator state {name!r} must be a uint8 vector, "
                                  f"got {state.dtype} of shape {_shape(state)}")
    return states


def _set_torch_rng_states(states: dict[str, torch.Tensor]) -> None:
    """Set torch's CPU generator, and each CUDA device's that both the checkpoint and this machine have."""
    torch.set_rng_state(states["cpu"])
    if torch.cuda.is_available():
        for device in range(torch.cuda.device_count()):
            if f"cuda.{device}" in states:
                torch.cuda.set_rng_state(states[f"cuda.{device}"], device)


def _restore_generator(path: Path, state: dict[str, Any]) -> np.random.Generator:
    """A numpy generator whose bit generator has the saved state."""
    cls = _BIT_GENERATORS.get(state.get("bit_generator"))
    if cls is None:
        raise CheckpointError(f"{path}: unknown bit generator {state.get('bit_generator')!r} "
                              f"(expected one of {sorted(_BIT_GENERATORS)})")
    bit_generator = cls(0)
    try:
        bit_generator.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise CheckpointError(f"{path}: the generator state cannot be restored: {_one_line(exc)}") from None
    return np.random.Generator(bit_generator)


def _apply(directory: Path, restore, state, what: str) -> None:
    """Call ``restore(state)``, turning the errors torch raises on a state it rejects into a CheckpointError."""
    try:
        restore(state)
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{directory}: cannot restore {what}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


# ---------------------------------------------------------------------------------------------- JSON values


def _encode(value: Any, where: str, path: Path) -> Any:
    """``value`` as JSON values, tagging tuples, non-string-keyed dicts, Counters and numpy arrays."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, f"{where}[{i}]", path) for i, item in enumerate(value)]
        return {"__tuple__": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return _encode_dict(value, where, path)
    raise CheckpointError(f"{path}: {where} is a {type(value).__name__}, which JSON cannot hold")


def _encode_dict(value: dict, where: str, path: Path) -> dict:
    """A dict as a JSON object, or as tagged ``[key, value]`` pairs when its keys are not plain strings."""
    if not isinstance(value, Counter) and all(isinstance(key, str) for key in value) and not set(value) & set(_TAGS):
        return {key: _encode(item, f"{where}[{key!r}]", path) for key, item in value.items()}
    pairs = [[_encode(key, f"{where} key {key!r}", path), _encode(item, f"{where}[{key!r}]", path)]
             for key, item in value.items()]
    return {"__counter__" if isinstance(value, Counter) else "__items__": pairs}


def _decode(value: Any) -> Any:
    """The inverse of :func:`_encode`."""
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"__tuple__"}:
        return tuple(_decode(item) for item in value["__tuple__"])
    if set(value) == {"__ndarray__", "dtype"}:
        return np.array(value["__ndarray__"], dtype=np.dtype(value["dtype"]))
    if set(value) in ({"__items__"}, {"__counter__"}):
        pairs = [(_hashable(_decode(key)), _decode(item)) for key, item in next(iter(value.values()))]
        return Counter(dict(pairs)) if "__counter__" in value else dict(pairs)
    return {key: _decode(item) for key, item in value.items()}


def _hashable(key: Any) -> Any:
    """A decoded dict key: lists (never produced by :func:`_encode`) become tuples."""
    return tuple(key) if isinstance(key, list) else key
