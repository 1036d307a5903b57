"""Scores of gridscene captions against the states they describe: the captioning sweep's measures.

For m images of states z_i and one caption of T token ids per image, read by
:func:`parse_captions` into ``â(i, o)`` for every attribute kind a ∈ {col, row, shape, colour}
(:data:`ATTRIBUTES`) and object o < O (−1 where unread), against the truth ``a(z_i, o)``:

* ``exact = (1/m) Σ_i 1[â(i, o) = a(z_i, o) for every a and o]``;
* ``attributes[a] = (1/(m·O)) Σ_{i,o} 1[â(i, o) = a(z_i, o)]``, ``attribute_mean`` their mean over a;
* ``grammatical = (1/m) Σ_i 1[caption_i = caption(z, n) for some z and n]`` (a caption of the grammar);
* ``bleu``: sacrebleu's corpus BLEU-4, ``100 · BP · exp(¼ Σ_{n≤4} log p_n)`` (p_n the clipped n-gram
  precisions, BP the brevity penalty; ``tokenize="none"``: the captions are words joined by spaces),
  the references of an image being its state's caption under every wording (:func:`references`);
* ``cider``: CIDEr-D of pycocoevalcap (``Cider``, n = 4, σ = 6; idf over the evaluated images'
  references; pre-tokenised strings, no Java), against the same references. A right caption
  matches one of |N| references exactly, so its CIDEr is below the maximum 10.

**Chance** (:func:`chance_scores`): a caption of a random state ``z' ~ p`` (and wording ~ q)
independent of the image; its accuracies are the expectations over z',
``exact = (1/m) Σ_i p(z_i)`` and ``attributes[a] = (1/(m·O)) Σ_{i,o} Σ_{z'} p(z') 1[a(z', o) = a(z_i, o)]``
(``grammatical`` 1), its BLEU and CIDEr one draw per image.

These are standard caption measures: no section of docs/theory.md defines them (the sweep they
score is §9's "Captioning through one rotation"; the caption grammar is gridscene's, §5.1).
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np

from prhsim._rng import RngLike, check_rng
from prhsim.experiments._record import Record
from prhsim.worlds import CaptionLaw, GridScene, caption_law

#: gridscene's caption: 9 tokens per object's clause (the shortest span of the span closed form).
CLAUSE = 9
#: The attribute kinds of a gridscene object, in :meth:`GridScene.decode`'s keys.
ATTRIBUTES: tuple[str, ...] = ("col", "row", "shape", "colour")
Metric = Literal["exact", "attribute_mean", "grammatical", "bleu", "cider"]
CAPTION_SCORES: tuple[str, ...] = ("exact", "attribute_mean", "grammatical", "bleu", "cider")


def _token_ids(scene: GridScene) -> dict[str, int]:
    """The first token id of each word class of :func:`prhsim.worlds._gridscene.caption`'s vocabulary."""
    O, C, S = scene.n_objects, scene.n_colours, scene.n_shapes
    name0 = 4
    colour0 = name0 + O
    shape0 = colour0 + 2 * C
    return {"at": 0, "row": 1, "column": 2, "sep": 3, "name": name0, "colour": colour0, "shape": shape0,
            "number": shape0 + 2 * S}


