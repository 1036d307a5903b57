"""Top-m eigenpairs of a world's kernel, by algebraic value, with three backends (docs/theory.md §1, §6, §8.1).

* ``dense``: ``scipy.linalg.eigh`` on K (or ``K − 3ssᵀ`` when centred), top-m subset.
* ``sparse``: ``scipy.sparse.linalg.eigsh`` (Lanczos, ``which="LA"``) on the kernel
  operator, completed by deflation so that no copy of a repeated eigenvalue is missed
  (:func:`prhsim.optima._lanczos.lanczos_top`); K is never densified.
* ``kronecker``: the heap of docs/theory.md §6 over the factors' spectra (see
  :mod:`prhsim.optima._kronecker`); K is never formed.

Centring removes the trivial eigenvector ``s = √p`` (eigenvalue 1): dense and
sparse deflate with ``−3ssᵀ`` (never ``−ssᵀ``, which parks s at 0, inside an
indefinite spectrum); Kronecker drops the index tuple (0, …, 0).

Every solver runs under :func:`prhsim.optima._basis.solver_threads` (SOLVER_BLAS_THREADS BLAS threads).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.linalg as sla

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim.optima._basis import EigenBasis, VectorBasis, centred_operator, solver_threads
from prhsim.optima._kronecker import FactorSpectra, kronecker_top
from prhsim.optima._lanczos import lanczos_top
from prhsim.worlds import ProductWorld, World

Backend = Literal["auto", "dense", "sparse", "kronecker"]

#: The automatic backend uses dense eigh up to this many states.
DENSE_UP_TO = 800
#: Dense eigh holds K, ``K − 3ssᵀ``, its working copy and the eigenvectors: about this many n x n float tables.
DENSE_TABLES = 3


def _dense(world: World, m: int, centred: bool) -> VectorBasis:
    ensure_fits(DENSE_TABLES * FLOAT * float(world.n) ** 2, f"dense eigh of a world of {world.n:,} states",
                "use backend='sparse' (or 'kronecker' for a product world) or a smaller world")
    K = world.dense_kernel()
    if centred:
        s = world.sqrt_p
        K = K - 3.0 * np.outer(s, s)
    with solver_threads(world.n):
        vals, vecs = sla.eigh(K, subset_by_index=[world.n - m, world.n - 1])
    return VectorBasis(vals[::-1].copy(), vecs[:, ::-1].copy(), np.asarray(world.p), "dense")


def _sparse(world: World, m: int, centred: bool, rng: RngLike) -> VectorBasis:
    ncv = min(world.n, max(2 * m + 1, 20 + m))
    ensure_fits(FLOAT * world.n * (2 * ncv + m + 8), f"Lanczos with {ncv} vectors of {world.n:,} states",
                "lower the number of eigenpairs m (or k)")
    op = centred_operator(world) if centred else world.kernel
    v0 = check_rng(rng).standard_normal(world.n)
    with solver_threads(world.n):
        vals, vecs = lanczos_top(op, m, v0=v0, ncv=ncv, maxiter=world.n * 20)
    return VectorBasis(vals, vecs, np.asarray(world.p), "sparse")


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
    spectra: FactorSpectra | None = None,
) -> EigenBasis:
    """The top-m eigenpairs of K (uncentred) or of ``K − 3ssᵀ`` (centred), descending.

    Centred, the values are ``λ_2 … λ_{m+1}`` of K; uncentred, ``λ_1 … λ_m``.
    ``rng`` seeds the Lanczos start vectors (sparse backend, and large factors of the Kronecker backend).
    ``spectra``: a :class:`FactorSpectra` cache of factor spectra shared across product worlds, used by the
    Kronecker backend only (ignored by dense and sparse); see :func:`kronecker_top`.

    Example:
        >>> from prhsim.worlds import ring
        >>> basis = top_eigenpairs(ring(8), 3, centred=True)
        >>> basis.values.round(4).tolist()
        [0.8536, 0.8536, 0.5]
    """
    n = world.n
    available = n - 1 if centred else n
    if int(m) != m or not 1 <= m <= available:
        raise ValueError(f"need 1 <= number of eigenpairs <= {available} for a world of {n} states, got {m}")
    m = int(m)
    chosen = choose_backend(world, m) if backend == "auto" else backend
    if chosen == "kronecker":
        if not isinstance(world, ProductWorld):
            raise ValueError("the kronecker backend needs a ProductWorld")
        return kronecker_top(world, m, centred=centred, rng=rng, spectra=spectra)
    if chosen == "dense":
        return _dense(world, m, centred)
    if chosen == "sparse":
        if m >= n - 1:
            return _dense(world, m, centred)
        return _sparse(world, m, centred, rng)
    raise ValueError(f"unknown eigen-backend {backend!r}; choose auto, dense, sparse or kronecker")
