"""Feature files as the PRH benchmark writes them: read, checked, as N x L x D float arrays.

Formats (by suffix):

* ``.npy``: an array (N, D) (one layer) or (N, L, D);
* ``.safetensors``: the tensor named "feats", or the file's only tensor (needs ``safetensors``);
* ``.pt`` / ``.pth``: a dict holding "feats" (N x L x D, as the public PRH code saves it, or a
  list of one (N, D) tensor per layer, as the PRH code also accepts), or a tensor, read with
  ``torch.load(..., weights_only=True)`` (needs torch; nothing executable is unpickled).
  A list is stacked into (N, L, D) (its layers must share one width), or, with
  ``layers=True``, returned as the list of its (N, D_l) layers (widths may differ; the
  protocol clips each layer of a list on its own, as the PRH code does).

Every problem is a :class:`FeatureFileError` naming the file: missing or not a regular file (a folder, a
device, a symlink loop: :func:`file_problem`), unreadable, unknown format, no "feats", not real numbers, a shape
that is not (N, D) or (N, L, D) (or has no rows, layers or features), fewer than 2 rows, NaN or inf.
Features are returned in float32 (bf16/f16 are widened; float64 is kept).
"""

from __future__ import annotations

import errno
import stat
from pathlib import Path

import numpy as np

#: Suffixes read as feature files.
SUFFIXES = (".npy", ".safetensors", ".pt", ".pth")
#: The keys of a dict without "feats" (or tensors of a file) named in its error; the rest are counted.
NAMED_KEYS = 5


class FeatureFileError(ValueError):
    """A feature file that cannot be used; the message names the file and the problem."""


#: What a path that is not a regular file is, by the file type of its mode.
_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"),
          (stat.S_ISSOCK, "a socket"))


def file_problem(path: Path | str) -> str | None:
    """Why ``path`` cannot be read as a file, in a few words ("no such file", "is a directory", "is not a regular
    file (a character device)", "cannot be resolved (symlink loop)", ...), or None for a regular file (a symlink
    to one included)."""
    path = Path(path)
    try:
        mode = path.stat().st_mode  # follows symlinks
    except FileNotFoundError:
        return "no such file (a broken symlink)" if path.is_symlink() else "no such file"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "cannot be resolved (symlink loop)"
        if exc.errno == errno.ENOTDIR:
            return "no such file (a part of the path is a file, not a folder)"
        return f"cannot be reached ({exc.strerror or type(exc).__name__})"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), None)
        return "is not a regular file" + (f" ({kind})" if kind else "")
    return None


def _names(keys) -> str:
    """The first :data:`NAMED_KEYS` of ``keys`` (sorted) and how many more; "none" for none."""
    names = sorted(map(str, keys))
    more = f" and {len(names) - NAMED_KEYS} more" if len(names) > NAMED_KEYS else ""
    return ", ".join(names[:NAMED_KEYS]) + more if names else "none"


