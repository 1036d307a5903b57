"""The k-NN tie rule: the key (−v_ij, j), and identical rows as one point (docs/theory.md §10).

Every neighbour list of :mod:`prhsim.metrics._knn_search` ranks the candidates j ≠ i
of row i by the key (−v_ij, j): the larger inner product first, and among
equal inner products the smaller index. Equal values are only equal as
computed: two products that agree in exact arithmetic but are formed in
different tiles, by different BLAS kernels or on different CPUs can differ in
the last bit, and the tie is then decided by rounding. The commonest such tie
is between copies of one row, so copies are made equal by construction:

* Rows that are equal as the search sees them (value equality of every entry,
  so −0.0 equals 0.0; the input rows for ``knn_indices``, the L2-normalised
  rows as the metrics form them) are one point. The search runs on the
  distinct rows only, each pair of distinct rows' product formed once, and a
  copy j of row l has v_ij = v_il exactly; the copies of i's own row sit at one
  canonical value ⟨y_i, y_i⟩ (one dot product per distinct row).
* The lists are then expanded back to rows under the key. A row's k
  neighbours by the key lie in its own group and in the first k groups of its
  group's list (ranked by (−v, first index)): a member ranked t-th has fewer
  than t groups ahead of its own, each contributing a smaller key through its
  first member. So the distinct rows' k-NN lists (k groups, or all of them)
  and each group's first k + 1 members decide every row's list.

Copies are found by hashing each row's bit pattern (with +0.0 added, so
that −0.0 and 0.0 agree) to 64 bits with integer arithmetic, which involves
no rounding, then checking that rows of one hash are equal, entry by entry.
Cost O(N·d) with no N x d temporary; none of this runs when all rows are distinct.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from array_api_compat import device as array_device, is_torch_array

#: Elements of one gathered (rows x k x d) or (rows x k x k) block.
GATHER_ELEMENTS = 2**22


def row_chunks(n: int, d: int) -> list[tuple[int, int]]:
    """Row ranges of about GATHER_ELEMENTS entries: row-wise passes over the input without an N x d temporary."""
    rows = max(1, GATHER_ELEMENTS // max(d, 1))
    return [(r0, min(n, r0 + rows)) for r0 in range(0, n, rows)] if d else []


def top_by_key(xp: Any, vals: Any, idx: Any, k: int) -> tuple[Any, Any]:
    """The first k entries of each row under the key (-value, index), in that order."""
    order = xp.argsort(idx, axis=1, stable=True)
    vals, idx = xp.take_along_axis(vals, order, axis=1), xp.take_along_axis(idx, order, axis=1)
    order = xp.argsort(-vals, axis=1, stable=True)[:, :k]
    return xp.take_along_axis(vals, order, axis=1), xp.take_along_axis(idx, order, axis=1)


# --------------------------------------------------------------------------------------
# finding copies
# --------------------------------------------------------------------------------------
def _multipliers(words: int) -> np.ndarray:
    """Two rows of odd 32-bit multipliers, fixed: the hash of a row is a function of its bits alone."""
    gen = np.random.default_rng(0x6B6E6E)
    return gen.integers(0, 2**32, size=(2, words), dtype=np.uint64).astype(np.uint32) | np.uint32(1)


def _hashes_numpy(rows: Callable[[int, int], np.ndarray], n: int, d: int) -> np.ndarray:
    """(N,) uint64: Σ_w bits_w · c_w mod 2³², twice with other c, of each row's 32-bit words (+0.0 added)."""
    out = np.empty((n, 2), dtype=np.uint32)
    mult = None
    for r0, r1 in row_chunks(n, d):
        words = np.ascontiguousarray(rows(r0, r1) + 0.0).view(np.uint32)
        if mult is None:
            mult = _multipliers(words.shape[1])
        out[r0:r1, 0] = (words * mult[0]).sum(axis=1, dtype=np.uint32)
        out[r0:r1, 1] = (words * mult[1]).sum(axis=1, dtype=np.uint32)
    return (out[:, 0].astype(np.uint64) << np.uint64(32)) | out[:, 1].astype(np.uint64)


def _hashes_torch(rows: Callable[[int, int], Any], n: int, d: int, dev: Any) -> Any:
    """The same hash in torch (CUDA tensors): 32-bit words in int64 arithmetic, wrapped to 32 bits."""
    import torch

    out, mult = [], None
    for r0, r1 in row_chunks(n, d):
        words = (rows(r0, r1) + 0.0).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        if mult is None:
            mult = torch.as_tensor(_multipliers(words.shape[1]).astype(np.int64), device=dev)
        h = [((words * m).sum(dim=1) & 0xFFFFFFFF) for m in mult]
        out.append((h[0] << 32) | h[1])
    return torch.cat(out)


