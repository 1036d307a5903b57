"""Centred kernel alignment on N paired samples: linear, RBF and unbiased (docs/theory.md §10).

Rows ``a_n`` (of ``a``, N x d_a) and ``b_n`` (of ``b``, N x d_b) describe the same
N inputs. Every sample is weighted 1/N (the p-weighted population metrics are
:mod:`prhsim.metrics._procrustes`). Kernels ``K = k(a_i, a_j)``, ``L = l(b_i, b_j)``,
centring ``H = I − 11ᵀ/N``:

* biased HSIC ``HSIC(K, L) = tr(K H L H)/(N − 1)²`` and
  ``CKA(K, L) = HSIC(K, L)/sqrt(HSIC(K, K)·HSIC(L, L))`` (Kornblith et al. 2019);
* linear CKA (``K = a aᵀ``) in feature space, with column-centred ``ã``, ``b̃``:
  ``‖ãᵀb̃‖_F² / (‖ãᵀã‖_F ‖b̃ᵀb̃‖_F)``; memory O(N·d + d²), or O(N²) through the
  centred Gram matrices ``ããᵀ`` when that is smaller (the same number);
* RBF CKA: ``k(x, y) = exp(−‖x − y‖²/(2σ²))`` with, per side,
  ``σ² = sigma² · median(D²)``, the median over all N² entries of the squared-distance
  matrix D² (its N zero diagonal entries included; for even N² the mean of the two
  middle values): the bandwidth heuristic of Kornblith et al.'s reference code, so σ is
  ``sigma`` times the median distance;
* unbiased CKA: Song et al. (2012)'s unbiased HSIC on linear kernels with zeroed
  diagonals ``K̃``, ``L̃``:
  ``HSIC_u = [tr(K̃L̃) + (1ᵀK̃1)(1ᵀL̃1)/((N−1)(N−2)) − 2/(N−2)·1ᵀK̃L̃1] / (N(N−3))``,
  computed in feature space (``s_i = ‖a_i‖²``, ``t_i = ‖b_i‖²``):
  ``tr(K̃L̃) = ‖aᵀb‖_F² − Σ s_i t_i``, ``1ᵀK̃1 = ‖aᵀ1‖² − Σ s_i``,
  ``1ᵀK̃L̃1 = (K̃1)·(L̃1)`` with ``K̃1 = a(aᵀ1) − s``. HSIC_u is unchanged by a
  translation of either side, so the columns are centred first (fewer cancellations).

Inputs are numpy arrays, torch tensors (any device) or JAX arrays; the statistic is
computed in the input's library and device, in float32 or wider; float64 numpy rows go
through :mod:`prhsim.metrics._cka_permuted` as its identity permutation, the route of their
permutation null, so the null reproduces the score bit for bit. A representation
whose rows are all equal (zero variance) has no CKA: that is a ValueError, never an
epsilon in the denominator (which would bias small values).

``convention="prh"`` (:mod:`prhsim.metrics._convention`) gives the PRH code's value:
``HSIC(K, L)/(√(HSIC(K, K)·HSIC(L, L)) + 10⁻⁶)`` (biased HSIC ``tr(KHLH)``, or the
unbiased one), not clipped, and RBF kernels with the fixed bandwidth σ = ``sigma``
(default 1) in place of σ = ``sigma`` x the median distance. The errors stay prhsim's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from array_api_compat import array_namespace, device as array_device, is_numpy_array, is_torch_array

from prhsim._budget import ensure_fits
from prhsim.metrics._arguments import require_variance
from prhsim.metrics._cka_parts import centre, gram_route, hsic_u, rbf_gram
from prhsim.metrics._cka_permuted import identity_cka
from prhsim.metrics._convention import PRH_EPS, PRH_RBF_SIGMA, Convention, check_convention

#: Elements of one N x N block (a Gram matrix and its temporaries) counted per side by the guards.
_GRAM_COPIES = 4


def to_host(x: Any) -> np.ndarray:
    """A numpy copy of an array of any supported library (torch: detached, on the CPU)."""
    if is_torch_array(x):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def as_array(name: str, x: Any) -> tuple[Any, Any]:
    """``(xp, x)``: x in its own library as a real float (float32 or wider; ints become float64)."""
    try:
        xp = array_namespace(x)
    except TypeError:
        x = np.asarray(x)
        xp = array_namespace(x)
    if xp.isdtype(x.dtype, "bool") or xp.isdtype(x.dtype, "integral"):
        return xp, xp.astype(x, xp.float64)
    if not xp.isdtype(x.dtype, "real floating"):
        raise ValueError(f"{name} must hold real numbers, got dtype {x.dtype}")
    if xp.finfo(x.dtype).bits < 32:
        x = xp.astype(x, xp.float32)
    return xp, x


def check_finite(xp: Any, name: str, x: Any) -> None:
    """Raise ``ValueError("a contains NaN or inf")`` when x has a non-finite entry."""
    if not bool(xp.all(xp.isfinite(x))):
        raise ValueError(f"{name} contains NaN or inf")


def sample_pair(a: Any, b: Any, *, min_rows: int = 2, what: str = "this metric") -> tuple[Any, Any, Any]:
    """Validate two paired samples; return ``(xp, a, b)`` in one library and one float dtype.

    Errors (ValueError, one line): different libraries, not 2-D, different N,
    fewer than ``min_rows`` rows, NaN or inf.
    """
    xp, a = as_array("a", a)
    xp_b, b = as_array("b", b)
    if xp_b is not xp:
        raise ValueError(f"a and b must be arrays of one library, got {xp.__name__} and {xp_b.__name__}")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"a and b must be 2-D (samples x features), got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"a and b must have the same number of rows N, got {a.shape[0]} and {b.shape[0]}")
    if a.shape[0] < min_rows:
        raise ValueError(f"{what} needs at least {min_rows} rows, got N = {a.shape[0]}")
    check_finite(xp, "a", a)
    check_finite(xp, "b", b)
    if a.dtype != b.dtype:
        dtype = xp.result_type(a.dtype, b.dtype)
        a, b = xp.astype(a, dtype), xp.astype(b, dtype)
    return xp, a, b


def _itemsize(xp: Any, x: Any) -> int:
    return xp.finfo(x.dtype).bits // 8


def _one_route(x: Any) -> bool:
    """Whether the score goes through :mod:`prhsim.metrics._cka_permuted` (float64 numpy rows), the route of its
    permutation null, so that the null's identity permutation reproduces it bit for bit."""
    return is_numpy_array(x) and x.dtype == np.float64


