"""Exact k-nearest neighbours by inner product, in tiles: the search under the k-NN metrics (docs/theory.md §10).

For rows x_1..x_N (numpy arrays, torch tensors on any device, or JAX arrays; the
work runs in the input's library and on its device, in float32 or wider, 16-bit
floats upcast), ``N_k(i)`` is the set of the k rows j ≠ i with the largest
inner products ⟨x_i, x_j⟩. :func:`knn_search` returns each row's list ranked by
the key (−⟨x_i, x_j⟩, j), so among equal inner products the smaller index wins.
Rows that are equal (entry by entry, as the search sees them: the rows as
given, or the L2-normalised rows x̂_i = x_i / ‖x_i‖ formed tile by tile from
``scale``) are one point: the search runs on the distinct rows and every copy
of a row gets that row's one inner product, so copies tie exactly however the
products are tiled, on every library and CPU (:mod:`prhsim.metrics._knn_ties`).
Other ties are decided on the computed values: two products of different rows
that agree in exact arithmetic can differ in the last bit when formed by
different kernels, so the rule is identical across numpy, torch, JAX and tile
sizes where those products are exact (e.g. small integers; ±1 entries with d a
power of 4 after normalisation). A copy of a row is a neighbour like any other,
at the inner product of equal rows.

Cost. The N x N inner products are formed in square tiles of side ``block``
(B), using the symmetry ⟨x_i, x_j⟩ = ⟨x_j, x_i⟩: each pair of row blocks is
multiplied once, about N²d/2 multiply-adds in all. The diagonal tiles give
every row a first k-list by partial selection (``np.partition``,
``torch.topk``; never a full sort); an off-diagonal tile then only offers each
row the entries at or above its current k-th inner product, and candidate
lists are merged by the key above. JAX, which compiles every operation for
every new shape, runs fused fixed-shape steps instead (``jax.lax.top_k`` on
every tile). Memory: a few B x B tiles plus O(N·k), never an N x N array; the
default B keeps one tile near 64 MB. Rows are normalised block by block as the
tiles need them (no normalised copy of the inputs).

Screen. For numpy arrays and torch tensors, ``screen`` (None: where it pays,
:func:`prhsim.metrics._knn_screen.wanted`) screens the tiles at bf16 precision instead
(bf16 products on CPUs with bf16 matrix units, float32 products truncated to bf16 on
other CPUs), keeps per row the candidates a proven error bound cannot rule out, and
recomputes those in the compute dtype (:mod:`prhsim.metrics._knn_screen`,
docs/theory.md §10): the same neighbours, about twice as fast as these tiles on CPUs. Rows whose screen pools overflow take the exact tiles
(:func:`_exact_rows`).

The argument checks the k-NN metrics share (:func:`as_compute`,
:func:`as_compute_pair`, :func:`check_block`,
:func:`check_screen`, :func:`guard_lists`) live here too.
"""

from __future__ import annotations

import functools
import math
from numbers import Integral
from typing import Any

import numpy as np
from array_api_compat import (
    array_namespace,
    device as array_device,
    is_jax_array,
    is_numpy_array,
    is_torch_array,
)

from prhsim._budget import ensure_fits
from prhsim.metrics import _knn_screen
from prhsim.metrics._knn_ties import (
    GATHER_ELEMENTS,
    duplicate_groups,
    expand,
    row_chunks,
    top_by_key,
    unit_rows,
)

#: Bytes of one similarity tile (B x B) with the default block size.
TILE_BYTES = 64 * 2**20
#: Most candidates per row an off-diagonal tile may offer before the tile is selected from in full.
PRUNE_SLACK = 64
#: numpy tiles: blocks per neighbour in the block-maximum bound of :func:`_block_max_floor`.
BLOCK_MAX_BLOCKS = 4
#: numpy tiles: most steps of :func:`_kth_by_descent` before a partition of the row instead.
DESCENT_ROUNDS = 3


