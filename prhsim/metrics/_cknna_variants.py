"""Two more CKNNAs, as the Aristotelian package (Gröger, Wen & Brbić 2026) offers them beside the PRH one
(docs/theory.md §10, "CKNNA variants").

With the rows x_i of a and y_i of b (L2-normalised under ``convention="prhsim"``, as given under ``"prh"``),
the kernels ``K = XXᵀ`` and ``L = YYᵀ``, and a row's k neighbours taken by kernel value, ties to the smaller
index:

* **distance-agnostic CKNNA** counts the pairs that are neighbours on both sides, neighbours excluding the row
  itself (``N_k(i)``: the k largest ``K_ij``, j ≠ i)::

      CKNNA_agnostic = Σ_ij M^ab_ij / √(Σ_ij M^aa_ij · Σ_ij M^bb_ij)

  with ``M^ab_ij = 1[j ∈ N_k^a(i) and j ∈ N_k^b(i)]``, ``M^aa_ij = 1[j ∈ N_k^a(i)]`` and
  ``M^bb_ij = 1[j ∈ N_k^b(i)]``.
  Each normaliser's count is N·k, so it is the mean fraction of shared neighbours: mutual k-NN on the same
  neighbour lists.

* **biased CKNNA** applies the biased HSIC ``hsic_b(A, B) = tr(A H B H)`` (``H = I − 11ᵀ/N``) to the masked,
  uncentred kernels, the neighbours including the row itself (``N°_k(i)``: the k largest ``K_ij`` over all j)::

      CKNNA_biased = hsic_b(M°ab ∘ K, M°ab ∘ L)
                     / √(hsic_b(M°aa ∘ K, M°aa ∘ K) · hsic_b(M°bb ∘ L, M°bb ∘ L))

Under ``convention="prh"`` each denominator gains the PRH code's ``+ 10⁻⁶``, as the Aristotelian code adds it;
under ``"prhsim"`` a zero denominator is refused. Both are computed densely on the host in float64 (N x N
kernels: a reference for moderate N, O(N²) memory).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from prhsim._budget import ensure_fits
from prhsim.metrics._arguments import check_knn_k, check_rows, require_variance
from prhsim.metrics._cka import to_host
from prhsim.metrics._convention import PRH_EPS, Convention, check_convention

#: N x N float64 arrays held at once by either variant (the two kernels, a mask, a centred product).
DENSE_COPIES = 5


def _kernels(a: Any, b: Any, convention: Convention, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The two linear kernels of the rows (L2-normalised under "prhsim"), float64 on the host."""
    x, y = (np.asarray(to_host(v), dtype=np.float64) for v in (a, b))
    for name, v in (("a", x), ("b", y)):
        if v.ndim != 2:
            raise ValueError(f"{name} must be a 2-D array (N, d), got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name} contains NaN or inf")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"a and b must have the same number of rows N, got {x.shape[0]} and {y.shape[0]}")
    n = x.shape[0]
    check_rows(n, what)
    for name, v in (("a", x), ("b", y)):
        require_variance(np, name, v, what)
    ensure_fits(8.0 * DENSE_COPIES * n * n, f"{what} on {n:,} rows ({n:,} x {n:,} kernels)", "use fewer rows N")
    if check_convention(convention) == "prhsim":
        norms = [np.linalg.norm(v, axis=1, keepdims=True) for v in (x, y)]
        if any(np.any(m == 0) for m in norms):
            raise ValueError(f"{what} normalises rows: a row of zeros has no direction")
        x, y = x / norms[0], y / norms[1]
    return x @ x.T, y @ y.T


def neighbour_mask(kernel: np.ndarray, k: int, *, self_included: bool) -> np.ndarray:
    """``M_ij = 1[j is among row i's k largest kernel values]`` (the row itself left out unless ``self_included``),
    ties to the smaller index (a stable sort of the negated row)."""
    n = kernel.shape[0]
    scores = kernel.copy()
    if not self_included:
        np.fill_diagonal(scores, -np.inf)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    mask = np.zeros((n, n))
    mask[np.arange(n)[:, None], order] = 1.0
    return mask


def _ratio(top: float, left: float, right: float, convention: Convention, what: str) -> float:
    if convention == "prh":
        return float(top / (math.sqrt(max(left * right, 0.0)) + PRH_EPS))
    if not left * right > 0.0:
        raise ValueError(f"{what} is undefined: a side's masked kernel has no variance")
    return float(top / math.sqrt(left * right))


def _masked(a: Any, b: Any, knn_k: Any, convention: Any, what: str, self_included: bool) -> tuple[np.ndarray, ...]:
    """The checked convention, both kernels and both sides' neighbour masks."""
    convention = check_convention(convention)
    K, L = _kernels(a, b, convention, what)
    k = check_knn_k(knn_k, K.shape[0])
    return convention, K, L, neighbour_mask(K, k, self_included=self_included), \
        neighbour_mask(L, k, self_included=self_included)


def cknna_agnostic(a: Any, b: Any, *, knn_k: int = 10, convention: Convention = "prhsim") -> float:
    """Distance-agnostic CKNNA: shared neighbour pairs over √(N·k · N·k) (module docstring).

    >>> x = np.random.default_rng(0).normal(size=(30, 4))
    >>> round(cknna_agnostic(x, 2 * x, knn_k=5), 12)
    1.0
    """
    what = "distance-agnostic CKNNA"
    convention, _, _, ma, mb = _masked(a, b, knn_k, convention, what, self_included=False)
    return _ratio(float(np.sum(ma * mb)), float(ma.sum()), float(mb.sum()), convention, what)


def _hsic_biased(x: np.ndarray, y: np.ndarray) -> float:
    """``tr(X H Y H)`` with ``H = I − 11ᵀ/N``: ``Σ_ij (HXH)_ij Y_ji``."""
    centred = x - x.mean(axis=0, keepdims=True)
    centred = centred - centred.mean(axis=1, keepdims=True)
    return float(np.sum(centred * y.T))


def cknna_biased(a: Any, b: Any, *, knn_k: int = 10, convention: Convention = "prhsim") -> float:
    """Biased CKNNA: the biased HSIC of the masked kernels, neighbours including the row itself (module docstring).

    >>> x = np.random.default_rng(0).normal(size=(30, 4))
    >>> round(cknna_biased(x, 2 * x, knn_k=5), 12)
    1.0
    """
    convention, K, L, ma, mb = _masked(a, b, knn_k, convention, "biased CKNNA", self_included=True)
    mab = ma * mb
    return _ratio(_hsic_biased(mab * K, mab * L), _hsic_biased(ma * K, ma * K), _hsic_biased(mb * L, mb * L),
                  convention, "biased CKNNA")