def load_features(path: Path | str, *, layers: bool = False) -> np.ndarray | list[np.ndarray]:
    """The features in ``path`` as an (N, L, D) array; with ``layers=True`` a per-layer list file
    as the list of its (N, D_l) arrays (see the module docstring)."""
    path = Path(path)
    problem = file_problem(path)
    if problem is not None:
        raise FeatureFileError(f"{path}: {problem}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            raw = np.load(path, allow_pickle=False)
        elif suffix == ".safetensors":
            raw = _safetensors(path)
        elif suffix in (".pt", ".pth"):
            raw = _torch(path, layers)
        else:
            raise FeatureFileError(f"{path}: unknown feature format {suffix or '(no suffix)'!r}; "
                                   f"expected one of {', '.join(SUFFIXES)}")
    except FeatureFileError:
        raise
    except Exception as exc:  # any reader failure is the file's problem, said in one line
        raise FeatureFileError(f"{path}: cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    if isinstance(raw, list):
        checked = [_checked(path, layer, f" layer {i}") for i, layer in enumerate(raw)]
        if len({x.shape[0] for x in checked}) != 1:
            raise FeatureFileError(f"{path}: the per-layer tensors must all have one number of samples N, "
                                   f"got {sorted({x.shape[0] for x in checked})}")
        return [x[:, 0, :] for x in checked]
    return _checked(path, raw)


def _safetensors(path: Path) -> np.ndarray:
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise FeatureFileError(f"{path}: reading .safetensors needs the safetensors package "
                               "(pip install 'prhsim[prh]')") from None
    try:
        tensors = load_file(str(path))
    except TypeError:  # bf16 has no numpy dtype: read the file through torch and widen
        try:
            from safetensors.torch import load_file as load_torch
        except ImportError:
            raise FeatureFileError(f"{path}: a bf16 .safetensors file needs torch to be read "
                                   "(pip install 'prhsim[torch]')") from None
        tensors = {name: t.float().numpy() if t.is_floating_point() else t.numpy()
                   for name, t in load_torch(str(path)).items()}
    return _pick(path, tensors)


def _torch(path: Path, layers: bool = False) -> np.ndarray | list[np.ndarray]:
    try:
        import torch
    except ImportError:
        raise FeatureFileError(f"{path}: reading .pt files needs torch (pip install 'prhsim[torch]')") from None
    data = torch.load(path, map_location="cpu", weights_only=True)
    key = None  # the dict's key the features are read from, for the errors
    if isinstance(data, dict):
        if "feats" not in data and not (len(data) == 1 and isinstance(next(iter(data.values())),
                                                                       (torch.Tensor, list, tuple))):
            raise FeatureFileError(f"{path}: the dict has no 'feats' key (keys: {_names(data)})")
        key = "feats" if "feats" in data else str(next(iter(data)))
        data = _pick(path, data)
    what = "the top-level list" if key is None else f"{key!r} as a list"
    if isinstance(data, (list, tuple)):  # one (N, D) tensor per layer, as the PRH code also accepts
        if layers:
            if not data or not all(isinstance(t, torch.Tensor) and t.ndim == 2 for t in data):
                raise FeatureFileError(f"{path}: {what} must hold one (N, D) tensor per layer, "
                                       f"got {_list_content(data, torch)}")
            return [(t.float() if t.dtype in (torch.bfloat16, torch.float16) else t).detach().numpy() for t in data]
        data = _stack_layers(path, data, torch, what)
    if not isinstance(data, torch.Tensor):
        raise FeatureFileError(f"{path}: expected a tensor or a dict with 'feats', got {type(data).__name__}"
                               if key is None else f"{path}: {key!r} holds {type(data).__name__}, expected a tensor "
                               "or a list of one (N, D) tensor per layer")
    if data.dtype in (torch.bfloat16, torch.float16):
        data = data.float()
    return data.detach().numpy()


def _list_content(items: list | tuple, torch) -> str:
    """What is wrong with a per-layer list, in a few words: empty, or its first item that is not an (N, D) tensor."""
    if not items:
        return "an empty list"
    for i, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            return f"{type(item).__name__} at index {i}"
        if item.ndim != 2:
            return f"a tensor of shape {tuple(item.shape)} at index {i}"
    return "a list of (N, D) tensors"


def _stack_layers(path: Path, layers: list | tuple, torch, what: str = "'feats' as a list") -> object:
    """A list of per-layer (N, D) tensors as one (N, L, D) tensor (every layer must have the same N and D)."""
    if not layers or not all(isinstance(t, torch.Tensor) for t in layers):
        raise FeatureFileError(f"{path}: {what} must hold one tensor per layer, got {_list_content(layers, torch)}")
    shapes = sorted({tuple(t.shape) for t in layers})
    if len(shapes) != 1 or len(shapes[0]) != 2:
        raise FeatureFileError(f"{path}: the per-layer tensors must all be (N, D) of one shape to stack, "
                               f"got shapes {', '.join(map(str, shapes))}")
    return torch.stack([t.float() if t.dtype in (torch.bfloat16, torch.float16) else t for t in layers], dim=1)


def _pick(path: Path, tensors: dict) -> object:
    if "feats" in tensors:
        return tensors["feats"]
    if len(tensors) == 1:
        return next(iter(tensors.values()))
    raise FeatureFileError(f"{path}: no tensor named 'feats' (tensors: {_names(tensors)})")


def _checked(path: Path, raw: object, where: str = "") -> np.ndarray:
    x = np.asarray(raw)
    if x.dtype.name in ("bfloat16", "float16"):  # bf16 arrives as an ml_dtypes array where that package is installed
        x = x.astype(np.float32)
    if x.dtype.kind not in "fiu":
        raise FeatureFileError(f"{path}{where}: features must be real numbers, got dtype {x.dtype}")
    shape = x.shape  # as the file holds it, for the errors
    if x.ndim not in (2, 3):
        raise FeatureFileError(f"{path}{where}: features must have shape (N, D) or (N, L, D), got {shape}")
    if shape[0] == 0:
        raise FeatureFileError(f"{path}{where}: has 0 rows (shape {shape}); needs at least 2 samples")
    if x.ndim == 3 and shape[1] == 0:
        raise FeatureFileError(f"{path}{where}: has 0 layers (shape {shape})")
    if shape[-1] == 0:
        raise FeatureFileError(f"{path}{where}: has 0 features per row (shape {shape})")
    if x.ndim == 2:
        x = x[:, None, :]
    if x.shape[0] < 2:
        raise FeatureFileError(f"{path}{where}: needs at least 2 samples, got {x.shape[0]}")
    x = x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)
    if not np.all(np.isfinite(x)):
        raise FeatureFileError(f"{path}{where}: features contain NaN or inf")
    return x
