"""The top-m eigenpairs of a symmetric operator by Lanczos, completed by deflation so that no copy of a repeated eigenvalue is missed.

Lanczos from one start vector sees one copy of each eigenvalue in exact arithmetic; in floating
point further copies appear only through rounding, so ``eigsh`` can return ``μ, μ, ν`` where
the spectrum is ``μ, μ, μ, ν`` (measured: a span world with an eigenvalue of multiplicity 7 came
back with 5 copies). A missed copy at k would hide a tie, and the "unique" optimum would be one
subspace of a continuum (docs/theory.md §1.2).

:func:`lanczos_top` therefore checks what it found: with V the kept vectors, it runs Lanczos on
the deflated operator ``P A P − σ (I − P)`` (``P = I − VVᵀ``; σ pushes span V below the whole
spectrum) and adds every eigenpair above the smallest kept value, until the complement's top
is not above it (to ``DEFLATION_MARGIN``). Each round starts from a fresh random vector: a copy
orthogonal to the first start vector would stay invisible from anything built from it. The
result is then the top m of the spectrum, with every multiplicity.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse.linalg as spla

from prhsim.optima._basis import EIGSH_TOL

#: A complement eigenvalue counts as missed when it exceeds the smallest kept one by more than this (relative).
DEFLATION_MARGIN = 1e-9
#: Eigenpairs the deflation check asks for per round.
DEFLATION_BLOCK = 3
#: At most this many rounds (each adds at least one missed pair).
MAX_ROUNDS = 64
#: Seed of the deflation check's start vectors (fixed: the result never depends on the call's history).
DEFLATION_SEED = 20261130


def lanczos_top(op: Any, m: int, *, v0: np.ndarray, ncv: int | None = None, tol: float = EIGSH_TOL,
                maxiter: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The m algebraically largest eigenpairs of the symmetric operator ``op`` (n x n), descending, multiplicities complete."""
    n = op.shape[0]
    vals, vecs = spla.eigsh(op, k=m, which="LA", v0=v0, tol=tol, ncv=ncv, maxiter=maxiter)
    order = np.argsort(-vals, kind="stable")
    vals, vecs = vals[order], vecs[:, order]
    fresh = np.random.default_rng(DEFLATION_SEED)  # the check's start vectors: the same on every call
    for _ in range(MAX_ROUNDS):
        block = min(DEFLATION_BLOCK, n - vecs.shape[1] - 1)
        if block < 1:
            break
        sigma = 2.0 * float(np.max(np.abs(vals))) + 1.0
        V = vecs

        def deflated(x: np.ndarray, V: np.ndarray = V, sigma: float = sigma) -> np.ndarray:
            x = np.asarray(x, dtype=np.float64).reshape(n, -1)
            inside = V @ (V.T @ x)
            y = op @ (x - inside)
            y = np.asarray(y).reshape(n, -1)
            return (y - V @ (V.T @ y) - sigma * inside).reshape(np.shape(x) if x.shape[1] > 1 else (n,))

        complement = spla.LinearOperator((n, n), matvec=deflated, matmat=deflated, dtype=np.float64)
        start = fresh.standard_normal(n)  # not v0: a copy v0 has no component on stays invisible from it
        start -= V @ (V.T @ start)
        top, extra = spla.eigsh(complement, k=block, which="LA", v0=start, tol=tol,
                                ncv=None if ncv is None else max(ncv, 2 * block + 1), maxiter=maxiter)
        missed = top > vals[-1] + DEFLATION_MARGIN * max(1.0, abs(float(vals[0])))
        if not np.any(missed):
            break
        vals = np.concatenate([vals, top[missed]])
        vecs = np.concatenate([vecs, extra[:, missed]], axis=1)
        order = np.argsort(-vals, kind="stable")[:m]
        vals, vecs = vals[order], vecs[:, order]
    return vals, vecs
