"""Top-m eigenpairs of a world's kernel, by algebraic value, with three backends (THEORY §1, §6, §8.1).

* ``dense``: ``scipy.linalg.eigh`` on K (or ``K − 3ssᵀ`` when centred), top-m subset.
* ``sparse``: ``scipy.sparse.linalg.eigsh`` (Lanczos, ``which="LA"``) on the kernel
  operator; K is never densified.
* ``kronecker``: the heap of THEORY §6 over the factors' spectra (see
  :mod:`prhsim.jepa._kronecker`); K is never formed.

Centring removes the trivial eigenvector ``s = √p`` (eigenvalue 1): dense and
sparse deflate with ``−3ssᵀ`` (never ``−ssᵀ``, which parks s at 0, inside an
indefinite spectrum); Kronecker drops the index tuple (0, …, 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as spla

from prhsim._rng import RngLike, check_rng
from prhsim._types import States, Vector
from prhsim.worlds import ProductWorld, World

Backend = Literal["auto", "dense", "sparse", "kronecker"]

#: The automatic backend uses dense eigh up to this many states.
DENSE_UP_TO = 800
#: Lanczos tolerance (relative residual); 0 would mean machine precision.
EIGSH_TOL = 1e-13


class EigenBasis:
    """Top-m eigenpairs of K (or of K deflated), as p-whitened eigenfunctions.

    ``values`` are sorted descending. ``evaluate(states)`` returns
    ``h_i(z) = u_i(z) / sqrt(p(z))`` for the requested states, shape (s, m), so that
    ``Σ_z p(z) h(z) h(z)ᵀ = I``.
    """

    values: Vector
    backend: str
    n: int

    def evaluate(self, states: States | None = None) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def take(self, m: int) -> "EigenBasis":  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class VectorBasis(EigenBasis):
    """Eigenpairs stored as orthonormal vectors U (n x m) with the world's p."""

    values: Vector
    vectors: np.ndarray
    p: Vector
    backend: str

    @property
    def n(self) -> int:
        return self.vectors.shape[0]

    def evaluate(self, states: States | None = None) -> np.ndarray:
        if states is None:
            return self.vectors / np.sqrt(self.p)[:, None]
        states = np.asarray(states, dtype=np.int64)
        return self.vectors[states] / np.sqrt(self.p[states])[:, None]

    def take(self, m: int) -> "VectorBasis":
        return VectorBasis(self.values[:m], self.vectors[:, :m], self.p, self.backend)


def centred_operator(world: World) -> spla.LinearOperator:
    K = world.kernel
    s = world.sqrt_p

    def matmat(X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64).reshape(world.n, -1)
        return K.matmat(X) - 3.0 * np.outer(s, s @ X)

    return spla.LinearOperator(K.shape, matvec=lambda x: matmat(x).ravel(), matmat=matmat,
                               rmatvec=lambda x: matmat(x).ravel(), dtype=np.float64)


def _dense(world: World, m: int, centred: bool) -> VectorBasis:
    K = world.dense_kernel()
    if centred:
        s = world.sqrt_p
        K = K - 3.0 * np.outer(s, s)
    vals, vecs = sla.eigh(K, subset_by_index=[world.n - m, world.n - 1])
    return VectorBasis(vals[::-1].copy(), vecs[:, ::-1].copy(), np.asarray(world.p), "dense")


def _sparse(world: World, m: int, centred: bool, rng: RngLike) -> VectorBasis:
    op = centred_operator(world) if centred else world.kernel
    v0 = check_rng(rng).standard_normal(world.n)
    ncv = min(world.n, max(2 * m + 1, 20 + m))
    vals, vecs = spla.eigsh(op, k=m, which="LA", v0=v0, tol=EIGSH_TOL, ncv=ncv, maxiter=world.n * 20)
    order = np.argsort(-vals, kind="stable")
    return VectorBasis(vals[order], vecs[:, order], np.asarray(world.p), "sparse")


def choose_backend(world: World, m: int) -> str:
    """The automatic choice: Kronecker for product worlds, dense for small ones, Lanczos otherwise."""
    if isinstance(world, ProductWorld):
        return "kronecker"
    if world.n <= DENSE_UP_TO or m >= world.n // 3:
        return "dense"
    return "sparse"


def top_eigenpairs(
    world: World,
    m: int,
    *,
    centred: bool = True,
    backend: Backend = "auto",
    rng: RngLike = None,
) -> EigenBasis:
    """The top-m eigenpairs of K (uncentred) or of ``K − 3ssᵀ`` (centred), descending.

    Centred, the values are ``λ_2 … λ_{m+1}`` of K; uncentred, ``λ_1 … λ_m``.
    ``rng`` seeds the Lanczos start vector (sparse backend only).

    Example:
        >>> from prhsim.worlds import ring
        >>> basis = top_eigenpairs(ring(8), 3, centred=True)
        >>> basis.values.round(4).tolist()
        [0.8536, 0.8536, 0.5]
    """
    from prhsim.jepa._kronecker import kronecker_top

    n = world.n
    available = n - 1 if centred else n
    if int(m) != m or not 1 <= m <= available:
        raise ValueError(f"need 1 <= number of eigenpairs <= {available} for a world of {n} states, got {m}")
    m = int(m)
    chosen = choose_backend(world, m) if backend == "auto" else backend
    if chosen == "kronecker":
        if not isinstance(world, ProductWorld):
            raise ValueError("the kronecker backend needs a ProductWorld")
        return kronecker_top(world, m, centred=centred)
    if chosen == "dense":
        return _dense(world, m, centred)
    if chosen == "sparse":
        if m >= n - 1:
            return _dense(world, m, centred)
        return _sparse(world, m, centred, rng)
    raise ValueError(f"unknown eigen-backend {backend!r}; choose auto, dense, sparse or kronecker")
