"""The linear class on caption features: its moments against twins written from their definitions (the enumerated
span and next-token laws, loops over records), the solver against a generalised eigensolver, and the limit N → ∞."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg

from support import assert_close, dense
from prhsim.optima import linear_optimum, next_token_moments, span_moments
from prhsim.optima._linear_captions import one_hot, pooled_prefixes
from prhsim.worlds import CaptionStyle, Records, SpanLaw, caption_law, gridscene, next_token_law, span_world

STYLES = [CaptionStyle(), CaptionStyle(omission=0.4, redundancy=0.5, wording=("synonyms", "word_order"))]


def _scene():
    return gridscene(2, 1, 2, 2, move=[(0.5, 0.6)], shape_change=[0.3], colour_change=[0.4], dependence=0.5)


def _phi(rows, V):
    return one_hot(rows, V).toarray()


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("view", ["good", "bad"])
@pytest.mark.parametrize("with_world", [False, True])
def test_population_span_moments_are_the_span_worlds(style, view, with_world):
    """``C = ΦᵀD_XΦ − μμᵀ``, ``M = ΦᵀΠ_XΦ − μμᵀ`` over the enumerated distinct spans (docs/theory.md §0's restricted
    encoder class on the span world)."""
    scene = _scene()
    law = caption_law(scene, style)
    spans = SpanLaw(6)
    world = scene.world if with_world else None
    sw = span_world(law, spans, view, world)
    Phi = _phi(sw.tokens, law.vocab_size)
    p, Pi = sw.world.p, dense(sw.world.Pi)
    mu = Phi.T @ p
    mom = span_moments(law, spans, view, world=world)
    assert_close(mom.mean, mu, atol=1e-13)
    assert_close(mom.cov, Phi.T @ (Phi * p[:, None]) - np.outer(mu, mu), atol=1e-13)
    assert_close(mom.cross, Phi.T @ Pi @ Phi - np.outer(mu, mu), atol=1e-13)


def _loop_span_moments(law, spans, view, records):
    """The moments from loops: each record's view pairs as the learner draws them, every (start, length) of each."""
    start, length, weight = spans.table(law.length)
    T, V = law.length, law.vocab_size
    D = T * V
    mean, second, cross = np.zeros(D), np.zeros((D, D)), np.zeros((D, D))

    def cut(caption):
        out = []
        for s, L, w in zip(start, length, weight):
            row = np.where((np.arange(T) >= s) & (np.arange(T) < s + L), caption, law.pad)
            out.append((_phi(row[None], V)[0], w))
        return out

    N, C, _ = records.tokens.shape
    for r in range(N):
        caps = records.tokens[r]
        if view == "good" or records.paired:
            pairs = [(caps[i], caps[j], 1.0 / (C * (C - 1))) for i, j in itertools.permutations(range(C), 2)]
        else:
            pairs = [(caps[i], caps[i], 1.0 / C) for i in range(C)]
        for a, b, w_pair in pairs:
            for (x, wx), (y, wy) in itertools.product(cut(a), cut(b)):
                w = w_pair * wx * wy / N
                mean += w * (x + y) / 2
                second += w * (np.outer(x, x) + np.outer(y, y)) / 2
                cross += w * (np.outer(x, y) + np.outer(y, x)) / 2
    return mean, second - np.outer(mean, mean), cross - np.outer(mean, mean)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("view,kind", [("good", "pairs"), ("bad", "pairs"), ("good", "same"), ("bad", "same")])
def test_empirical_span_moments_match_loops_over_every_span(style, view, kind):
    scene = _scene()
    law = caption_law(scene, style)
    spans = SpanLaw(7)
    if kind == "pairs":
        records = law.sample_pairs(scene.world, 5, wording="independent" if view == "good" else "shared", rng=1)
    else:
        records = law.sample(5, 3 if view == "good" else 2, rng=1)
    mom = span_moments(law, spans, view, records=records)
    mean, cov, cross = _loop_span_moments(law, spans, view, records)
    assert mom.records == 5
    assert_close(mom.mean, mean, atol=1e-13)
    assert_close(mom.cov, cov, atol=1e-13)
    assert_close(mom.cross, cross, atol=1e-13)