def _guard(n: int, da: int, db: int, itemsize: int, what: str) -> None:
    elements = 3.0 * n * n if gram_route(n, da, db) else float(da * db + da * da + db * db)
    ensure_fits(itemsize * (elements + 2.0 * n * (da + db)), what, "use fewer samples N")


def _ratio(xp: Any, num: Any, saa: Any, sbb: Any, lo: float, convention: Convention = "prhsim") -> float:
    """``num/sqrt(saa·sbb)`` as a float clipped to [lo, 1] (rounding can leave 1 + ε);
    ``convention="prh"``: ``num/(sqrt(saa·sbb) + 10⁻⁶)``, not clipped."""
    for name, s in (("a", saa), ("b", sbb)):
        if not float(s) > 0.0:  # underflow of a nearly constant representation
            raise ValueError(f"{name} has zero variance: CKA is undefined")
    if convention == "prh":
        return float(num) / (math.sqrt(float(saa) * float(sbb)) + PRH_EPS)
    value = float(num) / (math.sqrt(float(saa)) * math.sqrt(float(sbb)))
    return min(max(value, lo), 1.0)


def linear_cka(a: Any, b: Any, *, convention: Convention = "prhsim") -> float:
    """Linear CKA ``‖ãᵀb̃‖_F² / (‖ãᵀã‖_F ‖b̃ᵀb̃‖_F)`` of two paired samples (docs/theory.md §10).

    Args:
        a: (N, d_a) representation, numpy, torch or JAX.
        b: (N, d_b) representation of the same N inputs, same library.
        convention: "prhsim", or "prh" for ``‖ãᵀb̃‖_F² / (‖ãᵀã‖_F ‖b̃ᵀb̃‖_F + 10⁻⁶)`` (module docstring).

    Returns:
        CKA ∈ [0, 1]; invariant to an orthogonal map or an isotropic scaling of either side.

    Raises:
        ValueError: N mismatch, not 2-D, N < 2, NaN/inf, or a constant side (zero variance).

    Example:
        >>> import numpy as np
        >>> a = np.random.default_rng(0).normal(size=(50, 4))
        >>> round(linear_cka(a, 3.0 * a[:, ::-1]), 12)
        1.0
    """
    convention = check_convention(convention)
    xp, a, b = sample_pair(a, b, what="CKA")
    require_variance(xp, "a", a)
    require_variance(xp, "b", b)
    n, da, db = a.shape[0], a.shape[1], b.shape[1]
    _guard(n, da, db, _itemsize(xp, a), f"linear CKA of {n:,} samples x ({da:,}, {db:,}) features")
    if _one_route(a):
        return identity_cka("linear_cka", a, b, convention)
    ac, bc = centre(xp, a), centre(xp, b)
    mt = xp.matrix_transpose
    if gram_route(n, da, db):
        K, L = ac @ mt(ac), bc @ mt(bc)  # centred Grams: H K H = ã ãᵀ
        num, saa, sbb = xp.sum(K * L), xp.sum(K * K), xp.sum(L * L)
    else:
        cross, gaa, gbb = mt(ac) @ bc, mt(ac) @ ac, mt(bc) @ bc
        num, saa, sbb = xp.sum(cross * cross), xp.sum(gaa * gaa), xp.sum(gbb * gbb)
    return _ratio(xp, num, saa, sbb, 0.0, convention)


