"""Correspondence analysis: the closed form of the whitened two-tower relative of next-token prediction (docs/theory.md §5).

**What is proved: correspondence analysis.** For a joint table ``P`` (C contexts x V tokens)
with marginals ``p_c``, ``p_y``, the whitened two-tower bilinear problem

    max E_P f(c)ᵀg(y)   s.t.  E_{p_c} f fᵀ = I,  E_{p_y} g gᵀ = I,  E_{p_c} f = 0,  E_{p_y} g = 0

is solved (Ky Fan / von Neumann) by the top-k singular triples ``(σ_i, u_i, v_i)`` of

    M = D_c^{-1/2} P D_y^{-1/2} − √p_c √p_yᵀ = D_c^{-1/2} (P − p_c p_yᵀ) D_y^{-1/2}:

``f = D_c^{-1/2} U_k``, ``g = D_y^{-1/2} V_k`` (up to a common rotation), optimum ``Σ_{i≤k} σ_i``.
``√p_c`` and ``√p_y`` are singular vectors of ``K = D_c^{-1/2} P D_y^{-1/2}`` with value 1 that M
removes, so M has rank at most ``min(C, V) − 1``; :func:`correspondence_analysis` takes the SVD
of M restricted to the orthogonal complements of ``√p_c`` and ``√p_y`` (the features are centred
to rounding even when σ = 0). ``σ_1`` (the top canonical correlation) measures the strength of
dependence: ``σ_1 = 0`` iff ``P = p_c p_yᵀ``.

**What is not proved.** Softmax cross-entropy has no such theorem: its optimum is identified
only up to ``h → hA``, ``w → wA^{-ᵀ}`` (A ∈ GL(d)) and shifts absorbed by the bias, so h is
compared with the CA context features only after centring and whitening it under ``p_c``
(:func:`prhsim.learners.whitened_deviation`: ``s_Θ = ‖sinΘ‖_F/√d`` in L²(p_c)). A χ² expansion of the expected
KL gives a low-rank fit of the PMI weighted by ``p(c)p(y)``; :func:`pmi_proxy` is its closed form,
the top-k left singular vectors of ``D_c^{1/2} PMI_dc D_y^{1/2}`` (PMI double-centred under
``p_c`` and ``p_y``) mapped to context features by ``D_c^{-1/2}``. Linearising
``PMI ≈ P/(p_c p_y) − 1`` recovers CA, so agreement is first-order in the dependence strength.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

from prhsim._tables import check_joint, check_rank


class _Complement:
    """The orthogonal complement of a unit vector s, by one Householder reflection (never formed).

    ``H = I − 2wwᵀ`` with ``H e_1 = s`` is symmetric and orthogonal, so its columns 2..n are an
    orthonormal basis Q of ``s^⊥``: ``Qᵀx = (Hx)[1:]`` and ``Qy = H[0; y]``, each O(n) per column.
    """

    def __init__(self, s: np.ndarray) -> None:
        v = np.array(s, dtype=np.float64)
        sign = 1.0 if v[0] >= 0 else -1.0
        v[0] += sign  # H = −sign·(I − 2wwᵀ) maps e_1 to s; the sign keeps w well conditioned
        self.w = v / np.linalg.norm(v)
        self.sign = -sign

    def _reflect(self, X: np.ndarray) -> np.ndarray:
        return self.sign * (X - 2.0 * np.outer(self.w, self.w @ X))

    def project(self, X: np.ndarray) -> np.ndarray:
        """``Qᵀ X`` for X (n, m): (n − 1, m)."""
        return self._reflect(X)[1:]

    def lift(self, Y: np.ndarray) -> np.ndarray:
        """``Q Y`` for Y (n − 1, m): (n, m)."""
        return self._reflect(np.vstack([np.zeros((1, Y.shape[1])), Y]))


def _centred_svd(M: np.ndarray, sc: np.ndarray, sy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SVD of M on ``√p_c^⊥ x √p_y^⊥`` (min(C, V) − 1 triples); each u's largest entry is positive."""
    Qc, Qy = _Complement(sc), _Complement(sy)
    U, s, Vt = scipy.linalg.svd(Qy.project(Qc.project(M).T).T, full_matrices=False)
    U, Vh = Qc.lift(U), Qy.lift(Vt.T)
    signs = np.sign(U[np.argmax(np.abs(U), axis=0), np.arange(U.shape[1])])
    signs[signs == 0] = 1.0
    return U * signs, s, Vh * signs


