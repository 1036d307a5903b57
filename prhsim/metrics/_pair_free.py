"""The map between two modalities from unpaired samples: spectral matching (docs/theory.md §9).

Setting: features of modality a, ``xa`` (Sa, k), and of modality b, ``xb`` (Sb, k), drawn
independently: no row of one corresponds to a row of the other. In the population the features
are centred and whitened (``Cov_p f = I``) and ``f_b = f_a Q`` for an orthogonal Q. Maps act on
rows: predicted b-features = a-features @ Q, in whitened coordinates (``apply`` maps raw rows).

Spectral matching (:func:`spectral_match`) uses each modality's own positive pairs (z, z') ~ π:

1. whiten, ``y = (x − m) W`` with m, C the (weighted) mean and covariance of the rows, ``W = C^{-1/2}``;
2. ``M = sym(E_π[y(z) y(z')ᵀ]) = R diag(μ̂) Rᵀ`` (μ̂ descending), and ``g = y R``; in the population
   ``M = Qᵀ diag(μ) Q`` for ``f = h Q``, so ``g_i = ±h_i`` (§9);
3. sign each g_i so that ``E[g_i³] > 0``; where that is within its error of 0, by an odd statistic
   ``E[g_i g_j g_l] > 0`` (j = l, or g_j and g_l already signed);
4. then ``g_a = g_b`` and the map is ``Q = R_a S_a S_b R_bᵀ`` (S the diagonal of signs).

Errors (§9): from samples, ``se(μ̂_i − μ̂_{i+1}) = sd(g_i(z)g_i(z') − g_{i+1}(z)g_{i+1}(z'))/√P`` over the
pairs and ``se(E[g_i³]) = sd(g_i³)/√S``; a gap or a third moment within ``sigmas`` errors (plus a
relative 1e-9) of 0 is a tie (a rotation of those features is not identifiable: higher-order resolution
is not attempted; the tied eigenvectors are still signed by their third moments, the best guess) or an
unrecoverable sign. Weights mean a population law: their errors are 0.
Features are numbered from 1 in the messages (μ_1 ≥ … ≥ μ_k), as in the docs.
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from prhsim.metrics._retrieval import Retrieval

#: Relative tolerance: gaps and odd statistics this close to 0 (relative to their scale) count as 0.
TOL = 1e-9
#: Covariance eigenvalues below this fraction of the largest make the covariance singular.
RANK_RTOL = 1e-10
#: Entries of one block of the held-out distance matrix in :func:`mapped_retrieval`.
BLOCK = 2**22


@dataclass(frozen=True)
class Whitening:
    """``y = (x − mean) @ whitener`` and back, ``x = y @ colourer + mean`` (``colourer = whitener⁻¹``)."""

    mean: np.ndarray
    whitener: np.ndarray
    colourer: np.ndarray

    def whiten(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float64) - self.mean) @ self.whitener

    def colour(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=np.float64) @ self.colourer + self.mean


class RowMap:
    """``apply``: raw a-rows to raw b-rows through the whitened map (mixin of the result classes)."""

    map: np.ndarray
    whitening_a: Whitening
    whitening_b: Whitening

    def apply(self, x_a: np.ndarray) -> np.ndarray:
        """Predicted raw b-features of raw a-features ``x_a`` (S, k): ``colour_b(whiten_a(x_a) @ map)``."""
        return self.whitening_b.colour(self.whitening_a.whiten(rows(x_a, "x_a", self.map.shape[0])) @ self.map)


@dataclass(frozen=True)
class PairFreeMap(RowMap):
    """Result of :func:`spectral_match`.

    Attributes:
        map: Q (k x k, orthogonal): whitened b ≈ whitened a @ Q.
        method: "spectral".
        identifiable: False when some ambiguity below was found (the map is then one of several).
        ambiguities: one line per tied eigenvalue pair or unsignable feature.
        eigenvalues_a, eigenvalues_b: μ̂ of each modality, descending.
        skewness_a, skewness_b: ``E[g_i³]`` of the signed features.
        whitening_a, whitening_b: each modality's :class:`Whitening`.
    """

    map: np.ndarray
    method: str
    identifiable: bool
    ambiguities: tuple[str, ...]
    eigenvalues_a: np.ndarray
    eigenvalues_b: np.ndarray
    skewness_a: np.ndarray
    skewness_b: np.ndarray
    whitening_a: Whitening
    whitening_b: Whitening


# --------------------------------------------------------------------------------------
# inputs and moments
# --------------------------------------------------------------------------------------
def rows(x: Any, name: str, k: int | None = None) -> np.ndarray:
    """x as a finite float array of shape (S, k), or a one-line ValueError naming it."""
    x = np.asarray(x, dtype=np.float64)
    want = f"(S, {k})" if k is not None else "(S, k)"
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0 or (k is not None and x.shape[1] != k):
        raise ValueError(f"{name} must have shape {want} with S, k ≥ 1, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or inf")
    return x


def weights(w: Any, n: int, name: str) -> np.ndarray:
    """Weights (n,), non-negative with a positive sum, normalised to sum 1 (uniform when None)."""
    if w is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
        raise ValueError(f"{name} must be finite and non-negative with a positive sum")
    return w / w.sum()


def weighted_moments(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``m = Σ w_s x_s`` and ``C = Σ w_s (x_s − m)(x_s − m)ᵀ`` (w sums to 1)."""
    m = w @ x
    xc = x - m
    return m, xc.T @ (w[:, None] * xc)


