"""The text encoder of the caption learners: an MLP over the one-hot of (position, token) (docs/theory.md §5.1).

A token row ``x`` of T ids in ``0..V`` (V is the pad id) is read as the one-hot of every
(position, token) pair, a vector of T·(V+1) entries, and passed through an MLP
(:func:`prhsim.learners._encoders.mlp_apply`, GELU between layers). The first layer of that
MLP applied to a one-hot is a sum of T rows of its weight matrix; :func:`token_apply` still
forms the one-hot and multiplies, which is the faster of the two on a CPU under ``vmap``
(:func:`token_one_hot` with a numpy MLP is its twin in the tests).

The encoder reads tokens, never the state: two captions of one state reach the same
embedding only if the encoder learns it, and unseen states are embedded by generalisation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from prhsim.learners._encoders import mlp_apply, mlp_init


def token_one_hot(ids: np.ndarray, n_ids: int) -> np.ndarray:
    """The one-hot of every (position, token) of rows of ids (…, T) in ``0..n_ids−1``: (…, T·n_ids) float64."""
    ids = np.asarray(ids)
    T = ids.shape[-1]
    out = np.zeros(ids.shape[:-1] + (T, n_ids))
    np.put_along_axis(out, ids[..., None].astype(np.int64), 1.0, axis=-1)
    return out.reshape(ids.shape[:-1] + (T * n_ids,))


def token_init(key: Any, length: int, n_ids: int, k: int, hidden: tuple[int, ...]) -> dict[str, Any]:
    """The MLP ``T·n_ids → hidden… → k`` of :func:`prhsim.learners._encoders.mlp_init` (LeCun-normal weights)."""
    return mlp_init(key, length * n_ids, k, tuple(hidden))


def token_apply(params: Any, ids: Any) -> Any:
    """``mlp(one_hot(ids))`` for token rows ids (…, T) in JAX; jit- and vmap-able.

    The one-hot (…, T, n_ids) is reshaped to (…, T·n_ids) and multiplied by the first layer: on a
    CPU a dense product (and its transpose in the backward pass) runs several times faster than
    gathering T rows of the weight matrix and scattering their gradient back.
    """
    import jax

    W = params["layers"][0][0]
    T = ids.shape[-1]
    x = jax.nn.one_hot(ids, W.shape[0] // T, dtype=W.dtype).reshape(*ids.shape[:-1], W.shape[0])
    return mlp_apply(params, x)
