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

Every problem is a :class:`FeatureFileError` naming the file: unreadable, unknown format,
no "feats", a shape that is not (N, D) or (N, L, D), fewer than 2 rows, NaN or inf.
Features are returned in float32 (bf16/f16 are widened; float64 is kept).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: Suffixes read as feature files.
SUFFIXES = (".npy", ".safetensors", ".pt", ".pth")


class FeatureFileError(ValueError):
    """A feature file that cannot be used; the message names the file and the problem."""


def load_features(path: Path | str, *, layers: bool = False) -> np.ndarray | list[np.ndarray]:
    """The features in ``path`` as an (N, L, D) array; with ``layers=True`` a per-layer list file
    as the list of its (N, D_l) arrays (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise FeatureFileError(f"{path}: no such file")
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
    if isinstance(data, dict):
        data = _pick(path, data)
    if isinstance(data, (list, tuple)):  # one (N, D) tensor per layer, as the PRH code also accepts
        if layers:
            if not data or not all(isinstance(t, torch.Tensor) and t.ndim == 2 for t in data):
                raise FeatureFileError(f"{path}: 'feats' as a list must hold one (N, D) tensor per layer")
            return [(t.float() if t.dtype in (torch.bfloat16, torch.float16) else t).detach().numpy() for t in data]
        data = _stack_layers(path, data, torch)
    if not isinstance(data, torch.Tensor):
        raise FeatureFileError(f"{path}: expected a tensor or a dict with 'feats', got {type(data).__name__}")
    if data.dtype in (torch.bfloat16, torch.float16):
        data = data.float()
    return data.detach().numpy()


def _stack_layers(path: Path, layers: list | tuple, torch) -> object:
    """A list of per-layer (N, D) tensors as one (N, L, D) tensor (every layer must have the same N and D)."""
    if not layers or not all(isinstance(t, torch.Tensor) for t in layers):
        raise FeatureFileError(f"{path}: 'feats' as a list must hold one tensor per layer")
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
    names = ", ".join(sorted(map(str, tensors))) or "none"
    raise FeatureFileError(f"{path}: no tensor named 'feats' (tensors: {names})")


def _checked(path: Path, raw: object, where: str = "") -> np.ndarray:
    x = np.asarray(raw)
    if x.dtype.name in ("bfloat16", "float16"):  # bf16 arrives as an ml_dtypes array where that package is installed
        x = x.astype(np.float32)
    if x.dtype.kind not in "fiu":
        raise FeatureFileError(f"{path}{where}: features must be numbers, got dtype {x.dtype}")
    if x.ndim == 2:
        x = x[:, None, :]
    if x.ndim != 3 or min(x.shape) < 1:
        raise FeatureFileError(f"{path}{where}: features must have shape (N, D) or (N, L, D), got {x.shape}")
    if x.shape[0] < 2:
        raise FeatureFileError(f"{path}{where}: needs at least 2 samples, got {x.shape[0]}")
    x = x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)
    if not np.all(np.isfinite(x)):
        raise FeatureFileError(f"{path}{where}: features contain NaN or inf")
    return x
