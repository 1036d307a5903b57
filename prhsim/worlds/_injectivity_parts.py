"""The decision by parts: injectivity of a renderer declared by
:class:`~prhsim.worlds._modality.Parts`, from the renders of its parts (docs/theory.md §0).

For ``g(z, n) = A_{ℓ(n)}(g_1(z_{S_1}, n), …, g_P(z_{S_P}, n))``, with A_ℓ a
coordinate permutation, it renders each part on Z_{S_o} x N, ``Σ_o |Z_{S_o}|·|N|``
small renders instead of ``|Z|·|N|`` observations, classes the equal renders of
each part exactly (:func:`~prhsim.worlds._equal_renders.exact_pairs`), and reads off
(the proof is in :class:`~prhsim.worlds._modality.Parts`):

1. ``z ↦ g(z, n)`` is injective iff every ``g_o(·, n)`` is injective on Z_{S_o};
2. for n ≠ n' of one layout, some (z, n) and (z', n') collide iff the images
   ``g_o(Z_{S_o}, n)`` and ``g_o(Z_{S_o}, n')`` meet for every part o;
3. n and n' of different layouts cannot collide when, at some coordinate, the
   values under n (over all z) and under n' lie in disjoint ranges (sufficient only).

1 and 2 are exact and give witnesses, each confirmed by rendering both states.
When 3 leaves a pair of nuisance values unseparated (or the dtype has no
coordinate ranges), when |N| exceeds :data:`PARTS_MAX_NUISANCE` (|N| x |N| tables
per part), or when the pairwise join of a part's equal renders exceeds
:data:`PARTS_MAX_JOIN`, the structure does not decide: :func:`decide_by_parts`
returns None and :func:`~prhsim.worlds.injectivity_check` falls back to the
generic check. Memory is guarded by :func:`_ensure_parts_fit`.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from prhsim._budget import FLOAT, ensure_fits
from prhsim.worlds._equal_renders import CHUNK, exact_pairs, row_words
from prhsim.worlds._modality import Modality, Parts, call_part

#: The decision by parts keeps |N| x |N| tables per part: above this many nuisance values it
#: leaves the modality to the generic check.
PARTS_MAX_NUISANCE = 1024
#: ... and it joins the equal renders of a part pairwise: above this many pairs, the generic check.
PARTS_MAX_JOIN = 4_000_000


def _part_rows(name: str, spec: Parts, o: int, sizes: tuple[int, ...], n_nuisance: int,
               states: np.ndarray) -> np.ndarray:
    """Render states ``a·|N| + n`` of part o (a indexes the part's factor values row-major)."""
    a, n = np.divmod(np.asarray(states, dtype=np.int64), n_nuisance)
    if sizes:
        values = np.stack(np.unravel_index(a, sizes), axis=1).astype(np.int64, copy=False)
    else:
        values = np.zeros((a.size, 0), dtype=np.int64)
    return call_part(name, spec, o, values, n)


def _meeting_tables(firsts: np.ndarray, others: np.ndarray, n_nuisance: int, max_report: int):
    """From a part's classes of equal renders (star pairs of part states ``a·|N| + n``):

    * ``within``: up to ``max_report`` triples (a, a', n), a < a', with g_o(a, n) = g_o(a', n);
    * ``meet_a``, ``meet_b``: (|N|, |N|) tables, ``meet_a[n, n'] = a`` and ``meet_b[n, n'] = a'`` with
      g_o(a, n) = g_o(a', n'), -1 where the images under n and n' do not meet.

    None when the pairwise join of the classes would exceed ``PARTS_MAX_JOIN``.
    """
    meet_a = np.full((n_nuisance, n_nuisance), -1, dtype=np.int64)
    meet_b = meet_a.copy()
    if firsts.size == 0:
        return [], meet_a, meet_b
    cls = np.concatenate([firsts, firsts])
    member = np.concatenate([firsts, others])
    a, n = np.divmod(member, n_nuisance)
    order = np.lexsort((a, n, cls))
    cls, a, n = cls[order], a[order], n[order]
    same_class_n = (cls[1:] == cls[:-1]) & (n[1:] == n[:-1])
    dup_member = same_class_n & (a[1:] == a[:-1])  # the class's first, listed twice
    twice = np.flatnonzero(same_class_n & ~dup_member)[:max_report]
    within = [(int(a[i]), int(a[i + 1]), int(n[i])) for i in twice]
    keep = np.r_[True, ~same_class_n]  # the smallest a per (class, n)
    cls, a, n = cls[keep], a[keep], n[keep]
    starts = np.flatnonzero(np.r_[True, cls[1:] != cls[:-1]])
    counts = np.diff(np.r_[starts, cls.size])
    join = int(np.sum(counts.astype(np.int64) ** 2))
    if join > PARTS_MAX_JOIN:
        return None
    per_elem = np.repeat(counts, counts)  # class size, per element
    i = np.repeat(np.arange(cls.size), per_elem)
    begin = np.repeat(np.repeat(starts, counts), per_elem)
    within_i = np.arange(join) - np.repeat(np.cumsum(per_elem) - per_elem, per_elem)
    j = begin + within_i
    cell, first = np.unique(n[i] * n_nuisance + n[j], return_index=True)  # per (n, n'): the smallest class's pair
    meet_a.ravel()[cell] = a[i[first]]
    meet_b.ravel()[cell] = a[j[first]]
    return within, meet_a, meet_b


def _element_keys(rows: np.ndarray, decimals: int | None) -> np.ndarray | None:
    """Coordinates of rows as unsigned integers with the same bytes (after rounding); None if not 1/2/4/8 bytes."""
    rows = np.asarray(rows)
    rows = rows.reshape(rows.shape[0], -1)
    if decimals is not None:
        rows = np.round(rows.astype(np.float64), decimals) + 0.0
    size = rows.dtype.itemsize
    if rows.dtype.hasobject or size not in (1, 2, 4, 8):
        return None
    return np.ascontiguousarray(rows).view(np.dtype(f"u{size}"))


def _coordinate_ranges(modality: Modality, sizes_of: list[tuple[int, ...]], layout: np.ndarray,
                       decimals: int | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Per nuisance value n and observation coordinate j: the min and max (as unsigned integers of the
    coordinate's bytes) of ``g(z, n)_j`` over all z, from the part renders. None if the dtype does not allow it."""
    spec, N = modality.parts, modality.n_nuisance
    lows, highs = [], []
    step = N * max(1, CHUNK // N)  # whole rows of nuisance values
    for o, sizes in enumerate(sizes_of):
        count = int(np.prod(sizes, dtype=np.int64)) * N
        low = high = None
        for start in range(0, count, step):
            rows = _part_rows(modality.name, spec, o, sizes, N, np.arange(start, min(count, start + step)))
            keys = _element_keys(rows, decimals)
            if keys is None:
                return None
            keys = keys.reshape(-1, N, keys.shape[1])  # (values, n, coordinate)
            lo, hi = keys.min(axis=0), keys.max(axis=0)
            low = lo if low is None else np.minimum(low, lo)
            high = hi if high is None else np.maximum(high, hi)
        lows.append(low)
        highs.append(high)
    if len({x.dtype for x in lows}) > 1:
        return None
    low, high = np.concatenate(lows, axis=1), np.concatenate(highs, axis=1)  # (N, D) in concatenation order
    rows = np.arange(N)[:, None]
    index = spec.layouts[layout]  # (N, D): observation coordinate j of n is concatenated coordinate index[n, j]
    return low[rows, index], high[rows, index]


def _state_of(part_values: dict[int, int], spec: Parts, sizes_of: list[tuple[int, ...]],
              factor_sizes: tuple[int, ...]) -> int:
    """The flat state with part o's factors at its flat value ``part_values[o]`` (every other factor 0)."""
    values = np.zeros(len(factor_sizes), dtype=np.int64)
    for o, a in part_values.items():
        if sizes_of[o]:
            values[list(spec.parts[o].factors)] = np.unravel_index(int(a), sizes_of[o])
    return int(np.ravel_multi_index(tuple(values), factor_sizes))


def _ensure_parts_fit(modality: Modality, sizes_of: list[tuple[int, ...]], decimals: int | None) -> None:
    """Guard the decision by parts: per part state, a key and its sort (4 x 8 bytes); a chunk of part renders;
    two |N| x |N| tables per part. Refuse parts of several dtypes (as the renderer does)."""
    N = modality.n_nuisance
    spec = modality.parts
    count = max(int(np.prod(s, dtype=np.int64)) * N for s in sizes_of)
    firsts = [_part_rows(modality.name, spec, o, s, N, np.zeros(1, dtype=np.int64)) for o, s in enumerate(sizes_of)]
    width = sum(f.size for f in firsts)
    if width != spec.width:
        raise ValueError(f"Parts: the parts' rows have {width} values, the observation shape {spec.shape} "
                         f"has {spec.width}")
    row_bytes = max(f.size * (FLOAT if decimals is not None else f.itemsize) for f in firsts)
    chunk = min(CHUNK, count)
    tables = len(spec.parts) * N * N * (2 * FLOAT + 1) + 4 * N * spec.width * FLOAT
    what = (f"the injectivity check of modality {modality.name!r} by parts "
            f"({count:,} part states of up to {row_bytes:,} bytes)")
    ensure_fits(count * 4.0 * FLOAT + 2.0 * chunk * (3 * row_bytes + 8 + FLOAT) + tables, what,
                "use smaller parts (or factors)")


def decide_by_parts(modality: Modality, decimals: int | None, max_report: int) -> tuple | None:
    """Decide injectivity from the declared parts (see :class:`Parts`): the colliding pairs
    ``((z, n), (z', n'))`` found (up to ``max_report``, each confirmed by rendering; empty when
    injective), or None when the structure does not decide."""
    spec, factor_sizes, N = modality.parts, modality.factor_sizes, modality.n_nuisance
    if N > PARTS_MAX_NUISANCE:
        return None
    sizes_of = [tuple(factor_sizes[f] for f in part.factors) for part in spec.parts]
    _ensure_parts_fit(modality, sizes_of, decimals)
    layout = spec.layout_classes(np.arange(N))
    same = layout
    if spec.layouts is not None:  # layouts with equal permutations are one layout
        same = np.unique(spec.layouts, axis=0, return_inverse=True)[1].ravel()[layout]
    same_layout = same[:, None] == same[None, :]
    pairs: list[tuple[int, int]] = []  # colliding modal states
    every_part_meets = np.ones((N, N), dtype=bool)
    meets = []
    for o, sizes in enumerate(sizes_of):
        count = int(np.prod(sizes, dtype=np.int64)) * N
        rows_of = partial(_part_rows, modality.name, spec, o, sizes, N)
        firsts, others = exact_pairs(rows_of, np.arange(count, dtype=np.int64), decimals)
        tables = _meeting_tables(firsts, others, N, max_report)
        if tables is None:
            return None
        within, meet_a, meet_b = tables
        for a1, a2, n in within:  # 1.: part o is not injective at n
            z1 = _state_of({o: a1}, spec, sizes_of, factor_sizes)
            z2 = _state_of({o: a2}, spec, sizes_of, factor_sizes)
            pairs.append((z1 * N + n, z2 * N + n))
        meets.append((meet_a, meet_b))
        every_part_meets &= meet_a >= 0
    cross = every_part_meets & same_layout & ~np.eye(N, dtype=bool)
    for n1, n2 in zip(*np.nonzero(np.triu(cross))):  # 2.: every part meets under n1 and n2
        if len(pairs) >= max_report:
            break
        z1 = _state_of({o: m[0][n1, n2] for o, m in enumerate(meets)}, spec, sizes_of, factor_sizes)
        z2 = _state_of({o: m[1][n1, n2] for o, m in enumerate(meets)}, spec, sizes_of, factor_sizes)
        pairs.append((z1 * N + int(n1), z2 * N + int(n2)))
    if not pairs and not same_layout.all():  # 3.: layouts that differ must be separated by a coordinate
        ranges = _coordinate_ranges(modality, sizes_of, layout, decimals)
        if ranges is None:
            return None
        low, high = ranges
        for n in range(N):
            other = ~same_layout[n]
            separated = ((high[n] < low[other]) | (high[other] < low[n])).any(axis=1)
            if not separated.all():
                return None
    return _checked_pairs(modality, pairs, decimals, max_report)


def _checked_pairs(modality: Modality, pairs: list[tuple[int, int]], decimals: int | None, max_report: int):
    """The first ``max_report`` distinct pairs (ordered), each confirmed by rendering both states."""
    N = modality.n_nuisance
    pairs = sorted({(min(a, b), max(a, b)) for a, b in pairs})[:max_report]
    if not pairs:
        return ()
    flat = np.array(pairs, dtype=np.int64)
    words = row_words(modality.render_states(flat.ravel()), decimals).reshape(len(pairs), 2, -1)
    if not np.array_equal(words[:, 0], words[:, 1]):  # the renderer is built from the parts: cannot happen
        raise RuntimeError(f"modality {modality.name!r}: a collision found from its parts does not render alike")
    return tuple(((a // N, a % N), (b // N, b % N)) for a, b in pairs)
