"""Next-token prediction against its whitened two-tower relative (docs/theory.md §5).

A softmax next-token model scores a context c and a token y by ``h(c)ᵀw_y + b_y``:

    −log p(y | c) = −h(c)ᵀw_y − b_y + log Σ_v exp(h(c)ᵀw_v + b_v).

The first term aligns the positive pair (context, next token); the log-partition is the
anti-collapse and negatives term. :func:`next_token_cross_entropy` is its batch mean, written
against the array API (numpy, JAX inside jit/grad/vmap, torch with autograd), with a
max-shifted log-sum-exp.

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
(:func:`whitened_deviation`: ``s_Θ = ‖sinΘ‖_F/√d`` in L²(p_c)). A χ² expansion of the expected
KL gives a low-rank fit of the PMI weighted by ``p(c)p(y)``; :func:`pmi_proxy` is its closed form,
the top-k left singular vectors of ``D_c^{1/2} PMI_dc D_y^{1/2}`` (PMI double-centred under
``p_c`` and ``p_y``) mapped to context features by ``D_c^{-1/2}``. Linearising
``PMI ≈ P/(p_c p_y) − 1`` recovers CA, so agreement is first-order in the dependence strength.

**The exact finite world** (:func:`emission_world`): states ``z ~ p_Z`` (uniform), an emission
table ``Em = (1 − a)/V + a·T`` with rows of T drawn from Dirichlet(1), tokens i.i.d. from
``Em(z, ·)`` given z, context = the first L tokens (``V^L`` contexts, row-major), target = token
L + 1, so ``P(c, y) = Σ_z p(z) Π_i Em(z, c_i) Em(z, y)``; ``a = 0`` is exact independence.

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

    >>> import numpy as np
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
import scipy.linalg
from array_api_compat import array_namespace, device as array_device, is_numpy_array, is_torch_array

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim.jepa._arrays import like, upcast
from prhsim.jepa._basis import SOLVER_THREADS_FROM, solver_threads
from prhsim.jepa._learned import subspace_distance
from prhsim.metrics import whiten

#: A joint table must sum to 1 within this.
SUM_TOL = 1e-9
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


# --------------------------------------------------------------------------- cross-entropy (array API)


def next_token_cross_entropy(h: Any, w: Any, y: Any, bias: Any = None) -> Any:
    """Mean softmax cross-entropy ``mean_b [−h_b·w_{y_b} − bias_{y_b} + logsumexp_v(h_b·w_v + bias_v)]``.

    Runs on numpy, JAX (inside jit, grad, vmap) and torch (autograd); 16-bit floats are
    computed in float32. The log-sum-exp is max-shifted and the target logit is taken after
    the shift, so logits of 1e3 or more are exact to rounding.

    Args:
        h: (B, k) context embeddings.
        w: (V, k) output (token) embeddings; converted to h's library when it is another one.
        y: (B,) integer next tokens in ``0 .. V − 1`` (checked on numpy and torch inputs;
            under JAX tracing an out-of-range token silently contributes a target logit of 0).
        bias: optional (V,) token biases.

    Returns:
        A 0-d array of h's library and compute dtype.

    Raises:
        ValueError: on shapes that do not match or (numpy, torch) tokens out of range.
        TypeError: on non-integer tokens or non-floating embeddings.

    Example:
        >>> import numpy as np
        >>> h, w = np.zeros((2, 3)), np.ones((4, 3))
        >>> bool(abs(next_token_cross_entropy(h, w, np.array([0, 3])) - np.log(4)) < 1e-15)
        True
    """
    xp, h = upcast(h)
    w = like(w, h)
    if h.ndim != 2 or w.ndim != 2 or h.shape[1] != w.shape[1]:
        raise ValueError(f"h and w must have shapes (B, k) and (V, k), got {tuple(h.shape)} and {tuple(w.shape)}")
    B, V = h.shape[0], w.shape[0]
    if B < 1 or V < 1:
        raise ValueError(f"the cross-entropy needs at least one context and one token, got h {tuple(h.shape)}, "
                         f"w {tuple(w.shape)}")
    if array_namespace(y) is not xp:
        y = xp.asarray(np.asarray(y), device=array_device(h))
    if not xp.isdtype(y.dtype, "integral"):
        raise TypeError(f"y must hold integer tokens, got dtype {y.dtype}")
    if tuple(y.shape) != (B,):
        raise ValueError(f"y must have shape ({B},) for h of shape {tuple(h.shape)}, got {tuple(y.shape)}")
    if is_numpy_array(y) or is_torch_array(y):
        lo, hi = int(xp.min(y)), int(xp.max(y))
        if lo < 0 or hi >= V:
            raise ValueError(f"tokens y must lie in 0..{V - 1}, got {lo if lo < 0 else hi}")
    logits = h @ xp.matrix_transpose(w)
    if bias is not None:
        bias = like(bias, h)
        if tuple(bias.shape) != (V,):
            raise ValueError(f"bias must have shape ({V},), got {tuple(bias.shape)}")
        logits = logits + bias[None, :]
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    onehot = xp.astype(y[:, None] == xp.arange(V, device=array_device(h))[None, :], shifted.dtype)
    target = xp.sum(onehot * shifted, axis=-1)
    return xp.mean(xp.log(xp.sum(xp.exp(shifted), axis=-1)) - target)


# --------------------------------------------------------------------------- joint tables


def _check_joint(P: Any, *, positive: bool = False, what: str = "P") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (C, V) joint table: finite, ≥ 0 (> 0 when ``positive``), summing to 1, every row and column with mass."""
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or min(P.shape) < 2:
        raise ValueError(f"{what} must be a (contexts x tokens) table with at least 2 of each, got shape {P.shape}")
    if not np.all(np.isfinite(P)):
        raise ValueError(f"{what} contains NaN or inf")
    if positive and not np.all(P > 0):
        c, y = np.argwhere(~(P > 0))[0]
        raise ValueError(f"{what} must be positive everywhere here (log P is taken), got P[{c}, {y}] = {P[c, y]}")
    if np.any(P < 0):
        c, y = np.argwhere(P < 0)[0]
        raise ValueError(f"{what} must be nonnegative, got P[{c}, {y}] = {P[c, y]}")
    total = math.fsum(P.ravel())
    if abs(total - 1.0) > SUM_TOL:
        raise ValueError(f"{what} must sum to 1 (within {SUM_TOL:g}), got {total!r}")
    p_c, p_y = P.sum(axis=1), P.sum(axis=0)
    if np.any(p_c <= 0):
        raise ValueError(f"every context needs positive mass, but row {int(np.argmax(p_c <= 0))} of {what} is empty")
    if np.any(p_y <= 0):
        raise ValueError(f"every token needs positive mass, but column {int(np.argmax(p_y <= 0))} of {what} is empty")
    return P, p_c, p_y