def whitening(x: np.ndarray, w: np.ndarray, name: str) -> Whitening:
    """The :class:`Whitening` of rows x under weights w: ``W = C^{-1/2}`` (symmetric), or a ValueError."""
    m, C = weighted_moments(x, w)
    vals, vecs = np.linalg.eigh((C + C.T) / 2)
    if vals[-1] <= 0 or vals[0] <= RANK_RTOL * vals[-1]:
        raise ValueError(f"cannot whiten {name}: its covariance is singular "
                         f"(eigenvalues {vals[0]:.3g} .. {vals[-1]:.3g})")
    return Whitening(m, (vecs / np.sqrt(vals)) @ vecs.T, (vecs * np.sqrt(vals)) @ vecs.T)


def _mean_error(v: np.ndarray, w: np.ndarray, exact: bool) -> tuple[float, float, float]:
    """``(E_w[v], se, scale)``: se = sd(v)/√S for samples (0 when exact), scale = sqrt(E_w[v²])."""
    se = 0.0 if exact or v.size < 2 else float(np.std(v, ddof=1) / np.sqrt(v.size))
    return float(w @ v), se, float(np.sqrt(w @ (v * v)))


# --------------------------------------------------------------------------------------
# spectral matching
# --------------------------------------------------------------------------------------
def _inputs(x: Any, pairs: Any, w: Any, pw: Any, side: str, k: int | None) -> tuple[np.ndarray, ...]:
    """One modality's validated rows, pairs and normalised weights of each."""
    x = rows(x, f"x{side}", k)
    k = x.shape[1]
    pairs = np.asarray(pairs, dtype=np.float64)
    if pairs.ndim != 3 or pairs.shape[0] == 0 or pairs.shape[1:] != (2, k):
        raise ValueError(f"pairs_{side} must have shape (P, 2, {k}) with P ≥ 1, got {pairs.shape}")
    if not np.all(np.isfinite(pairs)):
        raise ValueError(f"pairs_{side} contains NaN or inf")
    return x, pairs, weights(w, x.shape[0], f"weights_{side}"), weights(pw, pairs.shape[0], f"pair_weights_{side}")


class _Side:
    """One modality: whitening, the pair matrix's eigenbasis R, features g = y R and the pair products."""

    def __init__(self, x: np.ndarray, pairs: np.ndarray, w: np.ndarray, pw_n: np.ndarray, exact_states: bool,
                 exact_pairs: bool, side: str) -> None:
        k = x.shape[1]
        self.w, self.exact_states = w, exact_states
        self.whitening = whitening(x, self.w, f"x{side}")
        y0, y1 = self.whitening.whiten(pairs[:, 0]), self.whitening.whiten(pairs[:, 1])
        M = y0.T @ (pw_n[:, None] * y1)
        vals, vecs = np.linalg.eigh((M + M.T) / 2)
        order = np.argsort(-vals, kind="stable")
        self.mu, self.R = vals[order], vecs[:, order]
        self.g = self.whitening.whiten(x) @ self.R
        products = (y0 @ self.R) * (y1 @ self.R)  # g_i(z) g_i(z') per pair, (P, k)
        self.gap_se = np.zeros(k - 1) if exact_pairs or pairs.shape[0] < 2 else (
            np.std(products[:, :-1] - products[:, 1:], axis=0, ddof=1) / np.sqrt(pairs.shape[0]))

    def statistic(self, i: int, j: int, l: int, signs: np.ndarray) -> tuple[float, float, float]:
        """``E[g_i g_j g_l]`` (g_j, g_l signed), its standard error and scale."""
        v = self.g[:, i] * (signs[j] * self.g[:, j]) * (signs[l] * self.g[:, l])
        return _mean_error(v, self.w, self.exact_states)


