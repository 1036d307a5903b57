"""Hard whitening as a loss without an eigendecomposition (docs/theory.md §1.1).

For any whitening matrix W of a covariance C (``WᵀW = C⁻¹``: the symmetric
``C^{-1/2}`` of :func:`prhsim.objectives.whiten_batch`, a Cholesky factor, any rotation of
them), the whitened squared distance is the same quadratic form:

    ‖W(x − y)‖² = (x − y)ᵀ C⁻¹ (x − y),

so the whitened alignment loss needs one linear solve, not ``eigh``:

* on a batch of pairs (a_n, b_n) pooled into one batch of 2N rows with covariance C
  (1/(2N) moments, centred unless ``centred=False``)::

      whitened_invariance(a, b) = tr(C⁻¹ Δ),   Δ = (1/N) Σ_n (a_n − b_n)(a_n − b_n)ᵀ,

  equal to ``pairwise_invariance`` of the whitened halves of ``whiten_batch(concat(a, b))``;
* on a population, with ``C = E_p x xᵀ`` and ``A = E_π x(z) x(z')ᵀ`` (x = f − μ_p when
  centred)::

      whitened_alignment(C, A) = 2 tr(C⁻¹ (C − A)) = 2k − 2 tr(C⁻¹ A) = E_π‖f̃(z) − f̃(z')‖²,

  whose minimum over tables is ``L* = 2 Σ_{i≤k} (1 − μ_i)`` (Ky Fan).

Unlike autodiff through ``eigh``, whose gradient divides by eigenvalue gaps, the
gradient of a solve is finite whenever C is invertible. Written against the array
API: numpy, JAX (jit, grad, vmap) and torch (autograd).

    >>> import numpy as np
    >>> from prhsim.objectives import pairwise_invariance, whiten_batch
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.standard_normal((2, 16, 3))
    >>> W = whiten_batch(np.concatenate([a, b]))
    >>> bool(np.isclose(whitened_invariance(a, b), pairwise_invariance(W[:16], W[16:])))
    True
"""

from __future__ import annotations

from typing import Any

from prhsim.objectives._arrays import upcast


def whitened_invariance(a: Any, b: Any, *, centred: bool = True) -> Any:
    """``tr(C⁻¹ Δ)``: the pairwise invariance of pairs (a_n, b_n) (…, N, k) after whitening their pooled batch.

    C is the covariance of the 2N pooled rows (their second moment when not
    centred), Δ the mean outer product of the differences ``a_n − b_n``.
    """
    xp, a = upcast(a)
    _, b = upcast(b)
    if a.shape != b.shape or a.ndim < 2 or a.shape[-2] < 1:
        raise ValueError(f"a and b must share a shape (..., N, k), got {tuple(a.shape)} and {tuple(b.shape)}")
    pooled = xp.concat([a, b], axis=-2)
    if centred:
        pooled = pooled - xp.mean(pooled, axis=-2, keepdims=True)
    C = xp.matrix_transpose(pooled) @ pooled / pooled.shape[-2]
    diff = a - b
    delta = xp.matrix_transpose(diff) @ diff / diff.shape[-2]
    return xp.mean(_trace(xp, xp.linalg.solve(C, delta)))


def whitened_alignment(C: Any, A: Any) -> Any:
    """``2 tr(C⁻¹ (C − A))``: ``E_π‖f̃(z) − f̃(z')‖²`` from the moments ``C = E_p x xᵀ`` and ``A = E_π x(z) x(z')ᵀ``."""
    xp, C = upcast(C)
    _, A = upcast(A)
    if C.shape != A.shape or C.ndim < 2 or C.shape[-1] != C.shape[-2]:
        raise ValueError(f"C and A must be square matrices of one shape, got {tuple(C.shape)} and {tuple(A.shape)}")
    return xp.mean(2.0 * _trace(xp, xp.linalg.solve(C, C - A)))


def _trace(xp: Any, M: Any) -> Any:
    return xp.sum(xp.linalg.diagonal(M), axis=-1)
