"""Closed-form optima: Ky Fan value, whitening, centring, ties, spectral contrastive (THEORY §1)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import assert_close, dense
from prhsim.jepa import (
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
from prhsim.worlds import FiniteWorld, ProductWorld, grid, random_world, ring


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


def test_auto_k_picks_largest_gap():
    w = grid([5, 9], move=[0.3, 0.95])
    opt = closed_form(w, "auto")

    mu = top_eigenpairs(w, 33).values
    gaps = mu[:-1] - mu[1:]
    assert opt.k == int(np.argmax(gaps)) + 1 and opt.unique
    assert pick_k(np.array([1.0, 0.9, 0.2, 0.1])) == 2


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