# --------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------
def as_compute(x: Any, name: str) -> tuple[Any, Any]:
    """``(xp, x)``: a 2-D, finite, real floating array in its compute dtype (16-bit floats to float32)."""
    xp = array_namespace(x)
    if is_torch_array(x):
        x = x.detach()
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (N, d), got shape {tuple(x.shape)}")
    if not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(f"{name} must hold real floating-point values, got {x.dtype}")
    if xp.finfo(x.dtype).bits < 32:
        x = xp.astype(x, xp.float32)
    for r0, r1 in row_chunks(*x.shape):
        if not bool(xp.all(xp.isfinite(x[r0:r1, ...]))):
            raise ValueError(f"{name} contains NaN or inf")
    return xp, x


def check_block(block: Any) -> int | None:
    if block is None:
        return None
    if isinstance(block, bool) or not isinstance(block, Integral):
        raise TypeError(f"block must be an integer or None, got {block!r}")
    if block < 1:
        raise ValueError(f"block must be at least 1, got {block}")
    return int(block)

def check_screen(screen: Any, x: Any) -> bool | None:
    """screen as True, False or None (automatic), or a one-line error (True where the screen cannot run)."""
    if screen is not None and not isinstance(screen, bool):
        raise TypeError(f"screen must be True, False or None, got {screen!r}")
    if screen:
        if not _knn_screen.available(x):
            raise ValueError(f"screen=True needs numpy arrays or CPU/CUDA torch tensors (and torch installed), "
                             f"got {type(x).__module__}.{type(x).__name__}")
    return screen


def row_max_abs(xp: Any, x: Any) -> Any:
    """Each row's largest |entry|, shape (N, 1) (0 for rows of width 0)."""
    n, d = x.shape
    if d == 0:
        return xp.zeros((n, 1), dtype=x.dtype, device=array_device(x))
    return xp.concat([xp.maximum(xp.max(x[r0:r1, ...], axis=1, keepdims=True),  # no |x| temporary
                                 -xp.min(x[r0:r1, ...], axis=1, keepdims=True)) for r0, r1 in row_chunks(n, d)],
                     axis=0)


def row_scale(xp: Any, x: Any, name: str) -> tuple[Any, Any]:
    """``(m, r)``, each (N, 1): m_i = max_j |x_ij| and r_i = ‖x_i / m_i‖, so x̂_i = (x_i / m_i) / r_i.

    Scaling by the largest entry first keeps the squares from overflowing; a
    one-line error names the first zero row.
    """
    m = row_max_abs(xp, x)
    zero = xp.reshape(m == 0, (-1,))
    if bool(xp.any(zero)):
        row = int(xp.argmax(xp.astype(zero, xp.int32)))
        raise ValueError(f"row {row} of {name} is zero: it cannot be L2-normalised")
    r = []
    for r0, r1 in row_chunks(*x.shape):
        y = x[r0:r1, ...] / m[r0:r1, ...]
        r.append(xp.sqrt(xp.vecdot(y, y, axis=-1))[:, None])
    return m, xp.concat(r, axis=0)


def normalised_rows(xp: Any, x: Any, name: str) -> Any:
    """x with L2-normalised rows (an N x d copy), or a one-line error naming a zero row."""
    m, r = row_scale(xp, x, name)
    return unit_rows(x, (m, r))


def as_compute_pair(a: Any, b: Any) -> tuple[Any, Any, Any]:
    """``(xp, a, b)``: both inputs validated (2-D, finite, same N, one library), in their compute dtypes."""
    array_namespace(a, b)  # a TypeError when the two come from different libraries
    xp, a = as_compute(a, "a")
    _, b = as_compute(b, "b")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"a and b must have the same number of rows N, got {a.shape[0]} and {b.shape[0]}")
    return xp, a, b


def _index_dtype(xp: Any, x: Any) -> Any:
    return xp.arange(1, device=array_device(x)).dtype


def _cast(xp: Any, x: Any, dtype: Any) -> Any:
    """x as dtype, without a copy when it already is."""
    return x if x.dtype == dtype else xp.astype(x, dtype)


def guard_lists(n: int, k: int, lists: int, what: str) -> None:
    """Refuse neighbour lists that cannot fit (k close to N makes them N x N)."""
    ensure_fits(lists * 3.0 * n * k * 8, f"{lists} k-nearest-neighbour lists {what} (N = {n}, k = {k})",
                "lower k or N")


