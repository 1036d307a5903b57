"""Array-API helpers shared by the batch objectives: one namespace, one compute dtype.

The objectives compute with ``array_api_compat.array_namespace(x)`` of their
main input, so they run unchanged on numpy, JAX (inside jit/grad/vmap) and
torch (autograd, any device). This module imports neither torch nor jax.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from array_api_compat import array_namespace, device as array_device


def compute_dtype(xp: Any, dtype: Any) -> Any:
    """The dtype a statistic is computed in: float32 for 16-bit floats (bf16, f16), else ``dtype``."""
    if not xp.isdtype(dtype, "real floating"):
        raise TypeError(f"expected real floating inputs, got {dtype}")
    return xp.float32 if xp.finfo(dtype).bits < 32 else dtype


def upcast(x: Any) -> tuple[Any, Any]:
    """``(xp, x)`` with x cast to its compute dtype (16-bit floats to float32)."""
    xp = array_namespace(x)
    dtype = compute_dtype(xp, x.dtype)
    return xp, (x if x.dtype == dtype else xp.astype(x, dtype))


def like(a: Any, x: Any) -> Any:
    """``a`` as an array of x's library, device and dtype (autograd kept when already in that library).

    Lets a caller pass numpy constants (directions, a state law) next to JAX or
    torch arrays.
    """
    xp = array_namespace(x)
    try:
        same = array_namespace(a) is xp
    except TypeError:  # a Python scalar or list
        same = False
    if same:
        return a if a.dtype == x.dtype else xp.astype(a, x.dtype)
    return xp.asarray(np.asarray(a), dtype=x.dtype, device=array_device(x))