def parse_captions(scene: GridScene, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Read the attributes a gridscene caption states: ``{col, row, shape, colour}``, each (m, n_objects), −1 where unread.

    The grammar (:func:`prhsim.worlds._gridscene.caption`): one clause of 9 tokens per object,
    ``NAME COLOUR SHAPE at A a B b ;`` with ``(A, B)`` = (row, column) or (column, row) and a, b
    number words; two objects or more: the clauses in either order; one object: the place
    ``at A a B b`` may come first (``at A a B b NAME COLOUR SHAPE ;``). Each block of 9 tokens is read
    as a clause: its name gives the object, a word of either synonym its colour or shape, and the
    number after "row" (after "column") its row (column). An attribute is −1 when its word is not
    of its class, when (A, B) is not one of the two orders, or when the object is named by no
    clause or by more than one. The filler tokens ("at", ";") are not checked.
    """
    O, G, C, S = scene.n_objects, scene.size, scene.n_colours, scene.n_shapes
    ids = _token_ids(scene)
    x = np.atleast_2d(np.asarray(tokens, dtype=np.int64))
    if x.ndim != 2 or x.shape[1] != CLAUSE * O:
        raise ValueError(f"gridscene captions of {O} object(s) have {CLAUSE * O} tokens, got shape {x.shape}")
    if O == 1:  # the place first: back to NAME COLOUR SHAPE at A a B b ;
        place_first = x[:, 0] == ids["at"]
        x = np.where(place_first[:, None], x[:, [5, 6, 7, 0, 1, 2, 3, 4, 8]], x)

    def word(t: np.ndarray, first: int, count: int, per: int) -> np.ndarray:
        ok = (t >= first) & (t < first + per * count)
        return np.where(ok, (t - first) // per, -1)

    out = {a: np.full((x.shape[0], O), -1, dtype=np.int64) for a in ATTRIBUTES}
    named = np.zeros((x.shape[0], O), dtype=np.int64)
    clauses = []
    for b in range(O):
        block = x[:, CLAUSE * b:CLAUSE * (b + 1)]
        a_num, b_num = word(block[:, 5], ids["number"], G, 1), word(block[:, 7], ids["number"], G, 1)
        row_first = (block[:, 4] == ids["row"]) & (block[:, 6] == ids["column"])
        col_first = (block[:, 4] == ids["column"]) & (block[:, 6] == ids["row"])
        clause = {"col": np.where(row_first, b_num, np.where(col_first, a_num, -1)),
                  "row": np.where(row_first, a_num, np.where(col_first, b_num, -1)),
                  "shape": word(block[:, 2], ids["shape"], S, 2), "colour": word(block[:, 1], ids["colour"], C, 2)}
        name = word(block[:, 0], ids["name"], O, 1)
        clauses.append((name, clause))
        for o in range(O):
            named[:, o] += name == o
    for name, clause in clauses:
        for o in range(O):
            mine = (name == o) & (named[:, o] == 1)
            for a in ATTRIBUTES:
                out[a][mine, o] = clause[a][mine]
    return out


class CaptionScores(Record):
    """Scores of decoded captions against the true states (module docstring).

    ``bleu`` is on sacrebleu's 0–100 scale, ``cider`` on CIDEr's 0–10.
    """

    images: int
    exact: float
    attributes: dict[str, float]
    attribute_mean: float
    grammatical: float
    bleu: float
    cider: float


def _check_tokens(law: CaptionLaw, states: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    states = np.asarray(states)
    tokens = np.asarray(tokens)
    if states.ndim != 1 or states.size < 2 or not np.issubdtype(states.dtype, np.integer):
        raise ValueError(f"scores need the integer states of at least two images, got shape {states.shape}")
    if states.min() < 0 or states.max() >= law.n_states:
        raise ValueError(f"states must lie in 0..{law.n_states - 1}")
    if tokens.shape != (states.size, law.length) or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"one caption of {law.length} token ids per image needed: shape ({states.size}, "
                         f"{law.length}), got {tokens.shape}")
    if tokens.min() < 0 or tokens.max() > law.pad:
        raise ValueError(f"token ids must lie in 0..{law.pad} (the pad id)")
    return states.astype(np.int64), tokens.astype(np.int64)


def references(law: CaptionLaw, states: np.ndarray) -> list[list[str]]:
    """Each state's caption under every wording, as words: (m lists of |N| strings)."""
    n_n = law.modality.n_nuisance
    states = np.asarray(states, dtype=np.int64)
    words = law.decode(law.captions(np.repeat(states, n_n), np.tile(np.arange(n_n), states.size)))
    return [words[i * n_n:(i + 1) * n_n] for i in range(states.size)]


def bleu(hypotheses: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
    """sacrebleu corpus BLEU-4 (0–100) of pre-tokenised hypotheses, each against its list of references (equal counts)."""
    from sacrebleu.metrics import BLEU

    counts = {len(r) for r in refs}
    if len(refs) != len(hypotheses) or len(counts) != 1:
        raise ValueError("BLEU needs one list of references per hypothesis, all of one length")
    streams = [[r[j] for r in refs] for j in range(counts.pop())]
    return float(BLEU(tokenize="none").corpus_score(list(hypotheses), streams).score)


def cider(hypotheses: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
    """CIDEr-D (pycocoevalcap ``Cider``: n = 4, σ = 6, 0–10) of pre-tokenised hypotheses against their references."""
    from pycocoevalcap.cider.cider import Cider

    if len(refs) != len(hypotheses) or len(hypotheses) < 2 or any(len(r) < 1 for r in refs):
        raise ValueError("CIDEr needs at least two hypotheses, each with one or more references")
    gts = {i: list(r) for i, r in enumerate(refs)}
    res = {i: [h] for i, h in enumerate(hypotheses)}
    return float(Cider().compute_score(gts, res)[0])


def accuracies(scene: GridScene, states: np.ndarray, tokens: np.ndarray) -> tuple[float, dict[str, float], float]:
    """``(exact, attributes, grammatical)`` of captions (m, T) of the given states (m,): :class:`CaptionScores` without text metrics."""
    law = caption_law(scene)
    states, tokens = _check_tokens(law, states, tokens)
    truth = scene.decode(states)
    read = parse_captions(scene, tokens)
    right = np.stack([read[a] == truth[a] for a in ATTRIBUTES])  # (attribute, image, object)
    attributes = {a: float(right[i].mean()) for i, a in enumerate(ATTRIBUTES)}
    exact = float(np.all(right, axis=(0, 2)).mean())
    full = np.all(np.stack([read[a] >= 0 for a in ATTRIBUTES]), axis=(0, 2))
    grammatical = np.zeros(states.size, dtype=bool)
    if np.any(full):  # a caption of the grammar iff it is one of the captions of the state it names
        z_read = np.ravel_multi_index(tuple(read[a][full, o] for o in range(scene.n_objects) for a in ATTRIBUTES),
                                      scene.world.shape)
        n_n = law.modality.n_nuisance
        every = law.captions(np.repeat(z_read, n_n), np.tile(np.arange(n_n), z_read.size))
        grammatical[full] = np.any(np.all(every.reshape(z_read.size, n_n, -1) == tokens[full][:, None], axis=2), axis=1)
    return exact, attributes, float(grammatical.mean())


def caption_scores(scene: GridScene, states: np.ndarray, tokens: np.ndarray) -> CaptionScores:
    """Score captions (m, T) of images of the given states (m,) against the world's descriptions (module docstring)."""
    law = caption_law(scene)
    exact, attributes, grammatical = accuracies(scene, states, tokens)
    hyps, refs = law.decode(np.asarray(tokens)), references(law, states)
    return CaptionScores(images=int(np.size(states)), exact=exact, attributes=attributes,
                         attribute_mean=float(np.mean(list(attributes.values()))), grammatical=grammatical,
                         bleu=bleu(hyps, refs), cider=cider(hyps, refs))


def chance_scores(scene: GridScene, states: np.ndarray, rng: RngLike = None) -> CaptionScores:
    """The scores of a caption of a random state ``z' ~ p`` (wording ~ q) for each image (module docstring).

    Exact and attribute accuracies are expectations over z'; BLEU and CIDEr one draw per image.
    """
    law = caption_law(scene)
    states = np.asarray(states, dtype=np.int64)
    gen = check_rng(rng)
    guess = gen.choice(law.n_states, size=states.size, p=law.p)
    drawn = caption_scores(scene, states, law.captions(guess, gen.choice(law.q.size, size=states.size, p=law.q)))
    every = scene.decode(np.arange(law.n_states))
    truth = scene.decode(states)
    attributes = {}
    for a in ATTRIBUTES:
        hits = [law.p @ (every[a][:, o][None, :] == truth[a][:, o][:, None]).T for o in range(scene.n_objects)]
        attributes[a] = float(np.mean(hits))
    return drawn.model_copy(update={"exact": float(law.p[states].mean()), "attributes": attributes,
                                    "attribute_mean": float(np.mean(list(attributes.values()))), "grammatical": 1.0})