def _labels(same: Callable[[np.ndarray, np.ndarray], np.ndarray], hashes: np.ndarray,
            unique_rows: Callable[[np.ndarray], np.ndarray]) -> np.ndarray | None:
    """label[i] = the smallest index of a row equal to row i, or None when every row is distinct.

    ``same(i, j)`` compares rows pairwise (entry by entry); ``unique_rows(r)`` gives the
    inverse of ``np.unique(rows r, axis=0)`` for the rare hash collisions between unequal rows.
    """
    n = hashes.shape[0]
    order = np.argsort(hashes, kind="stable")  # ascending index inside every hash
    h = hashes[order]
    fresh = np.empty(n, dtype=bool)
    fresh[:1] = True
    fresh[1:] = h[1:] != h[:-1]
    if fresh.all():
        return None
    run = np.cumsum(fresh) - 1
    first = order[np.flatnonzero(fresh)][run]  # each row's first row of its hash
    label = np.empty(n, dtype=np.int64)
    label[order] = first
    shared = np.flatnonzero(label != np.arange(n))
    equal = same(shared, label[shared]) if shared.size else np.ones(0, dtype=bool)
    if not equal.all():  # unequal rows of one hash: group those hashes' rows exactly
        bad = np.isin(hashes, hashes[shared[~equal]])
        rows = np.flatnonzero(bad)
        inverse = unique_rows(rows)
        smallest = np.full(int(inverse.max()) + 1, n, dtype=np.int64)
        np.minimum.at(smallest, inverse, rows)
        label[rows] = smallest[inverse]
    return None if (label == np.arange(n)).all() else label


def unit_rows(x: Any, scale: tuple[Any, Any]) -> Any:
    """Rows x_i (a block of them) as (x_i / m_i) / r_i, with (m, r) = (max_j |x_ij|, ‖x_i / m_i‖) for those rows."""
    return (x / scale[0]) / scale[1]


def _host(y: Any) -> np.ndarray:
    return y.numpy() if is_torch_array(y) else np.asarray(y)


