"""CKA's building blocks in any array library (docs/theory.md §10): centring, the RBF Gram, the unbiased HSIC.

Shared by the registered scores (:mod:`prhsim.metrics._cka`), the permuted-pair route under them and their null
(:mod:`prhsim.metrics._cka_permuted`), and SVCCA, which centres too.
Every function takes the array namespace ``xp`` and computes in the input's library, device and dtype.
"""

from __future__ import annotations

from typing import Any

from array_api_compat import device as array_device


def centre(xp: Any, x: Any) -> Any:
    """x with each column's mean subtracted."""
    return x - xp.mean(x, axis=0, keepdims=True)


def gram_route(n: int, da: int, db: int) -> bool:
    """Use the N x N Gram matrices when they are smaller than the d x d cross-products."""
    return 3 * n * n < da * db + da * da + db * db


def median_entry(xp: Any, x: Any) -> Any:
    """Median of all entries (mean of the two middle values for an even count)."""
    flat = xp.sort(xp.reshape(x, (-1,)))
    m = flat.shape[0]
    return flat[m // 2] if m % 2 else (flat[m // 2 - 1] + flat[m // 2]) / 2.0


def rbf_gram(xp: Any, name: str, x: Any, sigma: float, relative: bool = True) -> Any:
    """The centred Gaussian Gram matrix of x, bandwidth ``σ² = sigma²·median(D²)`` (``relative=False``: σ = sigma)."""
    xc = centre(xp, x)
    n = xc.shape[0]
    sq = xp.sum(xc * xc, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (xc @ xp.matrix_transpose(xc))
    off = 1.0 - xp.eye(n, dtype=x.dtype, device=array_device(x))
    d2 = xp.clip(d2, 0.0, None) * off  # rounding: no negative squared distances, zero diagonal
    med = median_entry(xp, d2) if relative else 1.0
    if not float(med) > 0.0:
        raise ValueError(f"{name} has median pairwise distance 0 (most rows coincide): the RBF bandwidth is undefined")
    K = xp.exp(-d2 / (2.0 * sigma * sigma * med))
    return K - xp.mean(K, axis=0, keepdims=True) - xp.mean(K, axis=1, keepdims=True) + xp.mean(K)


def hsic_u(n: int, tr: Any, one_k: Any, one_l: Any, kl: Any) -> Any:
    """Song et al.'s unbiased HSIC from ``tr(K̃L̃)``, ``1ᵀK̃1``, ``1ᵀL̃1`` and ``1ᵀK̃L̃1``."""
    return (tr + one_k * one_l / ((n - 1) * (n - 2)) - 2.0 * kl / (n - 2)) / (n * (n - 3))