def _score(stats: Sequence[tuple[float, float, float]], sigmas: float) -> float:
    """min over the modalities of |t| / (sigmas·se + TOL·scale): above 1 means clearly non-zero in both."""
    out = np.inf
    for t, se, scale in stats:
        bound = sigmas * se + TOL * scale
        out = min(out, abs(t) / bound if bound > 0 else 0.0)
    return out


def _ties(a: _Side, b: _Side, sigmas: float) -> tuple[set[int], list[str]]:
    """Features in a tie and one message per tied adjacent pair (μ_i, μ_{i+1})."""
    tied, lines = set(), []
    for i in range(a.mu.size - 1):
        gaps = [s.mu[i] - s.mu[i + 1] for s in (a, b)]
        bounds = [sigmas * s.gap_se[i] + TOL * max(1.0, abs(s.mu[i])) for s in (a, b)]
        if any(g <= e for g, e in zip(gaps, bounds)):
            tied |= {i, i + 1}
            lines.append(f"features {i + 1}, {i + 2} tied: μ_{i + 1} − μ_{i + 2} = {gaps[0]:.3g} (a), "
                         f"{gaps[1]:.3g} (b) within the error {max(bounds):.3g}; a rotation of these features is "
                         "not identifiable")
    return tied, lines


def _signs(a: _Side, b: _Side, tied: set[int], sigmas: float) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Signs of each modality's features (third moments, then odd statistics) and the unsignable ones."""
    k = a.mu.size
    sa, sb = np.ones(k), np.ones(k)
    unsigned, signed = [], set()
    for i in sorted(set(range(k)) - tied):
        stats = (a.statistic(i, i, i, sa), b.statistic(i, i, i, sb))
        if _score(stats, sigmas) > 1:
            sa[i], sb[i] = np.sign(stats[0][0]), np.sign(stats[1][0])
            signed.add(i)
        else:
            unsigned.append(i)
    usable = sorted(set(range(k)) - tied)
    progress = True
    while unsigned and progress:
        progress = False
        for i in list(unsigned):
            best, arg = 1.0, None
            for j, l in itertools.combinations_with_replacement(usable, 2):
                if i in (j, l) or (j != l and not {j, l} <= signed):
                    continue
                stats = (a.statistic(i, j, l, sa), b.statistic(i, j, l, sb))
                score = _score(stats, sigmas)
                if score > best:
                    best, arg = score, stats
            if arg is not None:
                sa[i], sb[i] = np.sign(arg[0][0]), np.sign(arg[1][0])
                signed.add(i)
                unsigned.remove(i)
                progress = True
    for i in sorted(tied):  # not identifiable (reported), but the eigenvector signed by its third moment is still
        # the best guess: near a tie it is usually close to the truth, and an arbitrary sign would be 2 away
        ta, tb = a.statistic(i, i, i, sa)[0], b.statistic(i, i, i, sb)[0]
        sa[i], sb[i] = np.sign(ta) or 1.0, np.sign(tb) or 1.0
    lines = []
    for i in unsigned:
        (ta, ea, _), (tb, eb, _) = a.statistic(i, i, i, sa), b.statistic(i, i, i, sb)
        lines.append(f"feature {i + 1} unsigned: E[g_{i + 1}³] = {ta:.3g} (a), {tb:.3g} (b) within its error "
                     f"({sigmas:g}·se = {sigmas * max(ea, eb):.3g}), and no odd statistic E[g_{i + 1} g_j g_l] with a "
                     "signed pair (j, l) is clearly non-zero; its sign is not identifiable")
    return sa, sb, lines


