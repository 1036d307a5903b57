"""Finite worlds: states 0..n-1, a law p(z) > 0 and a symmetric positive-pair law Π (docs/theory.md §0).

The kernel ``K = D^{-1/2} Π D^{-1/2}`` is what every closed form works with; it
is offered as a :class:`scipy.sparse.linalg.LinearOperator` so that sparse and
product worlds are never densified.

A world is immutable: p, Π (a private copy; a sparse Π's data, indices and
indptr too) and the cached kernel matrix are write-protected arrays.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from prhsim._budget import FLOAT, ensure_fits
from prhsim._types import PairMatrix, Vector

#: Tolerances of the construction checks (absolute on p and on Π's entries).
SUM_ATOL = 1e-9
MARGINAL_RTOL = 1e-7
MARGINAL_ATOL = 1e-12
SYMMETRY_ATOL = 1e-12
#: Bytes of one stored sparse entry: the value and its column index (int64 at most).
SPARSE_ENTRY = 16


def freeze(matrix: PairMatrix) -> PairMatrix:
    """Write-protect a dense array, or a sparse matrix's data, indices and indptr (canonical first)."""
    if sp.issparse(matrix):
        matrix.sum_duplicates()  # canonical form: later operations never sort or merge in place
        for array in (matrix.data, matrix.indices, matrix.indptr):
            array.setflags(write=False)
    else:
        matrix.setflags(write=False)
    return matrix


class World:
    """What every world offers: ``n``, ``p``, the kernel operator and its factors.

    Worlds are immutable: an attribute set in construction cannot be reassigned,
    and their arrays are write-protected.
    """

    n: int

    def __setattr__(self, name: str, value: object) -> None:
        if name in self.__dict__:
            raise AttributeError(f"{type(self).__name__} is immutable: cannot reassign {name!r}")
        super().__setattr__(name, value)

    @property
    def p(self) -> Vector:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def kernel(self) -> LinearOperator:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def factors(self) -> tuple["FiniteWorld", ...]:  # pragma: no cover - interface
        raise NotImplementedError

    def kernel_matrix(self) -> PairMatrix:  # pragma: no cover - interface
        """K as a matrix (dense, or sparse for sparse worlds); product worlds densify only when small."""
        raise NotImplementedError

    def dense_kernel(self) -> np.ndarray:
        """A dense float copy of K (for small worlds, factors and baselines)."""
        ensure_fits(2 * FLOAT * float(self.n) ** 2, f"a dense copy of the kernel of a world of {self.n:,} states",
                    "use the kernel operator (world.kernel) or a smaller world")
        K = self.kernel_matrix()
        return np.array(K.toarray() if sp.issparse(K) else K, dtype=np.float64)

    @property
    def sqrt_p(self) -> Vector:
        """``s = sqrt(p)``, the trivial eigenvector of K (eigenvalue 1)."""
        return np.sqrt(self.p)


