"""When a learner has converged: the eigen-residual and its bound on s_Θ, the loss plateau, and the steps still needed (docs/theory.md §1.5).

Hard whitening on exact data (every pair of π) converges to a subspace, and how far a
representation is from the optimum can be bounded from π alone, without the closed
form's eigenvectors. For features X (n, k) of every state (p-centred when the objective
is), with C = XᵀPX, T = P⁻¹J the pair operator (J the joint law of π) and
A = XᵀJX:

* the residual ``R = TX − X C⁻¹A`` and its whitened norm ``r = √tr(C⁻¹ RᵀPR)``
  (zero exactly on an invariant subspace of T: on the optimum, and at saddles);
* the Ritz values ``θ_1 ≥ … ≥ θ_k``, the eigenvalues of ``C⁻¹A``;
* with ``μ_{k+1}`` (the (k+1)-th eigenvalue of T, one number of the spectrum head), the
  Davis–Kahan sinΘ theorem bounds the distance to the top-k eigenspace:
  ``s_Θ = ‖sinΘ‖_F/√k ≤ r / ((θ_k − μ_{k+1})·√k)`` whenever ``θ_k > μ_{k+1}``.

Every other objective or data mode (SIGReg, minibatches) stops on a plateau of its loss:
the mean loss of a window of steps against the previous window's, within their noise. A
noisy loss (minibatches, or SIGReg's directions drawn anew every step) hovers at a floor
set by the step size, so its plateau counts only once the schedule has brought the
learning rate down to :data:`PLATEAU_LR_FRACTION` of its peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from prhsim.learners._exact_law import FactorLaw, PairList, apply_factors, exact_law
from prhsim.worlds import World

#: Why a seed stopped: its residual bound (or residual) met the tolerance, its loss plateaued,
#: or the budget of steps ran out first.
Reason = Literal["residual", "plateau", "budget"]
#: Consecutive windows a plateau must hold before a seed stops.
PLATEAU_PATIENCE = 2
#: A plateau window holds at least this many steps' losses (whole logging chunks).
PLATEAU_STEPS = 50
#: A noisy loss (minibatches, resampled SIGReg directions) may plateau only once the schedule's
#: learning rate has fallen to this fraction of its peak: SGD's noise floor falls with the step.
PLATEAU_LR_FRACTION = 0.1
#: Logged points the rate of a curve is fitted on.
RATE_POINTS = 3
#: A curve that shrinks by less than this factor every 100 steps is no longer falling.
FALLING = 0.999


@dataclass(frozen=True)
class EigenResidual:
    """The residual of features as an approximate top-k eigenspace of T (see the module docstring).

    Attributes:
        norm: ``r = √tr(C⁻¹RᵀPR)``, the whitened residual norm.
        ritz: the Ritz values θ (k,), descending.
    """

    norm: float
    ritz: np.ndarray

    def bound(self, next_eigenvalue: float) -> float:
        """The Davis–Kahan bound on ``s_Θ`` given ``μ_{k+1}``; inf when ``θ_k ≤ μ_{k+1}`` (no separation)."""
        delta = float(self.ritz[-1]) - float(next_eigenvalue)
        if not delta > 0:
            return math.inf
        return self.norm / (delta * math.sqrt(self.ritz.size))


class LawOperator:
    """``X ↦ JX``, the joint law of π applied to features of every state (numpy, float64).

    A factor law applies each factor along its own axis (π is never formed), a pair list
    is one sparse matrix built once.
    """

    def __init__(self, law: PairList | FactorLaw, n: int) -> None:
        self._law = law
        self._J = (sp.csr_array((law.pi, (law.rows, law.cols)), shape=(n, n))
                   if isinstance(law, PairList) else None)

    def joint(self, X: np.ndarray) -> np.ndarray:
        """``J X``, J the joint law (n, n) of the positive pairs (a factor law: ``(⊗_f J_f) X``)."""
        if self._J is not None:
            return self._J @ X
        return apply_factors(X, self._law.shape, self._law.mats)


def eigen_residual(F: np.ndarray, world: World, *, centred: bool = True) -> EigenResidual:
    """The whitened eigen-residual of features F (n, k) of every state of ``world`` (module docstring).

    Example:
        >>> from prhsim.worlds import ring
        >>> from prhsim.optima import whitened_optimum
        >>> w = ring(12); opt = whitened_optimum(w, 2)
        >>> res = eigen_residual(opt.features(), w)
        >>> res.norm < 1e-12, bool(np.allclose(res.ritz, opt.eigenvalues[:2]))
        (True, True)

    Raises:
        ValueError: when the p-covariance of F is singular (a collapsed F has no residual).
    """
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2 or F.shape[0] != world.n:
        raise ValueError(f"F must hold one row per state ({world.n:,}), got shape {F.shape}")
    return residual_of(F, np.asarray(world.p, dtype=np.float64), LawOperator(exact_law(world, F.shape[1]), world.n),
                       centred=centred)


def residual_of(F: np.ndarray, p: np.ndarray, law: LawOperator, *, centred: bool) -> EigenResidual:
    """:func:`eigen_residual` with the law already built (the training loop measures every logged step)."""
    X = F - p @ F if centred else F
    C = X.T @ (p[:, None] * X)
    JX = law.joint(X)
    A = X.T @ JX
    A = (A + A.T) / 2
    try:
        L = np.linalg.cholesky(C)
    except np.linalg.LinAlgError:
        raise ValueError("the features' covariance is singular (collapsed): no eigen-residual") from None
    Li = np.linalg.inv(L)  # C⁻¹ = Liᵀ Li
    ritz = np.linalg.eigvalsh(Li @ A @ Li.T)[::-1]
    safe = np.where(p > 0, p, 1.0)
    R = JX / safe[:, None] - X @ np.linalg.solve(C, A)  # TX − X C⁻¹A
    RL = R @ Li.T  # R C^{-1/2} up to a rotation
    return EigenResidual(norm=float(np.sqrt(max(np.sum(p[:, None] * RL * RL), 0.0))), ritz=ritz)


def plateaued(previous: np.ndarray, current: np.ndarray, rtol: float) -> bool:
    """Whether a window of losses has stopped moving against the previous window.

    True when the change of the window means is at most ``rtol·|mean|`` or at most twice
    its standard error (minibatch losses are noisy: a change within the noise is no progress).
    """
    m0, m1 = float(np.mean(previous)), float(np.mean(current))
    se = math.sqrt(float(np.var(previous)) / previous.size + float(np.var(current)) / current.size)
    return abs(m1 - m0) <= max(rtol * abs(m1), 2.0 * se)


@dataclass(frozen=True)
class CurveRate:
    """How fast a logged curve still falls: its rate and the steps it needs to reach a target.

    Attributes:
        rate_per_100: the factor by which the curve shrinks every 100 steps (at least
            :data:`FALLING`: no longer falling).
        steps_needed: the further steps to reach the target at that rate (None when not falling).
    """

    rate_per_100: float
    steps_needed: int | None

    def describe(self, name: str) -> str:
        if self.steps_needed is None:
            return f"{name} no longer falling"
        return (f"{name} still falling at rate {self.rate_per_100:.3g} per 100 steps; "
                f"about {self.steps_needed:,} more steps needed")


def curve_rate(steps: np.ndarray, values: np.ndarray, target: float) -> CurveRate | None:
    """The rate of the last :data:`RATE_POINTS` logged values (a geometric fit) and the steps to ``target``.

    None when fewer than two positive finite values are logged.
    """
    steps, values = np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)
    keep = np.isfinite(values) & (values > 0)
    steps, values = steps[keep][-RATE_POINTS:], values[keep][-RATE_POINTS:]
    if steps.size < 2 or steps[-1] <= steps[0]:
        return None
    slope = float(np.polyfit(steps, np.log(values), 1)[0])  # log-value per step
    rate = math.exp(100.0 * slope)
    if rate >= FALLING:
        return CurveRate(rate_per_100=rate, steps_needed=None)
    needed = max(0.0, math.log(target / values[-1]) / slope)
    return CurveRate(rate_per_100=rate, steps_needed=int(math.ceil(needed)))


def heavy_ball(gap: float, spread: float) -> tuple[float, float]:
    """Step size η and momentum β of the preconditioned heavy-ball method for a spectrum (docs/theory.md §1.5).

    Near the optimum every pair (i ≤ k < j) of eigen-directions contracts like gradient
    descent on a quadratic whose curvatures lie in ``[gap, spread]``
    (``gap = μ_k − μ_{k+1}``, ``spread = μ_1 − μ_min ≤ μ_1 + 1``); Polyak's choice
    ``η = 4/(√s + √g)²``, ``β = ((√s − √g)/(√s + √g))²`` contracts by ``√β`` per step.

    Example:
        >>> eta, beta = heavy_ball(0.01, 1.0)
        >>> round(eta, 4), round(beta, 4)
        (3.3058, 0.6694)
    """
    if not (gap > 0 and spread >= gap):
        raise ValueError(f"the heavy-ball rates need 0 < gap <= spread, got gap {gap!r}, spread {spread!r}")
    sg, ss = math.sqrt(gap), math.sqrt(spread)
    return 4.0 / (ss + sg) ** 2, ((ss - sg) / (ss + sg)) ** 2


@dataclass(frozen=True)
class StopReport:
    """How every seed of a training call stopped (arrays write-protected; the leading axis is the seed).

    Attributes:
        rule: the stopping rule of the call: "residual" (hard whitening on exact data) or
            "plateau" (every other objective or data mode).
        tol: the tolerance of the rule's measure (None: the whole budget was taken).
        converged: whether each seed met its rule within the budget, (S,).
        at: the step each seed stopped at (the budget when it did not converge), (S,).
        reason: why each seed stopped ("residual", "plateau" or "budget").
        residual: the whitened eigen-residual ``r`` at the logged steps (S, L), or None (plateau rule).
        bound: the Davis–Kahan bound on ``s_Θ`` at the logged steps (S, L), or None without ``μ_{k+1}``.
    """

    rule: Literal["residual", "plateau"]
    tol: float | None
    converged: np.ndarray
    at: np.ndarray
    reason: tuple[Reason, ...]
    residual: np.ndarray | None = None
    bound: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("converged", "at", "residual", "bound"):
            value = getattr(self, name)
            if value is not None:
                value.setflags(write=False)