@dataclass(frozen=True)
class CorrespondenceAnalysis:
    """The closed form of the whitened two-tower bilinear problem (docs/theory.md §5).

    Attributes:
        values: ``σ_1 ≥ … ≥ σ_k``, the top singular values of
            ``M = D_c^{-1/2} P D_y^{-1/2} − √p_c √p_yᵀ``
            (canonical correlations between context and next token).
        contexts: (C, k) context features ``f(c) = U[:, :k]/√p_c``: centred and whitened under ``p_c``.
        tokens: (V, k) token features ``g(y) = V[:, :k]/√p_y``: centred and whitened under ``p_y``.
        p_c: the context marginal (C,).
        p_y: the token marginal (V,).
        gap: ``σ_k − σ_{k+1}`` (``σ_{k+1} = 0`` when k is ``min(C, V) − 1``); the optimum is one
            rotation orbit iff it is positive.
    """

    values: np.ndarray
    contexts: np.ndarray
    tokens: np.ndarray
    p_c: np.ndarray
    p_y: np.ndarray
    gap: float

    @property
    def k(self) -> int:
        return int(self.values.shape[0])

    @property
    def strength(self) -> float:
        """``σ_1``: the dependence strength (0 iff context and next token are independent)."""
        return float(self.values[0])

    @property
    def value(self) -> float:
        """The optimum ``max E_P f(c)ᵀg(y) = Σ_{i≤k} σ_i``."""
        return float(np.sum(self.values))


def correspondence_analysis(P: Any, k: int) -> CorrespondenceAnalysis:
    """Top-k correspondence analysis of a joint (context, next token) table (module docstring).

    Args:
        P: (C, V) joint probabilities: nonnegative, summing to 1 (within 1e-9), every row and
            column with positive mass.
        k: number of features, ``1 ≤ k ≤ min(C, V) − 1``.

    Raises:
        ValueError: on a table that is not a joint law with positive marginals, or a bad k.

    Example:
        >>> import numpy as np
        >>> P = np.array([[0.4, 0.1], [0.1, 0.4]])  # the φ coefficient of a 2 x 2 table
        >>> ca = correspondence_analysis(P, 1)
        >>> round(ca.strength, 12), round(float(ca.p_c @ ca.contexts[:, 0] ** 2), 12)
        (0.6, 1.0)
    """
    P, p_c, p_y = check_joint(P)
    C, V = P.shape
    k = check_rank(k, min(C, V) - 1, P.shape)
    sc, sy = np.sqrt(p_c), np.sqrt(p_y)
    M = (P - np.outer(p_c, p_y)) / np.outer(sc, sy)
    U, s, Vh = _centred_svd(M, sc, sy)
    gap = float(s[k - 1] - (s[k] if k < s.shape[0] else 0.0))
    return CorrespondenceAnalysis(values=s[:k].copy(), contexts=U[:, :k] / sc[:, None],
                                  tokens=Vh[:, :k] / sy[:, None], p_c=p_c, p_y=p_y, gap=gap)


def pmi_proxy(P: Any, k: int) -> np.ndarray:
    """Context features of the weighted low-rank PMI fit: ``D_c^{-1/2}`` times the top-k left singular vectors.

    ``PMI(c, y) = log P(c, y)/(p_c p_y)`` is double-centred under ``p_c`` and ``p_y``
    (``PMI − E_{p_y} PMI − E_{p_c} PMI + E_{p_c p_y} PMI``), weighted to
    ``D_c^{1/2} PMI_dc D_y^{1/2}`` and decomposed (restricted to ``√p_c^⊥ x √p_y^⊥``, so the
    features are centred). The χ² expansion of the expected KL (docs/theory.md §5) makes this
    the second-order proxy of the softmax optimum.

    Args:
        P: (C, V) joint probabilities, positive everywhere (PMI takes log P), summing to 1.
        k: number of features, ``1 ≤ k ≤ min(C, V) − 1``.

    Returns:
        (C, k) context features, centred and whitened under ``p_c``.

    Raises:
        ValueError: on a table with a zero or negative entry, or a bad k.
    """
    P, p_c, p_y = check_joint(P, positive=True)
    C, V = P.shape
    k = check_rank(k, min(C, V) - 1, P.shape)
    X = np.log(P) - np.log(p_c)[:, None] - np.log(p_y)[None, :]
    X = X - (X @ p_y)[:, None] - (p_c @ X)[None, :] + p_c @ X @ p_y
    sc, sy = np.sqrt(p_c), np.sqrt(p_y)
    U, _, _ = _centred_svd(sc[:, None] * X * sy[None, :], sc, sy)
    return U[:, :k] / sc[:, None]
