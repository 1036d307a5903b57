"""Which states render alike: every pair of states with equal observations, found by
64-bit keys and confirmed exactly (docs/theory.md §0).

:func:`exact_pairs` takes a renderer of any subset of states, ``rows_of(states)``,
and returns every pair (smallest state of its class, other state) of states whose
renders have equal bytes (after rounding to ``decimals`` when given, -0.0 folded
into 0.0). It renders the states in chunks of :data:`CHUNK` and turns each row
into L uint64 words w_1..w_L (its bytes, zero-padded to a multiple of 8: two rows
have equal words iff they have equal bytes), hashed to a 64-bit key

    key(w) = fmix((Σ_j fmix(w_j ⊕ c_j) mod 2^64) ⊕ L·φ),   c_j = fmix(j·φ),

with fmix MurmurHash3's 64-bit finaliser (a bijection of uint64) and φ the
golden-ratio constant 0x9E3779B97F4A7C15. Equal rows get equal keys; unequal rows
share one with probability about 2^-64. The keys (8 bytes a state) are sorted, and
only the states sharing a key are rendered again and compared exactly, so a hash
collision can never be reported as equal renders: the keys are a filter, the
verdict is byte for byte. At most about two chunks of renders are held at once.

The generic injectivity check (:mod:`prhsim.worlds._injectivity`) runs it on whole
observations, the decision by parts (:mod:`prhsim.worlds._injectivity_parts`) on the
renders of each part.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

#: Rendered in chunks of this many states to bound memory.
CHUNK = 65_536
#: uint64 words hashed at a time (the hash's temporaries stay in cache).
HASH_BLOCK = 65_536

_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def row_words(obs: np.ndarray, decimals: int | None) -> np.ndarray:
    """Each row of ``obs`` as uint64 words: its bytes (after rounding), zero-padded to a multiple of 8.

    Two rows have equal words iff they have equal bytes (every row has the same length).
    With ``decimals``, values are rounded as float64 and -0.0 is folded into 0.0 first.
    """
    obs = np.asarray(obs)
    rows = obs.reshape(obs.shape[0], -1)
    if decimals is not None:
        rows = np.round(rows.astype(np.float64), decimals) + 0.0  # + 0.0 folds -0.0 into 0.0
    rows = np.ascontiguousarray(rows)
    if rows.dtype.hasobject:
        raise TypeError("the injectivity check compares observations byte for byte: object arrays are not supported")
    nbytes = rows.shape[1] * rows.dtype.itemsize
    width = max(1, -(-nbytes // 8))
    if nbytes == 8 * width and rows.dtype.itemsize in (1, 2, 4, 8):
        return rows.view(np.uint64)
    padded = np.zeros((rows.shape[0], 8 * width), dtype=np.uint8)
    padded[:, :nbytes] = rows.view(np.uint8).reshape(rows.shape[0], nbytes)
    return padded.view(np.uint64)


def _fmix(x: np.ndarray, tmp: np.ndarray | None = None) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser, in place (a bijection of uint64 with full avalanche)."""
    tmp = np.empty_like(x) if tmp is None else tmp
    np.right_shift(x, 33, out=tmp)
    x ^= tmp
    x *= _FMIX1
    np.right_shift(x, 33, out=tmp)
    x ^= tmp
    x *= _FMIX2
    np.right_shift(x, 33, out=tmp)
    x ^= tmp
    return x


