"""Sampling positive pairs (z, z') ~ π, and V views per anchor, from a world (docs/theory.md §0, §4, §6).

A finite world is sampled from its stored pairs with Walker alias tables, built
once per world: one table over Π's positive entries draws a whole pair
``(z, z') ~ π`` from one uniform, and one table per row (built on first use)
draws further views ``z' ~ Π[z, ·] / p(z)`` of a drawn anchor. A uniform u picks
cell ``i = ⌊u·m⌋`` of a table of m cells and keeps entry i when the fraction
``u·m − i`` falls below the cell's ``prob[i]``, else takes its ``alias[i]``: a
draw costs a few array passes, independent of the table's size and of B. Set-up
costs a few passes over the stored pairs (nnz of a sparse Π, n² of a dense one)
and two sorted searches among them.

A product world ``π = ⊗ π_f`` (docs/theory.md §6), a modal world ``π_Z ⊗ ρ``
among them (docs/theory.md §4), is sampled factor by factor: each factor draws
its coordinates of the anchor and of the views, and the flat state is their
row-major ravel (``np.ravel_multi_index`` with the world's shape). Neither π nor
p of the product is ever formed, so a world of 10¹² states costs what its
factors cost.

Sampled probabilities are exact up to float64 rounding: the probabilities the
tables imply match π's to about 1e-16 (their running sums are taken in extended
precision), and a uniform's 53 bits, shared by the cell and the threshold, resolve
each outcome's probability to about 2⁻⁵³ absolute.
"""

from __future__ import annotations

import numbers
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple, Sequence

import numpy as np
import scipy.sparse as sp

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim._types import States
from prhsim.worlds._finite import FiniteWorld, World
from prhsim.worlds._views import ModalWorld

#: Peak bytes per drawn state of one factor (its uniform, u·m, cell, threshold, alias offset, state).
SAMPLE_BYTES = 6 * FLOAT
#: Peak bytes per stored pair of a finite world's set-up, and of its row tables' (measured: about 125):
#: the kept tables (weight, row, column, cut, jump: 40) and the construction's temporaries (extended
#: precision running sums and search keys among them).
SETUP_BYTES = 16 * FLOAT
#: Pairs are drawn in blocks of about this many (their temporaries stay in cache and off fresh pages).
BLOCK = 8192
#: The largest world whose states fit the int64 indices the samplers return.
MAX_STATES = int(np.iinfo(np.int64).max)

# One sampler per finite world, built on first use (worlds are immutable; the entry dies with the world).
_CACHE: "weakref.WeakKeyDictionary[FiniteWorld, _FactorSampler]" = weakref.WeakKeyDictionary()


class AliasTable(NamedTuple):
    """Walker alias tables of consecutive segments of outcomes 0..m-1 (one segment: one law).

    Segment g holds the outcomes (and cells) ``start[g] .. start[g] + length[g] - 1``. A
    uniform u picks cell ``c = start[g] + i`` with ``i = ⌊u·length[g]⌋``, keeps outcome c
    when ``u·length[g] < cut[c]`` and otherwise takes outcome ``c + jump[c]`` (of the same
    segment): ``cut[c] = i + prob[c]`` holds the cell's keep probability, ``jump[c]`` its alias
    as an offset, so that a draw is ``c + (u·m ≥ cut[c])·jump[c]``. Outcome j has probability
    ``(prob[j] + Σ_{c: alias[c] = j} (1 − prob[c])) / length[g]`` given its segment (:meth:`implied`).
    """

    cut: np.ndarray
    jump: np.ndarray
    start: np.ndarray
    length: np.ndarray

    @classmethod
    def of(cls, prob: np.ndarray, alias: np.ndarray, start: np.ndarray, length: np.ndarray) -> "AliasTable":
        """The table of keep probabilities ``prob`` and aliases ``alias`` (outcome indices) per cell."""
        cell = np.arange(prob.size, dtype=np.int64)
        local = cell - np.repeat(start, length)
        return cls(local + prob, alias - cell, start, length)

    @property
    def prob(self) -> np.ndarray:
        """The keep probability of every cell, as drawn (``cut`` less the cell's index in its segment)."""
        return self.cut - (np.arange(self.cut.size) - np.repeat(self.start, self.length))

    @property
    def alias(self) -> np.ndarray:
        """The alias of every cell (an outcome of the same segment)."""
        return np.arange(self.jump.size) + self.jump

    def implied(self) -> np.ndarray:
        """The probability of every outcome given its segment, as the table draws it."""
        prob = self.prob
        mass = prob + np.bincount(self.alias, weights=1.0 - prob, minlength=prob.size)
        return mass / np.repeat(self.length, self.length)

    def draw(self, u: np.ndarray, segment: np.ndarray | None = None) -> np.ndarray:
        """Outcomes from uniforms u in [0, 1): of the one segment, or of ``segment`` (broadcast against u)."""
        m = self.length[0] if segment is None else self.length[segment]
        x = u * m
        c = x.astype(np.int64)  # ⌊u·m⌋ (x ≥ 0)
        np.minimum(c, m - 1, out=c)  # u·m rounded up to m: the last cell, whose cut it passes (the alias)
        if segment is not None:
            c += self.start[segment]
        c += (x >= self.cut[c]) * self.jump[c]
        return c


