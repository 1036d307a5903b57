"""Sampling positive pairs (z, z') ~ π, and V views per anchor, from a world (docs/theory.md §0, §4, §6).

A finite world is sampled from its stored pairs: the anchor ``z ~ p`` (the row
sums of Π) and each view ``z' ~ Π[z, ·] / p(z)``. Both draws are an inverse-CDF
lookup (``searchsorted``) in one cumulative sum over Π's positive entries, row
by row: set-up is linear in the stored pairs (nnz of a sparse Π, n² of a dense
one) and each draw costs ``O(log nnz)``, independent of B.

A product world ``π = ⊗ π_f`` (docs/theory.md §6), a modal world ``π_Z ⊗ ρ``
among them (docs/theory.md §4), is sampled factor by factor: each factor draws
its coordinates of the anchor and of the views, and the flat state is their
row-major ravel (``np.ravel_multi_index`` with the world's shape). Neither π nor
p of the product is ever formed, so a world of 10¹² states costs what its
factors cost.

Sampled probabilities are exact up to float64 rounding of the cumulative sums
(about 1e-16 absolute per stored pair).
"""

from __future__ import annotations

import numbers
import weakref
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim._types import States
from prhsim.worlds._finite import SPARSE_ENTRY, FiniteWorld, World
from prhsim.worlds._views import ModalWorld

#: Peak bytes per drawn state of one factor (its uniform, search index, clipped copy, coordinate, flat state).
SAMPLE_BYTES = 6 * FLOAT
#: Peak copies of each stored pair in a finite world's set-up (the cumulative sum; a filtered copy of
#: the entries and their columns when Π stores zeros).
SETUP_COPIES = 3
#: The largest world whose states fit the int64 indices the samplers return.
MAX_STATES = int(np.iinfo(np.int64).max)