# --------------------------------------------------------------------------------------
# selection in one tile
# --------------------------------------------------------------------------------------
def _default_block(n: int, d: int, itemsize: int) -> int:
    """Tile side B with B² + 2·B·d elements near TILE_BYTES (one tile plus its two row blocks), at most N."""
    elements = TILE_BYTES // itemsize
    return max(1, min(n, math.isqrt(elements + d * d) - d))


def _fill_diagonal(xp: Any, s: Any) -> Any:
    """A square tile with -inf on its diagonal (in place where the library allows)."""
    if is_numpy_array(s):
        np.fill_diagonal(s, -np.inf)
        return s
    if is_torch_array(s):
        return s.fill_diagonal_(-math.inf)
    r = xp.arange(s.shape[0], device=array_device(s))
    if is_jax_array(s):
        return s.at[r, r].set(-math.inf)
    return xp.where(r[:, None] == r[None, :], xp.asarray(-math.inf, dtype=s.dtype, device=array_device(s)), s)


def _kth_largest(xp: Any, s: Any, k: int) -> tuple[Any, tuple[Any, Any] | None]:
    """The k-th largest value of each row (k < width), and the top-k lists when no row ties at the boundary.

    The second item is None when the library has no partial selection with
    indices or when some row's (k+1)-th value equals its k-th (the tie rule then
    decides membership). numpy selects with one ``np.argpartition`` of the row's
    top k + 1 (the values are read from the tile, so they are the tile's own).
    """
    width = s.shape[1]
    if is_torch_array(s):
        import torch

        vals, idx = torch.topk(s, k + 1, dim=1)
        kth = vals[:, k - 1]
        if not bool(torch.any(vals[:, k] == kth)):
            return kth, (vals[:, :k], idx[:, :k])
        return kth, None
    if is_numpy_array(s):
        idx = np.argpartition(s, width - k - 1, axis=1)[:, width - k - 1:]  # column 0: the (k+1)-th largest
        vals = np.take_along_axis(s, idx, axis=1)
        kth = vals[:, 1:].min(axis=1)
        if not np.any(vals[:, 0] == kth):
            return kth, (vals[:, 1:], idx[:, 1:])
        return kth, None
    return xp.sort(s, axis=1)[:, width - k], None


def _block_max_floor(s: np.ndarray, k: int) -> np.ndarray:
    """A lower bound on each row's k-th largest value: the k-th largest of its blocks' maxima.

    The row splits into ``BLOCK_MAX_BLOCKS * k`` blocks of consecutive columns; k blocks have a maximum at or
    above the bound, so at least k entries are, and the entries at or above it hold the row's top k with every
    tie at the k-th value. One reduction and a partition of a few maxima replace a partition of the whole row.
    """
    width = s.shape[1]
    blocks = BLOCK_MAX_BLOCKS * k
    starts = (np.arange(blocks) * width) // blocks  # increasing, every block non-empty (width >= blocks)
    maxima = np.maximum.reduceat(s, starts, axis=1)
    return np.partition(maxima, blocks - k, axis=1)[:, blocks - k]


def _kth_by_descent(s: np.ndarray, k: int, rounds: int = DESCENT_ROUNDS) -> np.ndarray | None:
    """Each row's k-th largest value by stepping down its distinct values from the maximum, or None.

    v is the k-th largest exactly when #{s >= v} >= k > #{s > v}: start at the row's maximum and step to the
    next lower distinct value while fewer than k entries are at or above it. Rows whose top k hold few
    distinct values (ties) settle in a pass or two, where a partition of the row is slow; None when some
    row needs more than ``rounds`` steps.
    """
    v = s.max(axis=1)
    for _ in range(rounds):
        short = np.count_nonzero(s >= v[:, None], axis=1) < k
        if not short.any():
            return v
        rows = np.flatnonzero(short)
        part = s[rows]
        v[rows] = np.where(part < v[rows, None], part, -np.inf).max(axis=1)
    return v if np.all(np.count_nonzero(s >= v[:, None], axis=1) >= k) else None