def walker(weights: np.ndarray, lengths: np.ndarray) -> AliasTable:
    """Alias tables of the laws ``weights[segment] / sum`` of consecutive segments (all weights > 0, lengths ≥ 1).

    Vectorised form of the sweep construction: in a segment of m cells of height
    ``h = 1/m`` (its weights scaled to sum 1), the light outcomes (share < h) keep
    their share in their own cell and take the rest from a heavy one; the heavy
    outcomes, in order, fill the light ones in order, and each heavy outcome's
    leftover ``h + E − D`` (E: the heavies' surplus so far, D: the deficit they have
    filled) stays in its own cell, the rest of which the next heavy outcome fills.
    The light outcome starting at deficit D is filled by the first heavy one whose
    running surplus exceeds D, and a heavy outcome has filled the light ones starting
    below its running surplus: two sorted searches, for all the segments at once (the
    running sums restart at each segment, in extended precision where the platform
    has it, so that rounding carries from no segment to the next).
    """
    weights = np.asarray(weights, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    end = start + lengths
    seg = np.repeat(np.arange(lengths.size), lengths)
    cells = lengths[seg].astype(np.float64)  # m of each outcome's segment
    share = weights / np.add.reduceat(weights, start)[seg]
    excess = share - 1.0 / cells
    # every segment keeps a heavy outcome (its largest), even when rounding puts all shares below h
    heavy = (excess >= 0) | (weights == np.maximum.reduceat(weights, start)[seg])
    H, L = np.flatnonzero(heavy), np.flatnonzero(~heavy)
    hseg, lseg = seg[H], seg[L]
    del heavy, seg
    first_heavy, last_heavy = np.searchsorted(H, start), np.searchsorted(H, end) - 1
    first_light, end_light = np.searchsorted(L, start), np.searchsorted(L, end)
    # running deficit of the lights and surplus of the heavies, in extended precision, taken from each
    # segment's start (no drift from one segment to the next) and keyed 2·segment + sum to search them all at once
    wide = np.longdouble
    filled = np.concatenate([[wide(0)], np.cumsum(-excess[L], dtype=wide)])  # deficit of the first c lights
    filled_before = filled[first_light]  # per segment
    light_key = 2 * lseg + (filled[:-1] - filled_before[lseg])  # deficit filled before each light
    surplus = np.concatenate([[wide(0)], np.cumsum(np.maximum(excess[H], 0.0), dtype=wide)])
    del excess
    heavy_sum = surplus[1:] - surplus[first_heavy][hseg]  # surplus of the segment's heavies up to each
    del surplus
    heavy_key = 2 * hseg + heavy_sum
    prob = share * cells  # a light outcome keeps its share of its cell (heavy ones are set below)
    del share
    alias = np.arange(weights.size, dtype=np.int64)
    # the light outcome starting at deficit D: the first heavy one with surplus > D (within its segment)
    alias[L] = H[np.clip(np.searchsorted(heavy_key, light_key, side="right"), first_heavy[lseg], last_heavy[lseg])]
    # heavy outcome m has filled the lights starting below its surplus E_m: it keeps h + E_m - D in its cell
    count = np.clip(np.searchsorted(light_key, heavy_key, side="left"), first_light[hseg], end_light[hseg])
    del light_key, heavy_key
    nxt = np.minimum(np.arange(1, H.size + 1), H.size - 1)
    has_next = hseg[nxt] == hseg
    has_next[-1] = False  # the last heavy outcome of a segment keeps its whole cell
    keep = ((1.0 / cells[H] + (heavy_sum - (filled[count] - filled_before[hseg]))) * cells[H]).astype(np.float64)
    prob[H] = np.where(has_next, np.clip(keep, 0.0, 1.0), 1.0)
    alias[H] = np.where(has_next, H[nxt], H)
    return AliasTable.of(prob, alias, start, lengths)


@dataclass(frozen=True, eq=False)
class _FactorSampler:
    """The alias tables of one finite world's Π, over its positive entries in row-major order.

    Entry j is the pair ``(rows[j], cols[j])`` with weight ``Π[rows[j], cols[j]] > 0``;
    ``pairs`` draws an entry with probability proportional to its weight (z ~ p and
    z' ~ Π[z, ·]/p(z) at once), ``views`` (built on first use) one entry of row z, with
    probability proportional to its weight, for each anchor z (row z's entries are
    ``indptr[z] .. indptr[z+1] - 1``).
    """

    n: int
    weights: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    indptr: np.ndarray
    pairs: AliasTable

    @classmethod
    def build(cls, world: FiniteWorld) -> "_FactorSampler":
        n, Pi = world.n, world.Pi
        if sp.issparse(Pi):
            ensure_fits(SETUP_BYTES * float(Pi.nnz) + 2 * FLOAT * n,
                        f"the pair sampler of a world with {Pi.nnz:,} stored pairs", "use a sparser or smaller world")
            keep = Pi.data > 0  # explicit zeros are never drawn
            rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(Pi.indptr))[keep]
            weights, cols = Pi.data[keep], Pi.indices[keep].astype(np.int64)
        else:
            ensure_fits(SETUP_BYTES * float(n) ** 2, f"the pair sampler of a dense world of {n:,} states",
                        "use a sparse Pi or a smaller world")
            flat = np.flatnonzero(Pi.ravel() > 0)
            rows, cols = np.divmod(flat, n)
            weights = Pi.ravel()[flat]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
        table = walker(weights, np.array([weights.size]))
        for array in (weights, rows, cols, indptr, *table):
            array.setflags(write=False)
        return cls(n, weights, rows, cols, indptr, table)

    @cached_property
    def views(self) -> AliasTable:
        """One table per row with entries: row z's law ``Π[z, ·] / p(z)`` (segments indexed by state)."""
        ensure_fits(SETUP_BYTES * float(self.weights.size), f"the row tables of {self.weights.size:,} stored pairs",
                    "use a sparser or smaller world")
        counts = np.diff(self.indptr)
        table = walker(self.weights, counts[counts > 0])
        # index the segments by state: a state without entries (never an anchor) gets an empty segment
        table = table._replace(start=self.indptr[:-1], length=counts)
        for array in table:
            array.setflags(write=False)
        return table


