"""The exact log-bilinear next-token fit, and its comparison with correspondence analysis (docs/theory.md §5).

**The exact fit** (:func:`fit_log_bilinear`): L-BFGS-B on the exact expected cross-entropy
``Σ_{c,y} P(c, y)[−log softmax_y(h_c Wᵀ + b)]`` over a tabular h (C, d), W (V, d), b (V,). It
equals ``H(Y|C) + Σ_c p_c KL(q_c ‖ r_c)`` with ``q_c = P(c, ·)/p_c`` and ``r_c`` the softmax; the
solver minimises the KL term, computed without cancellation (below), so that weak dependence,
where the whole signal is ``O(σ_1²)`` next to a loss of ``O(log V)``, stays resolvable in float64.
With ``R = h Wᵀ + b − log q`` and ``x = R − E_{q_c} R`` (row-centred under q_c)::

    KL_c = log E_{q_c} e^{x} = log1p(E_{q_c} φ(x)),   φ(x) = e^x − 1 − x ≥ 0  (series for |x| < ½),
    ∂/∂(h Wᵀ + b)_{cy} = p_c (r_cy − q_cy) = P(c, y) (expm1(x_cy) − S_c) / (1 + S_c),  S_c = E_{q_c} φ(x),

(a max-shifted log-sum-exp on rows where ``max |x| ≥ ½``). The variables are scaled by the
dependence: ``h = √s h̃``, ``W = √s W̃``, ``b = log p_y + s b̃`` with ``s = √(2 I(C; Y))``, and the
objective is ``KL / I(C; Y)`` (I is the KL of the model ``h = 0, b = log p_y``), so the problem
L-BFGS-B sees is O(1) at every dependence strength. The loss can never go below ``H(Y|C)``.

    >>> from prhsim.optima import correspondence_analysis
    >>> from prhsim.worlds import emission_world
    >>> world = emission_world(0.1, rng=0)
    >>> ca = correspondence_analysis(world.joint, 2)
    >>> fit = fit_log_bilinear(world.joint, 2, rng=1)
    >>> bool(fit.loss >= fit.entropy), bool(whitened_deviation(fit.h, ca) < 2 * ca.strength < 0.02)
    (True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from prhsim._rng import RngLike, check_rng
from prhsim._tables import check_int, check_joint, check_rank
from prhsim.learners._evaluate import subspace_distance
from prhsim.metrics import whiten
from prhsim.optima import SOLVER_THREADS_FROM, CorrespondenceAnalysis, solver_threads

#: ``|x|`` below which ``φ(x) = e^x − 1 − x`` is summed as a series (rows whose ``max |x|`` is larger
#: use a max-shifted log-sum-exp).
SERIES_RADIUS = 0.5
#: Terms of the series ``φ(x) = x² Σ_{m ≥ 0} x^m/(m + 2)!``: the remainder is below 1e-19 · φ(x) on |x| ≤ ½.
_SERIES = tuple(1.0 / math.factorial(m + 2) for m in range(17))
#: Default gradient tolerance of :func:`fit_log_bilinear` (max |projected gradient| of the scaled problem).
FIT_TOL = 1e-12
#: A fit whose line search found no representable decrease still counts as converged below this gradient.
CONVERGED_GRADIENT = 1e-6
#: Default standard deviation of the random initial ``h̃``, ``W̃`` (scaled coordinates).
INIT_SCALE = 0.1


def _phi(x: np.ndarray) -> np.ndarray:
    """``e^x − 1 − x`` to relative precision (series on |x| < ½; x is clipped to ≤ 1 where unused)."""
    x = np.minimum(x, 1.0)
    series = np.zeros_like(x)
    for c in reversed(_SERIES):
        series = series * x + c
    return np.where(np.abs(x) < SERIES_RADIUS, x * x * series, np.expm1(x) - x)


class _Table:
    """The constants of the exact objective of one joint table P > 0."""

    def __init__(self, P: np.ndarray, p_c: np.ndarray, p_y: np.ndarray) -> None:
        self.P, self.p_c, self.p_y = P, p_c, p_y
        self.q = P / p_c[:, None]
        self.log_q = np.log(self.q)
        self.log_p_y = np.log(p_y)
        self.entropy = -math.fsum((P * self.log_q).ravel())

    def kl(self, logits: np.ndarray) -> tuple[float, np.ndarray]:
        """``Σ_c p_c KL(q_c ‖ softmax(logits_c))`` and its gradient in the logits (module docstring)."""
        R = logits - self.log_q
        x = R - np.sum(self.q * R, axis=1, keepdims=True)
        S = np.sum(self.q * _phi(x), axis=1)
        kl_rows = np.log1p(S)
        G = self.P * (np.expm1(np.minimum(x, 1.0)) - S[:, None]) / (1.0 + S)[:, None]
        wide = np.max(np.abs(x), axis=1) >= SERIES_RADIUS
        if np.any(wide):  # a max-shifted log-sum-exp where the series is not used
            xw = x[wide]
            m = np.max(xw, axis=1, keepdims=True)
            e = np.exp(xw - m)
            z = np.sum(self.q[wide] * e, axis=1, keepdims=True)
            kl_rows[wide] = m[:, 0] + np.log(z[:, 0])
            G[wide] = self.P[wide] * (e / z - 1.0)
        return float(self.p_c @ kl_rows), G


def expected_cross_entropy(P: Any, h: Any, W: Any, b: Any) -> tuple[float, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``Σ_{c,y} P(c, y)[−log softmax_y(h_c Wᵀ + b)]`` and its gradient in (h, W, b).

    Computed as ``H(Y|C) + Σ_c p_c KL(q_c ‖ r_c)`` with the cancellation-free KL of the module
    docstring; the gradient is ``(G W, Gᵀ h, Σ_c G)`` with ``G = p_c (r − q)``.

    Args:
        P: (C, V) joint, positive everywhere, summing to 1.
        h: (C, d) context embeddings; W: (V, d) token embeddings; b: (V,) token biases.

    Raises:
        ValueError: on a bad table or shapes that do not match.
    """
    P, p_c, p_y = check_joint(P, positive=True)
    h, W, b = (np.asarray(v, dtype=np.float64) for v in (h, W, b))
    C, V = P.shape
    if h.ndim != 2 or h.shape[0] != C or W.shape != (V, h.shape[1]) or b.shape != (V,):
        raise ValueError(f"h, W, b must have shapes ({C}, d), ({V}, d), ({V},), got {h.shape}, {W.shape}, {b.shape}")
    table = _Table(P, p_c, p_y)
    kl, G = table.kl(h @ W.T + b)
    return table.entropy + kl, (G @ W, G.T @ h, G.sum(axis=0))


