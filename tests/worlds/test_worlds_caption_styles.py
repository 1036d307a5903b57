"""Caption worlds with the properties real captions have: dependence, partial captions, redundancy, wording size.

Each is checked against a twin written from its definition, and the default settings against the values the
caption law had before the settings existed (tests/worlds/data/caption_law_before_styles.json, computed with
that code)."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from support import assert_close, dense
from prhsim.optima import closed_form, next_token_optimum, span_optimum
from prhsim.worlds import (
    CaptionStyle,
    FiniteWorld,
    SpanLaw,
    caption_law,
    gridscene,
    metropolis,
    next_token_law,
    pixels,
    resampling,
    span_world,
    view_world,
    good,
)

BEFORE = json.loads((Path(__file__).parent / "data" / "caption_law_before_styles.json").read_text())


def _hash(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("args", [(2, 1, 2, 2), (3, 2, 2, 2), (4, 2, 2, 2)])
def test_the_default_style_is_the_caption_law_as_it_was(args):
    """Token for token, state law and pair law bit for bit, closed forms to 1e-12."""
    scene = gridscene(*args)
    law = caption_law(scene)
    key = "x".join(map(str, args))
    n_n = law.modality.n_nuisance
    units = np.arange(law.n_states * n_n)
    assert _hash(law.captions(units // n_n, units % n_n)) == BEFORE[key + "/captions"]
    assert _hash(scene.world.p) == BEFORE[key + "/p"]
    assert _hash(dense(scene.world.to_finite().Pi)) == BEFORE[key + "/Pi"]
    assert law.q.tolist() == BEFORE[key + "/q"] and not law.blanks
    if args[0] <= 3:
        ntl = next_token_law(law)
        assert _hash(ntl.joint) == BEFORE[key + "/ntl_joint"] and _hash(ntl.captions) == BEFORE[key + "/ntl_captions"]
        # k = 4 lies inside a tie (σ = 1 eight times over): the values are the optimum, not the basis
        assert_close(next_token_optimum(law, 4).eigenvalues, BEFORE[key + "/ntp_values"], atol=1e-12)
        for view in ("good", "bad"):
            o = span_optimum(law, SpanLaw(7 if args[0] == 2 else 9), view, 4, world=scene.world)
            assert_close(o.eigenvalues, BEFORE[key + f"/{view}_values"], atol=1e-12)


# --------------------------------------------------------------------------------------
# dependence: the Metropolis pair law and the dependent appearance of each object
# --------------------------------------------------------------------------------------
def _naive_metropolis(p, Pi0):
    """Metropolis from its definition: propose from Q = D₀⁻¹Π₀, accept w.p. min(1, p(b)Q(b,a) / (p(a)Q(a,b)))."""
    p0 = Pi0.sum(axis=1)
    Q = Pi0 / p0[:, None]
    n = len(p)
    P = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            if a != b and Q[a, b] > 0:
                P[a, b] = Q[a, b] * min(1.0, p[b] * Q[b, a] / (p[a] * Q[a, b]))
        P[a, a] = 1.0 - P[a].sum()
    return p[:, None] * P


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.integers(0, 10_000))
def test_metropolis_matches_its_definition_and_keeps_p(n, seed):
    rng = np.random.default_rng(seed)
    proposal = resampling(rng.dirichlet(np.ones(n)), rng.uniform(0.1, 0.9))
    p = rng.dirichlet(np.ones(n)) * 0.9 + 0.1 / n
    world = metropolis(p, proposal)
    assert_close(dense(world.Pi), _naive_metropolis(p, dense(proposal.Pi)), atol=1e-14)
    assert_close(dense(world.Pi).sum(axis=0), p, atol=1e-14)
    assert np.all(dense(world.Pi) >= 0)


def test_metropolis_towards_the_proposals_own_law_is_the_proposal():
    proposal = resampling(np.array([0.2, 0.3, 0.5]), 0.4)
    assert_close(dense(metropolis(proposal.p, proposal).Pi), dense(proposal.Pi), atol=1e-15)
    with pytest.raises(ValueError, match="positive law over the proposal's 3 states"):
        metropolis([0.5, 0.5], proposal)


@pytest.mark.parametrize("rho", [0.3, 0.8])
def test_a_dependent_scene_has_the_appearance_law_and_the_same_modalities(rho):
    scene, free = gridscene(2, 2, 2, 3, dependence=rho), gridscene(2, 2, 2, 3)
    S, C = 2, 3
    law = (rho * (np.arange(S)[:, None] % C == np.arange(C)[None, :]) + (1 - rho) / C) / S
    assert_close(scene.appearance_law(), law, atol=1e-15)
    attrs = scene.decode(np.arange(scene.n))
    p = scene.world.p
    for o in range(2):  # P(colour = shape mod C) = ρ + (1 − ρ)/C for each object
        follows = attrs["colour"][:, o] == attrs["shape"][:, o] % C
        assert_close(p[follows].sum(), rho + (1 - rho) / C, atol=1e-12)
        # column and row keep their own independent laws
        assert_close(np.bincount(attrs["col"][:, o], weights=p), np.full(2, 0.5), atol=1e-12)
    assert scene.world.shape == (2, 2, 6) * 2 and free.world.shape == (2, 2, 2, 3) * 2
    z, n = np.arange(scene.n), np.zeros(scene.n, dtype=int)
    for a, b in zip(scene.modalities(rng=0), free.modalities(rng=0)):  # the states keep their index and renders
        assert np.array_equal(a.render(z, n), b.render(z, n))
        assert view_world(scene.world, a, good()).n == scene.n * a.n_nuisance
    with pytest.raises(ValueError, match=r"dependence must lie in \[0, 1\)"):
        gridscene(2, dependence=1.0)


# --------------------------------------------------------------------------------------
# partial captions, redundancy, wording
# --------------------------------------------------------------------------------------
def _naive_caption(scene, style, z, n):
    """A caption written out from the style's definition (module docstring of prhsim.worlds._scene_captions)."""
    vocab = scene_vocab = __import__("prhsim.worlds", fromlist=["caption_vocabulary"]).caption_vocabulary(scene)
    O = scene.n_objects
    radix = style.radices(O)
    digits = []
    rest = n
    for r in reversed(radix):
        rest, d = divmod(rest, r)
        digits.append(d)
    summary, pattern, word, clause, choices, synonym = digits
    if radix[1] > 1:  # a synonym per word: bit 2o for object o's colour word, 2o + 1 for its shape word
        colour_syn = [(choices >> (2 * o)) & 1 for o in range(O)]
        shape_syn = [(choices >> (2 * o + 1)) & 1 for o in range(O)]
    else:
        colour_syn = shape_syn = [synonym] * O
    masks = list(itertools.product((0, 1), repeat=O))[1:]
    mentioned = masks[pattern] if radix[4] > 1 else (1,) * O
    said = summary == 1 if radix[5] > 1 else style.redundancy > 0
    attrs = scene.decode(np.array([z]))
    names = ["alpha", "beta", "gamma", "delta"]
    colours = [("red", "crimson"), ("orange", "amber"), ("yellow", "gold"), ("green", "emerald")]
    shapes = [("square", "block"), ("diagonal", "slash"), ("bar", "strip")]
    numbers = ["zero", "one", "two", "three"]
    order = list(range(O))[::-1] if clause == 1 and O > 1 else list(range(O))
    clauses, summaries = [], []
    for o in order:
        col, row = attrs["col"][0, o], attrs["row"][0, o]
        shape, colour = attrs["shape"][0, o], attrs["colour"][0, o]
        place = (["column", numbers[col], "row", numbers[row]] if word == 1 else ["row", numbers[row], "column", numbers[col]])
        words = [names[o], colours[colour][colour_syn[o]], shapes[shape][shape_syn[o]], "at"] + place + [";"]
        if clause == 1 and O == 1:
            words = words[3:8] + words[0:3] + words[8:]
        summ = [colours[colour][colour_syn[o]], shapes[shape][shape_syn[o]]] if said else [None, None]
        if not mentioned[o]:
            words, summ = [None] * 9, [None, None]
        clauses += words
        summaries += summ
    words = clauses + (summaries if style.redundancy > 0 else [])
    pad = len(vocab)
    return [pad if w is None else vocab.index(w) for w in words]


