"""Cross-representation retrieval after one orthogonal map (docs/theory.md §10).

Rows ``a_n``, ``b_n`` are paired; ``fit`` names the paired fitting subset F, the
other rows are the held-out set T. Every fitted quantity comes from F only:

1. centre each side with its mean over F, then L2-normalise every row
   (``x_n ← (x_n − μ_F)/‖x_n − μ_F‖``; a zero row stays zero);
2. reduce both sides to m dimensions by PCA on F: project onto the top m right
   singular vectors of that side's F rows (the rows of step 1, not re-centred), with
   ``m = min(d_a, d_b, |F| − 1, rank_a, rank_b)``: the F rows, centred on their
   mean, span at most |F| − 1 dimensions, and ``rank_x`` is the numerical rank of
   side x's F rows (singular values above ``σ_max · max(|F|, d) · eps``), so no kept
   direction is an arbitrary one that F does not determine (m = 0, a side constant
   on F, makes every score 0: a full tie);
3. fit one orthogonal map by Procrustes on F: ``Q = U Vᵀ`` from the SVD
   ``a_Fᵀ b_F = U S Vᵀ`` (m x m), the Q minimising ``‖a_F Q − b_F‖_F``;
4. on T, score every pair by cosine similarity, ``s_ij = cos(a_i Q, b_j)`` for the
   direction a → b and ``cos(b_j Qᵀ, a_i)`` for b → a (the same numbers up to
   rounding, since Q is orthogonal), and rank the |T| candidates for every query.

Recall at k is the mean over queries of the chance that the true partner is among the
top k when exact ties are broken uniformly at random: with g candidates scoring
strictly higher than the partner and e others scoring exactly equal to it, the query
contributes ``clip((k − g)/(e + 1), 0, 1)`` (1 when ``g + e < k``, 0 when ``g ≥ k``).
So a collapsed representation (all scores equal) scores the chance level ``k/|T|``,
neither 0 nor 1. k ≥ |T| gives 1.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, NamedTuple, Sequence

import numpy as np
from array_api_compat import device as array_device

from prhsim._budget import ensure_fits
from prhsim.metrics._cka import sample_pair, to_host

#: Entries of one block of the held-out score matrix (rows are scored in blocks of about this size).
BLOCK = 2**22


class Retrieval(NamedTuple):
    """Recall at each k, both directions: ``a_to_b[k]`` queries with a and retrieves among b."""

    a_to_b: dict[int, float]
    b_to_a: dict[int, float]


def _fit_indices(fit: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(fit rows, held-out rows)`` from a boolean mask (N,) or an index array."""
    f = to_host(fit)
    if f.dtype == bool:
        if f.shape != (n,):
            raise ValueError(f"a boolean fit mask must have shape ({n},), got {f.shape}")
        idx = np.flatnonzero(f)
    else:
        if f.ndim != 1 or not (f.size == 0 or np.issubdtype(f.dtype, np.integer)):
            raise ValueError(f"fit must be a boolean mask of shape ({n},) or a 1-D integer index array")
        idx = f.astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"fit indices must lie in [0, {n}), got range [{idx.min()}, {idx.max()}]")
        if np.unique(idx).size != idx.size:
            raise ValueError("fit indices must be distinct")
        idx = np.sort(idx)
    held = np.setdiff1d(np.arange(n), idx)
    if idx.size < 2:
        raise ValueError(f"the fitting subset needs at least 2 rows, got {idx.size}")
    if held.size < 2:
        raise ValueError(f"retrieval needs at least 2 held-out rows (not in fit), got {held.size}")
    return idx, held


def _unit_rows(xp: Any, x: Any) -> Any:
    """Rows scaled to unit norm; zero rows stay zero."""
    norm = xp.sqrt(xp.sum(x * x, axis=1, keepdims=True))
    return x / xp.where(norm > 0, norm, xp.ones_like(norm))


def _pca(xp: Any, rows: Any) -> tuple[Any, int]:
    """The right singular vectors (d x r) of ``rows`` and their numerical rank."""
    _, s, vt = xp.linalg.svd(rows, full_matrices=False)
    s = to_host(s)
    eps = float(xp.finfo(rows.dtype).eps)
    rank = int(np.sum(s > s[0] * max(rows.shape) * eps)) if s.size and s[0] > 0 else 0
    return xp.matrix_transpose(vt), rank


