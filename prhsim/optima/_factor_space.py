"""A modality's closed-form optimum in factor space: every quantity of a run without a modal-world table.

A modal world is the product world ``π_Z ⊗ ρ`` over ``Z x N`` with factors
``(Z_1, …, Z_F, N)`` (docs/theory.md §4, §6). Its closed-form features are
products of factor eigenfunctions,

``f_i(z, n) = s_i · Π_f T_f[z_f, t_{i,f}] · u_i(n)``,

with ``T_f`` a factor's p_f-whitened eigenfunctions, ``t_i`` the optimum's index tuple
over the factors of Z, ``u_i`` the eigenfunction of the nuisance factor and ``s_i`` the
feature's scale (1 for whitened features). Every second moment a run needs is then a
product of small factor Gram matrices (docs/theory.md §6, "Factor space"):

* ``E_p[f_i f_j] = s_i s_j Π_f ⟨T_f t_{i,f}, T_f t_{j,f}⟩_{p_f} · ⟨u_i, u_j⟩_q``, and ``E_π[f_i f'_j]``
  the same with each factor's ``Π_f``: the whitening error ``‖FᵀDF − I‖_F`` and the loss
  ``E_π‖f − f'‖² = 2 tr(FᵀDF) − 2 tr(FᵀΠF)`` (§1.1);
* conditional means ``m_i(z) = E[f_i | z] = c_i · b_i(z)`` with ``b_i = Π_f T_f t_{i,f}`` and
  ``c_i = s_i ⟨u_i, 1⟩_q``, and conditional deviations ``b_i(z) w_i(n)`` with ``w_i = s_i u_i − c_i``:
  the coupled comparison of two modalities (§2, "different state spaces") and the
  nuisance-free dimension (§4).

Differences of conditional means are formed in the coordinates of the distinct
product functions ``b`` (a coefficient matrix per modality), never as a difference of
Gram-weighted sums, so two modalities with the same optimum compare at rounding level
(ρ_P ≈ 1e-16), as the table path does; :meth:`FactorFeatures.table` is that path's table.
Each quantity is a method of :class:`FactorFeatures` beside its table twin in this package
(``whitening_error``, ``alignment_loss``) or in :mod:`prhsim.metrics`
(``nuisance_free_dimension``, and ``coupled_comparison`` for :func:`factor_comparison`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prhsim._budget import ensure_fits
from prhsim._types import States
from prhsim.metrics import Comparison, orthogonal_map
from prhsim.optima._closed_form import Optimum
from prhsim.optima._kronecker import KroneckerBasis
from prhsim.worlds import FiniteWorld


@dataclass(frozen=True)
class FactorFeatures:
    """Product features ``f_i(x) = scales_i · Π_f tables[f][x_f, index[i, f]]`` on a product world.

    The last factor is the nuisance N of a modal world; the others are Z's factors.

    Attributes:
        tables: per factor, its p_f-whitened eigenfunctions (n_f x r_f).
        index: (k, F) index of each feature into each factor's table.
        scales: (k,) per-feature scale.
        factors: the product world's factor worlds (their p_f and Π_f).
    """

    tables: tuple[np.ndarray, ...]
    index: np.ndarray
    scales: np.ndarray
    factors: tuple[FiniteWorld, ...]

    @property
    def k(self) -> int:
        return int(self.index.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(f.n for f in self.factors)

    def take(self, columns: list[int] | np.ndarray) -> "FactorFeatures":
        """The features ``columns`` (in that order)."""
        columns = np.asarray(columns, dtype=np.int64)
        return FactorFeatures(self.tables, self.index[columns], self.scales[columns], self.factors)

    def rows(self, states: States) -> np.ndarray:
        """``f(x)`` at flat states of the product world (row-major), shape (s, k)."""
        states = np.asarray(states, dtype=np.int64).ravel()
        ensure_fits(8.0 * states.size * (2 * self.k + 2), f"features of {states.size:,} states x {self.k}",
                    "evaluate fewer states")
        out = np.broadcast_to(self.scales, (states.size, self.k)).copy()
        for table, idx, z in zip(self.tables, self.index.T, np.unravel_index(states, self.shape)):
            out *= table[z[:, None], idx[None, :]]  # only the (s x k) entries needed
        return out

    @classmethod
    def from_optimum(cls, opt: Optimum, *, columns: int | None = None) -> "FactorFeatures":
        """The factor-space features of a closed-form optimum on a product world (Kronecker backend):
        its k features, or its first ``columns`` eigenfunctions (up to k + 1, scale 1).

        Raises:
            ValueError: if the optimum's eigenbasis is not a Kronecker basis.
        """
        return _from_optimum(opt, columns=columns)

    def table(self) -> np.ndarray:
        """The full feature table over every state of the product world (the table path; small worlds)."""
        return _table(self)

    def with_trivial_nuisance(self) -> "FactorFeatures":
        """The same features with a one-state nuisance factor appended (``u = 1``, ``q = (1)``):
        two feature sets of one product world then compare with :func:`factor_comparison`."""
        return _with_trivial_nuisance(self)

    def whitening_error(self) -> float:
        """``‖FᵀDF − I‖_F`` from the factor Grams (twin: :func:`prhsim.optima.whitening_error`)."""
        return _whitening_error(self)

    def alignment_loss(self) -> float:
        """``E_π‖f(x) − f(x')‖² = 2 tr(FᵀDF) − 2 tr(FᵀΠF)`` from the factor Grams (docs/theory.md §1.1;
        twin: :func:`prhsim.optima.alignment_loss`)."""
        return _alignment_loss(self)

    def nuisance_free_dimension(self, *, threshold: float = 0.5) -> int:
        """Eigenvalues of ``E_p[m mᵀ]`` above ``threshold`` (docs/theory.md §4; twin:
        :func:`prhsim.metrics.nuisance_free_dimension`)."""
        return _nuisance_free_dimension(self, threshold=threshold)

    def nuisance(self) -> tuple[np.ndarray, np.ndarray]:
        """``(u, q)``: the nuisance factor's functions of the features times their scales (|N| x k), and q."""
        return self.tables[-1][:, self.index[:, -1]] * self.scales, np.asarray(self.factors[-1].p)


