"""Second-order anti-collapse on a batch: whitening, a covariance penalty, spectral contrastive (docs/theory.md §1).

Batch moments use the 1/N normalisation (the batch's own law, as p is the
world's): ``Cov = (1/N) Σ_n (e_n − ē)(e_n − ē)ᵀ`` when centred, the second
moment ``(1/N) Σ_n e_n e_nᵀ`` when not. These are the batch analogues of
``Cov_p f`` and of the constraint ``FᵀDF = I`` of §1.1.

    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal((50, 3)) @ np.diag([1.0, 2.0, 3.0])
    >>> bool(np.allclose(covariance(whiten_batch(x)), np.eye(3)))
    True
"""

from __future__ import annotations

from typing import Any

from array_api_compat import device as array_device

from prhsim.objectives._arrays import upcast

#: Eigenvalue floor of :func:`whiten_batch`: directions with less variance are scaled by 1/√eps, not 1/√λ.
EPS = 1e-8


def _moment(x: Any, centred: bool) -> tuple[Any, Any, Any]:
    xp, x = upcast(x)
    if x.ndim < 2:
        raise ValueError(f"a batch must have shape (..., N, D), got {tuple(x.shape)}")
    if centred:
        x = x - xp.mean(x, axis=-2, keepdims=True)
    return xp, x, xp.matrix_transpose(x) @ x / x.shape[-2]


def covariance(x: Any, *, centred: bool = True) -> Any:
    """``(1/N) Σ_n (e_n − ē)(e_n − ē)ᵀ`` (or ``(1/N) Σ_n e_n e_nᵀ`` when not centred) of a batch (…, N, D)."""
    return _moment(x, centred)[2]


def whiten_batch(x: Any, *, eps: float = EPS, centred: bool = True) -> Any:
    """Hard whitening of a batch (…, N, D): ``(x − x̄) C^{-1/2}`` with ``C = U diag(λ) Uᵀ``.

    ``C^{-1/2} = U diag(1/√max(λ, eps)) Uᵀ`` (symmetric, so whitening is
    rotation-equivariant: ``whiten_batch(x Q) = whiten_batch(x) Q``); the output has
    covariance I on the directions with variance above ``eps`` (§1.1's
    constraint ``E f fᵀ = I`` on a batch).

    Usable inside autograd (JAX, torch): the gradient goes through ``eigh`` and
    is finite when C's eigenvalues are distinct, as they generically are for
    N > D. A batch with tied eigenvalues (e.g. rank-deficient, N ≤ D, or
    exactly duplicated coordinates) has a well-defined value but autodiff of
    ``eigh`` divides by the eigenvalue gaps there and returns inf/NaN.
    """
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps}")
    xp, xc, C = _moment(x, centred)
    lam, U = xp.linalg.eigh(C)
    scale = 1.0 / xp.sqrt(xp.maximum(lam, xp.asarray(eps, dtype=lam.dtype)))
    return xc @ ((U * scale[..., None, :]) @ xp.matrix_transpose(U))


def covariance_penalty(x: Any, *, centred: bool = True) -> Any:
    """Soft whitening: ``‖Cov − I‖_F²`` of a batch (…, N, D), averaged over leading axes.

    Zero exactly when the batch is whitened; a soft version of §1.1's
    constraint, like VICReg's variance/covariance terms.
    """
    xp, _, C = _moment(x, centred)
    d = C.shape[-1]
    diff = C - xp.eye(d, dtype=C.dtype, device=array_device(C))
    return xp.mean(xp.sum(diff * diff, axis=(-2, -1)))


def spectral_contrastive(a: Any, b: Any) -> Any:
    """The batch spectral contrastive loss (HaoChen et al. 2021; docs/theory.md §1.3) of pairs (a_n, b_n).

    For N ≥ 2 pairs ``(z_n, z'_n)`` with embeddings ``a_n = f(z_n)``, ``b_n = f(z'_n)`` (…, N, k):

        L = −(2/N) Σ_n a_nᵀ b_n + 1/(N(N−1)) Σ_{n ≠ m} (a_nᵀ b_m)².

    With the pairs drawn independently from π, ``z_n`` and ``z'_m`` (n ≠ m) are
    independent with marginal p, so ``E L = −2 E_π f(z)ᵀf(z') + E_{p⊗p}(f(z)ᵀf(z''))²``,
    the population loss :func:`prhsim.optima.spectral_contrastive_loss` (unbiased).

        >>> import numpy as np
        >>> a = np.array([[1.0, 0.0], [0.0, 1.0]])
        >>> float(spectral_contrastive(a, a))  # −2·1 + mean of the two off-pair (0)²
        -2.0
    """
    xp, a = upcast(a)
    _, b = upcast(b)
    if a.shape != b.shape or a.ndim < 2 or a.shape[-2] < 2:
        raise ValueError("a and b must share a shape (..., N, k) with N >= 2, "
                         f"got {tuple(a.shape)} and {tuple(b.shape)}")
    n = a.shape[-2]
    diag = xp.sum(a * b, axis=-1)  # (…, N): a_nᵀ b_n
    gram = a @ xp.matrix_transpose(b)  # (…, N, N): a_nᵀ b_m
    off = xp.sum(gram * gram, axis=(-2, -1)) - xp.sum(diag * diag, axis=-1)
    return xp.mean(-2.0 * xp.mean(diag, axis=-1) + off / (n * (n - 1)))