def spectral_match(xa: Any, pairs_a: Any, xb: Any, pairs_b: Any, *, weights_a: Any = None,
                   pair_weights_a: Any = None, weights_b: Any = None, pair_weights_b: Any = None,
                   sigmas: float = 2.0) -> PairFreeMap:
    """The map a → b from each modality's own positive pairs, no cross-modal pair (docs/theory.md §9).

    ``Q = R_a S_a S_b R_bᵀ``: ``R_m`` diagonalises ``M_m = sym E_π[y_m(z) y_m(z')ᵀ]`` in whitened
    coordinates, ``S_m`` signs each feature by its third moment (or an odd statistic); see the module
    docstring for the steps and the error rules.

    Args:
        xa: (Sa, k) features of modality a; ``pairs_a``: (Pa, 2, k) features of positive pairs of a.
        xb, pairs_b: the same for modality b (any Sb, Pb; the same k).
        weights_a, pair_weights_a, weights_b, pair_weights_b: optional weights of the rows and pairs
            (normalised); all states with p and all pairs with π give the population answer, exactly.
            Given weights count as a population law (no sampling error).
        sigmas: how many standard errors a gap or a third moment must clear to count.

    Returns:
        :class:`PairFreeMap`.
    """
    if not (isinstance(sigmas, numbers.Real) and sigmas >= 0):
        raise ValueError(f"sigmas must be a non-negative number, got {sigmas!r}")
    ins_a = _inputs(xa, pairs_a, weights_a, pair_weights_a, "a", None)
    ins_b = _inputs(xb, pairs_b, weights_b, pair_weights_b, "b", ins_a[0].shape[1])
    a = _Side(*ins_a, weights_a is not None, pair_weights_a is not None, "a")
    b = _Side(*ins_b, weights_b is not None, pair_weights_b is not None, "b")
    tied, lines = _ties(a, b, float(sigmas))
    sa, sb, unsigned = _signs(a, b, tied, float(sigmas))
    lines += unsigned
    Q = (a.R * (sa * sb)) @ b.R.T
    skew = [np.einsum("s,si->i", s.w, (s.g * sign) ** 3) for s, sign in ((a, sa), (b, sb))]
    return PairFreeMap(Q, "spectral", not lines, tuple(lines), a.mu, b.mu, skew[0], skew[1], a.whitening, b.whitening)


# --------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------
def map_error(Q: Any, Q_true: Any) -> float:
    """``‖Q − Q_true‖₂`` (operator norm): 0 when exact, at most 2 between orthogonal maps."""
    Q, Q_true = np.asarray(Q, dtype=np.float64), np.asarray(Q_true, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[0] != Q.shape[1]:
        raise ValueError(f"Q must be a square matrix (k, k), got shape {Q.shape}")
    if Q_true.shape != Q.shape:
        raise ValueError(f"Q_true must have shape {Q.shape}, got {Q_true.shape}")
    return float(np.linalg.norm(Q - Q_true, 2))


def _recall(queries: np.ndarray, keys: np.ndarray, ks: tuple[int, ...]) -> dict[int, float]:
    """Tie-aware recall at k by Euclidean distance; query i's partner is key i (the §10 rule)."""
    t = queries.shape[0]
    step = max(1, BLOCK // t)
    key_sq = np.sum(keys * keys, axis=1)
    higher, equal = [], []
    for r0 in range(0, t, step):
        q = queries[r0:r0 + step]
        d = key_sq[None, :] - 2 * q @ keys.T  # ‖q − key‖² − ‖q‖², the same order
        partner = d[np.arange(q.shape[0]), np.arange(r0, r0 + q.shape[0])][:, None]
        higher.append(np.sum(d < partner, axis=1))
        equal.append(np.sum(d == partner, axis=1) - 1)
    g, e = np.concatenate(higher).astype(float), np.concatenate(equal).astype(float)
    return {k: float(np.mean(np.clip((k - g) / (e + 1.0), 0.0, 1.0))) for k in ks}


def mapped_retrieval(mapping: RowMap, xa: Any, xb: Any, *, ks: Sequence[int] = (1, 5)) -> Retrieval:
    """Recall@k of held-out states through a pair-free map (the pairing is used to score only).

    Row i of ``xa`` and of ``xb`` render the same held-out state. a → b ranks every b-row by its
    Euclidean distance to ``whiten_a(xa_i) @ Q`` in b's whitened coordinates; b → a ranks a-rows
    against ``whiten_b(xb_j) @ Qᵀ``. Ties count as in :func:`prhsim.metrics.retrieval`
    (``clip((k − g)/(e + 1), 0, 1)``), which fits its own map from pairs and ranks by cosine instead.
    A state held out twice ties with itself: pass distinct states to score a map alone.
    """
    ks = tuple(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {ks!r}")
    k = mapping.map.shape[0]
    xa, xb = rows(xa, "xa", k), rows(xb, "xb", k)
    if xa.shape[0] != xb.shape[0]:
        raise ValueError(f"xa and xb must hold the same held-out states, got {xa.shape[0]} and {xb.shape[0]} rows")
    ya, yb = mapping.whitening_a.whiten(xa), mapping.whitening_b.whiten(xb)
    return Retrieval(_recall(ya @ mapping.map, yb, ks), _recall(yb @ mapping.map.T, ya, ks))