@pytest.mark.parametrize("style", [
    CaptionStyle(),
    CaptionStyle(omission=0.3),
    CaptionStyle(redundancy=0.4),
    CaptionStyle(redundancy=1.0, wording=("synonyms",)),
    CaptionStyle(omission=0.5, redundancy=0.5, wording=("clause_order", "word_order")),
    CaptionStyle(wording=()),
    CaptionStyle(wording=("word_synonyms",), redundancy=0.5),
    CaptionStyle(wording=("word_synonyms", "clause_order"), omission=0.3),
])
@pytest.mark.parametrize("objects", [1, 2])
def test_captions_follow_their_style(style, objects):
    scene = gridscene(2, objects, 2, 2)
    law = caption_law(scene, style)
    n_n = law.modality.n_nuisance
    assert law.length == style.length(objects) and law.blanks == style.blanks
    assert_close(law.q.sum(), 1.0, atol=1e-14)
    for z, n in itertools.product(range(0, scene.n, 5), range(n_n)):
        assert law.captions([z], [n])[0].tolist() == _naive_caption(scene, style, z, n), (z, n)


def test_the_nuisance_law_of_partial_and_redundant_captions():
    style = CaptionStyle(omission=0.25, redundancy=0.4, wording=("synonyms",))
    q = style.nuisance_law(2).reshape(2, 3, 2)  # synonym set x pattern x summary
    pattern = np.array([0.25 * 0.75, 0.75 * 0.25, 0.75 * 0.75])  # beta only, alpha only, both
    naive = np.einsum("s,p,r->spr", [0.5, 0.5], pattern / pattern.sum(), [0.6, 0.4])
    assert_close(q, naive, atol=1e-15)
    with pytest.raises(ValueError, match="omission"):
        CaptionStyle(omission=1.0)
    with pytest.raises(ValueError, match="wording"):
        CaptionStyle(wording=("synonyms", "tense"))
    with pytest.raises(ValueError, match="give one"):
        CaptionStyle(wording=("synonyms", "word_synonyms"))
    assert CaptionStyle(wording=("word_synonyms",)).nuisance_law(2).size == 16


