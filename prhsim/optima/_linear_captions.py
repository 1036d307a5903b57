"""Linear encoders of caption features: the exact optimum on N records and on the law (docs/theory.md §5.4).

**Features.** A token row x (a span, a prefix or a whole caption: T positions, the pad id V
where nothing is) is read as ``φ(x) ∈ {0, 1}^{T·V}``, the one-hot of every (position, token)
whose token is not the pad id: the learners' input without its pad coordinates. (At each
position the pad coordinate is one minus the others, so an affine function of either input
is an affine function of the other.) The class is ``f(x) = Wᵀ(φ(x) − μ)``, W of shape (T·V, k).

**JEPA views.** With the span law's ``P_in(t) = P(t ∈ span)`` and ``P_both(t, s) = P(t, s ∈ span)``
and ``pos(i)`` the position of coordinate i, a span of a caption a has

    E[φ(span)] = φ(a) ⊙ π_in,    E[φ(span)φ(span)ᵀ] = (φ(a)φ(a)ᵀ) ⊙ Π_both,

``π_in[i] = P_in(pos(i))``, ``Π_both[i, j] = P_both(pos(i), pos(j))``. The two views of a pair cut
their spans independently from two captions (a, b) (b = a for two spans of one caption), so
over the training pairs

    μ = E φ,   C = E[(φφᵀ ⊙ Π_both)] − μμᵀ,   M = E[sym((φ(a) ⊙ π_in)(φ(b) ⊙ π_in)ᵀ)] − μμᵀ,

and the optimum of ``max tr WᵀMW`` subject to ``WᵀCW = I`` is the top k of the generalised
problem (M, C): §1.1 restricted to linear encoders (the restricted-encoder closed form).

**Next-token prediction.** A caption a with targets t (its non-blank positions 1..T−1, L_a of
them, each weighted 1/L_a as the learner draws them) has contexts ``ψ_t = φ(prefix_t(a))`` and next
tokens ``e_{a_t}``. The whitened two-tower problem with a linear context encoder and a free
token side is CCA (§5): the top k singular triples of ``B_cᵀ (C_cy − μ_c p_yᵀ) D_y^{-1/2}`` with
B_c whitening ``C_cc − μ_c μ_cᵀ``; a caption's feature is the mean of its prefixes' features,
``Wᵀ(Σ_t ψ_t / L_a − μ_c)``.

**Empirical and population.** :func:`span_moments` and :func:`next_token_moments` take the
expectation over N records (every span and every target of a record integrated out exactly:
the records are the sample, not the spans) or, without records, over the law itself; then
:func:`linear_optimum` solves. The empirical C is singular when N is small: the optimum is taken
in the span of the observed features (eigenvalues of C above ``RANK_RTOL`` times the largest),
or, with ``ridge`` > 0, with ``C + ridge·(tr C/D)·I``.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
import scipy.sparse as sp

from prhsim.worlds import CaptionLaw, Records, SpanLaw, World

#: Eigenvalues of a covariance below this fraction of its largest are outside the observed span.
RANK_RTOL = 1e-9
Task = Literal["good", "bad", "ntp"]


class CaptionMoments(NamedTuple):
    """The moments a linear optimum needs (module docstring), centred.

    Attributes:
        task: "good", "bad" (the JEPA's views) or "ntp".
        mean: μ (D,), the mean feature of a view (a context, for "ntp").
        cov: C (D, D), the covariance of a view's (a context's) features.
        cross: M (D, D), the cross-covariance of the two views (symmetric); for "ntp" ``C_cy − μ p_yᵀ`` (D, V).
        tokens: p_y (V,), the law of the next token ("ntp"), else empty.
        records: N, or 0 for the law itself.
        length, vocab: T and V (D = T·V).
    """

    task: str
    mean: np.ndarray
    cov: np.ndarray
    cross: np.ndarray
    tokens: np.ndarray
    records: int
    length: int
    vocab: int


class LinearOptimum(NamedTuple):
    """The optimum of the linear class (module docstring).

    Attributes:
        task: as in :class:`CaptionMoments`.
        values: the top ``k + 1`` eigenvalues of (M, C) (JEPA) or singular values (ntp), descending.
        weights: W (D, k); mean: μ (D,).
        gap: ``values[k-1] − values[k]``; rank: the dimension of the observed span of C.
        length, vocab: T and V of the features.
    """

    task: str
    values: np.ndarray
    weights: np.ndarray
    mean: np.ndarray
    gap: float
    rank: int
    length: int
    vocab: int

    @property
    def k(self) -> int:
        return int(self.weights.shape[1])

    def features(self, rows: np.ndarray) -> np.ndarray:
        """``f(x) = Wᵀ(φ(x) − μ)`` of token rows (m, T) (for "ntp": the mean over each caption's prefixes, as
        :func:`pooled_prefixes` gives it, so pass whole captions here only through :meth:`captions`)."""
        return np.asarray(one_hot(rows, self.vocab) @ self.weights) - self.mean @ self.weights

    def captions(self, rows: np.ndarray, pad: int) -> np.ndarray:
        """The representation of whole captions (m, T): the encoder of the caption (JEPA), or the mean of the
        encoder over its prefixes that have a target (ntp)."""
        if self.task != "ntp":
            return self.features(rows)
        return np.asarray(pooled_prefixes(rows, pad, self.vocab) @ self.weights) - self.mean @ self.weights


def one_hot(rows: np.ndarray, vocab: int) -> sp.csr_array:
    """φ of token rows (m, T): the sparse (m, T·V) one-hot of every (position, token) below ``vocab`` (pads dropped)."""
    rows = np.asarray(rows, dtype=np.int64)
    m, T = rows.shape
    keep = rows < vocab
    r, t = np.nonzero(keep)
    cols = t * vocab + rows[r, t]
    return sp.csr_array((np.ones(r.size), (r, cols)), shape=(m, T * vocab))


def _positions(T: int, vocab: int) -> np.ndarray:
    return np.repeat(np.arange(T), vocab)


def _distinct(rows: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct rows of ``rows`` (m, T), their summed weights, and the distinct index of every row."""
    rows = np.ascontiguousarray(rows, dtype=np.int32)
    keys = rows.view(np.dtype((np.void, 4 * rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    return rows[first], np.bincount(inverse, weights=weights, minlength=first.size), inverse


def span_probabilities(spans: SpanLaw, T: int) -> tuple[np.ndarray, np.ndarray]:
    """``P_in(t)`` (T,) and ``P_both(t, s)`` (T, T) of the span law on captions of T tokens."""
    start, length, weight = spans.table(T)
    j = np.arange(T)
    inside = ((j[None, :] >= start[:, None]) & (j[None, :] < (start + length)[:, None])).astype(np.float64)
    return weight @ inside, (inside * weight[:, None]).T @ inside


def span_moments(law: CaptionLaw, spans: SpanLaw, view: Literal["good", "bad"], *, records: Records | None = None,
                 world: World | None = None) -> CaptionMoments:
    """The moments of a JEPA's view pairs, over ``records`` (as :func:`prhsim.learners.train_text` draws its pairs
    from them) or, without records, over the law (``world``: the pair law of the two views' states, or None for
    views of one state, as :func:`prhsim.optima.span_optimum` takes it)."""
    if view not in ("good", "bad"):
        raise ValueError(f"a span view is 'good' or 'bad', got {view!r}")
    T, V = law.length, law.vocab_size
    p_in, p_both = span_probabilities(spans, T)
    pos = _positions(T, V)
    scale = p_in[pos]
    if records is not None:
        first, second, w = _record_pairs(records, view)
        captions, c, inverse = _distinct(np.concatenate([first, second]), np.concatenate([w, w]) / 2.0)
        Phi = one_hot(captions, V)
        A = one_hot(first, V).multiply(scale[None, :]).tocsr()
        B = one_hot(second, V).multiply(scale[None, :]).tocsr()
        raw = np.asarray((A.T @ B.multiply(w[:, None]).tocsr()).todense())
        count = int(records.count)
    else:
        captions, c = _all_captions(law)
        Phi = one_hot(captions, V)
        raw = _law_cross(law, Phi, view, world, scale)
        count = 0
    mean = np.asarray(Phi.T @ c) * scale
    second_moment = np.asarray((Phi.T @ Phi.multiply(c[:, None]).tocsr()).todense()) * p_both[np.ix_(pos, pos)]
    cross = (raw + raw.T) / 2.0 - np.outer(mean, mean)
    return CaptionMoments(view, mean, second_moment - np.outer(mean, mean), cross, np.zeros(0), count, T, V)


def _record_pairs(records: Records, view: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The caption pairs (a, b) a learner cuts its two views from, with their weights (summing to 1)."""
    tokens = np.asarray(records.tokens)
    N, C, T = tokens.shape
    if view == "good" or records.paired:
        if C < 2:
            raise ValueError(f"{view} views need records of at least 2 captions, got {C}")
        i, j = np.nonzero(~np.eye(C, dtype=bool))  # every ordered pair of different captions
        first = tokens[:, i].reshape(-1, T)
        second = tokens[:, j].reshape(-1, T)
        return first, second, np.full(first.shape[0], 1.0 / (N * i.size))
    rows = tokens.reshape(-1, T)  # one caption, cut twice
    return rows, rows, np.full(rows.shape[0], 1.0 / (N * C))


def _all_captions(law: CaptionLaw) -> tuple[np.ndarray, np.ndarray]:
    """Every caption ``z·|N| + n`` and its probability ``p(z) q(n)``."""
    n_n = law.modality.n_nuisance
    units = np.arange(law.n_states * n_n)
    return law.captions(units // n_n, units % n_n), (law.p[:, None] * law.q[None, :]).ravel()


def _law_cross(law: CaptionLaw, Phi: sp.csr_array, view: str, world: World | None, scale: np.ndarray) -> np.ndarray:
    """``E[(φ(a) ⊙ π_in)(φ(b) ⊙ π_in)ᵀ]`` over the law's caption pairs (a, b)."""
    n_z, n_n = law.n_states, law.modality.n_nuisance
    q = law.q
    A = Phi.multiply(scale[None, :]).tocsr()
    if world is None:
        if view == "bad":  # one caption, two spans
            w = (law.p[:, None] * q[None, :]).ravel()
            return np.asarray((A.T @ A.multiply(w[:, None]).tocsr()).todense())
        mixed = _wording_mean(A, q, n_z, n_n)  # two captions of one state, independent wording
        return mixed.T @ (mixed * law.p[:, None])
    if world.n != n_z:
        raise ValueError(f"the pair law is over {world.n:,} states, the caption law over {n_z:,}")
    root = np.sqrt(np.asarray(world.p))
    K = world.kernel

    def pair(X: np.ndarray) -> np.ndarray:  # Π_Z X = D^{1/2} K D^{1/2} X
        return root[:, None] * np.asarray(K @ (root[:, None] * X))

    if view == "good":
        mixed = _wording_mean(A, q, n_z, n_n)
        return mixed.T @ pair(mixed)
    total = np.zeros((A.shape[1], A.shape[1]))
    for n in range(n_n):  # the wording is copied across the pair
        X = np.asarray(A[np.arange(n_z) * n_n + n].todense())
        total += q[n] * (X.T @ pair(X))
    return total


def _wording_mean(A: sp.csr_array, q: np.ndarray, n_z: int, n_n: int) -> np.ndarray:
    """``Σ_n q(n) A[z·|N| + n]`` for every z: (|Z|, D)."""
    Q = sp.kron(sp.identity(n_z, format="csr"), sp.csr_array(q[None, :]), format="csr")
    return np.asarray((Q @ A).todense())


def next_token_moments(law: CaptionLaw, *, records: Records | None = None) -> CaptionMoments:
    """The moments of next-token prediction over ``records`` (a caption of a record chosen uniformly, a target
    uniform among its non-blank positions 1..T−1) or, without records, over the law."""
    T, V, pad = law.length, law.vocab_size, law.pad
    if records is not None:
        tokens = np.asarray(records.tokens)
        N, C, _ = tokens.shape
        rows = tokens.reshape(-1, T)
        captions, c, _ = _distinct(rows, np.full(rows.shape[0], 1.0 / (N * C)))
        count = int(N)
    else:
        captions, c = _all_captions(law)
        count = 0
    targets = captions[:, 1:] != pad  # (m, T−1): position t + 1 is a target
    L = targets.sum(axis=1)
    if np.any(L == 0):
        raise ValueError("a caption with no token after its first position has no next token to predict")
    weight = c / L
    D = T * V
    Phi = one_hot(captions, V)
    pos = _positions(T, V)
    # r_a(s) = #{targets t > s} / L_a, the weight of coordinate (s, a_s) in a's mean context
    after = np.concatenate([np.cumsum(targets[:, ::-1], axis=1)[:, ::-1], np.zeros((captions.shape[0], 1))], axis=1)
    mean = np.asarray(Phi.multiply((after[:, pos] * weight[:, None])).sum(axis=0)).ravel()
    cov = np.zeros((D, D))
    patterns, group = np.unique(targets, axis=0, return_inverse=True)
    for g in range(patterns.shape[0]):  # r depends on the caption only through its blank pattern
        rows = np.flatnonzero(group.ravel() == g)
        Pg = Phi[rows]
        r = after[rows[0]] / L[rows[0]]
        both = r[np.maximum.outer(pos, pos)]
        cov += np.asarray((Pg.T @ Pg.multiply(c[rows][:, None]).tocsr()).todense()) * both
    cross = np.zeros((D, V))
    p_y = np.zeros(V)
    for t in range(1, T):
        hit = np.flatnonzero(targets[:, t - 1])
        if hit.size == 0:
            continue
        Y = sp.csr_array((weight[hit], (np.arange(hit.size), captions[hit, t])), shape=(hit.size, V))
        cross[: t * V] += np.asarray((Phi[hit][:, : t * V].T @ Y).todense())
        p_y += np.bincount(captions[hit, t], weights=weight[hit], minlength=V)
    return CaptionMoments("ntp", mean, cov - np.outer(mean, mean), cross - np.outer(mean, p_y), p_y, count, T, V)


def pooled_prefixes(rows: np.ndarray, pad: int, vocab: int) -> sp.csr_array:
    """Each caption's mean context features ``Σ_t ψ_t / L_a`` over its targets (sparse (m, T·V))."""
    rows = np.asarray(rows, dtype=np.int64)
    targets = rows[:, 1:] != pad
    L = targets.sum(axis=1)
    after = np.concatenate([np.cumsum(targets[:, ::-1], axis=1)[:, ::-1], np.zeros((rows.shape[0], 1))], axis=1)
    r = after / np.maximum(L, 1)[:, None]
    return one_hot(rows, vocab).multiply(r[:, _positions(rows.shape[1], vocab)]).tocsr()


def combine(a: CaptionMoments, b: CaptionMoments) -> CaptionMoments:
    """The moments over the records of ``a`` and of ``b`` together: their uncentred moments averaged with the records'
    counts as weights, centred again (moments over nested record sets in one pass over the largest)."""
    if (a.task, a.length, a.vocab) != (b.task, b.length, b.vocab) or a.records < 1 or b.records < 1:
        raise ValueError("combine needs the record moments of one task and caption law, each of at least one record")
    wa, wb = a.records / (a.records + b.records), b.records / (a.records + b.records)
    mean = wa * a.mean + wb * b.mean
    second = wa * (a.cov + np.outer(a.mean, a.mean)) + wb * (b.cov + np.outer(b.mean, b.mean))
    if a.task == "ntp":
        tokens = wa * a.tokens + wb * b.tokens
        raw = wa * (a.cross + np.outer(a.mean, a.tokens)) + wb * (b.cross + np.outer(b.mean, b.tokens))
        cross = raw - np.outer(mean, tokens)
    else:
        tokens = a.tokens
        raw = wa * (a.cross + np.outer(a.mean, a.mean)) + wb * (b.cross + np.outer(b.mean, b.mean))
        cross = raw - np.outer(mean, mean)
    return CaptionMoments(a.task, mean, second - np.outer(mean, mean), cross, tokens, a.records + b.records,
                          a.length, a.vocab)


def _whitener(cov: np.ndarray, ridge: float) -> np.ndarray:
    """B with ``Bᵀ C B = I`` on the observed span of C (or on all of ``C + ridge·(tr C/D)·I``)."""
    cov = (cov + cov.T) / 2.0
    if ridge > 0:
        cov = cov + ridge * np.trace(cov) / cov.shape[0] * np.eye(cov.shape[0])
    vals, vecs = np.linalg.eigh(cov)
    top = max(float(vals[-1]), 0.0)
    keep = vals > RANK_RTOL * top
    return vecs[:, keep] / np.sqrt(vals[keep])


def linear_optimum(moments: CaptionMoments, k: int, *, ridge: float = 0.0, fill: bool = False) -> LinearOptimum:
    """The optimum of the linear class on ``moments`` (module docstring).

    With ``fill``, an observed span of fewer than k + 1 directions (a handful of records) keeps the directions
    there are and fills the other columns of W with zeros (values 0, gap 0) instead of refusing.

    Raises:
        ValueError: on a bad k or ridge, or (without ``fill``) when the observed span holds fewer than k + 1
            directions.
    """
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not ridge >= 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    k = int(k)
    B = _whitener(moments.cov, float(ridge))
    if B.shape[1] < k + 1 and not fill:
        raise ValueError(f"the features span {B.shape[1]} directions, fewer than k + 1 = {k + 1}: "
                         "more records or a smaller k")
    if moments.task == "ntp":
        p_y = moments.tokens
        seen = p_y > 0
        H = B.T @ moments.cross[:, seen] / np.sqrt(p_y[seen])[None, :]
        U, s, _ = np.linalg.svd(H, full_matrices=False)
        values, vectors = s, U
    else:
        H = B.T @ moments.cross @ B
        values, vectors = np.linalg.eigh((H + H.T) / 2.0)
        values, vectors = values[::-1], vectors[:, ::-1]
    m = min(k + 1, values.size)
    values = np.concatenate([values[:m], np.zeros(k + 1 - m)])
    W = np.zeros((B.shape[0], k))
    kept = min(k, vectors.shape[1])
    W[:, :kept] = B @ vectors[:, :kept]
    return LinearOptimum(moments.task, values, W, moments.mean, float(values[k - 1] - values[k]), int(B.shape[1]),
                         moments.length, moments.vocab)
