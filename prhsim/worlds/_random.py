"""Random worlds by symmetric Sinkhorn scaling (docs/theory.md §0, §8.1).

``Π = diag(x) A diag(x)`` for a symmetric non-negative affinity A, with x chosen
so that the row sums match a target law; symmetric Π with equal marginals.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim.worlds._checks import check_size
from prhsim.worlds._finite import SPARSE_ENTRY, FiniteWorld

#: Peak n x n float tables of a dense random world (affinity, its symmetrisation, the scaled Π and its
#: symmetrisation, the world's copy and validation; measured: about 5).
DENSE_TABLES = 6
#: Peak copies of each stored entry of a sparse world (COO, CSR, A + Aᵀ, the scaled Π, its
#: symmetrisation, the world's copy and validation, not all at once; measured: about 7.5).
SPARSE_COPIES = 8
#: Bytes per state of the vectors (p, target, scaling x, A x, marginals).
VECTOR_BYTES = 8 * FLOAT


def _ensure_world_fits(n: int, entries: float | None, what: str, hint: str) -> None:
    """Guard a world of n states: dense (entries None, n² floats) or with this many sparse entries."""
    tables = DENSE_TABLES * FLOAT * float(n) ** 2 if entries is None else SPARSE_COPIES * SPARSE_ENTRY * entries
    ensure_fits(tables + VECTOR_BYTES * float(n), what, hint)


def _sinkhorn(A, target: np.ndarray, tol: float, max_iter: int):
    """``Π = diag(x) A diag(x) / sum`` with row sums ``target`` (symmetric Sinkhorn, ``x ← sqrt(x·p/(Ax))``)."""
    x = np.sqrt(target / np.asarray(A.sum(axis=1)).ravel())
    for _ in range(max_iter):
        Ax = A @ x
        err = np.max(np.abs(x * Ax - target))
        if err < tol:
            break
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # divergence is checked just below
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
    the way to build kernels ``K_1, K_2`` on the same p (docs/theory.md §3).
    """
    p = np.asarray(p, dtype=np.float64)
    A = affinity if sp.issparse(affinity) else np.asarray(affinity, dtype=np.float64)
    if A.shape != (p.size, p.size):
        raise ValueError(f"affinity must have shape ({p.size}, {p.size}), got {A.shape}")
    sparse = sp.issparse(A)
    _ensure_world_fits(p.size, float(A.nnz) if sparse else None,
                       f"Sinkhorn scaling of a {'sparse' if sparse else 'dense'} affinity over {p.size:,} states",
                       "use a smaller affinity" if sparse else "use a smaller or sparse affinity")
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
    Dense worlds without self-loops have indefinite kernels (docs/theory.md §8.1).
    """
    n = check_size("n", n, 3)
    if concentration <= 0:
        raise ValueError(f"concentration must be positive, got {concentration}")
    if degree is not None and not 1 <= degree < n:
        raise ValueError(f"degree must lie in 1..{n - 1}, got {degree}")
    if degree is None:
        _ensure_world_fits(n, None, f"a dense random world of {n:,} states",
                           "lower n, or pass degree for a sparse world")
    else:
        _ensure_world_fits(n, 2.0 * n * degree + n, f"a sparse random world of {n:,} states x degree {degree}",
                           "lower n or degree")
    gen = check_rng(rng)
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
        rows = np.repeat(np.arange(n), degree)
        cols = gen.integers(0, n - 1, size=n * degree)
        cols = cols + (cols >= rows)  # no self-pairs from the random graph
        w = gen.uniform(0.5, 1.5, size=n * degree)
        A = sp.coo_array((w, (rows, cols)), shape=(n, n)).tocsr()
        A = sp.csr_array((A + A.T) / 2 + (self_loop + 1e-2) * sp.eye_array(n))  # a diagonal keeps scaling feasible
    Pi = _sinkhorn(A, target, tol, max_iter)
    p = np.asarray(Pi.sum(axis=1)).ravel()
    return FiniteWorld(p / p.sum(), Pi)