def rbf_cka(a: Any, b: Any, *, sigma: float | None = None, convention: Convention = "prhsim") -> float:
    """CKA with Gaussian kernels ``exp(−‖x − y‖²/(2σ²))``, σ = ``sigma`` x median distance per side.

    The bandwidth follows Kornblith et al. (2019)'s reference code: ``σ² = sigma² ·
    median(D²)`` over all N² entries of the squared-distance matrix of that side,
    diagonal zeros included. Memory is O(N²), refused up front by the memory guard.

    Args:
        a: (N, d_a) representation.
        b: (N, d_b) representation of the same N inputs.
        sigma: bandwidth as a multiple of the median distance; None means 1.0.
        convention: "prhsim", or "prh": σ = ``sigma`` itself (None: the PRH code's 1.0) and
            ``HSIC(K, L)/(√(HSIC(K, K)·HSIC(L, L)) + 10⁻⁶)`` (module docstring).

    Returns:
        CKA ∈ [0, 1]; invariant to an orthogonal map, an isotropic scaling (σ scales
        along) and a common row permutation.

    Raises:
        ValueError: the errors of :func:`linear_cka`, ``sigma <= 0``, or a side whose
            median squared distance is 0.
    """
    convention = check_convention(convention)
    relative = convention == "prhsim"
    sigma = (1.0 if relative else PRH_RBF_SIGMA) if sigma is None else float(sigma)
    if not (sigma > 0.0 and math.isfinite(sigma)):
        what = "a positive multiple of the median distance" if relative else "a positive bandwidth"
        raise ValueError(f"sigma must be {what}, got {sigma}")
    xp, a, b = sample_pair(a, b, what="CKA")
    require_variance(xp, "a", a)
    require_variance(xp, "b", b)
    n = a.shape[0]
    ensure_fits(_itemsize(xp, a) * 2.0 * _GRAM_COPIES * n * n, f"RBF CKA of {n:,} samples (N x N kernels)",
                "use fewer samples N")
    if _one_route(a):
        return identity_cka("rbf_cka", a, b, convention, sigma)
    K = rbf_gram(xp, "a", a, sigma, relative)
    L = rbf_gram(xp, "b", b, sigma, relative)
    return _ratio(xp, xp.sum(K * L), xp.sum(K * K), xp.sum(L * L), 0.0, convention)


