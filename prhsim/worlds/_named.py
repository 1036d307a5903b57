"""Named worlds: ring, path, torus, grid and resampling attributes.

Each builds ``π(z, z') = p(z) P(z, z')`` for a reversible chain P, so Π is
symmetric and both marginals equal p (docs/theory.md §0).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp

from prhsim._budget import FLOAT, ensure_fits
from prhsim.worlds._checks import check_prob, check_size
from prhsim.worlds._finite import FiniteWorld
from prhsim.worlds._product import ProductWorld

#: Worlds larger than this are built with a sparse Π by default.
SPARSE_FROM = 512
#: Peak bytes per state of a walk world: 3n COO entries (row, column, value; listed, then joined),
#: the CSR matrix, its scaled copy and the world's own copy, and p (measured: about 425).
WALK_BYTES_PER_STATE = 440
#: Peak dense n x n float tables of a dense walk world (the matrix, the world's copy, validation).
WALK_DENSE_TABLES = 5
#: Peak n x n float tables of a resampling world (diag, outer, their sum, the world's copy, validation).
RESAMPLING_TABLES = 6


def _walk_world(n: int, move: float, *, periodic: bool, sparse: bool | None, name: str) -> FiniteWorld:
    """Uniform-p lazy walk: stay w.p. 1-move, step to each neighbour w.p. move/2.

    Periodic: the neighbours of 0 are n-1 and 1. Reflecting: a step off the edge
    is a stay, so P stays symmetric and p uniform.
    """
    use_sparse = n > SPARSE_FROM if sparse is None else sparse
    dense_bytes = 0.0 if use_sparse else WALK_DENSE_TABLES * FLOAT * float(n) ** 2
    ensure_fits(WALK_BYTES_PER_STATE * float(n) + dense_bytes,
                f"a {'sparse' if use_sparse else 'dense'} {name} of {n:,} states",
                "lower n" if use_sparse else "lower n or pass sparse=True")
    i = np.arange(n)
    rows, cols, vals = [i], [i], [np.full(n, 1.0 - move)]
    for step in (1, -1):
        rows.append(i)
        cols.append((i + step) % n if periodic else np.clip(i + step, 0, n - 1))
        vals.append(np.full(n, move / 2))
    P = sp.coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
    Pi = sp.csr_array(P) / n  # duplicate entries are summed
    return FiniteWorld(np.full(n, 1.0 / n), Pi if use_sparse else Pi.toarray())


def ring(n: int, *, laziness: float = 0.5, sparse: bool | None = None) -> FiniteWorld:
    """Lazy random walk on a cycle of n states, uniform p.

    ``P = laziness·I + (1-laziness)/2·(shift + shiftᵀ)``; eigenvalues
    ``laziness + (1-laziness)cos(2πj/n)`` come in tied pairs (docs/theory.md §1.2).
    """
    n = check_size("ring size", n, 3)
    return _walk_world(n, 1.0 - check_prob("laziness", laziness), periodic=True, sparse=sparse, name="ring")


def path(n: int, *, move: float = 0.5, sparse: bool | None = None) -> FiniteWorld:
    """Lazy reflecting walk on 0..n-1, uniform p: step to a neighbour w.p. move/2 each.

    Eigenvalues ``1 - move·(1 - cos(πj/n))``, j = 0..n-1, all distinct for move > 0.
    """
    n = check_size("path length", n)
    return _walk_world(n, check_prob("move", move), periodic=False, sparse=sparse, name="path")


def torus(shape: Sequence[int], *, laziness: float = 0.5) -> ProductWorld:
    """Product of rings: a lazy walk on a periodic grid (full of ties, docs/theory.md §6)."""
    return ProductWorld([ring(s, laziness=laziness) for s in _check_shape(shape)])


def grid(shape: Sequence[int], *, move: float | Sequence[float] = 0.5) -> ProductWorld:
    """Product of reflecting paths; ``move`` per axis (distinct values break the ties)."""
    shape = _check_shape(shape)
    moves = [move] * len(shape) if np.isscalar(move) else list(move)
    if len(moves) != len(shape):
        raise ValueError(f"grid needs one move probability per axis: {len(shape)} axes, {len(moves)} given")
    return ProductWorld([path(s, move=m) for s, m in zip(shape, moves)])


def _check_shape(shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(shape)
    if not shape:
        raise ValueError("shape must have at least one axis")
    return tuple(check_size("axis size", s) for s in shape)


def resampling(q: Sequence[float], rate: float) -> FiniteWorld:
    """Keep the value w.p. 1-rate, else redraw it from q: ``π = (1-rate)·diag(q) + rate·qqᵀ``.

    ``K = (1-rate)·I + rate·√q√qᵀ`` has spectrum ``{1, (1-rate)^{×(|q|-1)}}`` (docs/theory.md §4).
    Used for attributes that sometimes change, and for nuisance factors of views.
    """
    q = np.asarray(q, dtype=np.float64)
    rate = check_prob("rate", rate)
    ensure_fits(RESAMPLING_TABLES * FLOAT * float(q.size) ** 2, f"a resampling world of {q.size:,} values",
                "lower the number of values of q")
    return FiniteWorld(q, (1.0 - rate) * np.diag(q) + rate * np.outer(q, q))


def metropolis(p: Sequence[float], proposal: FiniteWorld) -> FiniteWorld:
    """The Metropolis chain with stationary law p whose proposal is the chain of ``proposal`` (docs/theory.md §5.3).

    The proposal chain ``Q(a → a') = Π₀(a, a')/p₀(a)`` is reversible for its own law p₀ (Π₀ symmetric). A move
    is accepted with probability ``min(1, p(a') p₀(a) / (p(a) p₀(a')))``, so with ``r = p/p₀``::

        Π(a, a') = Π₀(a, a') · min(r(a), r(a'))   (a ≠ a'),     Π(a, a) = p(a) − Σ_{a'≠a} Π(a, a'),

    symmetric with both marginals p, and ``Π = Π₀`` when ``p = p₀``. Used for attributes that depend on one
    another (a colour that follows the shape) and still move as the independent attributes do.

    Raises:
        ValueError: if p is not a positive law over the proposal's states.
    """
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (proposal.n,) or not np.all(p > 0) or not np.isclose(p.sum(), 1.0, atol=1e-12):
        raise ValueError(f"metropolis needs a positive law over the proposal's {proposal.n} states, got shape "
                         f"{p.shape} and sum {p.sum() if p.size else 0.0}")
    ensure_fits(RESAMPLING_TABLES * FLOAT * float(p.size) ** 2, f"a Metropolis world of {p.size:,} values",
                "lower the number of values")
    Pi0 = proposal.Pi.toarray() if sp.issparse(proposal.Pi) else np.asarray(proposal.Pi, dtype=np.float64)
    r = p / proposal.p
    Pi = Pi0 * np.minimum(r[:, None], r[None, :])
    np.fill_diagonal(Pi, 0.0)
    np.fill_diagonal(Pi, p - Pi.sum(axis=1))
    return FiniteWorld(p, Pi, symmetrize=True)