@pytest.mark.parametrize("style", STYLES)
def test_population_next_token_moments_are_the_next_token_laws(style):
    law = caption_law(_scene(), style)
    ntl = next_token_law(law)
    Psi = _phi(ntl.contexts, law.vocab_size)
    p_c, p_y = ntl.joint.sum(axis=1), ntl.joint.sum(axis=0)
    mu = Psi.T @ p_c
    mom = next_token_moments(law)
    assert_close(mom.tokens, p_y, atol=1e-14)
    assert_close(mom.mean, mu, atol=1e-13)
    assert_close(mom.cov, Psi.T @ (Psi * p_c[:, None]) - np.outer(mu, mu), atol=1e-13)
    assert_close(mom.cross, Psi.T @ ntl.joint - np.outer(mu, p_y), atol=1e-13)
    # a caption's pooled context is the mean over its prefixes that have a target
    n_n = law.modality.n_nuisance
    units = np.arange(law.n_states * n_n)
    captions = law.captions(units // n_n, units % n_n)
    pooled = pooled_prefixes(captions, law.pad, law.vocab_size).toarray()
    assert_close(pooled, ntl.pool(Psi), atol=1e-13)


def test_empirical_next_token_moments_match_loops():
    law = caption_law(_scene(), STYLES[1])
    records = law.sample(7, 2, rng=3)
    T, V = law.length, law.vocab_size
    D = T * V
    mean, second, cross, p_y = np.zeros(D), np.zeros((D, D)), np.zeros((D, V)), np.zeros(V)
    for caption in records.tokens.reshape(-1, T):
        targets = [t for t in range(1, T) if caption[t] != law.pad]
        for t in targets:
            w = 1.0 / (records.tokens.shape[0] * records.tokens.shape[1] * len(targets))
            psi = _phi(np.where(np.arange(T) < t, caption, law.pad)[None], V)[0]
            mean += w * psi
            second += w * np.outer(psi, psi)
            cross[:, caption[t]] += w * psi
            p_y[caption[t]] += w
    mom = next_token_moments(law, records=records)
    assert_close(mom.mean, mean, atol=1e-13)
    assert_close(mom.cov, second - np.outer(mean, mean), atol=1e-13)
    assert_close(mom.cross, cross - np.outer(mean, p_y), atol=1e-13)


def test_records_holding_every_caption_once_give_the_law():
    """Uniform p and q: one record per caption is the law itself (two spans of one caption; next-token prediction)."""
    scene = gridscene(2, 1, 2, 2)
    law = caption_law(scene)
    assert np.ptp(law.p) == 0 and np.ptp(law.q) == 0
    n_n = law.modality.n_nuisance
    units = np.arange(law.n_states * n_n)
    tokens = law.captions(units // n_n, units % n_n)[:, None, :]
    records = Records(units // n_n, (units % n_n)[:, None], tokens)
    for empirical, population in ((span_moments(law, SpanLaw(5), "bad", records=records),
                                   span_moments(law, SpanLaw(5), "bad", world=None)),
                                  (next_token_moments(law, records=records), next_token_moments(law))):
        for a, b in zip(empirical[1:4], population[1:4]):
            assert_close(a, b, atol=1e-14)


@pytest.mark.parametrize("task", ["good", "ntp"])
def test_the_solver_is_the_generalised_problem(task):
    """With a ridge C is definite: W solves (M, C) as scipy's generalised eigensolver does (JEPA), or is the CCA of a
    definite context covariance (ntp): WᵀCW = I and the objective's matrix is diagonal with the values."""
    scene = _scene()
    law = caption_law(scene, CaptionStyle(wording=("synonyms",)))
    mom = next_token_moments(law) if task == "ntp" else span_moments(law, SpanLaw(6), "good", world=scene.world)
    ridge = 1e-3
    opt = linear_optimum(mom, 3, ridge=ridge)
    C = mom.cov + ridge * np.trace(mom.cov) / mom.cov.shape[0] * np.eye(mom.cov.shape[0])
    W = opt.weights
    assert_close(W.T @ C @ W, np.eye(3), atol=1e-9)
    if task == "ntp":
        seen = mom.tokens > 0
        G = W.T @ mom.cross[:, seen] / np.sqrt(mom.tokens[seen])
        assert_close(np.linalg.svd(G, compute_uv=False), opt.values[:3], atol=1e-9)
        L = np.linalg.cholesky(C)
        naive = scipy.linalg.solve_triangular(L, mom.cross[:, seen], lower=True) / np.sqrt(mom.tokens[seen])
        assert_close(np.linalg.svd(naive, compute_uv=False)[:4], opt.values, atol=1e-9)
    else:
        assert_close(W.T @ mom.cross @ W, np.diag(opt.values[:3]), atol=1e-9)
        naive = scipy.linalg.eigh(mom.cross, C, eigvals_only=True)[::-1]
        assert_close(naive[:4], opt.values, atol=1e-9)


def test_the_empirical_optimum_approaches_the_restricted_closed_form():
    """Davis–Kahan with a sample covariance: the subspace error falls about like 1/√N (a slope near −1/2)."""
    scene = gridscene(2, 1, 2, 2)
    law = caption_law(scene, CaptionStyle(wording=("synonyms",)))
    spans = SpanLaw(5)
    k = 3
    limit = linear_optimum(span_moments(law, spans, "good", world=scene.world), k)
    assert limit.gap > 0.05
    n_n = law.modality.n_nuisance
    units = np.arange(law.n_states * n_n)
    rows = law.captions(units // n_n, units % n_n)
    w = (law.p[:, None] * law.q[None, :]).ravel()

    def basis(F):
        F = (F - w @ F) * np.sqrt(w)[:, None]
        return np.linalg.qr(F)[0]

    target = basis(limit.captions(rows, law.pad))
    budgets = [100, 1000, 10000]
    errors = []
    for N in budgets:
        dist = []
        for seed in range(6):
            records = law.sample_pairs(scene.world, N, rng=np.random.default_rng([N, seed]))
            opt = linear_optimum(span_moments(law, spans, "good", records=records), k)
            B = basis(opt.captions(rows, law.pad))
            dist.append(np.linalg.norm(B @ B.T - target @ target.T) / np.sqrt(2 * k))
        errors.append(np.mean(dist))
    slope = np.polyfit(np.log(budgets), np.log(errors), 1)[0]
    assert errors[-1] < 0.05 and -0.75 < slope < -0.3, (errors, slope)


def test_bad_arguments_are_named():
    law = caption_law(gridscene(2, 1, 2, 2))
    mom = next_token_moments(law)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        linear_optimum(mom, 0)
    with pytest.raises(ValueError, match="ridge"):
        linear_optimum(mom, 2, ridge=-1.0)
    with pytest.raises(ValueError, match="fewer than k \\+ 1"):
        linear_optimum(mom, 500)
    with pytest.raises(ValueError, match="'good' or 'bad'"):
        span_moments(law, SpanLaw(3), "ntp")
    with pytest.raises(ValueError, match="at least 2 captions"):
        span_moments(law, SpanLaw(3), "good", records=law.sample(4, 1, rng=0))


@pytest.mark.parametrize("task", ["good", "bad", "ntp"])
def test_combined_moments_are_the_moments_of_all_the_records(task):
    from prhsim.optima import combine_moments

    scene = _scene()
    law = caption_law(scene, STYLES[1])
    if task == "ntp":
        records = law.sample(40, 1, rng=5)
        moments = lambda r: next_token_moments(law, records=r)  # noqa: E731
    else:
        records = law.sample_pairs(scene.world, 40, wording="independent" if task == "good" else "shared", rng=5)
        moments = lambda r: span_moments(law, SpanLaw(6), task, records=r)  # noqa: E731
    part = lambda a, b: Records(records.states[a:b], records.nuisance[a:b], records.tokens[a:b], records.pad)  # noqa: E731
    joined = combine_moments(moments(part(0, 13)), moments(part(13, 40)))
    whole = moments(records)
    assert joined.records == 40
    for a, b in zip(joined[1:5], whole[1:5]):
        assert_close(a, b, atol=1e-14)
    other = next_token_moments(law, records=records) if task != "ntp" else span_moments(law, SpanLaw(6), "bad",
                                                                                          records=records)
    with pytest.raises(ValueError, match="one task"):
        combine_moments(whole, other)
