"""Closed-form optima of the second-order JEPA objectives (docs/theory.md §1).

Whitened alignment: minimise ``L(F) = E_π‖f(z) − f(z')‖²`` subject to
``FᵀDF = I`` (and ``E_p f = 0`` when centred). By Ky Fan,
``F* = D^{-1/2} U_k Q`` for any ``Q ∈ O(k)`` and ``L* = 2 Σ_{i≤k} (1 − μ_i)``,
where ``μ`` is K's spectrum (uncentred) or K's spectrum without the trivial
eigenvalue (centred, ``μ_i = λ_{i+1}``). The optimum is one O(k)-orbit iff the
gap ``μ_k − μ_{k+1}`` is positive (§1.2).

Spectral contrastive (HaoChen et al. 2021): ``F* = D^{-1/2} U_k diag(√λ⁺) Q``,
``L*_sc = −Σ_{i≤k} (λ_i⁺)²``; not whitened, includes the constant coordinate (§1.3).

``k="auto"`` (:func:`pick_k`) chooses k at the largest relative Laplacian gap
``(μ_k − μ_{k+1}) / (1 − μ_{k+1})`` of the centred spectrum (§1.2: k only at a gap);
an uncentred optimum takes the constant plus the same slow features.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike
from prhsim._types import States, Vector
from prhsim.optima._basis import EigenBasis
from prhsim.optima._kronecker import FactorSpectra
from prhsim.optima._spectrum import Backend, top_eigenpairs
from prhsim.worlds import World

#: A gap at or below this is a tie: no uniqueness is expected (docs/theory.md §2, "Report").
GAP_TOL = 1e-9
#: Largest world whose full feature table ``F`` is materialised by :attr:`Optimum.F`.
FEATURE_LIMIT = 5_000_000
#: ``k="auto"`` searches the centred k in 1..AUTO_K_MAX (capped by the world).
AUTO_K_MAX = 32
#: Scores within this relative tolerance of the best count as tied; the first k wins.
TIE_RTOL = 1e-9
#: Below this, ``1 − μ_{k+1}`` counts as zero (a disconnected world) and the relative gap as 0.
FLAT_TOL = 1e-12

ClosedFormObjective = Literal["whitened", "spectral_contrastive"]
Criterion = Literal["relative", "absolute"]


class TieWarning(UserWarning):
    """k splits a block of tied eigenvalues: the optimum is not one rotation orbit."""


@dataclass(frozen=True)
class Optimum:
    """A closed-form optimum.

    Attributes:
        objective: "whitened" or "spectral_contrastive".
        k: number of features.
        centred: whether the trivial eigenvector was excluded.
        eigenvalues: ``μ_1 … μ_{k+1}`` (k+1 values, descending; the last shows the gap).
        value: the optimal loss L*.
        gap: ``μ_k − μ_{k+1}``.
        unique: True when the optimum is a single O(k)-orbit (for spectral
            contrastive: when ``GGᵀ`` is unique).
        basis: the eigenpairs behind the features (k+1 of them).
        criterion: the :func:`pick_k` criterion that chose k, or None when k was given.
    """

    objective: ClosedFormObjective
    k: int
    centred: bool
    eigenvalues: Vector
    value: float
    gap: float
    unique: bool
    basis: EigenBasis
    criterion: Criterion | None = None

    @property
    def n(self) -> int:
        return self.basis.n

    @property
    def scales(self) -> Vector:
        """Per-feature scale applied to the whitened eigenfunctions (1, or ``√λ⁺``)."""
        if self.objective == "whitened":
            return np.ones(self.k)
        return np.sqrt(np.maximum(self.eigenvalues[: self.k], 0.0))

    def features(self, states: States | None = None) -> np.ndarray:
        """``f*(z)`` for the given states (all if None), shape (s, k); the canonical Q = I."""
        rows = self.n if states is None else int(np.size(states))
        ensure_fits(FLOAT * rows * (self.basis.values.size + self.k), f"features of {rows:,} states x {self.k}",
                    "evaluate on fewer states: features(states)")
        return self.basis.evaluate(states)[:, : self.k] * self.scales

    @property
    def F(self) -> np.ndarray:
        """The full feature table (n x k); refused above FEATURE_LIMIT states."""
        if self.n > FEATURE_LIMIT:
            raise ValueError(f"refusing to materialise F for {self.n} states (limit {FEATURE_LIMIT}); use features(states)")
        return self.features()


def describe_tie(values: Vector, k: int, tol: float = GAP_TOL) -> str:
    """Name the tied block around position k (1-based) of ``values``."""
    lo = k
    while lo > 1 and abs(values[lo - 2] - values[k - 1]) <= tol:
        lo -= 1
    hi = k + 1
    while hi < values.size and abs(values[hi] - values[k - 1]) <= tol:
        hi += 1
    open_ended = hi == values.size  # the block may go on past the computed eigenvalues
    more = " or more" if open_ended else ""
    above = f"a k past mu_{hi}" if open_ended else f"k={hi}"
    below = f"k={lo - 1} or " if lo > 1 else ""
    return (f"k={k} splits a tie: mu_{lo}..mu_{hi} = {values[k - 1]:.10g} (multiplicity {hi - lo + 1}{more}); "
            f"the optimum is a continuum of subspaces, not one rotation orbit; choose {below}{above} at a gap")


def pick_k(
    values: Vector,
    k_min: int = 1,
    k_max: int | None = None,
    *,
    centred: bool = True,
    criterion: Criterion = "relative",
) -> int:
    """The k in [k_min, k_max] at the best gap of the spectrum ``values = μ`` (§1.2).

    Scores: ``relative`` (default) ``r_k = (μ_k − μ_{k+1}) / (1 − μ_{k+1})``, the gap
    relative to the Laplacian eigenvalue ``1 − μ_{k+1}`` (0 where that is ≤ 1e-12,
    e.g. a disconnected world); ``absolute`` ``μ_k − μ_{k+1}``. The first k whose score
    is within a relative 1e-9 of the best wins, so rounding cannot split an exact tie.

    ``centred=True``: ``μ`` is the centred spectrum ``λ_2, λ_3, …``. ``centred=False``:
    ``μ = λ_1 = 1, λ_2, …`` and k ≥ 2, so k is the centred choice plus the constant,
    never the constant alone. ``values`` must hold at least ``k_max + 1`` eigenvalues.

    Example:
        >>> import numpy as np
        >>> pick_k(np.array([0.9, 0.8, 0.2, 0.1])), pick_k(np.array([1.0, 0.9, 0.8, 0.2]), centred=False)
        (2, 3)
    """
    values = np.asarray(values, dtype=np.float64)
    if criterion not in ("relative", "absolute"):
        raise ValueError(f"criterion must be 'relative' or 'absolute', got {criterion!r}")
    if values.ndim != 1:
        raise ValueError(f"pick_k needs a vector of eigenvalues, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        i = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"pick_k needs finite eigenvalues, got values[{i}] = {values[i]}")
    if not centred and values.size and abs(values[0] - 1.0) > GAP_TOL:
        raise ValueError(f"uncentred eigenvalues must start with the trivial lambda_1 = 1, got {values[0]:.12g}")
    k_max = values.size - 1 if k_max is None else k_max
    k_min = k_min if centred else max(k_min, 2)
    if not 1 <= k_min <= k_max <= values.size - 1:
        raise ValueError(f"k range [{k_min}, {k_max}] is empty or exceeds the {values.size} eigenvalues computed")
    upper, lower = values[k_min - 1 : k_max], values[k_min : k_max + 1]
    scores = upper - lower
    if criterion == "relative":
        room = 1.0 - lower
        scores = np.where(room > FLAT_TOL, scores / np.where(room > FLAT_TOL, room, 1.0), 0.0)
    best = scores.max()
    return int(k_min + np.flatnonzero(scores >= best - TIE_RTOL * abs(best))[0])


def _resolve_k(world: World, k: int | str, centred: bool) -> tuple[int, int]:
    """Return (k or 0 for auto, number of eigenpairs to compute)."""
    if isinstance(k, str):
        if k != "auto":
            raise ValueError(f"k must be a positive integer or 'auto', got {k!r}")
        if world.n < 3:
            raise ValueError(f"a world of {world.n} states has no k to choose")
        k_centred = min(AUTO_K_MAX, world.n - 2)  # largest centred k; uncentred adds the constant
        return 0, k_centred + (1 if centred else 2)
    limit = world.n - 2 if centred else world.n - 1
    if isinstance(k, bool) or int(k) != k or not 1 <= k <= limit:
        raise ValueError(f"k must be an integer in 1..{limit} for a world of {world.n} states "
                         f"({'centred' if centred else 'uncentred'}; one more eigenvalue is needed for the gap), got {k}")
    return int(k), int(k) + 1


def closed_form(
    world: World,
    k: int | Literal["auto"] = "auto",
    *,
    objective: ClosedFormObjective = "whitened",
    centred: bool = True,
    backend: Backend = "auto",
    criterion: Criterion = "relative",
    rng: RngLike = None,
    spectra: FactorSpectra | None = None,
) -> Optimum:
    """The closed-form optimum of ``objective`` with k features.

    Args:
        world: any world (finite, sparse or product).
        k: number of features, or "auto": the centred k in 1..min(32, n−2) with the
            largest relative gap ``(μ_k − μ_{k+1}) / (1 − μ_{k+1})`` (the first if
            several tie within 1e-9); uncentred objectives (and spectral
            contrastive) take that k plus one, the constant. See :func:`pick_k`.
        objective: "whitened" (docs/theory.md §1.1) or "spectral_contrastive" (§1.3, always
            uncentred: its optimum contains the constant coordinate).
        centred: whitened objective only; centred (default) excludes the trivial
            eigenvector and deflates with ``−3ssᵀ``.
        backend: eigen-backend (see :func:`prhsim.optima.top_eigenpairs`).
        criterion: the :func:`pick_k` score for ``k="auto"``: "relative" (default) or
            "absolute" (the largest ``μ_k − μ_{k+1}``); recorded in the Optimum.
        rng: seeds the Lanczos start vector.
        spectra: a cache of factor spectra shared by product worlds with common factors
            (Kronecker backend; see :class:`prhsim.optima.FactorSpectra`).

    Warns:
        TieWarning: when k splits a tie (gap ≤ 1e-9), naming the tied block.

    Example:
        >>> from prhsim.worlds import ring
        >>> opt = closed_form(ring(8), 2)
        >>> round(opt.value, 6), opt.unique
        (0.585786, True)
    """
    if objective not in ("whitened", "spectral_contrastive"):
        raise ValueError(f"objective must be 'whitened' or 'spectral_contrastive', got {objective!r}")
    if criterion not in ("relative", "absolute"):
        raise ValueError(f"criterion must be 'relative' or 'absolute', got {criterion!r}")
    if objective == "spectral_contrastive":
        centred = False
    k_fixed, m = _resolve_k(world, k, centred)
    basis = top_eigenpairs(world, m, centred=centred, backend=backend, rng=rng, spectra=spectra)
    k_used = k_fixed or pick_k(basis.values, centred=centred, criterion=criterion)
    basis = basis.take(k_used + 1)
    mu = basis.values
    gap = float(mu[k_used - 1] - mu[k_used])
    tied = gap <= GAP_TOL
    if objective == "whitened":
        value = 2.0 * float(np.sum(1.0 - mu[:k_used]))
        unique = not tied
    else:
        value = -float(np.sum(np.maximum(mu[:k_used], 0.0) ** 2))
        unique = not (tied and mu[k_used - 1] > GAP_TOL)
    if not unique:
        warnings.warn(describe_tie(mu, k_used), TieWarning, stacklevel=2)
    return Optimum(objective, k_used, centred, mu, value, gap, unique, basis, None if k_fixed else criterion)


def whitened_optimum(world: World, k: int | Literal["auto"] = "auto", *, centred: bool = True,
                     backend: Backend = "auto", criterion: Criterion = "relative", rng: RngLike = None) -> Optimum:
    """:func:`closed_form` with the whitened objective (docs/theory.md §1.1)."""
    return closed_form(world, k, objective="whitened", centred=centred, backend=backend, criterion=criterion, rng=rng)


def spectral_contrastive_optimum(world: World, k: int | Literal["auto"] = "auto", *, backend: Backend = "auto",
                                 criterion: Criterion = "relative", rng: RngLike = None) -> Optimum:
    """:func:`closed_form` with the spectral-contrastive objective (docs/theory.md §1.3)."""
    return closed_form(world, k, objective="spectral_contrastive", backend=backend, criterion=criterion, rng=rng)