class _Scaled:
    """The problem L-BFGS-B sees: ``KL / I`` over ``θ = (h̃, W̃, b̃)``.

    ``h = √s h̃``, ``W = √s W̃``, ``b = log p_y + s b̃`` (module docstring).
    """

    def __init__(self, table: _Table, d: int) -> None:
        self.table, self.d = table, d
        self.C, self.V = table.P.shape
        info, _ = table.kl(np.broadcast_to(table.log_p_y, table.P.shape))
        self.information = info
        self.s = math.sqrt(2.0 * info) if info > 0 else 1.0
        self.scale = 1.0 / info if info > 0 else 1.0

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The model's (h, W, b) of scaled coordinates θ."""
        C, V, d, r = self.C, self.V, self.d, math.sqrt(self.s)
        h = theta[:C * d].reshape(C, d) * r
        W = theta[C * d:(C + V) * d].reshape(V, d) * r
        b = self.table.log_p_y + self.s * theta[(C + V) * d:]
        return h, W, b

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        h, W, b = self.unpack(theta)
        kl, G = self.table.kl(h @ W.T + b)
        G = G * self.scale
        r = math.sqrt(self.s)
        grad = np.concatenate([(G @ W).ravel() * r, (G.T @ h).ravel() * r, G.sum(axis=0) * self.s])
        return kl * self.scale, grad


@dataclass(frozen=True)
class LogBilinearFit:
    """The log-bilinear softmax model fitted to the exact expected cross-entropy.

    Attributes:
        h: (C, d) context embeddings (not centred or whitened).
        W: (V, d) token embeddings.
        b: (V,) token biases.
        loss: the expected cross-entropy ``Σ P(c, y)[−log softmax_y(h_c Wᵀ + b)]`` (nats).
        entropy: ``H(Y|C)``, the loss's lower bound (reached only by a rank-unrestricted model).
        kl: ``loss − entropy = Σ_c p_c KL(q_c ‖ r_c)``, computed without cancellation.
        information: ``I(C; Y)``, the KL of the context-blind model ``softmax(log p_y)``.
        iterations: L-BFGS-B iterations.
        converged: L-BFGS-B reported success, or it stopped at the rounding floor (a line search
            that finds no representable decrease) with ``gradient ≤ 1e-6``.
        gradient: max |gradient| of the scaled problem at the end.
        message: L-BFGS-B's stopping message.
    """

    h: np.ndarray
    W: np.ndarray
    b: np.ndarray
    loss: float
    entropy: float
    kl: float
    information: float
    iterations: int
    converged: bool
    gradient: float
    message: str


