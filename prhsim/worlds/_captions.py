"""Captions as token sequences: a caption law over a world, finite samples of it, and contiguous spans (docs/theory.md §5.1).

A *caption law* is a world's law of states ``p(z)`` and a caption renderer: a modality whose
observation of ``(z, n)`` is a fixed-length row of token ids (gridscene's ``caption``: a
template grammar whose wording — synonym set, clause order, word order — is the nuisance n,
``n ~ q`` independent of z, in a :class:`prhsim.worlds.CaptionStyle`). A caption may leave
positions *blank* (the pad id V: an object it does not mention, a summary it does not give);
a blank is never a token of the caption, so it is neither counted nor predicted. A *record* is one state with several captions of independent
nuisance (an image and its captions), or a positive pair of states with one caption each
(:meth:`CaptionLaw.sample_pairs`). A *span* is a contiguous piece of a caption, kept at its
positions in a row of the caption's length, every other position the pad id ``V`` (the
vocabulary size), so an encoder that reads (position, token) pairs sees a span and a whole
caption alike.

The span law (:class:`SpanLaw`): the length L is uniform on ``[min_length, max_length]``
and the start uniform on ``0..T − L``; a whole caption is the span ``(0, T)``.

Token accounting (:meth:`Records.tokens_seen`): a record's tokens are every token of every caption
it holds (blanks aside), whatever spans a learner cuts from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from prhsim._budget import ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim._types import States
from prhsim.worlds._modality import Modality
from prhsim.worlds._scene_captions import CaptionStyle, caption, caption_vocabulary


class Records(NamedTuple):
    """A finite sample of a caption law: ``count`` states, ``captions`` captions each.

    Attributes:
        states: z of each record, (count,); or the two states of a positive pair, (count, 2)
            (:meth:`CaptionLaw.sample_pairs`), caption i describing state i.
        nuisance: n of each caption, (count, captions), drawn independently from q.
        tokens: the captions' token ids, (count, captions, T), int32.
        pad: the blank (pad) id of the law, or -1 where no caption has a blank.
    """

    states: np.ndarray
    nuisance: np.ndarray
    tokens: np.ndarray
    pad: int = -1

    @property
    def count(self) -> int:
        return int(self.states.shape[0])

    @property
    def paired(self) -> bool:
        """True when each record is a positive pair of states, one caption each."""
        return self.states.ndim == 2

    @property
    def captions(self) -> int:
        return int(self.tokens.shape[1])

    def tokens_seen(self) -> int:
        """Every token of every caption the records hold: ``count · captions · T`` less the blanks."""
        if self.pad < 0:
            return int(self.tokens.size)
        return int(np.count_nonzero(self.tokens != self.pad))


@dataclass(frozen=True)
class CaptionLaw:
    """Captions of a world's states: ``z ~ p``, ``n ~ q``, caption = ``modality.render(z, n)``.

    Attributes:
        modality: a modality whose observation is a row of T token ids in ``0..V-1``.
        p: the law of Z, (|Z|,).
        vocabulary: the token strings (token id = position), V of them.
        blanks: True when a caption may hold the pad id V at some position (module docstring).
    """

    modality: Modality
    p: np.ndarray
    vocabulary: tuple[str, ...]
    blanks: bool = False

    def __post_init__(self) -> None:
        p = np.asarray(self.p, dtype=np.float64)
        if p.ndim != 1 or p.size < 1 or not np.all(p > 0) or not np.isclose(p.sum(), 1.0, atol=1e-9):
            raise ValueError(f"a caption law needs a positive law of Z summing to 1, got shape {p.shape}")
        p.setflags(write=False)
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "vocabulary", tuple(self.vocabulary))
        self.modality.check_base(p.size)
        if self.modality.renderer_free:
            raise ValueError(f"modality {self.modality.name!r} has no renderer: it cannot emit captions")
        probe = np.asarray(self.modality.render(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)))
        if probe.ndim != 2 or not np.issubdtype(probe.dtype, np.integer):
            raise ValueError(f"modality {self.modality.name!r} does not render rows of token ids "
                             f"(got {probe.dtype} of shape {probe.shape[1:]} per state)")
        top = len(self.vocabulary) if self.blanks else len(self.vocabulary) - 1
        if probe.min() < 0 or probe.max() > top:
            raise ValueError(f"modality {self.modality.name!r} renders token ids outside 0..{top}")
        object.__setattr__(self, "_length", int(probe.shape[1]))

    @property
    def n_states(self) -> int:
        return int(self.p.size)

    @property
    def length(self) -> int:
        """T, the tokens of one caption."""
        return self._length  # type: ignore[attr-defined]

    @property
    def vocab_size(self) -> int:
        """V, the token ids ``0..V-1``; V itself is the pad id."""
        return len(self.vocabulary)

    @property
    def pad(self) -> int:
        return len(self.vocabulary)

    @property
    def q(self) -> np.ndarray:
        return self.modality.nuisance

    @property
    def record_pad(self) -> int:
        """The pad id where captions may hold blanks, else -1 (:attr:`Records.pad`)."""
        return self.pad if self.blanks else -1

    def captions(self, z: States, n: States) -> np.ndarray:
        """Token ids of the captions ``(z, n)``, (s, T) int32."""
        z, n = np.asarray(z, dtype=np.int64).ravel(), np.asarray(n, dtype=np.int64).ravel()
        return np.asarray(self.modality.render(z, n), dtype=np.int32)

    def sample(self, count: int, captions: int = 1, *, rng: RngLike = None) -> Records:
        """``count`` records: ``z ~ p`` and ``captions`` captions of independent nuisance ``n ~ q`` each."""
        count, captions = _positive("count", count), _positive("captions", captions)
        self._check_records(count, captions)
        gen = check_rng(rng)
        z = gen.choice(self.n_states, size=count, p=self.p)
        n = gen.choice(self.modality.n_nuisance, size=(count, captions), p=self.q)
        tokens = self.captions(np.repeat(z, captions), n.ravel()).reshape(count, captions, self.length)
        return Records(z, n, tokens, self.record_pad)

    def sample_pairs(self, world, count: int, *, wording: Literal["independent", "shared"] = "independent",
                     rng: RngLike = None) -> Records:
        """``count`` records of two captions: of a positive pair ``(z, z') ~ π`` of ``world``, wording independent or shared.

        ``states`` is then (count, 2). Shared wording (one n for both captions) is the bad view of
        docs/theory.md §4 (the nuisance is copied across the pair); independent wording is the good view.
        """
        from prhsim.worlds._sampling import pair_sampler

        count = _positive("count", count)
        self._check_records(count, 2)
        if wording not in ("independent", "shared"):
            raise ValueError(f"wording must be 'independent' or 'shared', got {wording!r}")
        if world.n != self.n_states:
            raise ValueError(f"the pair law is over {world.n:,} states, the caption law over {self.n_states:,}")
        gen = check_rng(rng)
        z, z2 = pair_sampler(world).pairs(count, rng=gen)
        n = gen.choice(self.modality.n_nuisance, size=(count, 1 if wording == "shared" else 2), p=self.q)
        n = np.broadcast_to(n, (count, 2))
        states = np.stack([z, z2], axis=1)
        tokens = self.captions(states.ravel(), n.ravel()).reshape(count, 2, self.length)
        return Records(states, np.ascontiguousarray(n), tokens, self.record_pad)

    def records_bytes(self, count: int, captions: int) -> float:
        """Peak bytes of drawing ``count`` records of ``captions`` captions: per caption its tokens (int32) and,
        while they are built, the state, nuisance and unit indices and the rendered rows (int64), three copies
        (about twice the peak measured with tracemalloc)."""
        return 3.0 * count * captions * (4 * self.length + 8 * (self.length + 3))

    def _check_records(self, count: int, captions: int) -> None:
        ensure_fits(self.records_bytes(count, captions),
                    f"{count:,} records of {captions} caption(s) of {self.length} tokens", "draw fewer records")

    def decode(self, tokens: np.ndarray) -> list[str]:
        """The words of rows of token ids (the pad id is dropped)."""
        rows = np.atleast_2d(np.asarray(tokens))
        return [" ".join(self.vocabulary[t] for t in row if t != self.pad) for row in rows]


@dataclass(frozen=True)
class SpanLaw:
    """Contiguous spans of a caption of T tokens: length uniform on ``[min_length, max_length]``, start uniform.

    Attributes:
        min_length: the shortest span (at least 1).
        max_length: the longest span; None means the whole caption (T).
    """

    min_length: int = 1
    max_length: int | None = None

    def __post_init__(self) -> None:
        _positive("min_length", self.min_length)
        if self.max_length is not None and _positive("max_length", self.max_length) < self.min_length:
            raise ValueError(f"max_length ({self.max_length}) must be at least min_length ({self.min_length})")

    def lengths(self, T: int) -> np.ndarray:
        """The possible span lengths in a caption of T tokens."""
        top = T if self.max_length is None else min(self.max_length, T)
        if self.min_length > top:
            raise ValueError(f"spans of at least {self.min_length} tokens do not fit a caption of {T} tokens "
                             f"(max_length {top})")
        return np.arange(self.min_length, top + 1)

    def table(self, T: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (start, length) a span can take and its probability: three arrays of one length."""
        lengths = self.lengths(T)
        starts = [np.arange(T - L + 1) for L in lengths]
        weight = [np.full(s.size, 1.0 / (len(lengths) * s.size)) for s in starts]
        return (np.concatenate(starts), np.concatenate([np.full(s.size, L) for s, L in zip(starts, lengths)]),
                np.concatenate(weight))

    def cut(self, tokens: np.ndarray, pad: int, *, rng: RngLike = None) -> np.ndarray:
        """One span of each row of ``tokens`` (…, T), at its positions, the rest ``pad``; same shape, int32."""
        tokens = np.asarray(tokens)
        T = tokens.shape[-1]
        gen = check_rng(rng)
        lengths = self.lengths(T)
        L = lengths[gen.integers(lengths.size, size=tokens.shape[:-1])]
        start = np.floor(gen.random(size=tokens.shape[:-1]) * (T - L + 1)).astype(np.int64)
        return spans_of(tokens, start, L, pad)


def spans_of(tokens: np.ndarray, start: np.ndarray, length: np.ndarray, pad: int) -> np.ndarray:
    """``tokens[..., start:start+length]`` of each row, kept at its positions, every other position ``pad`` (int32)."""
    tokens = np.asarray(tokens)
    j = np.arange(tokens.shape[-1])
    start, length = np.asarray(start)[..., None], np.asarray(length)[..., None]
    return np.where((j >= start) & (j < start + length), tokens, pad).astype(np.int32)


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def caption_law(scene, style: CaptionStyle | None = None) -> CaptionLaw:
    """The caption law of a gridscene: its law of Z and its ``caption`` modality (template grammar) in ``style``."""
    style = style or CaptionStyle()
    return CaptionLaw(caption(scene, style), scene.world.p, caption_vocabulary(scene), style.blanks)