def _check_k(k: Any, top: int, shape: tuple[int, ...]) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= top:
        raise ValueError(f"k must be an integer in 1..{top} (min(C, V) − 1 for a table of shape {shape}), got {k!r}")
    return int(k)


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
    P, p_c, p_y = _check_joint(P)
    C, V = P.shape
    k = _check_k(k, min(C, V) - 1, P.shape)
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
    P, p_c, p_y = _check_joint(P, positive=True)
    C, V = P.shape
    k = _check_k(k, min(C, V) - 1, P.shape)
    X = np.log(P) - np.log(p_c)[:, None] - np.log(p_y)[None, :]
    X = X - (X @ p_y)[:, None] - (p_c @ X)[None, :] + p_c @ X @ p_y
    sc, sy = np.sqrt(p_c), np.sqrt(p_y)
    U, _, _ = _centred_svd(sc[:, None] * X * sy[None, :], sc, sy)
    return U[:, :k] / sc[:, None]


# --------------------------------------------------------------------------- the emission world


@dataclass(frozen=True)
class EmissionWorld:
    """The exact finite next-token world of docs/theory.md §5.

    Attributes:
        joint: (V^L, V) exact ``P(c, y) = Σ_z p(z) Π_i Em(z, c_i) Em(z, y)``; context index
            ``c = Σ_i c_i V^{L−1−i}`` (row-major over the L context tokens).
        a: the emission strength (0: tokens independent of z, hence of each other).
        p_z: (n_states,) the state law (uniform).
        emission: (n_states, V) ``Em = (1 − a)/V + a·T``, rows summing to 1.
        context: L, the number of context tokens.
    """

    joint: np.ndarray
    a: float
    p_z: np.ndarray
    emission: np.ndarray
    context: int

    @property
    def vocab(self) -> int:
        return int(self.emission.shape[1])

    def context_tokens(self) -> np.ndarray:
        """(V^L, L): the tokens of every context, row-major (row c holds ``c_1 … c_L``)."""
        grids = np.indices((self.vocab,) * self.context).reshape(self.context, -1)
        return grids.T.copy()


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def emission_world(a: float, *, n_states: int = 5, vocab: int = 6, context: int = 2,
                   rng: RngLike = None) -> EmissionWorld:
    """The exact joint of (first ``context`` tokens, next token) under an emission model (module docstring).

    Args:
        a: emission strength in [0, 1]: ``Em = (1 − a)/V + a·T``.
        n_states: number of hidden states z (uniform law).
        vocab: V, the number of tokens (at least 2).
        context: L, the number of context tokens (``V^L`` contexts).
        rng: seed or Generator for T (rows Dirichlet(1)); the same seed gives the same T at every a.

    Raises:
        ValueError: on bad arguments, or a table above the memory limit.

    Example:
        >>> w = emission_world(0.0, vocab=3, context=1)
        >>> w.joint.shape, bool(abs(w.joint - 1 / 9).max() < 1e-15)
        ((3, 3), True)
    """
    a = float(a)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"the emission strength a must lie in [0, 1], got {a!r}")
    n_states = _check_int("n_states", n_states, 1)
    vocab = _check_int("vocab", vocab, 2)
    context = _check_int("context", context, 1)
    contexts = float(vocab) ** context
    ensure_fits(FLOAT * contexts * (n_states + vocab), f"an emission world of {vocab}^{context} contexts",
                "lower vocab or context")
    T = check_rng(rng).dirichlet(np.ones(vocab), size=n_states)
    emission = (1.0 - a) / vocab + a * T
    emission /= emission.sum(axis=1, keepdims=True)
    p_z = np.full(n_states, 1.0 / n_states)
    prefix = np.ones((n_states, 1))
    for _ in range(context):  # P(c | z), row-major over the context tokens
        prefix = (prefix[:, :, None] * emission[:, None, :]).reshape(n_states, -1)
    joint = (p_z[:, None] * prefix).T @ emission
    return EmissionWorld(joint=joint / math.fsum(joint.ravel()), a=a, p_z=p_z, emission=emission, context=context)


# --------------------------------------------------------------------------- the exact log-bilinear fit


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
    P, p_c, p_y = _check_joint(P, positive=True)
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
    import scipy.optimize  # here, not at import: it costs prhsim.jepa a quarter of a second

    P, p_c, p_y = _check_joint(P, positive=True)
    C, V = P.shape
    d = _check_k(d, min(C, V) - 1, P.shape)
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    if not init_scale > 0:
        raise ValueError(f"init_scale must be positive, got {init_scale!r}")
    max_iter = _check_int("max_iter", max_iter, 1)
    restarts = _check_int("restarts", restarts, 1)
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
    principal angles in L²(p_c) (:func:`prhsim.jepa._learned.subspace_distance`).

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