def _hash_words(words: np.ndarray) -> np.ndarray:
    """64-bit keys of rows of uint64 words: ``fmix(Σ_j fmix(w_j ⊕ c_j))`` with per-position constants c_j.

    Equal rows get equal keys; unequal rows share a key with probability about 2^-64
    (the sum wraps modulo 2^64). Only a filter: every shared key is resolved exactly.
    """
    s, width = words.shape
    salts = _fmix(np.arange(1, width + 1, dtype=np.uint64) * _GOLDEN)
    keys = np.empty(s, dtype=np.uint64)
    step = max(1, HASH_BLOCK // width)
    x = np.empty((min(step, s), width), dtype=np.uint64)
    tmp = np.empty_like(x)
    for i in range(0, s, step):
        block = words[i:i + step]
        m = block.shape[0]
        xb, tb, out = x[:m], tmp[:m], keys[i:i + m]
        np.bitwise_xor(block, salts, out=xb)
        _fmix(xb, tb)
        if width <= 4:  # a short row: add columns (a reduction over 1-4 values is slow)
            np.copyto(out, xb[:, 0])
            for j in range(1, width):
                out += xb[:, j]
        else:
            xb.sum(axis=1, dtype=np.uint64, out=out)
    keys ^= np.uint64((width * int(_GOLDEN)) % 2**64)  # the row length (python ints: no overflow warning)
    return _fmix(keys)


def _as_void(words: np.ndarray) -> np.ndarray:
    """Rows of words as one opaque value each (compared and sorted byte for byte)."""
    words = np.ascontiguousarray(words)
    return words.view(np.dtype((np.void, 8 * words.shape[1]))).ravel()


def _classes_within(states: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ascending ``states`` with opaque ``values``: the stable order by value and its class starts.

    Returns (order, start, first): ``order`` sorts values (stably, so ascending states within a
    class), ``start[i]`` marks the first of its class at sorted position i, ``first[i]`` is the
    sorted position of that first (the smallest state of the class).
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    start = np.ones(order.size, dtype=bool)
    start[1:] = ordered[1:] != ordered[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    return order, start, first


def _resolve_batch(rows_of, states: np.ndarray, decimals: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Exact classes among ``states`` (rendered at once): star pairs (smallest of the class, other member)."""
    states = np.sort(states)
    values = _as_void(row_words(rows_of(states), decimals))
    order, start, first = _classes_within(states, values)
    ordered = states[order]
    return ordered[first][~start], ordered[~start]


def _resolve_large(rows_of, states: np.ndarray, decimals: int | None) -> tuple[list, list]:
    """Exact classes among more than CHUNK states sharing one key, two chunks of renders at a time.

    Each pass renders the CHUNK smallest remaining states, classes them, then matches every
    other remaining state against their distinct renders; the unmatched remain. A class's
    smallest state is in the head of the pass that meets it first, so it is its representative.
    """
    firsts, others = [], []
    remaining = np.sort(states)
    while remaining.size:
        head = remaining[:CHUNK]
        head_values = _as_void(row_words(rows_of(head), decimals))
        order, start, first = _classes_within(head, head_values)
        ordered = head[order]
        firsts.append(ordered[first][~start])
        others.append(ordered[~start])
        reps, rep_values = ordered[start], head_values[order][start]  # sorted by value
        left = []
        rest = remaining[CHUNK:]
        for i in range(0, rest.size, CHUNK):
            chunk = rest[i:i + CHUNK]
            values = _as_void(row_words(rows_of(chunk), decimals))
            at = np.minimum(np.searchsorted(rep_values, values), rep_values.size - 1)
            match = rep_values[at] == values
            firsts.append(reps[at[match]])
            others.append(chunk[match])
            left.append(chunk[~match])
        remaining = np.concatenate(left) if left else remaining[:0]
    return firsts, others


def exact_pairs(rows_of: Callable[[np.ndarray], np.ndarray], states: np.ndarray,
                 decimals: int | None) -> tuple[np.ndarray, np.ndarray]:
    """All pairs of ``states`` with equal renders, as star pairs (smallest state of its class, other state).

    ``rows_of(states)`` renders any subset. Keys are hashed chunk by chunk (one chunk of
    renders in memory, 8 bytes a state kept), sorted, and only the states sharing a key
    are rendered again and compared exactly, in batches of whole key groups; a key
    group larger than a chunk is resolved by :func:`_resolve_large`. Returns arrays
    (firsts, others), ordered by (first, other).
    """
    states = np.asarray(states, dtype=np.int64)
    empty = (states[:0], states[:0])
    if states.size < 2:
        return empty
    keys = np.empty(states.size, dtype=np.uint64)
    for i in range(0, states.size, CHUNK):
        keys[i:i + CHUNK] = _hash_words(row_words(rows_of(states[i:i + CHUNK]), decimals))
    order = np.argsort(keys)
    keys = keys[order]
    hit = keys[1:] == keys[:-1]
    if not hit.any():
        return empty
    member = np.zeros(states.size, dtype=bool)
    member[1:] |= hit
    member[:-1] |= hit
    cand, cand_keys = states[order[member]], keys[member]
    del keys, order, member, hit
    by = np.lexsort((cand, cand_keys))
    cand, cand_keys = cand[by], cand_keys[by]
    starts = np.flatnonzero(np.r_[True, cand_keys[1:] != cand_keys[:-1]])
    sizes = np.diff(np.r_[starts, cand.size])
    firsts, others = [], []
    large = sizes > CHUNK
    for s0, size in zip(starts[large], sizes[large]):
        f, o = _resolve_large(rows_of, cand[s0:s0 + size], decimals)
        firsts += f
        others += o
    small_sizes = sizes[~large]
    if small_sizes.size:
        # batches of whole groups: a group joins the batch of its first member, so a batch has under 2 x CHUNK states
        cand = cand[np.repeat(~large, sizes)]
        offsets = np.cumsum(small_sizes) - small_sizes
        batch = np.repeat(offsets // CHUNK, small_sizes)
        bounds = np.flatnonzero(np.r_[True, batch[1:] != batch[:-1], True])
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            f, o = _resolve_batch(rows_of, cand[lo:hi], decimals)
            firsts.append(f)
            others.append(o)
    firsts = np.concatenate(firsts) if firsts else states[:0]
    others = np.concatenate(others) if others else states[:0]
    by = np.lexsort((others, firsts))
    return firsts[by], others[by]