class FiniteWorld(World):
    """A finite world ``(p, Π)``, validated on construction.

    Args:
        p: state law, shape (n,), strictly positive, summing to 1.
        Pi: pair law, shape (n, n), dense or scipy.sparse, non-negative, with
            both marginals equal to p (``Π1 = Πᵀ1 = p``).
        symmetrize: if True, replace Π by ``(Π + Πᵀ)/2`` (docs/theory.md §1.4: the
            second-order loss only sees the symmetric part). Otherwise an
            asymmetric Π is an error.

    Raises:
        ValueError: naming the violated condition and the offending value.

    Example:
        >>> import numpy as np
        >>> w = FiniteWorld(np.array([0.5, 0.5]), np.array([[0.4, 0.1], [0.1, 0.4]]))
        >>> w.kernel_matrix()
        array([[0.8, 0.2],
               [0.2, 0.8]])
    """

    Pi: PairMatrix

    def __init__(self, p: Vector, Pi: PairMatrix, *, symmetrize: bool = False) -> None:
        p = np.array(p, dtype=np.float64, copy=True)
        Pi = sp.csr_array(Pi, dtype=np.float64, copy=True) if sp.issparse(Pi) else np.array(Pi, dtype=np.float64, copy=True)
        _validate(p, Pi, symmetrize)
        if symmetrize:
            Pi = (Pi + Pi.T) / 2
            Pi = sp.csr_array(Pi) if sp.issparse(Pi) else np.asarray(Pi)
        p.setflags(write=False)
        freeze(Pi)
        self._p = p
        self.Pi = Pi
        self.n = int(p.shape[0])

    def __repr__(self) -> str:
        kind = "sparse" if self.is_sparse else "dense"
        return f"FiniteWorld(n={self.n}, {kind})"

    @property
    def p(self) -> Vector:
        return self._p

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.Pi)

    @property
    def factors(self) -> tuple["FiniteWorld", ...]:
        return (self,)

    def kernel_matrix(self) -> PairMatrix:
        """``K = D^{-1/2} Π D^{-1/2}``, sparse for a sparse world (never densified)."""
        return self._kernel_matrix

    @cached_property
    def _kernel_matrix(self) -> PairMatrix:
        if self.is_sparse:
            ensure_fits(3 * SPARSE_ENTRY * float(self.Pi.nnz) + 4 * FLOAT * self.n,
                        f"the sparse kernel of a world with {self.Pi.nnz:,} pairs", "use a sparser or smaller world")
        else:
            ensure_fits(3 * FLOAT * float(self.n) ** 2, f"the dense kernel of a world of {self.n:,} states",
                        "use a sparse Pi or a smaller world")
        inv_s = 1.0 / np.sqrt(self.p)
        if self.is_sparse:
            d = sp.diags_array(inv_s)
            K = sp.csr_array(d @ self.Pi @ d)
        else:
            K = self.Pi * inv_s[:, None] * inv_s[None, :]
            K = (K + K.T) / 2  # exact symmetry for eigh
        return freeze(K)

    @property
    def kernel(self) -> LinearOperator:
        """K as a LinearOperator (matvec/matmat without forming anything new)."""
        return aslinearoperator(self.kernel_matrix())


def _validate(p: np.ndarray, Pi: PairMatrix, symmetrize: bool) -> None:
    if p.ndim != 1 or p.shape[0] < 1:
        raise ValueError(f"p must be a non-empty vector, got shape {p.shape}")
    n = p.shape[0]
    if Pi.shape != (n, n):
        raise ValueError(f"Pi must have shape ({n}, {n}) to match p, got {Pi.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"p contains NaN or inf at state {int(np.flatnonzero(~np.isfinite(p))[0])}")
    entries = Pi.data if sp.issparse(Pi) else Pi
    if not np.all(np.isfinite(entries)):
        raise ValueError("Pi contains NaN or inf entries")
    if np.any(p <= 0):
        z = int(np.argmin(p))
        raise ValueError(f"p must be strictly positive: p[{z}] = {p[z]:.3g}")
    if abs(p.sum() - 1.0) > SUM_ATOL:
        raise ValueError(f"p must sum to 1, sums to {p.sum():.12g}")
    if entries.size and entries.min() < 0:
        if sp.issparse(Pi):
            coo = Pi.tocoo()
            j = int(np.argmin(coo.data))
            where, value = (int(coo.row[j]), int(coo.col[j])), coo.data[j]
        else:
            where = tuple(int(i) for i in np.unravel_index(np.argmin(Pi), Pi.shape))
            value = Pi[where]
        raise ValueError(f"Pi must be non-negative: Pi[{where[0]}, {where[1]}] = {value:.3g}")
    rows = np.asarray(Pi.sum(axis=1)).ravel()
    cols = np.asarray(Pi.sum(axis=0)).ravel()
    for name, marg in (("row", rows), ("column", cols)):
        bad = ~np.isclose(marg, p, rtol=MARGINAL_RTOL, atol=MARGINAL_ATOL)
        if np.any(bad):
            z = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"Pi's {name} marginal must equal p: at state {z} it is {marg[z]:.12g}, p is {p[z]:.12g}"
            )
    if not symmetrize:
        diff = Pi - Pi.T
        asym = abs(diff).max() if sp.issparse(diff) else np.abs(diff).max()
        if asym > SYMMETRY_ATOL + 1e-9 * float(abs(entries).max()):
            raise ValueError(
                f"Pi must be symmetric (max |Pi - Pi^T| = {asym:.3g}); pass symmetrize=True to use (Pi + Pi^T)/2"
            )
