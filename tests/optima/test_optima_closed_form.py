"""Closed-form optima: Ky Fan value, whitening, centring, ties, spectral contrastive (docs/theory.md §1)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from support import assert_close, dense
from prhsim.optima import (
    top_eigenpairs,
    TieWarning,
    alignment_loss,
    closed_form,
    pick_k,
    spectral_contrastive_loss,
    spectral_contrastive_optimum,
    whitened_optimum,
    whitening_error,
)
from prhsim.metrics import principal_angles
from prhsim.worlds import FiniteWorld, ProductWorld, gridscene, random_world, ring, same_sample


def naive_alignment_loss(world: FiniteWorld, F: np.ndarray) -> float:
    """E_π‖f(z) − f(z')‖² as the double sum over Π (the definition)."""
    Pi = dense(world.Pi)
    diff = F[:, None, :] - F[None, :, :]
    return float(np.sum(Pi * np.sum(diff**2, axis=2)))


def naive_sc_loss(world: FiniteWorld, F: np.ndarray) -> float:
    """−2 E_π f(z)ᵀf(z') + E_{p⊗p}(f(z)ᵀf(z''))² as double sums."""
    Pi, p = dense(world.Pi), world.p
    inner = F @ F.T
    return float(-2 * np.sum(Pi * inner) + np.sum(np.outer(p, p) * inner**2))


def random_feasible(world, k, rng, centred):
    """A random F with FᵀDF = I (and E_p f = 0 when centred)."""
    X = rng.normal(size=(world.n, k))
    if centred:
        X = X - world.p @ X
    G, _ = np.linalg.qr(np.sqrt(world.p)[:, None] * X)
    return G / np.sqrt(world.p)[:, None]


@given(n=st.integers(4, 30), seed=st.integers(0, 10_000), centred=st.booleans(), data=st.data())
@settings(max_examples=60)
def test_ky_fan_value_attained_and_beats_random_feasible(n, seed, centred, data):
    w = random_world(n, rng=seed)
    k = data.draw(st.integers(1, n - 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)
        opt = whitened_optimum(w, k, centred=centred)
    F = opt.F
    assert whitening_error(w, F) < 1e-10
    assert_close(naive_alignment_loss(w, F), opt.value, atol=1e-10)
    assert_close(alignment_loss(w, F), opt.value, atol=1e-10)
    if centred:
        assert_close(w.p @ F, np.zeros(k), atol=1e-10)
    rng = np.random.default_rng(seed)
    for _ in range(5):
        assert naive_alignment_loss(w, random_feasible(w, k, rng, centred)) >= opt.value - 1e-10


def test_centred_value_and_spectrum_are_lambda_2_onwards():
    w = random_world(20, rng=5)
    lam = np.sort(np.linalg.eigvalsh(w.kernel_matrix()))[::-1]
    c = whitened_optimum(w, 4)
    u = whitened_optimum(w, 4, centred=False)
    assert_close(c.eigenvalues, lam[1:6])
    assert_close(u.eigenvalues, lam[:5])
    assert_close(c.value, 2 * np.sum(1 - lam[1:5]))
    assert_close(u.F[:, 0] * np.sign(u.F[0, 0]), np.ones(20), what="uncentred optimum contains the constant")


def test_deflation_is_minus_3ssT_not_minus_ssT():
    """With an indefinite K, s parked at 0 would sit inside the spectrum; at -2 it never does."""
    w = random_world(40, rng=9)
    lam = np.sort(np.linalg.eigvalsh(w.kernel_matrix()))[::-1]
    assert lam[-1] < 0
    opt = whitened_optimum(w, 38)  # asks for λ_2 … λ_40, including the negative ones
    assert_close(opt.eigenvalues, lam[1:40])


def test_ring_gap_vs_tie():
    w = ring(12)
    opt = whitened_optimum(w, 2)
    assert opt.unique and opt.gap > 0.1
    with pytest.warns(TieWarning, match=r"k=3 splits a tie: mu_3..mu_4"):
        tied = whitened_optimum(w, 3)
    assert not tied.unique and tied.gap < 1e-12


def test_tie_is_a_continuum_of_different_subspaces():
    """At a tie, swapping in the (k+1)-th eigenvector keeps the value but changes the subspace (§1.2)."""
    w = ring(12)
    with pytest.warns(TieWarning):
        opt = whitened_optimum(w, 3)
    H = opt.basis.evaluate()
    other = H[:, [0, 1, 3]]
    assert_close(alignment_loss(w, other), opt.value)
    assert principal_angles(opt.F, other, w.p).s_theta > 0.5


def naive_pick_k(values, centred=True, criterion="relative"):
    """The auto-k rule from its definition: a loop over k, the first k within 1e-9 (relative) of the best score."""
    values = [float(v) for v in values]
    ks = range(1 if centred else 2, len(values))
    scores = {}
    for k in ks:
        gap, room = values[k - 1] - values[k], 1.0 - values[k]
        scores[k] = gap if criterion == "absolute" else (gap / room if room > 1e-12 else 0.0)
    best = max(scores.values())
    return min(k for k in ks if scores[k] >= best - 1e-9 * abs(best))


def test_auto_k_keeps_the_default_gridscene_at_10_and_takes_the_ring_s_first_pair():
    assert closed_form(gridscene().world).k == 10
    opt = closed_form(ring(64))
    assert opt.k == 2 and opt.unique and opt.criterion == "relative"  # the old absolute rule took k = 30
    assert closed_form(ring(64), criterion="absolute").k == 30
    assert closed_form(ring(64), centred=False).k == 3  # the constant plus the same slow pair
    assert closed_form(ring(64), 4).criterion is None  # k given: no criterion chose it


@given(seed=st.integers(0, 10_000), n=st.integers(4, 40), loops=st.sampled_from([0.0, 0.5, 3.0]),
       criterion=st.sampled_from(["relative", "absolute"]))
@settings(max_examples=40)
def test_auto_k_matches_the_naive_rule_and_uncentred_adds_the_constant(seed, n, loops, criterion):
    w = random_world(n, rng=seed, self_loop=loops)
    lam = np.sort(np.linalg.eigvalsh(w.kernel_matrix()))[::-1]
    window = min(32, n - 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)
        c = closed_form(w, criterion=criterion)
        u = whitened_optimum(w, centred=False, criterion=criterion)
        sc = spectral_contrastive_optimum(w, criterion=criterion)
    assert c.k == naive_pick_k(lam[1 : window + 2], criterion=criterion)
    assert u.k == sc.k == c.k + 1 >= 2
    assert u.k == naive_pick_k(lam[: window + 2], centred=False, criterion=criterion)


@given(seed=st.integers(0, 10_000), eps=st.floats(0.05, 0.95))
@settings(max_examples=25)
def test_auto_k_ignores_laziness(seed, eps):
    """(x, x) w.p. 1−ε maps μ to 1 − ε(1 − μ) (§4, bad view B): every relative gap, hence k, is unchanged."""
    w = random_world(16, rng=seed, self_loop=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)
        assert closed_form(same_sample(w, eps)).k == closed_form(w).k


def test_auto_k_on_a_disconnected_world_takes_the_component_indicators():
    """Three components: λ_2 = λ_3 = 1, so r_1 = 0 (no Laplacian room) and r_2 = 1, the largest possible."""
    parts = [ring(5), ring(6), ring(7)]
    n = sum(w.n for w in parts)
    p = np.concatenate([w.p * w.n / n for w in parts])
    Pi = np.zeros((n, n))
    start = 0
    for w in parts:
        Pi[start : start + w.n, start : start + w.n] = dense(w.Pi) * w.n / n
        start += w.n
    opt = closed_form(FiniteWorld(p, Pi))
    assert opt.k == 2 and opt.unique
    assert_close(opt.eigenvalues[:2], [1.0, 1.0])


def test_pick_k_breaks_rounding_ties_towards_the_first_k():
    # absolute gaps 0.25, 0.25, 0.25 in exact arithmetic; in floating point the second is the largest
    values = np.array([0.8, 0.55, 0.3, 0.05])
    assert int(np.argmax(values[:-1] - values[1:])) == 1
    assert pick_k(values, criterion="absolute") == 1
    # relative gaps 1 − ℓ_k/ℓ_{k+1} = 0.5 for ℓ = 1 − μ = 0.1, 0.2, 0.4, 0.8; rounding favours the second
    values = np.array([0.9, 0.8, 0.6, 0.2])
    scores = (values[:-1] - values[1:]) / (1 - values[1:])
    assert int(np.argmax(scores)) == 1
    assert pick_k(values) == 1
    assert pick_k(np.array([1.0, 0.9, 0.2, 0.1]), criterion="absolute") == 2
    assert pick_k(np.array([0.9, 0.8, 0.2, 0.1]), k_min=3) == 3


def test_spectral_contrastive_exact_tie_picks_the_first_k():
    """ring(12): uncentred gaps at k = 5 and k = 7 are both 0.25 exactly; rounding made the old rule take 7."""
    values = top_eigenpairs(ring(12), 12, centred=False).values
    gaps = values[:-1] - values[1:]
    assert_close(gaps[4], gaps[6]) and int(np.argmax(gaps)) == 6
    assert pick_k(values, centred=False, criterion="absolute") == 5
    assert spectral_contrastive_optimum(ring(12), criterion="absolute").k == 5
    assert spectral_contrastive_optimum(ring(12)).k == 3  # relative: the constant and the first cos pair


@pytest.mark.parametrize("call, message", [
    (lambda: pick_k(np.array([0.9, 0.5]), criterion="largest"), "criterion must be 'relative' or 'absolute'"),
    (lambda: pick_k(np.array([0.9, 0.8, 0.5]), centred=False), r"must start with the trivial lambda_1 = 1, got 0\.9"),
    (lambda: pick_k(np.array([0.9, np.nan, 0.5])), r"finite eigenvalues, got values\[1\] = nan"),
    (lambda: pick_k(np.array([1.0, 0.5]), centred=False), r"k range \[2, 1\] is empty"),
    (lambda: pick_k(np.array([0.9, 0.5]), k_max=2), "exceeds the 2 eigenvalues"),
    (lambda: closed_form(ring(8), criterion="largest"), "criterion must be"),
    (lambda: closed_form(FiniteWorld(np.full(2, 0.5), np.eye(2) / 2)), "a world of 2 states has no k to choose"),
])
def test_pick_k_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_spectral_contrastive_optimum_matches_definition_and_beats_random():
    w = random_world(15, rng=11)
    lam = np.sort(np.linalg.eigvalsh(w.kernel_matrix()))[::-1]
    opt = spectral_contrastive_optimum(w, 4)
    assert not opt.centred
    assert_close(opt.value, -np.sum(np.maximum(lam[:4], 0) ** 2))
    assert_close(naive_sc_loss(w, opt.F), opt.value)
    assert_close(spectral_contrastive_loss(w, opt.F), opt.value)
    gram = opt.F.T @ (w.p[:, None] * opt.F)
    assert_close(np.sort(np.linalg.eigvalsh(gram))[::-1], np.maximum(lam[:4], 0), what="E ffᵀ = diag(λ⁺)")
    rng = np.random.default_rng(0)
    for scale in (0.1, 0.5, 1.0):
        assert naive_sc_loss(w, scale * rng.normal(size=(15, 4))) >= opt.value


def test_spectral_contrastive_rank_drops_on_nonpositive_eigenvalues():
    w = ring(6, laziness=0.0)  # eigenvalues 1, .5, .5, -.5, -.5, -1
    opt = spectral_contrastive_optimum(w, 4)  # λ_4 = -0.5 ≤ 0: a zero column
    assert_close(opt.scales[3], 0.0)
    assert opt.unique  # λ_4 = λ_5 < 0 does not make GGᵀ ambiguous


def test_product_world_closed_form_loss_through_operator():
    w = ProductWorld([random_world(4, rng=0), ring(5), random_world(3, rng=1, self_loop=0.5)])
    opt = whitened_optimum(w, 5)
    assert_close(alignment_loss(w, opt.F), opt.value)
    assert_close(naive_alignment_loss(w.to_finite(), opt.F), opt.value)


@pytest.mark.parametrize("k, message", [(0, "k must be"), (19, "k must be"), ("many", "auto"), (2.5, "k must be")])
def test_bad_k(k, message):
    with pytest.raises(ValueError, match=message):
        whitened_optimum(ring(20), k)


def test_bad_objective():
    with pytest.raises(ValueError, match="objective"):
        closed_form(ring(10), 2, objective="cosine")