def _factor_sampler(world: FiniteWorld) -> _FactorSampler:
    sampler = _CACHE.get(world)
    if sampler is None:
        sampler = _CACHE[world] = _FactorSampler.build(world)
    return sampler


def _check_count(name: str, value: object) -> int:
    """A positive integer (not a bool, not a float)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True, eq=False)
class PairSampler:
    """Draws positive pairs and multi-view batches from a world's pair law π, factor by factor.

    Built by :func:`pair_sampler`; states are row-major flat indices over ``shape``
    (one factor for a finite world). Every method takes a keyword-only ``rng``
    (an int seed or a numpy Generator; None is seed 0), :meth:`batches_for` one per stream.

    Attributes:
        n: the number of states.
        shape: the factor sizes.

    Example:
        >>> from prhsim.worlds import ring
        >>> z, z2 = pair_sampler(ring(5)).pairs(4, rng=0)
        >>> z.shape, z2.dtype.name, bool(np.all((z2 - z) % 5 != 2))
        ((4,), 'int64', True)
    """

    n: int
    shape: tuple[int, ...]
    _factors: tuple[_FactorSampler, ...] = field(repr=False)

    def pairs(self, B: int, *, rng: RngLike = None) -> tuple[States, States]:
        """B positive pairs ``(z, z') ~ π`` (z ~ p and z' ~ Π[z, ·]/p(z)); two int64 arrays of shape (B,).

        The same as ``views(B, 1, rng=rng)`` with the view column flattened (same seed, same pairs).
        """
        z, v = self.views(_check_count("B", B), 1, rng=rng)
        return z, v[:, 0]

    def batches(self, B: int, steps: int, *, rng: RngLike = None) -> tuple[States, States]:
        """``steps`` minibatches of B pairs in one draw: anchors and views, each (steps, B) int64.

        Row j equals what the j-th of ``steps`` back-to-back ``pairs(B, rng=gen)`` calls on one
        generator returns, and the generator advances as those calls would advance it (each
        call draws B uniforms per factor, factor by factor: one per pair), so a training loop
        can draw a chunk of steps at once and keep the per-step stream.
        """
        anchors, views = self.batches_for(B, steps, [rng])
        return anchors[0], views[0]

    def batches_for(self, B: int, steps: int, rngs: Sequence[RngLike]) -> tuple[States, States]:
        """``batches(B, steps, rng=r)`` of every r in ``rngs``, stacked: anchors and views, (len(rngs), steps, B) int64.

        One ``random`` call per generator and one table lookup for all of them, so that many
        streams (one per training seed) cost no Python call per stream and step; stream s
        depends on ``rngs[s]`` alone.
        """
        B, steps = _check_count("B", B), _check_count("steps", steps)
        gens = [check_rng(rng) for rng in rngs]
        rows, F = len(gens) * steps, len(self._factors)
        ensure_fits(SAMPLE_BYTES * float(B) * rows * 2, f"{len(gens):,} x {steps:,} batches of {B:,} pairs",
                    "lower B or steps")
        u = np.empty((len(gens), steps, F, B))
        for gen, out in zip(gens, u):
            gen.random(out=out)  # the stream of back-to-back pairs() calls on this generator
        u = u.reshape(rows, F, B)
        anchors = np.empty((rows, B), dtype=np.int64)
        views = np.empty((rows, B), dtype=np.int64)
        per_block = max(1, BLOCK // B)
        for first in range(0, rows, per_block):  # a block of steps at a time: the temporaries stay small
            block = slice(first, first + per_block)
            a, v = anchors[block], views[block]
            for f, (size, factor) in enumerate(zip(self.shape, self._factors)):  # row-major ravel, as pairs()
                j = factor.pairs.draw(u[block, f])
                if f == 0:
                    np.take(factor.rows, j, out=a)
                    np.take(factor.cols, j, out=v)
                else:
                    a *= size
                    a += factor.rows[j]
                    v *= size
                    v += factor.cols[j]
        return anchors.reshape(len(gens), steps, B), views.reshape(len(gens), steps, B)

    def views(self, B: int, V: int, *, rng: RngLike = None) -> tuple[States, States]:
        """B anchors ``z ~ p`` and V views each: ``z'_1..z'_V ~ π(·|z)`` independent given z.

        ``P(z, z'_1, …, z'_V) = p(z) Π_v π(z'_v | z)``, so each ``(z, z'_v)`` is a positive pair
        and the views of one anchor are exchangeable. Returns anchors (B,) and views (B, V), int64.
        Per factor, B·V uniforms ``u`` (B, V): ``u[:, 0]`` draws the pair (anchor, first view)
        from π, ``u[:, 1:]`` the further views from the anchor's row.
        """
        B, V = _check_count("B", B), _check_count("V", V)
        ensure_fits(SAMPLE_BYTES * float(B) * (V + 1), f"{B:,} anchors x {V:,} views", "lower B or V")
        gen = check_rng(rng)
        anchors = np.zeros(B, dtype=np.int64)
        views = np.zeros((B, V), dtype=np.int64)
        for size, factor in zip(self.shape, self._factors):  # row-major ravel, one factor at a time
            u = gen.random((B, V))
            j = factor.pairs.draw(u[:, 0])
            z = factor.rows[j]
            view = np.empty((B, V), dtype=np.int64)
            view[:, 0] = factor.cols[j]
            if V > 1:
                view[:, 1:] = factor.cols[factor.views.draw(u[:, 1:], z[:, None])]
            anchors = anchors * size + z
            views = views * size + view
        return anchors, views


def pair_sampler(world: World) -> PairSampler:
    """The pair sampler of a finite or product world (set-up linear in each factor's stored pairs).

    Factor tables are built once per factor world and shared by every sampler that uses it.

    Raises:
        ValueError: if ``world`` is not a world, or has more states than int64 indices can hold.
    """
    if not isinstance(world, World):
        raise ValueError(f"world must be a FiniteWorld or ProductWorld, got {type(world).__name__}")
    factors = tuple(world.factors)
    if not all(isinstance(f, FiniteWorld) for f in factors):
        raise ValueError(f"world must be a FiniteWorld or ProductWorld of finite factors, got {world!r}")
    shape = tuple(f.n for f in factors)
    n = int(np.prod(shape, dtype=object))
    if n > MAX_STATES:
        raise ValueError(f"world has {n} states, more than int64 state indices can hold ({MAX_STATES})")
    return PairSampler(n, shape, tuple(_factor_sampler(f) for f in factors))


def sample_pairs(world: World, B: int, *, rng: RngLike = None) -> tuple[States, States]:
    """B positive pairs ``(z, z') ~ π`` of ``world``: ``pair_sampler(world).pairs(B, rng=rng)``.

    Example:
        >>> from prhsim.worlds import ProductWorld, ring
        >>> z, z2 = sample_pairs(ProductWorld([ring(10**4)] * 3), 3, rng=1)  # 10^12 states, nothing formed
        >>> bool(z.max() < 10**12 and z2.max() < 10**12)
        True
    """
    return pair_sampler(world).pairs(B, rng=rng)


class ModalPairs(NamedTuple):
    """Modal pairs ``((z, n), (z', n'))``: base states z, z2 and nuisance values n, n2 (arrays of one shape)."""

    z: States
    n: States
    z2: States
    n2: States


def split_modal(world: ModalWorld, states: States) -> tuple[States, States]:
    """Base state and nuisance of modal states ``z·|N| + n``: ``(states // |N|, states % |N|)``.

    Example:
        >>> from prhsim.worlds import Modality, good, ring, view_world
        >>> w = view_world(ring(3), Modality("text", [0.5, 0.5]), good())
        >>> [a.tolist() for a in split_modal(w, np.array([0, 3, 5]))]
        [[0, 1, 2], [0, 1, 1]]
    """
    if not isinstance(world, ModalWorld):
        raise ValueError(f"world must be a ModalWorld (from view_world), got {type(world).__name__}")
    return np.divmod(np.asarray(states, dtype=np.int64), world.n_nuisance)


def sample_modal_pairs(world: ModalWorld, B: int, *, rng: RngLike = None) -> ModalPairs:
    """B modal pairs of a view world, split into base states and nuisances.

    The nuisance pair follows the view (docs/theory.md §4): a good view draws n' ~ q
    independently of n; bad(ε) keeps n' = n w.p. 1-ε and otherwise draws n' ~ q,
    so ``P(n' = n) = (1-ε) + ε Σ q²``.
    """
    if not isinstance(world, ModalWorld):
        raise ValueError(f"world must be a ModalWorld (from view_world), got {type(world).__name__}")
    a, b = sample_pairs(world, B, rng=rng)
    return ModalPairs(*split_modal(world, a), *split_modal(world, b))
