"""Evaluating a learned representation against the closed form (docs/theory.md §1.1, §2, §7).

A learned table ``F`` (n × k, row z is f(z)) is not whitened: the whitening
objective is blind to affine maps of f, and SIGReg only pushes towards
whiteness. So, as docs/theory.md §2 prescribes for learned embeddings, F is
centred and whitened under p first, ``F̃ = (F − 1μᵀ) C^{-1/2}``, and F̃ is compared
with the closed form F*:

* ``s_Θ = ‖sinΘ‖_F / √k`` (principal angles) and ``ρ_P = min_Q ‖F̃ − F* Q‖_D / √k`` (Procrustes);
* the whitened alignment loss over the optimum, ``E_π‖f̃(z) − f̃(z')‖² / L*``, which is
  ≥ 1 for every feasible F̃ by Ky Fan, = 1 exactly on the optimal orbit;
* before whitening: ``‖Cov_p f − I‖_F``, ``E_p f`` and the collapse indicator ``tr Cov_p f``;
* the population SIGReg (``mean_j EP(a_j)`` over fixed directions) of F and of F* (§7).

Everything is numpy (:mod:`prhsim.metrics` does the comparisons).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from prhsim.optima import Optimum
from prhsim.optima import alignment_loss
from prhsim.objectives import population_sigreg
from prhsim.objectives import draw_directions
from prhsim.metrics import principal_angles, procrustes, whiten
from prhsim.worlds import World

#: ``ep="auto"`` computes the population SIGReg (n² · M exponentials) up to this many states.
EP_AUTO_LIMIT = 2048
#: Directions of the population SIGReg (docs/theory.md §7 measured with 32 fixed directions).
EP_DIRECTIONS = 32
#: A representation is *collapsed* when ``tr Cov_p f < COLLAPSE_TOL · k``.
COLLAPSE_TOL = 1e-2


@dataclass(frozen=True)
class LearnedEvaluation:
    """A learned representation against the closed form (all p-weighted).

    Attributes:
        k: number of features.
        s_theta: ``‖sinΘ‖_F / √k`` ∈ [0, 1] between the whitened features and the optimum.
        rho_p: ``min_Q ‖F̃ − F* Q‖_D / √k`` ∈ [0, √2].
        correlations: canonical correlations with the optimum (Procrustes singular values), descending.
        det_q: det of the fitted map (±1; information only).
        cov_error: ``‖Cov_p f − I‖_F`` before whitening (the second moment ``FᵀDF`` for an uncentred optimum).
        mean: ``E_p f`` (k,) before whitening.
        alignment: ``E_π‖f̃(z) − f̃(z')‖²`` of the whitened features.
        optimum_value: ``L*`` (L*_c for a centred optimum).
        alignment_ratio: ``alignment / L*`` (≥ 1 by Ky Fan; inf when L* = 0 < alignment).
        trace_cov: ``tr Cov_p f`` before whitening (the collapse indicator).
        collapsed: ``trace_cov < collapse_tol · k``.
        ep: population SIGReg of f (before whitening) over the fixed directions, or None.
        ep_closed_form: the same for the closed form's features, or None.
        gap: the optimum's gap ``μ_k − μ_{k+1}`` (below 1e-9: no uniqueness expected).
    """

    k: int
    s_theta: float
    rho_p: float
    correlations: np.ndarray
    det_q: float
    cov_error: float
    mean: np.ndarray
    alignment: float
    optimum_value: float
    alignment_ratio: float
    trace_cov: float
    collapsed: bool
    ep: float | None
    ep_closed_form: float | None
    gap: float

    @property
    def mean_norm(self) -> float:
        return float(np.linalg.norm(self.mean))


def trace_covariance(F: np.ndarray, p: np.ndarray) -> float:
    """``tr Cov_p f = Σ_z p(z) ‖f(z) − μ‖²`` (the collapse indicator)."""
    F = np.asarray(F, dtype=np.float64)
    X = F - p @ F
    return float(np.sum(p[:, None] * X * X))


def subspace_distance(F: np.ndarray, reference: np.ndarray, p: np.ndarray, *, centred: bool = True) -> float:
    """``s_Θ`` between span of F (p-centred first when ``centred``) and span of the reference; NaN for non-finite F."""
    F = np.asarray(F, dtype=np.float64)
    if not np.all(np.isfinite(F)):
        return float("nan")
    return float(principal_angles(F - p @ F if centred else F, reference, p).s_theta)


def evaluate_learned(F: np.ndarray, world: World, optimum: Optimum, *, ep: bool | Literal["auto"] = "auto",
             directions: np.ndarray | None = None, seed: int = 0,
             collapse_tol: float = COLLAPSE_TOL) -> LearnedEvaluation:
    """Compare learned features of every state with the whitened closed form of ``world``.

    Args:
        F: learned features (n, k), row z is f(z); whitened here under p (centred iff the optimum is).
        world: the world F was learned on.
        optimum: its whitened closed form with the same k (e.g. :func:`prhsim.optima.whitened_optimum`).
        ep: compute the population SIGReg of F and of F* (``"auto"``: when n ≤ 2048; it costs n²·M).
        directions: unit directions (k, M) for the population SIGReg; default
            ``draw_directions(k, 32, seed=seed, step=0)``.
        collapse_tol: the collapse threshold relative to k.

    Raises:
        ValueError: on shapes that do not match, NaN or inf in F, a non-whitened optimum,
            or a singular p-covariance (a fully collapsed F cannot be whitened).

    Example:
        >>> from prhsim.worlds import path
        >>> from prhsim.optima import whitened_optimum
        >>> w = path(6); opt = whitened_optimum(w, 2)
        >>> r = evaluate_learned(3.0 * opt.F @ np.array([[0.0, 1.0], [1.0, 0.0]]) + 1.0, w, opt)
        >>> round(r.s_theta, 9), round(r.rho_p, 9), round(r.alignment_ratio, 9), r.collapsed
        (0.0, 0.0, 1.0, False)
    """
    if optimum.objective != "whitened":
        raise ValueError(f"evaluate_learned compares with a whitened optimum, got {optimum.objective!r}")
    F = np.asarray(F, dtype=np.float64)
    if F.shape != (world.n, optimum.k) or optimum.n != world.n:
        raise ValueError(f"features must have shape ({world.n}, {optimum.k}) for this world and optimum "
                         f"(optimum on {optimum.n} states), got {F.shape}")
    if not np.all(np.isfinite(F)):
        raise ValueError("learned features contain NaN or inf")
    if not collapse_tol > 0:
        raise ValueError(f"collapse_tol must be positive, got {collapse_tol}")
    p = np.asarray(world.p)
    k, centred = optimum.k, optimum.centred
    star = optimum.features()
    mean = p @ F
    X = F - mean if centred else F
    moment = X.T @ (p[:, None] * X)
    trace = trace_covariance(F, p)
    Fw = whiten(F, p, centre=centred)
    fit = procrustes(Fw, star, p)
    alignment = alignment_loss(world, Fw)
    value = float(optimum.value)
    ratio = alignment / value if value > 0 else (1.0 if alignment <= 0 else float("inf"))
    ep_F = ep_star = None
    if ep is True or (ep == "auto" and world.n <= EP_AUTO_LIMIT):
        A = draw_directions(k, EP_DIRECTIONS, seed=seed, step=0) if directions is None else np.asarray(directions)
        ep_F, ep_star = float(population_sigreg(F, p, A)), float(population_sigreg(star, p, A))
    elif ep not in (False, "auto"):
        raise ValueError(f"ep must be True, False or 'auto', got {ep!r}")
    return LearnedEvaluation(
        k=k, s_theta=float(principal_angles(Fw, star, p).s_theta), rho_p=float(fit.rho),
        correlations=np.clip(fit.singular_values, 0.0, 1.0), det_q=fit.det_q,
        cov_error=float(np.linalg.norm(moment - np.eye(k))), mean=mean, alignment=alignment,
        optimum_value=value, alignment_ratio=float(ratio), trace_cov=trace, collapsed=bool(trace < collapse_tol * k),
        ep=ep_F, ep_closed_form=ep_star, gap=float(optimum.gap))


class SeedSpread(NamedTuple):
    """Seed-to-seed distances of whitened features: ``rho_p[i, j]`` and ``s_theta[i, j]`` (S × S, zero diagonal)."""

    rho_p: np.ndarray
    s_theta: np.ndarray


def seed_spread(features: np.ndarray, p: np.ndarray, *, centred: bool = True) -> SeedSpread:
    """``ρ_P`` and ``s_Θ`` between every two seeds' features (S, n, k), each whitened under p first (§2)."""
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 3 or features.shape[1] != np.size(p):
        raise ValueError(f"features must have shape (seeds, {np.size(p)}, k), got {features.shape}")
    W = [whiten(F, p, centre=centred) for F in features]
    S = len(W)
    rho, sin = np.zeros((S, S)), np.zeros((S, S))
    for i in range(S):
        for j in range(i + 1, S):
            rho[i, j] = rho[j, i] = procrustes(W[i], W[j], p).rho
            sin[i, j] = sin[j, i] = principal_angles(W[i], W[j], p).s_theta
    return SeedSpread(rho, sin)


#: Bootstrap resamples behind a sampled evaluation's standard errors.
BOOTSTRAP = 64


@dataclass(frozen=True)
class SampledEvaluation:
    """A learned representation against the closed form on M states drawn from p (each weighs 1/M).

    The estimates are those of :class:`LearnedEvaluation` with the sample's empirical law for p;
    ``*_se`` are their bootstrap standard errors (:data:`BOOTSTRAP` resamples of the M states).
    The whitened alignment loss needs π, not p, and is not estimated here.

    Attributes:
        samples: M.
        s_theta, s_theta_se: ``‖sinΘ‖_F / √k`` between the whitened features and the optimum, and its error.
        rho_p, rho_p_se: the Procrustes distance after whitening, and its error.
        cov_error: ``‖Cov f − I‖_F`` before whitening.
        trace_cov: ``tr Cov f`` (the collapse indicator).
    """

    samples: int
    s_theta: float
    s_theta_se: float
    rho_p: float
    rho_p_se: float
    cov_error: float
    trace_cov: float


def evaluate_sampled(F: np.ndarray, reference: np.ndarray, *, centred: bool = True, seed: int = 0) -> SampledEvaluation:
    """Learned features F (M, k) and the closed form's ``reference`` (M, k) at the same M states drawn from p.

    Raises:
        ValueError: on shapes that differ, fewer than 2k states, or features that cannot be whitened.
    """
    F, R = np.asarray(F, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if F.shape != R.shape or F.ndim != 2 or F.shape[0] < 2 * F.shape[1]:
        raise ValueError(f"F and the reference must both be (M, k) with M >= 2k, got {F.shape} and {R.shape}")
    m = F.shape[0]

    def measures(rows: np.ndarray) -> tuple[float, float]:
        q = np.full(rows.size, 1.0 / rows.size)
        a = whiten(F[rows], q, centre=centred)
        b = whiten(R[rows], q, centre=centred)
        return float(principal_angles(a, b, q).s_theta), float(procrustes(a, b, q).rho)

    every = np.arange(m)
    s_theta, rho_p = measures(every)
    rng = np.random.default_rng([seed, m])
    boot = np.array([measures(rng.integers(0, m, size=m)) for _ in range(BOOTSTRAP)])
    q = np.full(m, 1.0 / m)
    X = F - q @ F if centred else F
    cov = X.T @ (q[:, None] * X)
    return SampledEvaluation(samples=m, s_theta=s_theta, s_theta_se=float(boot[:, 0].std(ddof=1)), rho_p=rho_p,
                             rho_p_se=float(boot[:, 1].std(ddof=1)),
                             cov_error=float(np.linalg.norm(cov - np.eye(F.shape[1]))),
                             trace_cov=float(np.trace(cov)))
