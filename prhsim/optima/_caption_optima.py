"""Closed forms of the caption learners, on whole captions: span views and next-token prediction (docs/theory.md §5.1).

**Span views.**

With ``E[x, u] = P(x | u)`` (spans x, latent causes u with law w) and the latent pair law
``Π_U`` (:func:`prhsim.worlds._span_worlds.latent_pairs`), the span world has

    Π_X = E Π_U Eᵀ,   p_X = E w,   K_X = D_X^{-1/2} E Π_U Eᵀ D_X^{-1/2}.

:func:`span_optimum` applies ``K_X − 3√p_X √p_Xᵀ`` (the centred kernel, docs/theory.md §1.1) as an
operator — two sparse products with E and one with ``Π_U`` (``diag(w)`` for views of one state;
``π_Z`` through the world's kernel ``D^{1/2} K_Z D^{1/2}``, applied to each wording for bad
views) — and takes its top k + 1 eigenpairs by Lanczos completed by deflation (every copy of a
repeated eigenvalue, :func:`prhsim.optima._lanczos.lanczos_top`), so Π over spans is never formed.
The features are ``f(x) = φ(x)/√p(x)``, whitened under p_X; only the whole captions' rows are
kept, which is where the learners are evaluated.

:func:`prhsim.worlds.span_world` builds the same world as a finite world for small laws
(its closed form is the twin this one is tested against).

**Next-token prediction.** :func:`next_token_optimum` is correspondence analysis
(:func:`prhsim.optima.correspondence_analysis`) of the exact (prefix, next token) law
(:func:`prhsim.worlds.next_token_law`): the whitened two-tower relative of the softmax learner.
A caption's feature is the mean of its prefixes' context features (lengths 1..T−1, those whose next
position is not blank), as the learner pools its context encoder.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from scipy.sparse.linalg import LinearOperator

from prhsim._rng import RngLike, check_rng
from prhsim.optima._basis import solver_threads
from prhsim.optima._closed_form import GAP_TOL
from prhsim.optima._lanczos import lanczos_top
from prhsim.worlds import CaptionLaw, SpanLaw, World, next_token_law, span_emission
from prhsim.optima._correspondence import correspondence_analysis


class SpanOptimum(NamedTuple):
    """The top-k whitened optimum of a span view, on whole captions.

    Attributes:
        view: "good" or "bad".
        eigenvalues: ``μ_1 … μ_{k+1}`` of the centred span kernel (descending).
        captions: ``f*`` of every whole caption ``z·|N| + n``, (|Z|·|N|, k).
        gap: ``μ_k − μ_{k+1}``; unique: the gap is above ``GAP_TOL``.
        n_spans: distinct spans.
    """

    view: str
    eigenvalues: np.ndarray
    captions: np.ndarray
    gap: float
    unique: bool
    n_spans: int


def span_optimum(law: CaptionLaw, spans: SpanLaw, view: Literal["good", "bad"], k: int, *,
                 world: World | None = None, rng: RngLike = None) -> SpanOptimum:
    """Closed form of the whitened JEPA on span pairs (module docstring).

    Args:
        law: the caption law.
        spans: the span law of both views.
        view: "good" (two captions of independent wording) or "bad" (shared wording).
        k: number of features.
        world: the pair law of the two views' states (its ``π_Z``); None: both views describe one state.
        rng: seeds the Lanczos start vector.
    """
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    em = span_emission(law, spans, view)
    E, w = em.emission, em.weights
    p_x = em.p
    n_x = p_x.size
    if k + 2 > n_x:
        raise ValueError(f"k = {k} needs more than {k + 1} distinct spans, got {n_x}")
    s = 1.0 / np.sqrt(p_x)
    sqrt_p = np.sqrt(p_x)
    apply_pairs = _latent_operator(law, view, world, w)
    ET = E.T.tocsr()

    def matvec(v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, dtype=np.float64).ravel()
        out = s * (E @ apply_pairs(ET @ (s * v)))
        return out - 3.0 * sqrt_p * (sqrt_p @ v)  # the trivial pair moves to −2 (docs/theory.md §1.1)

    op = LinearOperator((n_x, n_x), matvec=matvec, dtype=np.float64)
    v0 = check_rng(rng).standard_normal(n_x)
    m = k + 1
    with solver_threads(n_x):
        values, vectors = lanczos_top(op, m, v0=v0, ncv=min(n_x, max(2 * m + 1, 20 + m)))
    features = vectors[em.captions, :k] * s[em.captions, None]
    gap = float(values[k - 1] - values[k])
    return SpanOptimum(view, values, features, gap, bool(gap > GAP_TOL), int(n_x))


def _latent_operator(law: CaptionLaw, view: str, world: World | None, w: np.ndarray):
    """``v ↦ Π_U v`` for the latent pair law (see :func:`prhsim.worlds._span_worlds.latent_pairs`)."""
    if world is None:
        return lambda v: w * v
    if world.n != law.n_states:
        raise ValueError(f"the pair law is over {world.n:,} states, the caption law over {law.n_states:,}")
    K = world.kernel
    root = np.sqrt(np.asarray(world.p))
    if view == "good":
        return lambda v: root * (K @ (root * v))
    q = law.q
    n_n = q.size

    def bad(v: np.ndarray) -> np.ndarray:
        V = v.reshape(-1, n_n)
        return ((root[:, None] * (K @ (root[:, None] * V))) * q[None, :]).ravel()

    return bad


def next_token_optimum(law: CaptionLaw, k: int) -> SpanOptimum:
    """Correspondence analysis of the caption law's (prefix, next token) law, pooled over each caption's prefixes.

    ``eigenvalues`` holds the singular values ``σ_1 … σ_k`` and the gap ``σ_k − σ_{k+1}``.
    """
    ntl = next_token_law(law)
    seen = ntl.joint.sum(axis=0) > 0  # a token that is never a next token (a name always said first) has no feature
    ca = correspondence_analysis(ntl.joint if seen.all() else ntl.joint[:, seen], k)
    features = ntl.pool(ca.contexts)
    return SpanOptimum("ntp", ca.values, features, ca.gap, bool(ca.gap > GAP_TOL), int(ntl.joint.shape[0]))
