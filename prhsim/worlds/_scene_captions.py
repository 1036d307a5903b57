"""gridscene's captions: a template grammar, and the properties real captions have (docs/theory.md §5.3).

A caption describes each object in a clause of 9 tokens, "alpha red square at row one column
two ;", the clauses one after another. Its *wording* is nuisance, drawn independently of the
state: the synonym set (red/crimson, square/block, …), the clause order (forward or reversed)
and the word order ("row r column c" or "column c row r"); or, in place of one synonym set for the
whole caption, a synonym drawn for each colour and shape word on its own (``word_synonyms``). :class:`CaptionStyle` adds the
properties real captions have, each off by default (the default style is the grammar as it
always was, token for token):

* ``wording``: which wording factors vary (the others stay at their first value): "synonyms" (one
  set for the caption: 2 values), "word_synonyms" (one choice per colour and shape word: ``4^O``
  values for O objects; not with "synonyms"), "clause_order" and "word_order" (2 values each);
* ``omission`` ω: each object goes unmentioned with probability ω, independently, given that
  at least one is mentioned (``P(m) ∝ Π_o (1 − ω)^{m_o} ω^{1 − m_o}`` over the non-empty subsets
  m): two captions of one image then describe overlapping subsets of it;
* ``redundancy`` r: with probability r a caption ends with a summary clause that names every
  mentioned object's colour and shape again ("… ; red square blue dot"), in the caption's
  clause order and synonym set: content said twice in one caption.

Every caption keeps one length and one layout: an unmentioned object leaves its clause and its
summary words *blank* (the pad id, the vocabulary size V), and so does an absent summary. A
caption is then the pad-padded row an encoder of (position, token) pairs reads, and the blank
positions are never a next token (:func:`prhsim.worlds.next_token_law`). With ω > 0 the
captions are no longer injective in (z, n): an unmentioned object's attributes do not show.

The nuisance n is the mixed-radix number ``((((synonym·Y + choices)·C + clause)·W + word)·P + pattern)·R
+ summary`` over the factors that vary (a fixed factor has one value; ``choices`` holds the word
synonyms, bit 2o for object o's colour word and bit 2o + 1 for its shape word), so the default
style's n is ``4·synonym + 2·clause + word`` as before. A summary repeats each word with the
synonym it had in its clause.

Declared by parts (:class:`prhsim.worlds.Parts`): one part per object, its clause (and its
two summary words), laid out by one of two coordinate permutations chosen by the clause order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

import numpy as np

from prhsim._types import States
from prhsim.worlds._modality import Modality, Part, Parts

NAMES = ("alpha", "beta", "gamma", "delta")
SHAPE_WORDS = (("square", "block"), ("diagonal", "slash"), ("bar", "strip"), ("cross", "backslash"),
               ("dot", "speck"), ("pillar", "post"))
COLOUR_WORDS = (("red", "crimson"), ("orange", "amber"), ("yellow", "gold"), ("green", "emerald"),
                ("cyan", "teal"), ("blue", "azure"), ("purple", "violet"))
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
WordingFactor = Literal["synonyms", "clause_order", "word_order", "word_synonyms"]
#: The default wording factors, in the order they make up the nuisance.
WORDING_FACTORS: tuple[WordingFactor, ...] = ("synonyms", "clause_order", "word_order")
#: Every wording factor, in the order they make up the nuisance (word synonyms after the caption's synonym set).
ALL_WORDING: tuple[WordingFactor, ...] = ("synonyms", "word_synonyms", "clause_order", "word_order")
#: Tokens of one object's clause and of its summary words.
CLAUSE, SUMMARY = 9, 2


def object_part(scene, o: int, render, name: str) -> Part:
    """A :class:`Part` of object o that reads the object's factors of ``scene.world`` and renders from its
    attributes: ``render(values, n)`` gets (col, row, shape, colour) per state, whether the scene's world holds
    them as four factors or as column, row and the joint (shape, colour) factor (``dependence`` > 0)."""
    if scene.dependence == 0:
        return Part((4 * o, 4 * o + 1, 4 * o + 2, 4 * o + 3), render, name)
    C = scene.n_colours

    def joint(values: np.ndarray, n: States) -> np.ndarray:
        col, row, appearance = np.asarray(values).T
        return render(np.stack([col, row, appearance // C, appearance % C], axis=1), n)

    return Part((3 * o, 3 * o + 1, 3 * o + 2), joint, name)


@dataclass(frozen=True)
class CaptionStyle:
    """How a scene's captions are worded and what they leave out or repeat (module docstring).

    Attributes:
        wording: the wording factors that vary, a subset of :data:`WORDING_FACTORS`.
        omission: ω in [0, 1), the chance that a caption leaves an object unmentioned.
        redundancy: r in [0, 1], the chance that a caption ends with a summary clause.
    """

    wording: tuple[WordingFactor, ...] = WORDING_FACTORS
    omission: float = 0.0
    redundancy: float = 0.0

    def __post_init__(self) -> None:
        wording = tuple(self.wording)
        unknown = [w for w in wording if w not in ALL_WORDING]
        if unknown or len(set(wording)) != len(wording):
            raise ValueError(f"wording must be distinct factors among {ALL_WORDING}, got {wording}")
        if "synonyms" in wording and "word_synonyms" in wording:
            raise ValueError("wording holds synonyms (one set per caption) and word_synonyms (one per word): give one")
        object.__setattr__(self, "wording", tuple(w for w in ALL_WORDING if w in wording))
        if not 0.0 <= float(self.omission) < 1.0:
            raise ValueError(f"omission must lie in [0, 1), got {self.omission}")
        if not 0.0 <= float(self.redundancy) <= 1.0:
            raise ValueError(f"redundancy must lie in [0, 1], got {self.redundancy}")
        object.__setattr__(self, "omission", float(self.omission))
        object.__setattr__(self, "redundancy", float(self.redundancy))

    @property
    def summary(self) -> bool:
        """True when captions have summary positions (``redundancy`` > 0)."""
        return self.redundancy > 0

    @property
    def blanks(self) -> bool:
        """True when some caption has blank positions (an unmentioned object, or an absent summary)."""
        return self.omission > 0 or 0 < self.redundancy < 1

    def length(self, objects: int) -> int:
        """T, the tokens of a caption of ``objects`` objects."""
        return (CLAUSE + (SUMMARY if self.summary else 0)) * objects

    def radices(self, objects: int) -> tuple[int, ...]:
        """The values of each nuisance factor: synonym set, word synonyms, clause order, word order, mention
        pattern, summary."""
        syn, choices, cl, wo = (2 if w in self.wording else 1 for w in ALL_WORDING)
        choices = 4 ** objects if choices == 2 else 1
        patterns = 2 ** objects - 1 if self.omission > 0 else 1
        summaries = 2 if 0 < self.redundancy < 1 else 1
        return (syn, choices, cl, wo, patterns, summaries)

    def nuisance_law(self, objects: int) -> np.ndarray:
        """q over the mixed-radix nuisance (module docstring), uniform over the wording."""
        syn, choices, cl, wo, patterns, summaries = self.radices(objects)
        wordings = syn * choices * cl * wo
        q = np.full(wordings, 1.0 / wordings)
        if patterns > 1:
            masks = np.array(list(itertools.product((0, 1), repeat=objects))[1:])  # non-empty, pattern i = mask i + 1
            weight = np.prod(np.where(masks == 1, 1.0 - self.omission, self.omission), axis=1)
            q = np.kron(q, weight / weight.sum())
        if summaries > 1:
            q = np.kron(q, np.array([1.0 - self.redundancy, self.redundancy]))
        return q

    def decode(self, n: States, objects: int) -> dict[str, np.ndarray]:
        """The factors of nuisance values: colour and shape synonyms (s, objects), clause (1 = reversed), word
        (1 = column first), mentioned (s, objects) booleans, summary (1 = present)."""
        n = np.asarray(n, dtype=np.int64)
        syn_r, choice_r, cl_r, wo_r, pat_r, sum_r = self.radices(objects)
        n, summary = np.divmod(n, sum_r)
        n, pattern = np.divmod(n, pat_r)
        n, word = np.divmod(n, wo_r)
        n, clause = np.divmod(n, cl_r)
        synonym, choices = np.divmod(n, choice_r)
        if choice_r > 1:
            bits = np.arange(objects)
            colour_syn = (choices[:, None] >> (2 * bits)[None, :]) & 1
            shape_syn = (choices[:, None] >> (2 * bits + 1)[None, :]) & 1
        else:
            colour_syn = shape_syn = np.repeat(synonym[:, None], objects, axis=1)
        if pat_r > 1:
            bits = pattern + 1  # pattern i is the mask i + 1 of itertools.product (first object most significant)
            mentioned = (bits[:, None] >> (objects - 1 - np.arange(objects))[None, :]) & 1 == 1
        else:
            mentioned = np.ones((n.size, objects), dtype=bool)
        if self.summary and sum_r == 1:
            summary = np.ones_like(summary)
        return {"colour_synonym": colour_syn, "shape_synonym": shape_syn, "clause": clause, "word": word,
                "mentioned": mentioned, "summary": summary}

    def clause_order_of(self, n: States, objects: int) -> np.ndarray:
        """The layout of each nuisance value: 1 where the clauses are reversed."""
        return self.decode(n, objects)["clause"]


def caption_vocabulary(scene) -> list[str]:
    """The token strings of :func:`caption` (token id = position in this list); the pad id is their count."""
    vocab = ["at", "row", "column", ";"] + list(NAMES[: scene.n_objects])
    vocab += [w for pair in COLOUR_WORDS[: scene.n_colours] for w in pair]
    vocab += [w for pair in SHAPE_WORDS[: scene.n_shapes] for w in pair]
    return vocab + list(NUMBER_WORDS[: scene.size])


def caption(scene, style: CaptionStyle | None = None) -> Modality:
    """Token ids of a templated description, 9 tokens per object (and 2 per object of summary), in ``style``.

    Default style: nuisance (8 values, uniform): synonym set (2) x clause order forward/reversed (2)
    x "row r column c" / "column c row r" (2). Object names keep it injective. With one object
    there is one clause; "reversed" then puts its place ("at row r column c") before its
    description, so the caption stays injective. See the module docstring for the other styles.
    """
    style = style or CaptionStyle()
    O, C, S = scene.n_objects, scene.n_colours, scene.n_shapes
    AT, ROW, COL, SEP, NAME0 = 0, 1, 2, 3, 4
    COLOUR0 = NAME0 + O
    SHAPE0 = COLOUR0 + 2 * C
    NUM0 = SHAPE0 + 2 * S
    PAD = NUM0 + scene.size
    q = style.nuisance_law(O)

    def clause(o: int):
        def render(values: np.ndarray, n: States) -> np.ndarray:
            col, row, shape, colour = values.T
            f = style.decode(n, O)
            c_syn, s_syn, col_first = f["colour_synonym"][:, o], f["shape_synonym"][:, o], f["word"]
            s = len(n)
            row_tok, col_tok = NUM0 + row, NUM0 + col
            first = np.where(col_first == 1, COL, ROW)
            first_val = np.where(col_first == 1, col_tok, row_tok)
            second = np.where(col_first == 1, ROW, COL)
            second_val = np.where(col_first == 1, row_tok, col_tok)
            words = [np.full(s, NAME0 + o), COLOUR0 + 2 * colour + c_syn, SHAPE0 + 2 * shape + s_syn,
                     np.full(s, AT), first, first_val, second, second_val, np.full(s, SEP)]
            if style.summary:
                said = f["summary"] == 1
                words += [np.where(said, COLOUR0 + 2 * colour + c_syn, PAD),
                          np.where(said, SHAPE0 + 2 * shape + s_syn, PAD)]
            rows = np.stack(words, axis=1).astype(np.int32)
            if style.omission > 0:
                rows[~f["mentioned"][:, o]] = PAD
            return rows
        return render

    parts = tuple(object_part(scene, o, clause(o), f"clause {o}") for o in range(O))
    width = style.length(1)  # one part: a clause and its summary words
    objects = np.arange(O)

    def layout(order: np.ndarray, clause_index: np.ndarray) -> np.ndarray:
        """Clauses of the objects in ``order`` (each permuted by ``clause_index``), then their summary words."""
        index = [width * o + clause_index for o in order]
        if style.summary:
            index += [width * o + CLAUSE + np.arange(SUMMARY) for o in order]
        return np.concatenate(index)

    forward = layout(objects, np.arange(CLAUSE))
    if O == 1:  # the place ("at row r column c") before the description
        backward = layout(objects, np.r_[3:8, 0:3, 8])
    else:  # the clauses in reverse order
        backward = layout(objects[::-1], np.arange(CLAUSE))
    if "clause_order" in style.wording:
        spec = Parts(parts, (style.length(O),), np.stack([forward, backward]),
                     layout_of=lambda n: style.clause_order_of(n, O))
    else:
        spec = Parts(parts, (style.length(O),), forward[None])
    described = "templated caption (token ids); nuisance: " + (" x ".join(
        {"synonyms": "synonyms", "word_synonyms": "word synonyms", "clause_order": "clause order",
         "word_order": "word order"}[w]
        for w in style.wording) or "none")
    if style.omission > 0:
        described += f" x mentions (each object omitted w.p. {style.omission:g})"
    if 0 < style.redundancy < 1:
        described += f" x summary (w.p. {style.redundancy:g})"
    return Modality("caption", q, description=described, n_states=scene.n, factor_sizes=scene.world.shape, parts=spec)