def _from_optimum(opt: Optimum, *, columns: int | None = None) -> FactorFeatures:
    """The factor-space features of a closed-form optimum on a product world (Kronecker backend):
    its k features, or its first ``columns`` eigenfunctions (up to k + 1, scale 1).

    Raises:
        ValueError: if the optimum's eigenbasis is not a Kronecker basis.
    """
    basis = opt.basis
    if not isinstance(basis, KroneckerBasis):
        raise ValueError(f"factor-space features need a Kronecker eigenbasis, got the {basis.backend} backend")
    if columns is None:
        index, scales = basis.indices[: opt.k], opt.scales
    else:
        index, scales = basis.indices[:columns], np.ones(columns)
    return FactorFeatures(tuple(s.functions for s in basis.spectra), index, scales, basis.world.factors)


def _with_trivial_nuisance(features: FactorFeatures) -> FactorFeatures:
    """The same features with a one-state nuisance factor appended (``u = 1``, ``q = (1)``).

    Compares two feature sets of one product world with :func:`factor_comparison`.
    """
    one = FiniteWorld(np.ones(1), np.ones((1, 1)))
    return FactorFeatures((*features.tables, np.ones((1, 1))), np.column_stack([features.index,
                          np.zeros(features.k, dtype=np.int64)]), features.scales, (*features.factors, one))


def _table(features: FactorFeatures) -> np.ndarray:
    """The full feature table over every state of the product world (the table path; small worlds)."""
    n = int(np.prod(features.shape, dtype=object))
    return features.rows(np.arange(n, dtype=np.int64))


def _factor_gram(a: np.ndarray, b: np.ndarray, factor: FiniteWorld, operator: bool) -> np.ndarray:
    """``aᵀ diag(p_f) b`` or, with ``operator``, ``aᵀ Π_f b``."""
    if operator:
        return a.T @ np.asarray(factor.Pi @ b)
    return a.T @ (np.asarray(factor.p)[:, None] * b)


def _gram(features: FactorFeatures, operator: bool) -> np.ndarray:
    """``E_p[f fᵀ]`` (or ``E_π[f f'ᵀ]`` with ``operator``) as a product of factor Grams."""
    out = np.outer(features.scales, features.scales)
    for table, idx, factor in zip(features.tables, features.index.T, features.factors):
        cols = table[:, idx]
        out = out * _factor_gram(cols, cols, factor, operator)
    return out


def _whitening_error(features: FactorFeatures) -> float:
    """``‖FᵀDF − I‖_F`` from the factor Grams."""
    return float(np.linalg.norm(_gram(features, False) - np.eye(features.k)))


def _alignment_loss(features: FactorFeatures) -> float:
    """``E_π‖f(x) − f(x')‖² = 2 tr(FᵀDF) − 2 tr(FᵀΠF)`` from the factor Grams (docs/theory.md §1.1)."""
    return float(2.0 * np.trace(_gram(features, False)) - 2.0 * np.trace(_gram(features, True)))


@dataclass(frozen=True)
class _Conditional:
    """Conditional moments over Z of one modality in the coordinates of a shared set of product functions."""

    coefficients: np.ndarray  # (u, k): m = b_U @ coefficients
    base_gram: np.ndarray  # (k, k): E_p[b_i b_j] over the modality's own functions
    deviations: np.ndarray  # (k, k): E_q[w_i w_j]