def duplicate_groups(xp: Any, x: Any, scale: tuple[Any, Any] | None) -> tuple[Any, Any] | None:
    """``(first, group)`` for rows with copies, None when all N rows are distinct.

    The rows compared are x's rows, or with ``scale`` = (m, r) the unit rows
    :func:`unit_rows` forms (the metrics' rows). ``first``: (m,) ascending
    indices of each distinct row's first occurrence; ``group``: (N,) the position
    in ``first`` of each row's first occurrence (groups numbered in order of first
    occurrence). Arrays of x's library and device; CUDA tensors stay on the GPU,
    other inputs are hashed through numpy (JAX arrays by one host copy).
    """
    n, d = x.shape
    if n < 2 or d == 0:
        return None
    dev = array_device(x)
    cuda = is_torch_array(x) and x.device.type != "cpu"
    if cuda:
        import torch
    else:
        x = _host(x)
        scale = None if scale is None else tuple(_host(v) for v in scale)

    def seen(sel: Any) -> Any:
        """Rows sel (a slice or an index array) as the search sees them."""
        if cuda and isinstance(sel, np.ndarray):
            sel = torch.as_tensor(sel, device=dev)
        xs = x[sel]
        return xs if scale is None else unit_rows(xs, tuple(v[sel] for v in scale))

    def same(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        parts = [(seen(i[c0:c1]) == seen(j[c0:c1])).all(axis=1) for c0, c1 in row_chunks(i.size, d)]
        return np.concatenate([_host(p.cpu()) if cuda else p for p in parts])

    def unique_rows(i: np.ndarray) -> np.ndarray:
        if cuda:
            return _host(torch.unique(seen(i), dim=0, return_inverse=True)[1].cpu())
        return np.unique(seen(i), axis=0, return_inverse=True)[1].reshape(-1)

    seen_slice = lambda r0, r1: seen(slice(r0, r1))  # noqa: E731
    hashes = _host(_hashes_torch(seen_slice, n, d, dev).cpu()) if cuda else _hashes_numpy(seen_slice, n, d)
    label = _labels(same, hashes, unique_rows)
    if label is None:
        return None
    first = np.flatnonzero(label == np.arange(n))
    group = np.searchsorted(first, label)
    idt = xp.arange(1, device=dev).dtype
    return xp.asarray(first, dtype=idt, device=dev), xp.asarray(group, dtype=idt, device=dev)


# --------------------------------------------------------------------------------------
# back from groups to rows
# --------------------------------------------------------------------------------------
def expand(xp: Any, vals: Any, idx: Any, own: Any, first: Any, group: Any, k: int) -> tuple[Any, Any]:
    """Every row's k-NN list from the distinct rows' lists (module docstring).

    Args:
        vals, idx: (m, k_g) the distinct rows' lists, k_g = min(k, m − 1), ranked by the
            key, indices into ``first``.
        own: (m,) each distinct row's inner product with itself (its copies' value).
        first, group: from :func:`duplicate_groups`.
        k: neighbours per row, k < N.

    Returns:
        (values, indices), each (N, k), ranked by the key (−v, j).
    """
    n, m = group.shape[0], first.shape[0]
    dev = array_device(group)
    idt = group.dtype
    counts = _bincount(xp, group, m)
    members = xp.argsort(group, stable=True)  # group by group, ascending index inside
    start = xp.cumulative_sum(counts) - counts
    cand = xp.concat([xp.arange(m, dtype=idt, device=dev)[:, None], idx], axis=1)  # (m, k_g + 1): own group first
    cand_vals = xp.concat([own[:, None], vals], axis=1)
    caps = xp.minimum(xp.take(counts, xp.reshape(cand, (-1,))), xp.asarray(k + 1, dtype=idt, device=dev))
    caps = xp.reshape(caps, cand.shape)
    width = int(xp.max(xp.sum(caps, axis=1)))
    rows = max(1, GATHER_ELEMENTS // max(width, 1))
    top_vals, top_idx = [], []
    for r0 in range(0, m, rows):
        c, cv, cap = cand[r0:r0 + rows, ...], cand_vals[r0:r0 + rows, ...], caps[r0:r0 + rows, ...]
        v, j = _members(xp, c, cv, cap, members, start, n, k + 1)
        top_vals.append(v)
        top_idx.append(j)
    top_vals, top_idx = xp.concat(top_vals, axis=0), xp.concat(top_idx, axis=0)
    # row i: its group's first k + 1 members other than i
    v, j = xp.take(top_vals, group, axis=0), xp.take(top_idx, group, axis=0)
    me = j == xp.arange(n, dtype=idt, device=dev)[:, None]
    order = xp.argsort(xp.astype(me, xp.int8), axis=1, stable=True)[:, :k]
    return xp.take_along_axis(v, order, axis=1), xp.take_along_axis(j, order, axis=1)


def _bincount(xp: Any, group: Any, m: int) -> Any:
    """Members per group, through a sort (the array API has no bincount)."""
    s = xp.sort(group)
    edges = xp.searchsorted(s, xp.arange(m + 1, dtype=group.dtype, device=array_device(group)))
    return edges[1:] - edges[:-1]


def _members(xp: Any, cand: Any, cand_vals: Any, caps: Any, members: Any, start: Any, n: int,
             keep: int) -> tuple[Any, Any]:
    """For rows of candidate groups: the first ``keep`` members under the key, each group's first caps members."""
    dev = array_device(cand)
    idt = cand.dtype
    rows = cand.shape[0]
    flat_caps = xp.reshape(caps, (-1,))
    total = xp.sum(caps, axis=1)
    seg = xp.repeat(xp.arange(flat_caps.shape[0], dtype=idt, device=dev), flat_caps)
    seg_start = xp.cumulative_sum(flat_caps) - flat_caps
    pos = xp.arange(seg.shape[0], dtype=idt, device=dev) - xp.take(seg_start, seg)
    who = xp.take(members, xp.take(start, xp.take(xp.reshape(cand, (-1,)), seg)) + pos)
    val = xp.take(xp.reshape(cand_vals, (-1,)), seg)
    width = int(xp.max(total))
    slot = xp.arange(width, dtype=idt, device=dev)[None, :]
    valid = slot < total[:, None]
    row_start = xp.cumulative_sum(total) - total
    where = xp.reshape(xp.where(valid, row_start[:, None] + slot, xp.zeros_like(slot)), (-1,))
    shape = (rows, width)
    val = xp.where(valid, xp.reshape(xp.take(val, where), shape),
                   xp.asarray(-math.inf, dtype=cand_vals.dtype, device=dev))
    who = xp.where(valid, xp.reshape(xp.take(who, where), shape), xp.asarray(n, dtype=idt, device=dev))
    return top_by_key(xp, val, who, keep)