def unbiased_cka(a: Any, b: Any, *, convention: Convention = "prhsim") -> float:
    """CKA from Song et al. (2012)'s unbiased HSIC on linear kernels (docs/theory.md §10).

    Args:
        a: (N, d_a) representation, N >= 4.
        b: (N, d_b) representation of the same N inputs.
        convention: "prhsim", or "prh" for ``HSIC_u(K, L)/(√(HSIC_u(K, K)·HSIC_u(L, L)) + 10⁻⁶)``.

    Returns:
        ``HSIC_u(K, L)/sqrt(HSIC_u(K, K)·HSIC_u(L, L))`` ∈ [−1, 1] (it can be negative:
        the estimator is unbiased for HSIC, not non-negative).

    Raises:
        ValueError: the errors of :func:`linear_cka`, N < 4, or a side whose unbiased
            self-HSIC is not positive (zero up to rounding counts: at most N·eps times
            the size of its terms); the ratio is then undefined, and no NaN is returned.
    """
    convention = check_convention(convention)
    xp, a, b = sample_pair(a, b, min_rows=4, what="unbiased CKA")
    require_variance(xp, "a", a)
    require_variance(xp, "b", b)
    n, da, db = a.shape[0], a.shape[1], b.shape[1]
    _guard(n, da, db, _itemsize(xp, a), f"unbiased CKA of {n:,} samples x ({da:,}, {db:,}) features")
    if _one_route(a):
        return identity_cka("unbiased_cka", a, b, convention)
    a, b = centre(xp, a), centre(xp, b)  # HSIC_u is translation invariant
    mt = xp.matrix_transpose
    s, t = xp.sum(a * a, axis=1), xp.sum(b * b, axis=1)
    if gram_route(n, da, db):
        off = 1.0 - xp.eye(n, dtype=a.dtype, device=array_device(a))
        K, L = (a @ mt(a)) * off, (b @ mt(b)) * off
        tr_kl, tr_kk, tr_ll = xp.sum(K * L), xp.sum(K * K), xp.sum(L * L)
        k1, l1 = xp.sum(K, axis=1), xp.sum(L, axis=1)
    else:
        cross, gaa, gbb = mt(a) @ b, mt(a) @ a, mt(b) @ b
        tr_kl = xp.sum(cross * cross) - xp.sum(s * t)
        tr_kk = xp.sum(gaa * gaa) - xp.sum(s * s)
        tr_ll = xp.sum(gbb * gbb) - xp.sum(t * t)
        k1 = a @ xp.sum(a, axis=0) - s  # K̃1
        l1 = b @ xp.sum(b, axis=0) - t
    one_k, one_l = xp.sum(k1), xp.sum(l1)
    kk, ll = xp.sum(k1 * k1), xp.sum(l1 * l1)
    hkl = hsic_u(n, tr_kl, one_k, one_l, xp.sum(k1 * l1))
    eps = float(xp.finfo(a.dtype).eps)
    for name, tr, one, sq in (("a", tr_kk, one_k, kk), ("b", tr_ll, one_l, ll)):
        h = float(hsic_u(n, tr, one, one, sq))
        # the terms' size: below n·eps of it, a self-HSIC is zero up to rounding
        size = (abs(float(tr)) + float(one) ** 2 / ((n - 1) * (n - 2)) + 2.0 * float(sq) / (n - 2)) / (n * (n - 3))
        if not h > n * eps * size:
            raise ValueError(f"{name} has a non-positive unbiased self-HSIC ({h:.3g}): unbiased CKA is undefined")
    return _ratio(xp, hkl, hsic_u(n, tr_kk, one_k, one_k, kk), hsic_u(n, tr_ll, one_l, one_l, ll), -1.0, convention)
