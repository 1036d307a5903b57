"""Invariance (prediction) terms on a batch of views (docs/theory.md §1.1, §7).

Convention: the squared Euclidean norm is **summed** over the D embedding
coordinates and averaged over views and anchors, so the pairwise form is the
unbiased batch estimate of the alignment loss ``E_π‖f(z) − f(z')‖²`` of §1.1
(:func:`prhsim.optima.alignment_loss`). LeJEPA's code averages over D as well
(``(centre − e).square().mean()``); its value is ours divided by D: ``dims="mean"``
computes that form, which reproduces LeJEPA's balance against SIGReg at a given λ.

    >>> import numpy as np
    >>> a, b = np.zeros((4, 3)), np.ones((4, 3))
    >>> float(pairwise_invariance(a, b)), float(invariance(np.stack([a, b])))
    (3.0, 0.75)
"""

from __future__ import annotations

from typing import Any, Literal

from array_api_compat import array_namespace

#: How the squared norm treats the D coordinates: "sum" (this package's default, unbiased for
#: the alignment loss) or "mean" (LeJEPA's code: the sum divided by D).
Dims = Literal["sum", "mean"]


def _norm_sq(xp: Any, diff: Any, dims: Dims) -> Any:
    if dims == "sum":
        return xp.sum(diff * diff, axis=-1)
    if dims == "mean":
        return xp.mean(diff * diff, axis=-1)
    raise ValueError(f"dims must be 'sum' or 'mean', got {dims!r}")


def invariance(embeddings: Any, *, n_global: int | None = None, dims: Dims = "sum") -> Any:
    """LeJEPA's invariance: ``mean_{v,n} ‖e[v,n] − c[n]‖²`` with ``c[n] = mean_{g < n_global} e[g,n]``.

    Args:
        embeddings: (V, N, D): V views of N anchors (leading axes before V are
            batch axes and are averaged too).
        n_global: the first ``n_global`` views are the global views whose mean is
            the target; defaults to all V views.
        dims: "sum" the squared norm over D (default) or "mean" it (LeJEPA's code: the sum / D).

    The norm is summed over D; the mean runs over all V views (global ones
    included) and the N anchors. With two views, both global,
    ``invariance = pairwise_invariance(e[0], e[1]) / 4``.
    """
    xp = array_namespace(embeddings)
    if embeddings.ndim < 3:
        raise ValueError(f"embeddings must have shape (V, N, D), got {tuple(embeddings.shape)}")
    views = embeddings.shape[-3]
    g = views if n_global is None else n_global
    if int(g) != g or not 1 <= g <= views:
        raise ValueError(f"n_global must be an integer in [1, {views}], got {n_global}")
    centre = xp.mean(embeddings[..., :int(g), :, :], axis=-3, keepdims=True)
    diff = embeddings - centre
    return xp.mean(_norm_sq(xp, diff, dims))


def pairwise_invariance(a: Any, b: Any, *, dims: Dims = "sum") -> Any:
    """``mean_n ‖a_n − b_n‖²`` for paired embeddings a, b (…, N, D): the batch estimate of ``E_π‖f(z) − f(z')‖²``.

    The norm is summed over D (as in :func:`invariance`); with pairs
    ``(z_n, z'_n) ~ π`` its expectation is :func:`prhsim.optima.alignment_loss`.
    """
    xp = array_namespace(a, b)
    if a.shape != b.shape or a.ndim < 2:
        raise ValueError(f"a and b must share a shape (..., N, D), got {tuple(a.shape)} and {tuple(b.shape)}")
    diff = a - b
    return xp.mean(_norm_sq(xp, diff, dims))
