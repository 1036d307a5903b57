"""Product (Kronecker) worlds: independent factors, row-major states (docs/theory.md §6).

``p = ⊗ p_f``, ``Π = ⊗ Π_f`` and ``K = ⊗ K_f``. States index row-major,
``(z_1, …, z_F) ↦ ravel_multi_index``, which matches ``np.kron(A_1, np.kron(A_2, …))``.
K is applied factor by factor and never formed.
"""

from __future__ import annotations

from functools import cached_property
from typing import Iterable

import numpy as np
from scipy.sparse.linalg import LinearOperator

from prhsim._budget import FLOAT, ensure_fits
from prhsim._types import States, Vector
from prhsim.worlds._finite import FiniteWorld, World

#: The largest product world whose full p (or a vector of the kernel operator) prhsim will materialise.
MATERIALISE_LIMIT = 50_000_000
#: The largest product world whose kernel prhsim will form as a dense matrix.
DENSIFY_LIMIT = 20_000


class ProductWorld(World):
    """A Kronecker product of finite factor worlds.

    Args:
        factors: factor worlds (FiniteWorld or ProductWorld; nested products are
            flattened), at least one.

    Example:
        >>> from prhsim.worlds import ring
        >>> w = ProductWorld([ring(3), ring(4)])
        >>> w.n, w.shape
        (12, (3, 4))
    """

    def __init__(self, factors: Iterable[World]) -> None:
        flat: list[FiniteWorld] = []
        for f in factors:
            if isinstance(f, ProductWorld):
                flat.extend(f.factors)
            elif isinstance(f, FiniteWorld):
                flat.append(f)
            else:
                raise ValueError(f"a product world's factors must be worlds, got {type(f).__name__}")
        if not flat:
            raise ValueError("a product world needs at least one factor")
        self._factors = tuple(flat)
        self.shape = tuple(f.n for f in flat)
        self.n = int(np.prod(self.shape, dtype=object))

    def __repr__(self) -> str:
        return f"ProductWorld(shape={self.shape}, n={self.n})"

    @property
    def factors(self) -> tuple[FiniteWorld, ...]:
        return self._factors

    def unravel(self, states: States) -> tuple[np.ndarray, ...]:
        """Factor indices of flat states (row-major)."""
        states = np.asarray(states, dtype=np.int64)
        if states.size and (states.min() < 0 or states.max() >= self.n):
            raise ValueError(f"states must lie in 0..{self.n - 1}")
        return np.unravel_index(states, self.shape)

    def p_at(self, states: States) -> Vector:
        """``p(z)`` at the given flat states, without forming the full p."""
        idx = self.unravel(states)
        out = np.ones(np.shape(states))
        for f, i in zip(self.factors, idx):
            out = out * f.p[i]
        return out

    @property
    def p(self) -> Vector:
        """The full law ``⊗ p_f`` (materialised once; refused above MATERIALISE_LIMIT states)."""
        return self._p

    @cached_property
    def _p(self) -> Vector:
        _check_materialisable(self.n, "p")
        ensure_fits(2 * FLOAT * self.n, f"p of a product world of {self.n:,} states",
                    "use a smaller world, or p_at(states)")
        out = np.ones(1)
        for f in self.factors:
            out = np.kron(out, f.p)
        out.setflags(write=False)
        return out

    @property
    def kernel(self) -> LinearOperator:
        """``K = ⊗ K_f`` applied factor by factor (never formed)."""
        _check_materialisable(self.n, "the kernel operator's vectors")
        ensure_fits(3 * FLOAT * self.n, f"the kernel operator's vectors for a product world of {self.n:,} states",
                    "use a smaller world")
        mats = [f.kernel_matrix() for f in self.factors]
        shape = self.shape
        n = self.n

        def matmat(X: np.ndarray) -> np.ndarray:
            X = np.asarray(X, dtype=np.float64)
            cols = X.shape[1]
            T = X.reshape(*shape, cols)
            for axis, A in enumerate(mats):
                T = np.moveaxis(T, axis, 0)
                lead = T.shape
                T = (A @ T.reshape(lead[0], -1)).reshape(lead)
                T = np.moveaxis(T, 0, axis)
            return T.reshape(n, cols)

        return LinearOperator(
            (n, n),
            matvec=lambda x: matmat(np.asarray(x).reshape(n, 1)).ravel(),
            matmat=matmat,
            rmatvec=lambda x: matmat(np.asarray(x).reshape(n, 1)).ravel(),
            dtype=np.float64,
        )

    def kernel_matrix(self) -> np.ndarray:
        """Dense ``np.kron`` of the factor kernels: only for worlds small enough to densify."""
        if self.n > DENSIFY_LIMIT:
            raise ValueError(f"refusing to densify a product world with {self.n} states (limit {DENSIFY_LIMIT})")
        ensure_fits(2 * FLOAT * float(self.n) ** 2, f"the dense kernel of a product world of {self.n:,} states",
                    "use the kernel operator (world.kernel) or a smaller world")
        out = np.ones((1, 1))
        for f in self.factors:
            out = np.kron(out, f.dense_kernel())
        return out

    def to_finite(self) -> FiniteWorld:
        """The same world as a dense FiniteWorld (small worlds only, for tests and baselines)."""
        ensure_fits(6 * FLOAT * float(self.n) ** 2, f"a dense copy of a product world of {self.n:,} states",
                    "use a smaller world")
        s = self.sqrt_p
        Pi = s[:, None] * self.kernel_matrix() * s[None, :]
        return FiniteWorld(self.p, (Pi + Pi.T) / 2)


def _check_materialisable(n: int, what: str) -> None:
    if n > MATERIALISE_LIMIT:
        raise ValueError(
            f"refusing to materialise {what} of a world with {n} states (limit {MATERIALISE_LIMIT}); "
            "evaluate on a set of states instead"
        )