def _union(a: FactorFeatures, b: FactorFeatures) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Distinct product functions of Z used by ``a`` or ``b``: per-factor column tables, the
    unique index tuples (u x F), and each feature's position among them (for a, for b).

    Two columns are the same function when they come from equal factor tables at the same index.
    """
    cols, idx_a, idx_b = [], [], []
    for ta, tb, ia, ib in zip(a.tables[:-1], b.tables[:-1], a.index[:, :-1].T, b.index[:, :-1].T):
        if ta is tb or (ta.shape == tb.shape and np.array_equal(ta, tb)):
            cols.append(ta)
            idx_a.append(ia)
            idx_b.append(ib)
        else:
            cols.append(np.concatenate([ta, tb], axis=1))
            idx_a.append(ia)
            idx_b.append(ib + ta.shape[1])
    tuples = np.concatenate([np.stack(idx_a, axis=1), np.stack(idx_b, axis=1)]) if cols else np.zeros(
        (a.k + b.k, 0), dtype=np.int64)
    unique, inverse = np.unique(tuples, axis=0, return_inverse=True)
    inverse = np.ravel(inverse)
    return cols, unique, inverse[: a.k], inverse[a.k:]


def _union_gram(cols: list[np.ndarray], tuples: np.ndarray, factors: tuple[FiniteWorld, ...]) -> np.ndarray:
    """``E_{p_Z}[b_u b_v]`` for the product functions ``tuples`` (u x F)."""
    out = np.ones((tuples.shape[0], tuples.shape[0]))
    for table, idx, factor in zip(cols, tuples.T, factors):
        c = table[:, idx]
        out = out * _factor_gram(c, c, factor, False)
    return out


def _conditional(features: FactorFeatures, position: np.ndarray, size: int, gram: np.ndarray) -> _Conditional:
    u, q = features.nuisance()
    c = q @ u
    w = u - c
    coefficients = np.zeros((size, features.k))
    coefficients[position, np.arange(features.k)] = c
    return _Conditional(coefficients, gram[np.ix_(position, position)], w.T @ (q[:, None] * w))


def _check_pair(a: FactorFeatures, b: FactorFeatures) -> None:
    za, zb = a.shape[:-1], b.shape[:-1]
    if za != zb:
        raise ValueError(f"both modalities must share the factors of Z, got {za} and {zb}")
    if a.k != b.k:
        raise ValueError(f"both modalities need the same number of features, got {a.k} and {b.k}")


def factor_comparison(a: FactorFeatures, b: FactorFeatures) -> Comparison:
    """:func:`prhsim.metrics.coupled_comparison` of two modalities' whitened factor-space features.

    With coefficient matrices ``A``, ``B`` of the conditional means over the distinct
    product functions (Gram ``G``), ``M = Bᵀ G A``, ``Q̂ = UVᵀ`` for ``M = USVᵀ``,

    * ``res² = tr(Δᵀ G Δ) + tr(G_a ⊙ W_a) + tr(G_b ⊙ W_b)`` with ``Δ = A − B Q̂``;
    * ``‖sinΘ‖² = tr(Δ'ᵀ G Δ') + tr(G_b ⊙ W_b) + tr(M (G_a ⊙ W_a) Mᵀ)`` with ``Δ' = B − A Mᵀ``:
      the residual of projecting ``f_b`` on ``span f_a`` (``f_b ≈ f_a Mᵀ``),

    where ``G_m`` is the Gram of modality m's own product functions and ``W_m`` that of its
    nuisance deviations ``w_i``, so ``G_m ⊙ W_m`` is its conditional covariance summed over z.

    Raises:
        ValueError: if the two do not share Z's factors or have different numbers of features.
    """
    _check_pair(a, b)
    cols, tuples, pos_a, pos_b = _union(a, b)
    G = _union_gram(cols, tuples, a.factors[:-1])
    ca = _conditional(a, pos_a, tuples.shape[0], G)
    cb = _conditional(b, pos_b, tuples.shape[0], G)
    A, B = ca.coefficients, cb.coefficients
    M = B.T @ G @ A
    Q = orthogonal_map(M)
    var_a = ca.base_gram * ca.deviations
    var_b = cb.base_gram * cb.deviations
    delta = A - B @ Q
    res_sq = np.sum(delta * (G @ delta)) + np.trace(var_a) + np.trace(var_b)
    proj = M.T  # f_b ≈ f_a Mᵀ
    delta_sin = B - A @ proj
    sin_sq = np.sum(delta_sin * (G @ delta_sin)) + np.trace(var_b) + np.sum(proj * (var_a @ proj))
    k = a.k
    return Comparison(
        rho_p=float(np.sqrt(max(res_sq, 0.0) / k)),
        s_theta=float(np.sqrt(max(sin_sq, 0.0) / k)),
        correlations=np.clip(np.linalg.svd(M, compute_uv=False), 0.0, 1.0),
        Q=Q,
    )


def _nuisance_free_dimension(features: FactorFeatures, *, threshold: float = 0.5) -> int:
    """Eigenvalues of ``E_p[m mᵀ] = Aᵀ G A`` above ``threshold`` (docs/theory.md §4)."""
    tuples, pos = np.unique(features.index[:, :-1], axis=0, return_inverse=True)
    G = _union_gram(list(features.tables[:-1]), tuples, features.factors[:-1])
    A = _conditional(features, np.ravel(pos), tuples.shape[0], G).coefficients
    gram = A.T @ G @ A
    return int(np.sum(np.linalg.eigvalsh((gram + gram.T) / 2) > threshold))