def _select(xp: Any, s: Any, k: int, offset: int, sentinel: int, idt: Any) -> tuple[Any, Any]:
    """Each row's top min(k, width) columns of tile ``s`` under the tie rule, sorted; indices shifted by offset."""
    rows, width = s.shape
    dev = array_device(s)
    if k >= width:
        idx = xp.broadcast_to(xp.arange(offset, offset + width, dtype=idt, device=dev)[None, :], (rows, width))
        return top_by_key(xp, s, idx, width)
    kth = direct = None
    if is_numpy_array(s) and width >= BLOCK_MAX_BLOCKS * k:
        offered = _offers(xp, s, _block_max_floor(s, k), offset, False, sentinel, idt, limit=k + PRUNE_SLACK)
        if offered is not None:
            return top_by_key(xp, *offered, k)
        kth = _kth_by_descent(s, k)  # many entries tie near the top: a few passes over distinct values may settle
    if kth is None:
        kth, direct = _kth_largest(xp, s, k)
    if direct is not None:
        vals, idx = direct
        return top_by_key(xp, vals, _cast(xp, idx, idt) + offset, k)
    # every entry at or above the k-th value, ranked by the key (-value, index)
    offered = _offers(xp, s, kth, offset, False, sentinel, idt, limit=k + PRUNE_SLACK)
    if offered is not None:
        return top_by_key(xp, *offered, k)
    # many entries equal to some row's k-th value: the entries above it, then the lowest-index equal ones
    chunk = max(1, GATHER_ELEMENTS // width)
    parts = []
    for r0 in range(0, rows, chunk):
        part, t = s[r0:r0 + chunk, ...], kth[r0:r0 + chunk, None]
        above = part > t
        need = k - xp.sum(above, axis=1)
        equal = part == t
        rank = xp.cumulative_sum(xp.astype(equal, xp.int32), axis=1, dtype=xp.int32)
        selected = above | (equal & (rank <= need[:, None]))
        del above, equal, rank
        flat = xp.nonzero(xp.reshape(selected, (-1,)))[0]
        cols = xp.reshape(_cast(xp, flat % width, idt), (part.shape[0], k))
        parts.append(top_by_key(xp, xp.take_along_axis(part, cols, axis=1), cols + offset, k))
    return xp.concat([v for v, _ in parts], axis=0), xp.concat([i for _, i in parts], axis=0)


def _offers(xp: Any, s: Any, threshold: Any, offset: int, transposed: bool, sentinel: int, idt: Any,
            limit: int) -> tuple[Any, Any] | None:
    """The entries of each row (of s, or of sᵀ when transposed) at or above its threshold, padded to one width.

    Returns (values, indices), padding with (-inf, sentinel), or None when some
    row offers more than ``limit`` entries (select from the tile in full instead).
    """
    dev = array_device(s)
    mask = s >= (threshold[None, :] if transposed else threshold[:, None])
    counts = _cast(xp, xp.sum(mask, axis=0 if transposed else 1), idt)
    most = int(xp.max(counts))
    if most > limit:
        return None
    if most == 0:
        return (xp.zeros((counts.shape[0], 0), dtype=s.dtype, device=dev),
                xp.zeros((counts.shape[0], 0), dtype=idt, device=dev))
    flat = _cast(xp, xp.nonzero(xp.reshape(mask, (-1,)))[0], idt)
    del mask
    vals = xp.take(xp.reshape(s, (-1,)), flat)
    width = s.shape[1]
    if transposed:
        row, col = flat % width, flat // width
        order = xp.argsort(row, stable=True)  # group by row, columns stay ascending
        col, vals = xp.take(col, order), xp.take(vals, order)
    else:
        col = flat % width
    starts = xp.cumulative_sum(counts) - counts
    slot = xp.arange(most, dtype=idt, device=dev)[None, :]
    valid = slot < counts[:, None]
    where = xp.reshape(xp.where(valid, starts[:, None] + slot, xp.zeros_like(slot)), (-1,))
    shape = (counts.shape[0], most)
    vals = xp.where(valid, xp.reshape(xp.take(vals, where), shape),
                    xp.asarray(-math.inf, dtype=s.dtype, device=dev))
    col = xp.where(valid, xp.reshape(xp.take(col, where), shape) + offset,
                   xp.asarray(sentinel, dtype=idt, device=dev))
    return vals, col


def _update(xp: Any, best: tuple[Any, Any], s: Any, k: int, offset: int, transposed: bool, sentinel: int,
            idt: Any) -> tuple[Any, Any]:
    """Merge one tile's offers into the running k-lists ``best`` of its rows."""
    vals, idx = best
    if vals.shape[1] == k:
        threshold = vals[:, k - 1]
    else:
        threshold = xp.full((vals.shape[0],), -math.inf, dtype=vals.dtype, device=array_device(vals))
    new = _offers(xp, s, threshold, offset, transposed, sentinel, idt, limit=k + PRUNE_SLACK)
    if new is None:
        if transposed:
            s = xp.permute_dims(s, (1, 0))
            s = np.ascontiguousarray(s) if is_numpy_array(s) else (s.contiguous() if is_torch_array(s) else s)
        new = _select(xp, s, k, offset, sentinel, idt)
    if new[0].shape[1] == 0:
        return best
    return top_by_key(xp, xp.concat([vals, new[0]], axis=1), xp.concat([idx, new[1]], axis=1), k)


@functools.lru_cache(maxsize=None)
def _jax_steps() -> tuple[Any, Any, Any]:
    """The JAX tile steps, each compiled as one function (JAX compiles every operation for every new
    shape; fused, a call compiles a few functions per tile shape instead of dozens of operations).

    Selection there is fixed-shape: ``lax.top_k`` of k + margin candidates on every tile (no
    pruning, whose candidate counts depend on the data), ranked by the key (-value, index). That is
    exact unless some row's last candidate equals its k-th value (an equal value may then lie
    outside the candidates); the step reports it, and the caller retries with a wider margin, at
    last with ``margin=None``: a stable sort of the tile, which ranks equal values by index.
    """
    import jax
    import jax.numpy as jnp
    from jax import lax

    def top(vals, idx, k):
        order = jnp.argsort(idx, axis=1, stable=True)
        vals, idx = jnp.take_along_axis(vals, order, axis=1), jnp.take_along_axis(idx, order, axis=1)
        order = jnp.argsort(-vals, axis=1, stable=True)[:, :k]
        return jnp.take_along_axis(vals, order, axis=1), jnp.take_along_axis(idx, order, axis=1)

    def choose(s, offset, k, idt, margin):
        width = s.shape[1]
        if k >= width or (margin is not None and k + margin >= width):
            idx = jnp.broadcast_to(jnp.arange(width, dtype=idt)[None, :], s.shape) + offset
            return (*top(s, idx, min(k, width)), jnp.asarray(False))
        if margin is None:
            idx = jnp.argsort(-s, axis=1, stable=True)[:, :k]
            return jnp.take_along_axis(s, idx, axis=1), idx.astype(idt) + offset, jnp.asarray(False)
        # the barrier keeps XLA from rewriting top_k as a full sort of the tile when its values are compared
        vals, idx = lax.optimization_barrier(lax.top_k(s, k + margin))
        unsure = jnp.any(vals[:, -1] == vals[:, k - 1])
        return (*top(vals, idx.astype(idt) + offset, k), unsure)

    def unit(x, scale):
        return x if scale is None else (x / scale[0]) / scale[1]

    def diagonal(xi, si, offset, k, idt, margin):
        xi = unit(xi, si)
        s = xi @ xi.T
        return choose(jnp.where(jnp.eye(s.shape[0], dtype=bool), -jnp.inf, s), offset, k, idt, margin)

    def pair(xi, si, xj, sj, i0, j0, k, idt, margin):
        s = unit(xi, si) @ unit(xj, sj).T  # once for both: rows of i against j, and (transposed) the reverse
        return choose(s, j0, k, idt, margin), choose(s.T, i0, k, idt, margin)

    def merge(vals, idx, new_vals, new_idx, k):
        return top(jnp.concatenate([vals, new_vals], axis=1), jnp.concatenate([idx, new_idx], axis=1), k)

    static = ("k", "idt", "margin")
    return (jax.jit(diagonal, static_argnames=static), jax.jit(pair, static_argnames=static),
            jax.jit(merge, static_argnames=("k",)))


def _knn_jax(xp: Any, x: Any, scale: Any, k: int, side: int, idt: Any) -> tuple[Any, Any]:
    """:func:`knn_search` for JAX arrays: the same tiles, with fused fixed-shape steps (see _jax_steps)."""
    diagonal, pair, merge = _jax_steps()
    n = x.shape[0]
    starts = list(range(0, n, side))
    blocks = [(x[s:s + side, ...], None if scale is None else tuple(v[s:s + side, ...] for v in scale))
              for s in starts]
    def sure(step, *args):  # margins 8, then 128, then a full stable sort
        for margin in (8, 128, None):
            result = step(*args, k=k, idt=idt, margin=margin)
            if not any(bool(unsure) for *_, unsure in (result if step is pair else (result,))):
                return result
        raise AssertionError("unreachable: a full sort is always sure")  # pragma: no cover

    best = [sure(diagonal, *xi, i0)[:2] for i0, xi in zip(starts, blocks)]
    for ti, (i0, xi) in enumerate(zip(starts, blocks)):
        for tj in range(ti + 1, len(starts)):
            offers = sure(pair, *xi, *blocks[tj], i0, starts[tj])
            for row, (vals, idx, _) in zip((ti, tj), offers):
                width = min(k, best[row][0].shape[1] + vals.shape[1])
                best[row] = merge(*best[row], vals, idx, k=width)
    return xp.concat([v for v, _ in best], axis=0), xp.concat([i for _, i in best], axis=0)


def _tile_side(xp: Any, x: Any, block: int | None) -> int:
    """The exact search's tile side B (default: one tile near TILE_BYTES), its memory checked."""
    n, d = x.shape
    itemsize = xp.finfo(x.dtype).bits // 8
    side = _default_block(n, d, itemsize) if block is None else min(block, n)
    ensure_fits(3.0 * side * side * itemsize + 4.0 * side * d * itemsize,
                f"similarity tiles of {side} x {side} for k-nearest neighbours", "lower block")
    return side


def _exact_rows(xp: Any, x: Any, scale: Any, rows: Any, k: int, block: int | None) -> tuple[Any, Any]:
    """The exact tiled search (numpy, torch) for the given rows only, against every row: (values, indices).

    The same tiles and selection as :func:`knn_search`, row by row: the rows of a
    screen's overflowing pools (:mod:`._knn_screen`) get exactly what the exact
    path gives them.
    """
    n = x.shape[0]
    idt = _index_dtype(xp, x)
    side = _tile_side(xp, x, block)

    def unit(xb: Any, part: Any) -> Any:
        return xb if scale is None else unit_rows(xb, tuple(part(v) for v in scale))

    vals, idx = [], []
    for r0 in range(0, rows.shape[0], side):
        part = rows[r0:r0 + side]
        xr = unit(xp.take(x, part, axis=0), lambda v: xp.take(v, part, axis=0))
        best = None
        for c0 in range(0, n, side):
            tile = tile_products(xp, xr, unit(x[c0:c0 + side, ...], lambda v: v[c0:c0 + side, ...]))
            inside = xp.nonzero((part >= c0) & (part < c0 + tile.shape[1]))[0]
            if inside.shape[0]:  # the row itself is no neighbour
                tile[inside, xp.take(part, inside) - c0] = -math.inf
            best = (_select(xp, tile, k, c0, n, idt) if best is None
                    else _update(xp, best, tile, k, c0, False, n, idt))
        vals.append(best[0])
        idx.append(best[1])
    return xp.concat(vals, axis=0), xp.concat(idx, axis=0)


def _screened(xp: Any, x: Any, k: int, block: int | None, scale: Any,
              ordered: bool) -> tuple[Any, Any, int]:
    """:func:`._knn_screen.screened_knn`, with the rows it retires searched exactly here.

    Returns (values or None, indices, how many rows took the exact search).
    """
    vals, idx, retired = _knn_screen.screened_knn(x, k, block, scale, ordered)
    if retired.shape[0]:
        v, j = _exact_rows(xp, x, scale, xp.astype(retired, _index_dtype(xp, x)), k, block)
        idx[retired, ...] = j
        if vals is not None:
            vals[retired, ...] = v
    return vals, idx, int(retired.shape[0])


def knn_search(xp: Any, x: Any, k: int, block: int | None, scale: Any = None,
         screen: bool | None = None, ordered: bool = True) -> tuple[Any, Any]:
    """(values, indices), each (N, k): every row's k nearest rows j != i, sorted by (-value, j).

    With ``scale`` (``(m, r)`` from :func:`row_scale`) the rows are L2-normalised
    block by block as the tiles need them (:func:`unit_rows`), so no normalised
    N x d copy is held. ``screen``: True runs the screen of
    :mod:`._knn_screen` (same neighbours, see there), False these exact tiles,
    None chooses (:func:`._knn_screen.wanted`: N >= 2048, k ≪ N, CPU data). ``ordered=False`` allows the screen to return each row's set in
    any order, and values None. Rows with copies are searched once, as one point
    (:mod:`._knn_ties`: copies tie exactly, whatever the tiling or the BLAS).
    """
    groups = duplicate_groups(xp, x, scale)
    if groups is None:
        return _knn_distinct(xp, x, k, block, scale, screen, ordered)
    first, group = groups
    m = first.shape[0]
    u = xp.take(x, first, axis=0)
    su = None if scale is None else tuple(xp.take(v, first, axis=0) for v in scale)
    own = xp.concat([xp.vecdot(y, y, axis=-1) for y in (
        (u[r0:r1, ...] if su is None else unit_rows(u[r0:r1, ...], tuple(v[r0:r1, ...] for v in su)))
        for r0, r1 in row_chunks(*u.shape))], axis=0)
    if m > 1:
        vals, idx = _knn_distinct(xp, u, min(k, m - 1), block, su, screen, True)
    else:  # every row a copy of the first
        idx = xp.zeros((1, 0), dtype=group.dtype, device=array_device(x))
        vals = xp.zeros((1, 0), dtype=own.dtype, device=array_device(x))
    if is_jax_array(x):  # index bookkeeping on the host: JAX would compile each of its operations per shape
        parts = expand(np, *(np.asarray(v) for v in (vals, _cast(xp, idx, group.dtype), own, first, group)), k)
        return tuple(xp.asarray(v) for v in parts)
    return expand(xp, vals, _cast(xp, idx, group.dtype), own, first, group, k)


def tile_products(xp: Any, xi: Any, xj: Any) -> Any:
    """One tile of inner products, xi xjᵀ (numpy and torch searches; the seam a test perturbs to
    make two tiles round differently)."""
    return xi @ xp.permute_dims(xj, (1, 0))


def _knn_distinct(xp: Any, x: Any, k: int, block: int | None, scale: Any,
                  screen: bool | None, ordered: bool) -> tuple[Any, Any]:
    """:func:`knn_search` for rows that are all distinct (or whose copies may tie by rounding)."""
    n, d = x.shape
    if screen is None:
        screen = _knn_screen.wanted(x, k)
    if screen and d:
        return _screened(xp, x, k, block, scale, ordered)[:2]
    idt = _index_dtype(xp, x)
    side = _tile_side(xp, x, block)
    if is_jax_array(x):
        return _knn_jax(xp, x, scale, k, side, idt)
    starts = list(range(0, n, side))

    def rows(s0: int) -> Any:
        xb = x[s0:s0 + side, ...]
        return xb if scale is None else unit_rows(xb, tuple(v[s0:s0 + side, ...] for v in scale))

    best = []
    for i0 in starts:
        xi = rows(i0)
        tile = _fill_diagonal(xp, tile_products(xp, xi, xi))
        best.append(_select(xp, tile, k, i0, n, idt))
        del tile
    for ti, i0 in enumerate(starts):
        xi = rows(i0)
        for tj in range(ti + 1, len(starts)):
            tile = tile_products(xp, xi, rows(starts[tj]))
            best[ti] = _update(xp, best[ti], tile, k, starts[tj], False, n, idt)
            best[tj] = _update(xp, best[tj], tile, k, i0, True, n, idt)
            del tile
    vals = xp.concat([v for v, _ in best], axis=0)
    idx = xp.concat([i for _, i in best], axis=0)
    return vals, idx
