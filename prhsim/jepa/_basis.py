"""Eigenbases shared by the eigen-backends, and the centred (deflated) kernel operator (§1.1, §6).

An eigenbasis holds the top-m eigenpairs of K (or of ``K − 3ssᵀ``) and evaluates
the p-whitened eigenfunctions ``h_i(z) = u_i(z)/√p(z)`` on any set of states.
This module imports neither backend, so both can import it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg as spla

from prhsim._budget import FLOAT, ensure_fits
from prhsim._types import States, Vector
from prhsim.worlds import World

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
    """``K − 3ssᵀ`` as an operator: s moves from 1 to −2, below any eigenvalue of K (never ``−ssᵀ``, §1.1)."""
    K = world.kernel
    s = world.sqrt_p

    def matmat(X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64).reshape(world.n, -1)
        return K.matmat(X) - 3.0 * np.outer(s, s @ X)

    return spla.LinearOperator(K.shape, matvec=lambda x: matmat(x).ravel(), matmat=matmat,
                               rmatvec=lambda x: matmat(x).ravel(), dtype=np.float64)