def fit_log_bilinear(P: Any, d: int, *, rng: RngLike = None, tol: float = FIT_TOL,
                     init_scale: float = INIT_SCALE, max_iter: int = 20_000, restarts: int = 1) -> LogBilinearFit:
    """Minimise the exact expected cross-entropy of a rank-d softmax model by L-BFGS-B (module docstring).

    The rank-d problem is not convex and can have spurious local minima (seen at strong dependence,
    a = 1 in :func:`emission_world`): ``restarts`` runs from that many initialisations and keeps the
    lowest loss.

    Args:
        P: (C, V) joint (context, next token), positive everywhere, summing to 1.
        d: embedding dimension, ``1 ≤ d ≤ min(C, V) − 1``.
        rng: seed or Generator of the initial scaled ``h̃, W̃ ~ N(0, init_scale²)`` (``b̃ = 0``:
            the bias starts at ``log p_y``); restarts draw from it in turn.
        tol: L-BFGS-B's ``gtol`` on the scaled problem (its ``ftol`` is 0: it runs until no
            decrease is representable, or the gradient is below tol).
        init_scale: standard deviation of the initial scaled embeddings.
        max_iter: L-BFGS-B iteration limit per run.
        restarts: number of initialisations (the best is kept).

    Returns:
        The best run; ``iterations`` counts all runs, ``converged`` is the best run's.

    Raises:
        ValueError: on a bad table, d, tol, init_scale, max_iter or restarts.
    """
    import scipy.optimize  # here, not at import: it costs prhsim.learners a quarter of a second

    P, p_c, p_y = check_joint(P, positive=True)
    C, V = P.shape
    d = check_rank(d, min(C, V) - 1, P.shape)
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    if not init_scale > 0:
        raise ValueError(f"init_scale must be positive, got {init_scale!r}")
    max_iter = check_int("max_iter", max_iter, 1)
    restarts = check_int("restarts", restarts, 1)
    table = _Table(P, p_c, p_y)
    problem = _Scaled(table, d)
    gen = check_rng(rng)
    options = {"maxiter": max_iter, "maxfun": 2 * max_iter, "ftol": 0.0, "gtol": tol, "maxcor": 20}
    best, iterations = None, 0
    # one BLAS thread whatever the size: L-BFGS-B's calls are tiny, and a pool's threads waiting on busy
    # cores made each step 10x slower (measured on 2 busy cores)
    with solver_threads(SOLVER_THREADS_FROM):
        for _ in range(restarts):
            theta0 = np.concatenate([init_scale * gen.standard_normal((C + V) * d), np.zeros(V)])
            res = scipy.optimize.minimize(problem, theta0, jac=True, method="L-BFGS-B", options=options)
            iterations += int(res.nit)
            if best is None or res.fun < best.fun:
                best = res
    h, W, b = problem.unpack(best.x)
    kl, grad = problem(best.x)
    kl /= problem.scale
    gradient = float(np.max(np.abs(grad)))
    message = str(best.message)
    converged = bool(best.success) or (message.startswith("ABNORMAL") and gradient <= CONVERGED_GRADIENT)
    return LogBilinearFit(h=h, W=W, b=b, loss=table.entropy + kl, entropy=table.entropy, kl=kl,
                          information=problem.information, iterations=iterations, converged=converged,
                          gradient=gradient, message=message)


def whitened_deviation(h: Any, ca: CorrespondenceAnalysis) -> float:
    """``s_Θ = ‖sinΘ‖_F/√d`` between the centred, ``p_c``-whitened h and the CA context features.

    h is only identified up to ``h → hA`` (A ∈ GL(d)) and a shift, so it is centred and whitened
    under ``p_c`` (:func:`prhsim.metrics.whiten`, which refuses a collapsed h) and compared by
    principal angles in L²(p_c) (:func:`prhsim.learners._evaluate.subspace_distance`).

    Args:
        h: (C, d) context embeddings with ``d = ca.k``.
        ca: the correspondence analysis of the same table.

    Raises:
        ValueError: on a shape mismatch, NaN or inf, or a singular covariance of h.
    """
    h = np.asarray(h, dtype=np.float64)
    if h.shape != ca.contexts.shape:
        raise ValueError(f"h must have shape {ca.contexts.shape} (contexts x k of the analysis), got {h.shape}")
    return subspace_distance(whiten(h, ca.p_c), ca.contexts, ca.p_c)
