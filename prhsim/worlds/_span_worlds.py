"""The exact pair laws of span views: good (spans of two captions of one state) and bad (two spans of one caption).

docs/theory.md §5.1. Let u index the latent cause of a view and ``E[x, u] = P(x | u)`` the
chance that a span of the caption(s) of u is the observation x (a distinct token row). The two
views of a pair are drawn independently given u, so

    p(x) = Σ_u w_u E[x, u],        Π = E diag(w) Eᵀ,

with

* good view: u = z, ``w = p_Z`` and ``P(x | z) = Σ_n q(n) P(x | z, n)``: the two captions have
  independent wording;
* bad view: u = (z, n), ``w = p_Z ⊗ q``: both spans come from one caption and share its wording.

This is the anchor structure of next-token prediction (§5) with spans in place of
(context, next token): the JEPA's closed form on this world is what a whitened text encoder
converges to with the exact pair law. Distinct spans are enumerated, so the world is only
built for small caption laws (``MAX_SPANS`` rows before deduplication).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
import scipy.sparse as sp

from prhsim._budget import ensure_fits
from prhsim.worlds._captions import CaptionLaw, SpanLaw, spans_of
from prhsim.worlds._finite import FiniteWorld, World

#: Spans enumerated before deduplication (|Z| · |N| · number of (start, length) pairs).
MAX_SPANS = 10_000_000


class TooManySpans(ValueError):
    """A span or next-token law with more than ``MAX_SPANS`` rows to enumerate."""


class SpanWorld(NamedTuple):
    """A span view's exact world over distinct spans.

    Attributes:
        world: the finite world over the distinct spans x (p and Π as in the module docstring).
        tokens: the token row of each span, (|X|, T) int32: the span at its positions, the rest the pad id.
        emission: ``E[x, u] = P(x | u)``, sparse (|X|, |U|): u = z (good) or z·|N| + n (bad).
        view: "good" or "bad".
    """

    world: FiniteWorld
    tokens: np.ndarray
    emission: sp.csr_array
    view: Literal["good", "bad"]


class SpanEmission(NamedTuple):
    """The distinct spans of a caption law and ``E[x, u] = P(x | u)`` (module docstring).

    Attributes:
        tokens: the token row of each distinct span, (|X|, T) int32, padded with the pad id.
        emission: ``E``, sparse (|X|, |U|): u = z (good) or z·|N| + n (bad).
        weights: ``w_u``, the law of u: ``p_Z`` (good) or ``p_Z ⊗ q`` (bad).
        captions: the row x of each whole caption ``z·|N| + n``, (|Z|·|N|,).
    """

    tokens: np.ndarray
    emission: sp.csr_array
    weights: np.ndarray
    captions: np.ndarray

    @property
    def p(self) -> np.ndarray:
        """``p(x) = Σ_u w_u E[x, u]``."""
        return self.emission @ self.weights


def span_emission(law: CaptionLaw, spans: SpanLaw, view: Literal["good", "bad"]) -> SpanEmission:
    """Enumerate the spans of every caption of ``law`` and their emission law under ``view``.

    Raises:
        ValueError: on an unknown view, or more than ``MAX_SPANS`` spans to enumerate.
    """
    if view not in ("good", "bad"):
        raise ValueError(f"a span view is 'good' or 'bad', got {view!r}")
    n_z, n_n, T = law.n_states, law.modality.n_nuisance, law.length
    start, length, weight = spans.table(T)
    total = n_z * n_n * start.size
    if total > MAX_SPANS:
        raise TooManySpans(f"the exact span law needs {total:,} spans ({n_z:,} states x {n_n} wordings x "
                         f"{start.size} spans), above {MAX_SPANS:,}: use a smaller world or longer spans")
    ensure_fits(16.0 * total * (T + 2), f"{total:,} enumerated spans of {T} tokens", "use a smaller world")
    units = np.arange(n_z * n_n)
    captions = law.captions(units // n_n, units % n_n)  # (|Z||N|, T)
    small = np.uint8 if law.pad < 256 else np.int32
    rows = spans_of(np.repeat(captions, start.size, axis=0), np.tile(start, units.size),
                    np.tile(length, units.size), law.pad).astype(small)
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * T))).ravel()
    _, first, x = np.unique(keys, return_index=True, return_inverse=True)
    x = x.ravel()
    unit = np.repeat(units, start.size)
    w_span = np.tile(weight, units.size)
    if view == "good":
        col, w_unit, weights = unit // n_n, w_span * law.q[unit % n_n], law.p
    else:
        col, w_unit, weights = unit, w_span, (law.p[:, None] * law.q[None, :]).ravel()
    emission = sp.csr_array((w_unit, (x, col)), shape=(first.size, weights.size))
    emission.sum_duplicates()
    whole = (start == 0) & (length == T)
    if not whole.any():
        raise ValueError(f"the span law never shows a whole caption (max_length {spans.max_length} < {T} tokens): "
                         "its closed form has no value on whole captions")
    caption_rows = x.reshape(units.size, start.size)[:, np.flatnonzero(whole)[0]]
    return SpanEmission(rows[first].astype(np.int32), emission, weights, caption_rows)


def latent_pairs(law: CaptionLaw, view: Literal["good", "bad"], world: World | None) -> sp.csr_array | None:
    """``Π_U``, the pair law of the latent causes: None for ``diag(w)`` (both views of one state), else
    ``π_Z`` (good) or ``π_Z ⊗ diag(q)`` (bad: the wording is copied across the pair)."""
    if world is None:
        return None
    if world.n != law.n_states:
        raise ValueError(f"the pair law is over {world.n:,} states, the caption law over {law.n_states:,}")
    base = world.to_finite() if hasattr(world, "to_finite") else world
    Pi = sp.csr_array(base.Pi)
    return Pi if view == "good" else sp.csr_array(sp.kron(Pi, sp.diags_array(law.q)))


def span_world(law: CaptionLaw, spans: SpanLaw, view: Literal["good", "bad"], world: World | None = None) -> SpanWorld:
    """The exact pair law of ``view`` over the distinct spans of every caption of ``law``.

    Without ``world`` both views describe one state (the latent pair law is ``diag(w)``); with it,
    the two states of a pair follow its ``π_Z`` (:func:`latent_pairs`).

    Raises:
        ValueError: on an unknown view, or a caption law with more than ``MAX_SPANS`` spans to enumerate.
    """
    em = span_emission(law, spans, view)
    pairs = latent_pairs(law, view, world)
    E = em.emission
    Pi = (E * em.weights[None, :]) @ E.T if pairs is None else E @ pairs @ E.T
    return SpanWorld(FiniteWorld(em.p, sp.csr_array(Pi), symmetrize=True), em.tokens, E, view)


class NextTokenLaw(NamedTuple):
    """The exact (prefix, next token) law of a caption law (docs/theory.md §5).

    A caption ``(z, n) ~ p_Z ⊗ q`` and a position t uniform on its *targets*, the positions
    ``1..T−1`` that are not blank (all of them in a caption without blanks): the context is the
    caption's first t positions (kept at their positions, the rest padded), the target its token t.

    Attributes:
        joint: ``P(c, y)``, dense (|C|, V).
        contexts: the token row of each distinct prefix, (|C|, T) int32.
        captions: the context row of each caption's prefixes, (|Z|·|N|, T − 1): prefix lengths 1..T−1,
            −1 where the next position is blank (no target).
    """

    joint: np.ndarray
    contexts: np.ndarray
    captions: np.ndarray

    def pool(self, features: np.ndarray) -> np.ndarray:
        """Each caption's feature, the mean of its prefixes' context features (those with a target): (|Z|·|N|, k)."""
        features = np.asarray(features)
        if np.all(self.captions >= 0):
            return features[self.captions].mean(axis=1)
        valid = self.captions >= 0
        total = np.einsum("mt,mtk->mk", valid.astype(features.dtype), features[np.where(valid, self.captions, 0)])
        return total / valid.sum(axis=1, keepdims=True)


def next_token_law(law: CaptionLaw) -> NextTokenLaw:
    """Enumerate every caption's prefixes and next tokens with their exact probabilities.

    Raises:
        ValueError: with more than ``MAX_SPANS`` prefixes to enumerate.
    """
    n_z, n_n, T, V = law.n_states, law.modality.n_nuisance, law.length, law.vocab_size
    if T < 2:
        raise ValueError(f"next-token prediction needs captions of at least 2 tokens, got {T}")
    total = n_z * n_n * (T - 1)
    if total > MAX_SPANS:
        raise TooManySpans(f"the exact next-token law needs {total:,} prefixes, above {MAX_SPANS:,}: use a smaller world")
    ensure_fits(16.0 * total * (T + 2), f"{total:,} enumerated prefixes of {T} tokens", "use a smaller world")
    units = np.arange(n_z * n_n)
    captions = law.captions(units // n_n, units % n_n)
    targets = (captions[:, 1:] != law.pad).ravel()  # a blank is never a next token
    counts = (captions[:, 1:] != law.pad).sum(axis=1)
    if np.any(counts == 0):
        raise ValueError("a caption with no token after its first position has no next token to predict")
    t = np.tile(np.arange(1, T), units.size)[targets]
    holder = np.repeat(units, T - 1)[targets]
    rows = spans_of(captions[holder], np.zeros_like(t), t, law.pad)
    small = np.uint8 if law.pad < 256 else np.int32
    rows = rows.astype(small)
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * T))).ravel()
    _, first, c = np.unique(keys, return_index=True, return_inverse=True)
    c = c.ravel()
    y = captions[holder, t]
    w = (law.p[:, None] * law.q[None, :]).ravel()[holder] / counts[holder]
    ensure_fits(8.0 * first.size * V, f"the joint of {first.size:,} prefixes x {V} tokens", "use a smaller world")
    joint = np.zeros((first.size, V))
    np.add.at(joint, (c, y), w)
    index = np.full(units.size * (T - 1), -1, dtype=np.int64)
    index[targets] = c
    return NextTokenLaw(joint, rows[first].astype(np.int32), index.reshape(units.size, T - 1))