# One sampler per finite world, built on first use (worlds are immutable; the entry dies with the world).
_CACHE: "weakref.WeakKeyDictionary[FiniteWorld, _RowSampler]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class _RowSampler:
    """Inverse-CDF tables of one finite world's Π, over its positive entries in row-major order.

    ``cum[j]`` is the mass of entries 0..j; row z holds entries ``indptr[z]..indptr[z+1]-1``
    (columns ``indices[j]``, or ``j - indptr[z]`` for a dense Π when ``indices`` is None), its
    last positive entry is ``last[z]`` and ``row_end[z] = cum[last[z]]``, so the mass of row z
    is ``row_end[z] - row_end[z-1]`` (= p(z) up to rounding).
    """

    n: int
    cum: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray | None
    last: np.ndarray
    row_end: np.ndarray

    @classmethod
    def build(cls, world: FiniteWorld) -> "_RowSampler":
        n, Pi = world.n, world.Pi
        if sp.issparse(Pi):
            ensure_fits(SETUP_COPIES * SPARSE_ENTRY * float(Pi.nnz) + 2 * FLOAT * n,
                        f"the pair sampler of a world with {Pi.nnz:,} stored pairs", "use a sparser or smaller world")
            data, indices, indptr = Pi.data, Pi.indices, Pi.indptr
            keep = data > 0
            if not keep.all():  # explicit zeros: drop them so that no row ends on one
                rows = np.repeat(np.arange(n), np.diff(indptr))
                data, indices = data[keep], indices[keep]
                indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=n))])
            last = indptr[1:].astype(np.int64) - 1
        else:
            ensure_fits(SETUP_COPIES * FLOAT * float(n) ** 2, f"the pair sampler of a dense world of {n:,} states",
                        "use a sparse Pi or a smaller world")
            data, indices = Pi.ravel(), None
            indptr = np.arange(n + 1, dtype=np.int64) * n
            # the last positive column of each row: u rounding up to the row's end is clipped there
            last = indptr[:-1] + (n - 1 - np.argmax(Pi[:, ::-1] > 0, axis=1))
        cum = np.cumsum(data)
        row_end = cum[last]
        for array in (cum, row_end, last):
            array.setflags(write=False)
        return cls(n, cum, np.asarray(indptr), indices, last, row_end)

    def anchors(self, u: np.ndarray) -> np.ndarray:
        """States with law ``row_end`` increments (the row sums of Π, = p), from uniforms u in [0, 1)."""
        z = np.searchsorted(self.row_end, u * self.row_end[-1], side="right")
        return np.minimum(z, self.n - 1)

    def views(self, z: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``z' ~ Π[z, ·] / p(z)`` for anchors z of shape (B,) and uniforms u of shape (B, V)."""
        start = np.where(z > 0, self.row_end[z - 1], 0.0)[:, None]
        mass = self.row_end[z][:, None] - start
        j = np.searchsorted(self.cum, start + u * mass, side="right")  # first entry with cum > u
        j = np.minimum(j, self.last[z][:, None])
        if self.indices is None:
            return j - self.indptr[z][:, None]
        return self.indices[j].astype(np.int64)


def _row_sampler(world: FiniteWorld) -> _RowSampler:
    sampler = _CACHE.get(world)
    if sampler is None:
        sampler = _CACHE[world] = _RowSampler.build(world)
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
    (an int seed or a numpy Generator; None is seed 0).

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
    _factors: tuple[_RowSampler, ...] = field(repr=False)

    def pairs(self, B: int, *, rng: RngLike = None) -> tuple[States, States]:
        """B positive pairs ``(z, z') ~ π``: z ~ p, then z' ~ Π[z, ·]/p(z); two int64 arrays of shape (B,).

        The same as ``views(B, 1, rng=rng)`` with the view column flattened (same seed, same pairs).
        """
        z, v = self.views(_check_count("B", B), 1, rng=rng)
        return z, v[:, 0]

    def batches(self, B: int, steps: int, *, rng: RngLike = None) -> tuple[States, States]:
        """``steps`` minibatches of B pairs in one draw: anchors and views, each (steps, B) int64.

        Row j equals what the j-th of ``steps`` back-to-back ``pairs(B, rng=gen)`` calls on one
        generator returns, and the generator advances as those calls would advance it (each
        call draws, factor by factor, B anchor uniforms then B view uniforms), so a training
        loop can draw a chunk of steps at once and keep the per-step stream.
        """
        B, steps = _check_count("B", B), _check_count("steps", steps)
        ensure_fits(SAMPLE_BYTES * float(B) * steps * 2, f"{steps:,} batches of {B:,} pairs", "lower B or steps")
        gen = check_rng(rng)
        u = gen.random((steps, len(self._factors), 2, B))
        anchors = np.zeros((steps, B), dtype=np.int64)
        views = np.zeros((steps, B), dtype=np.int64)
        for f, (size, factor) in enumerate(zip(self.shape, self._factors)):  # row-major ravel, as pairs() does
            z = factor.anchors(u[:, f, 0])
            anchors = anchors * size + z
            views = views * size + factor.views(z.ravel(), u[:, f, 1].reshape(-1, 1)).reshape(z.shape)
        return anchors, views

    def views(self, B: int, V: int, *, rng: RngLike = None) -> tuple[States, States]:
        """B anchors ``z ~ p`` and V views each: ``z'_1..z'_V ~ π(·|z)`` independent given z.

        ``P(z, z'_1, …, z'_V) = p(z) Π_v π(z'_v | z)``, so each ``(z, z'_v)`` is a positive pair
        and the views of one anchor are exchangeable. Returns anchors (B,) and views (B, V), int64.
        """
        B, V = _check_count("B", B), _check_count("V", V)
        ensure_fits(SAMPLE_BYTES * float(B) * (V + 1), f"{B:,} anchors x {V:,} views", "lower B or V")
        gen = check_rng(rng)
        anchors = np.zeros(B, dtype=np.int64)
        views = np.zeros((B, V), dtype=np.int64)
        for size, factor in zip(self.shape, self._factors):  # row-major ravel, one factor at a time
            z = factor.anchors(gen.random(B))
            anchors = anchors * size + z
            views = views * size + factor.views(z, gen.random((B, V)))
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
    return PairSampler(n, shape, tuple(_row_sampler(f) for f in factors))


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
