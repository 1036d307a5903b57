"""Named worlds: ring, path, torus, grid, resampling attributes and Sinkhorn random worlds.

Each builds ``π(z, z') = p(z) P(z, z')`` for a reversible chain P, so Π is
symmetric and both marginals equal p (THEORY §0).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp

from prhsim._rng import RngLike, check_rng
from prhsim.worlds._finite import FiniteWorld
from prhsim.worlds._product import ProductWorld

#: Worlds larger than this are built with a sparse Π by default.
SPARSE_FROM = 512


def _check_prob(name: str, value: float, *, low_open: bool = False) -> float:
    value = float(value)
    ok = (0.0 < value <= 1.0) if low_open else (0.0 <= value <= 1.0)
    if not ok:
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(f"{name} must lie in {interval}, got {value}")
    return value


def _check_size(name: str, n: int, minimum: int = 2) -> int:
    if int(n) != n or n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n}")
    return int(n)


def _walk_world(n: int, move: float, *, periodic: bool, sparse: bool | None) -> FiniteWorld:
    """Uniform-p lazy walk: stay w.p. 1-move, step to each neighbour w.p. move/2."""
    i = np.arange(n)
    rows, cols, vals = [i], [i], [np.full(n, 1.0 - move)]
    for step in (1, -1):
        j = i + step
        if periodic:
            j = j % n
            rows.append(i), cols.append(j), vals.append(np.full(n, move / 2))
        else:
            inside = (j >= 0) & (j < n)
            rows.append(i[inside]), cols.append(j[inside]), vals.append(np.full(inside.sum(), move / 2))
            # a step off the edge is a stay (reflecting walk): P stays symmetric
            rows.append(i[~inside]), cols.append(i[~inside]), vals.append(np.full((~inside).sum(), move / 2))
    P = sp.coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
    Pi = sp.csr_array(P) / n  # duplicates are summed
    p = np.full(n, 1.0 / n)
    use_sparse = n > SPARSE_FROM if sparse is None else sparse
    return FiniteWorld(p, Pi if use_sparse else Pi.toarray())


def ring(n: int, *, laziness: float = 0.5, sparse: bool | None = None) -> FiniteWorld:
    """Lazy random walk on a cycle of n states, uniform p.

    ``P = laziness·I + (1-laziness)/2·(shift + shiftᵀ)``; eigenvalues
    ``laziness + (1-laziness)cos(2πj/n)`` come in tied pairs (THEORY §1.2).
    """
    n = _check_size("ring size", n, 3)
    return _walk_world(n, 1.0 - _check_prob("laziness", laziness), periodic=True, sparse=sparse)


def path(n: int, *, move: float = 0.5, sparse: bool | None = None) -> FiniteWorld:
    """Lazy reflecting walk on 0..n-1, uniform p: step to a neighbour w.p. move/2 each.

    Eigenvalues ``1 - move·(1 - cos(πj/n))``, j = 0..n-1, all distinct for move > 0.
    """
    n = _check_size("path length", n)
    return _walk_world(n, _check_prob("move", move), periodic=False, sparse=sparse)


def torus(shape: Sequence[int], *, laziness: float = 0.5) -> ProductWorld:
    """Product of rings: a lazy walk on a periodic grid (full of ties, THEORY §6)."""
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
    return tuple(_check_size("axis size", s) for s in shape)


def resampling(q: Sequence[float], rate: float) -> FiniteWorld:
    """Keep the value w.p. 1-rate, else redraw it from q: ``π = (1-rate)·diag(q) + rate·qqᵀ``.

    ``K = (1-rate)·I + rate·√q√qᵀ`` has spectrum ``{1, (1-rate)^{×(|q|-1)}}`` (THEORY §4).
    Used for attributes that sometimes change, and for nuisance factors of views.
    """
    q = np.asarray(q, dtype=np.float64)
    rate = _check_prob("rate", rate)
    return FiniteWorld(q, (1.0 - rate) * np.diag(q) + rate * np.outer(q, q))


def _sinkhorn(A, target: np.ndarray, tol: float, max_iter: int):
    """``Π = diag(x) A diag(x) / sum`` with row sums ``target`` (symmetric Sinkhorn, ``x ← sqrt(x·p/(Ax))``)."""
    x = np.sqrt(target / np.asarray(A.sum(axis=1)).ravel())
    for _ in range(max_iter):
        Ax = A @ x
        err = np.max(np.abs(x * Ax - target))
        if err < tol:
            break
        x = np.sqrt(x * target / Ax)
        if not np.all(np.isfinite(x)):
            raise ValueError("Sinkhorn scaling diverged: no symmetric scaling of this affinity matches the target p")
    else:
        raise ValueError(f"Sinkhorn scaling did not converge in {max_iter} iterations (error {err:.2e})")
    if sp.issparse(A):
        d = sp.diags_array(x)
        Pi = sp.csr_array(d @ A @ d)
        Pi = sp.csr_array((Pi + Pi.T) / 2)
    else:
        Pi = A * np.outer(x, x)
        Pi = (Pi + Pi.T) / 2
    return Pi / Pi.sum()


def sinkhorn_world(affinity, p, *, tol: float = 1e-14, max_iter: int = 10_000) -> FiniteWorld:
    """The world on law p whose Π is a symmetric scaling ``diag(x) A diag(x)`` of a symmetric affinity A.

    Two worlds scaled to one p share their marginals exactly up to ``tol``:
    the way to build kernels ``K_1, K_2`` on the same p (THEORY §3).
    """
    p = np.asarray(p, dtype=np.float64)
    A = affinity if sp.issparse(affinity) else np.asarray(affinity, dtype=np.float64)
    if A.shape != (p.size, p.size):
        raise ValueError(f"affinity must have shape ({p.size}, {p.size}), got {A.shape}")
    if (A.data if sp.issparse(A) else A).min() < 0:
        raise ValueError("affinity must be non-negative")
    return FiniteWorld(p, _sinkhorn(A, p, tol, max_iter))


def _cap(p: np.ndarray, cap: float) -> np.ndarray:
    """Clip p at ``cap`` and hand the excess to the other states in proportion (p sums to 1, n·cap > 1)."""
    p = p.copy()
    while p.max() > cap * (1 + 1e-9):
        over = p > cap
        excess = np.sum(p[over] - cap)
        p[over] = cap
        p[~over] += excess * p[~over] / p[~over].sum()
    return p


def random_world(
    n: int,
    *,
    degree: int | None = None,
    concentration: float = 2.0,
    self_loop: float = 0.0,
    tol: float = 1e-13,
    max_iter: int = 10_000,
    rng: RngLike = None,
) -> FiniteWorld:
    """A random symmetric world by symmetric Sinkhorn scaling (seeded).

    A symmetric affinity A (dense uniform, or a random graph of about ``degree``
    neighbours per state, plus ``self_loop`` on the diagonal) is scaled as
    ``Π = diag(x) A diag(x)`` with ``x ← sqrt(x · p₀ / (A x))`` until its row sums
    match a Dirichlet(concentration) target p₀ (capped at 0.4, so that
    a world without self-pairs exists). The returned p is Π's exact row
    sum (equal to p₀ within ``tol``), so Π's marginals equal p to rounding.
    Dense worlds without self-loops have indefinite kernels (THEORY §8.1).
    """
    n = _check_size("n", n, 3)
    gen = check_rng(rng)
    if concentration <= 0:
        raise ValueError(f"concentration must be positive, got {concentration}")
    target = gen.dirichlet(np.full(n, float(concentration)))
    target = np.maximum(target, 1e-3 / n)
    target /= target.sum()
    # with (almost) no self-pairs p(z) ≈ Σ_{z'≠z} π(z, z') ≤ 1 − p(z): cap p at 0.4 (< 1/2) to stay feasible
    target = _cap(target, 0.4)
    if degree is None:
        A = gen.uniform(size=(n, n))
        A = (A + A.T) / 2
        np.fill_diagonal(A, self_loop)
    else:
        if not 1 <= degree < n:
            raise ValueError(f"degree must lie in 1..{n - 1}, got {degree}")
        rows = np.repeat(np.arange(n), degree)
        cols = gen.integers(0, n - 1, size=n * degree)
        cols = cols + (cols >= rows)  # no self-pairs from the random graph
        w = gen.uniform(0.5, 1.5, size=n * degree)
        A = sp.coo_array((w, (rows, cols)), shape=(n, n)).tocsr()
        A = sp.csr_array((A + A.T) / 2 + (self_loop + 1e-2) * sp.eye_array(n))  # a diagonal keeps scaling feasible
    Pi = _sinkhorn(A, target, tol, max_iter)
    p = np.asarray(Pi.sum(axis=1)).ravel()
    return FiniteWorld(p / p.sum(), Pi)