def _recall(xp: Any, queries: Any, keys: Any, ks: tuple[int, ...]) -> dict[int, float]:
    """Tie-aware recall at each k: query i's partner is key i."""
    q, keys = _unit_rows(xp, queries), _unit_rows(xp, keys)
    t = q.shape[0]
    dev = array_device(q)
    cols = xp.arange(t, device=dev)
    step = max(1, BLOCK // t)
    higher, equal = [], []
    for r0 in range(0, t, step):
        r1 = min(t, r0 + step)
        s = q[r0:r1, :] @ xp.matrix_transpose(keys)
        own = cols[None, :] == xp.arange(r0, r1, device=dev)[:, None]
        partner = xp.sum(xp.where(own, s, xp.zeros_like(s)), axis=1)[:, None]
        higher.append(to_host(xp.sum(xp.astype(s > partner, xp.int64), axis=1)))
        equal.append(to_host(xp.sum(xp.astype(s == partner, xp.int64), axis=1)) - 1)
    g, e = np.concatenate(higher).astype(float), np.concatenate(equal).astype(float)
    return {k: float(np.mean(np.clip((k - g) / (e + 1.0), 0.0, 1.0))) for k in ks}


def retrieval(a: Any, b: Any, *, fit: Any, ks: Sequence[int] = (1, 5, 10)) -> Retrieval:
    """Recall@k of paired retrieval on held-out rows after one orthogonal map fitted on ``fit``.

    Args:
        a: (N, d_a) representation, numpy, torch or JAX.
        b: (N, d_b) representation of the same N inputs (widths may differ).
        fit: the fitting subset: a boolean mask (N,) or distinct row indices (numpy or
            the inputs' library).
        ks: the cut-offs k (positive ints).

    Returns:
        :class:`Retrieval` with ``{k: R@k}`` for a → b and b → a (see the module docstring).

    Raises:
        ValueError: the input errors of :func:`prhsim.metrics._cka.linear_cka` (apart from
            zero variance), a bad ``fit``, fewer than 2 fitting or held-out rows, bad ks.

    Example:
        >>> import numpy as np
        >>> a = np.random.default_rng(0).normal(size=(40, 3))
        >>> r = retrieval(a, a[:, ::-1], fit=np.arange(20), ks=(1,))
        >>> r.a_to_b[1], r.b_to_a[1]
        (1.0, 1.0)
    """
    ks = tuple(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {ks!r}")
    ks = tuple(int(k) for k in ks)
    xp, a, b = sample_pair(a, b, what="retrieval")
    n = a.shape[0]
    idx, held = _fit_indices(fit, n)
    t = held.size
    ensure_fits((xp.finfo(a.dtype).bits // 8) * (3.0 * min(t * t, BLOCK) + 4.0 * n * (a.shape[1] + b.shape[1])),
                f"retrieval among {t:,} held-out rows", "use fewer held-out rows")
    dev = array_device(a)
    fit_i, held_i = xp.asarray(idx, device=dev), xp.asarray(held, device=dev)
    units, bases, m = [], [], min(a.shape[1], b.shape[1], idx.size - 1)
    for x in (a, b):
        mu = xp.mean(xp.take(x, fit_i, axis=0), axis=0, keepdims=True)
        x = _unit_rows(xp, x - mu)
        basis, rank = _pca(xp, xp.take(x, fit_i, axis=0))
        units.append(x)
        bases.append(basis)
        m = min(m, rank)
    if m == 0:  # a side constant on F: every score is 0, a full tie
        chance = {k: chance_recall(held.size, k) for k in ks}
        return Retrieval(chance, dict(chance))
    (a_fit, a_held), (b_fit, b_held) = (
        (xp.take(y, fit_i, axis=0), xp.take(y, held_i, axis=0)) for y in (x @ v[:, :m] for x, v in zip(units, bases)))
    u, _, vt = xp.linalg.svd(xp.matrix_transpose(a_fit) @ b_fit)
    q = u @ vt
    return Retrieval(_recall(xp, a_held @ q, b_held, ks), _recall(xp, b_held @ xp.matrix_transpose(q), a_held, ks))


def chance_recall(held_out: int, k: int) -> float:
    """``min(k, T)/T``: recall at k of a random ranking of T held-out candidates."""
    return min(k, held_out) / held_out if held_out > 0 else math.nan
