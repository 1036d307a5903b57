"""Next-token cross-entropy on a batch, written against the array API (docs/theory.md §5).

A softmax next-token model scores a context c and a token y by ``h(c)ᵀw_y + b_y``:

    −log p(y | c) = −h(c)ᵀw_y − b_y + log Σ_v exp(h(c)ᵀw_v + b_v).

The first term aligns the positive pair (context, next token); the log-partition is the
anti-collapse and negatives term. :func:`next_token_cross_entropy` is its batch mean, written
against the array API (numpy, JAX inside jit/grad/vmap, torch with autograd), with a
max-shifted log-sum-exp.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from array_api_compat import array_namespace, device as array_device, is_numpy_array, is_torch_array

from prhsim.objectives._arrays import like, upcast


def next_token_cross_entropy(h: Any, w: Any, y: Any, bias: Any = None) -> Any:
    """Mean softmax cross-entropy ``mean_b [−h_b·w_{y_b} − bias_{y_b} + logsumexp_v(h_b·w_v + bias_v)]``.

    Runs on numpy, JAX (inside jit, grad, vmap) and torch (autograd); 16-bit floats are
    computed in float32. The log-sum-exp is max-shifted and the target logit is taken after
    the shift, so logits of 1e3 or more are exact to rounding.

    Args:
        h: (B, k) context embeddings.
        w: (V, k) output (token) embeddings; converted to h's library when it is another one.
        y: (B,) integer next tokens in ``0 .. V − 1`` (checked on numpy and torch inputs;
            under JAX tracing an out-of-range token silently contributes a target logit of 0).
        bias: optional (V,) token biases.

    Returns:
        A 0-d array of h's library and compute dtype.

    Raises:
        ValueError: on shapes that do not match or (numpy, torch) tokens out of range.
        TypeError: on non-integer tokens or non-floating embeddings.

    Example:
        >>> import numpy as np
        >>> h, w = np.zeros((2, 3)), np.ones((4, 3))
        >>> bool(abs(next_token_cross_entropy(h, w, np.array([0, 3])) - np.log(4)) < 1e-15)
        True
    """
    xp, h = upcast(h)
    w = like(w, h)
    if h.ndim != 2 or w.ndim != 2 or h.shape[1] != w.shape[1]:
        raise ValueError(f"h and w must have shapes (B, k) and (V, k), got {tuple(h.shape)} and {tuple(w.shape)}")
    B, V = h.shape[0], w.shape[0]
    if B < 1 or V < 1:
        raise ValueError(f"the cross-entropy needs at least one context and one token, got h {tuple(h.shape)}, "
                         f"w {tuple(w.shape)}")
    if array_namespace(y) is not xp:
        y = xp.asarray(np.asarray(y), device=array_device(h))
    if not xp.isdtype(y.dtype, "integral"):
        raise TypeError(f"y must hold integer tokens, got dtype {y.dtype}")
    if tuple(y.shape) != (B,):
        raise ValueError(f"y must have shape ({B},) for h of shape {tuple(h.shape)}, got {tuple(y.shape)}")
    if is_numpy_array(y) or is_torch_array(y):
        lo, hi = int(xp.min(y)), int(xp.max(y))
        if lo < 0 or hi >= V:
            raise ValueError(f"tokens y must lie in 0..{V - 1}, got {lo if lo < 0 else hi}")
    logits = h @ xp.matrix_transpose(w)
    if bias is not None:
        bias = like(bias, h)
        if tuple(bias.shape) != (V,):
            raise ValueError(f"bias must have shape ({V},), got {tuple(bias.shape)}")
        logits = logits + bias[None, :]
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    onehot = xp.astype(y[:, None] == xp.arange(V, device=array_device(h))[None, :], shifted.dtype)
    target = xp.sum(onehot * shifted, axis=-1)
    return xp.mean(xp.log(xp.sum(xp.exp(shifted), axis=-1)) - target)