def test_blanks_are_neither_counted_nor_predicted():
    scene = gridscene(2, 2, 2, 2)
    law = caption_law(scene, CaptionStyle(omission=0.5, redundancy=0.5))
    records = law.sample(300, 2, rng=0)
    assert records.tokens_seen() == int(np.count_nonzero(records.tokens != law.pad)) < records.tokens.size
    ntl = next_token_law(law)
    assert ntl.joint.shape[1] == law.vocab_size  # the pad id is no target
    n_n = law.modality.n_nuisance
    units = np.arange(law.n_states * n_n)
    captions = law.captions(units // n_n, units % n_n)
    assert np.array_equal(ntl.captions >= 0, captions[:, 1:] != law.pad)
    # the naive law: each caption's targets weighted 1/L, contexts the prefix rows
    joint: dict[tuple[bytes, int], float] = {}
    for u, caption in enumerate(captions):
        targets = [t for t in range(1, law.length) if caption[t] != law.pad]
        for t in targets:
            prefix = np.where(np.arange(law.length) < t, caption, law.pad).astype(np.int32).tobytes()
            key = (prefix, int(caption[t]))
            joint[key] = joint.get(key, 0.0) + law.p[u // n_n] * law.q[u % n_n] / len(targets)
    rows = {row.tobytes(): i for i, row in enumerate(ntl.contexts)}
    naive = np.zeros_like(ntl.joint)
    for (prefix, y), v in joint.items():
        naive[rows[prefix], y] += v
    assert_close(ntl.joint, naive, atol=1e-15)
    pooled = ntl.pool(np.arange(ntl.joint.shape[0], dtype=float)[:, None])
    u = 7
    valid = ntl.captions[u][ntl.captions[u] >= 0]
    assert_close(pooled[u, 0], valid.mean(), atol=1e-12)


@pytest.mark.parametrize("style", [CaptionStyle(omission=0.4), CaptionStyle(redundancy=0.5, wording=("synonyms",))])
@pytest.mark.parametrize("view", ["good", "bad"])
def test_span_optimum_on_styled_captions_equals_the_enumerated_span_world(style, view):
    """The operator closed form against the dense span world (whose law is itself checked against loops)."""
    scene = gridscene(2, 1, 2, 2, dependence=0.5)
    law = caption_law(scene, style)
    spans = SpanLaw(6)
    fast = span_optimum(law, spans, view, 3, world=scene.world)
    sw = span_world(law, spans, view, scene.world)
    slow = closed_form(sw.world, 3)
    assert_close(fast.eigenvalues[:4], slow.eigenvalues[:4], atol=1e-10)
    if fast.unique:
        from prhsim.worlds._span_worlds import span_emission

        rows = span_emission(law, spans, view).captions
        a, b = fast.captions, slow.features(rows)
        w = (law.p[:, None] * law.q[None, :]).ravel()
        # one subspace: the p-weighted projectors agree
        qa, qb = np.linalg.qr(np.sqrt(w)[:, None] * a)[0], np.linalg.qr(np.sqrt(w)[:, None] * b)[0]
        assert np.linalg.norm(qa @ qa.T - qb @ qb.T) < 1e-7


def test_next_token_optimum_on_a_dependent_world_carries_the_colour():
    """Shapes follow colours: the next token after a colour word depends on it, so CA's features vary with z.

    The template fills the top of the spectrum (seven features of σ = 1: the position says which kind of word
    comes next, the first colour word says the synonym set); the colour's feature, of σ = ρ = 0.8, comes eighth."""
    style = CaptionStyle(wording=("synonyms",))
    free = next_token_optimum(caption_law(gridscene(2, 1, 2, 2), style), 8)
    dep = next_token_optimum(caption_law(gridscene(2, 1, 2, 2, dependence=0.8), style), 8)
    assert_close(free.eigenvalues, np.r_[np.ones(7), 0.0], atol=1e-12)  # nothing but the template: σ_8 = 0
    assert_close(dep.eigenvalues, np.r_[np.ones(7), 0.8], atol=1e-12)
    spread_free = free.captions[:, :7].reshape(-1, 2, 7).std(axis=0).max()  # across states, per wording and feature
    spread_dep = dep.captions[:, 7].reshape(-1, 2).std(axis=0).max()
    assert spread_free < 1e-10 < 0.1 < spread_dep
