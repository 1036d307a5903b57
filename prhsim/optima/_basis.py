"""Eigenbases shared by the eigen-backends, the centred (deflated) kernel operator (§1.1, §6),
and the BLAS thread limit under which the eigensolvers run.

An eigenbasis holds the top-m eigenpairs of K (or of ``K − 3ssᵀ``) and evaluates
the p-whitened eigenfunctions ``h_i(z) = u_i(z)/√p(z)`` on any set of states.
This module imports neither backend, so both can import it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import scipy.sparse.linalg as spla

from prhsim._budget import FLOAT, ensure_fits
from prhsim._types import States, Vector
from prhsim.worlds import FiniteWorld, World

#: Lanczos tolerance (relative residual); 0 would mean machine precision.
EIGSH_TOL = 1e-13
#: BLAS threads while prhsim's eigensolvers run (None: leave the BLAS thread pools as they are). One thread,
#: because on a shared machine with few cores the pool's threads wait on busy cores: measured on 2 busy cores,
#: Lanczos (n = 20,000) ran 6.5x faster and dense eigh of a 1000-state factor 5x faster with one thread. When a
#: core is free, the default pool can be faster (Lanczos at n = 10^5: best of 3 runs 1.3-1.6x faster, median
#: 3x slower; benchmarks/bench_sparse.py).
SOLVER_BLAS_THREADS: int | None = 1
#: Problems with fewer rows than this run without touching the thread pools (limiting costs about 15 µs).
SOLVER_THREADS_FROM = 64

_threads_lock = threading.Lock()
_threads_depth = 0
_threads_limit = None  # the threadpoolctl limiter in force while _threads_depth > 0
_controller = None


@contextmanager
def solver_threads(rows: int) -> Iterator[None]:
    """Run a solve on ``rows`` rows (or a whole ``prhsim run`` whose largest world has ``rows`` states) with
    SOLVER_BLAS_THREADS BLAS threads (threadpoolctl).

    Re-entrant and safe to enter from several Python threads: the first block to enter sets the limit, the
    last to leave restores the pools. The limit is process-wide, so BLAS calls made meanwhile by other
    threads run under it too. Nothing is changed below SOLVER_THREADS_FROM rows. One thread also makes
    the solvers' results independent of the machine's load (a blocked BLAS routine may round differently
    with another thread count).
    """
    global _threads_depth, _threads_limit, _controller
    if SOLVER_BLAS_THREADS is None or rows < SOLVER_THREADS_FROM:
        yield
        return
    with _threads_lock:
        if _threads_depth == 0:
            if _controller is None:
                from threadpoolctl import ThreadpoolController

                _controller = ThreadpoolController()  # inspects the loaded BLAS libraries once (~1 ms)
            _threads_limit = _controller.limit(limits=SOLVER_BLAS_THREADS, user_api="blas")
        _threads_depth += 1
    try:
        yield
    finally:
        with _threads_lock:
            _threads_depth -= 1
            if _threads_depth == 0:
                _threads_limit.restore_original_limits()
                _threads_limit = None


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


def ensure_table_fits(rows: int, columns: int, what: str) -> None:
    """Guard a (rows x columns) float table and its one temporary: lower the number of states."""
    ensure_fits(2.0 * FLOAT * rows * columns + FLOAT * rows, f"{what} of {rows:,} states x {columns} features",
                "evaluate on fewer states")


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
        rows = self.n if states is None else int(np.size(states))
        ensure_table_fits(rows, self.vectors.shape[1], "eigenfunctions")
        if states is None:
            return self.vectors / np.sqrt(self.p)[:, None]
        states = np.asarray(states, dtype=np.int64)
        return self.vectors[states] / np.sqrt(self.p[states])[:, None]

    def take(self, m: int) -> "VectorBasis":
        return VectorBasis(self.values[:m], self.vectors[:, :m], self.p, self.backend)


def centred_operator(world: World) -> spla.LinearOperator:
    """``K − 3ssᵀ`` as an operator: s moves from 1 to −2, below any eigenvalue of K (never ``−ssᵀ``, §1.1).

    ``x ↦ Kx − 3(sᵀx)s``: K is applied as the world's matrix (sparse or dense; a product world's operator),
    and the rank-1 term with einsum and ufuncs, which call no BLAS routine. ``s @ x`` and ``np.outer``
    would wake the BLAS thread pool twice per matvec: measured on 2 busy cores at n = 20,000, that made the
    whole Lanczos solve 1.4-2x slower than eigsh on K alone.
    """
    K = world.kernel_matrix() if isinstance(world, FiniteWorld) else world.kernel
    s = np.asarray(world.sqrt_p, dtype=np.float64)
    n = world.n

    def matvec(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(n)
        y = np.asarray(K @ x, dtype=np.float64).reshape(n)
        y -= (3.0 * np.einsum("i,i->", s, x)) * s
        return y

    def matmat(X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64).reshape(n, -1)
        Y = np.asarray(K @ X, dtype=np.float64).reshape(n, -1)
        Y -= s[:, None] * (3.0 * np.einsum("i,ij->j", s, X))[None, :]
        return Y

    return spla.LinearOperator((n, n), matvec=matvec, matmat=matmat, rmatvec=matvec, rmatmat=matmat,
                               dtype=np.float64)
