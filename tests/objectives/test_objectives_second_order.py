"""Batch invariance, whitening, covariance penalty, spectral contrastive and the combined LeJEPA loss.

The batch estimators are checked against the population objectives through the
kernel (docs/theory.md §1.1, §1.3) by exact enumeration of every batch of pairs,
each weighted by its probability under π — no sampling.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from support import assert_close, dense
from prhsim.optima import alignment_loss, spectral_contrastive_loss
from prhsim.objectives import (
    covariance,
    covariance_penalty,
    draw_directions,
    invariance,
    lejepa_loss,
    pairwise_invariance,
    sigreg,
    spectral_contrastive,
    whiten_batch as whiten,
)
from prhsim.worlds import random_world


def expectation_over_batches(world, F, N, loss) -> float:
    """``Σ_batches Π_n π(z_n, z'_n) · loss(F[z], F[z'])`` over all N-tuples of pairs (exact)."""
    Pi = dense(world.Pi)
    pairs = [(z, y, Pi[z, y]) for z in range(world.n) for y in range(world.n) if Pi[z, y] > 0]
    total = 0.0
    for batch in itertools.product(pairs, repeat=N):
        z = [b[0] for b in batch]
        y = [b[1] for b in batch]
        total += np.prod([b[2] for b in batch]) * float(loss(F[z], F[y]))
    return total


@pytest.fixture(scope="module")
def small_world():
    return random_world(4, rng=0)


def test_spectral_contrastive_is_unbiased_for_the_population_loss(small_world) -> None:
    F = np.random.default_rng(0).standard_normal((4, 2))
    for N in (2, 3):
        expected = expectation_over_batches(small_world, F, N, spectral_contrastive)
        assert_close(expected, spectral_contrastive_loss(small_world, F), atol=1e-12, rtol=1e-12)


def test_pairwise_invariance_is_unbiased_for_the_alignment_loss(small_world) -> None:
    F = np.random.default_rng(1).standard_normal((4, 3))
    expected = expectation_over_batches(small_world, F, 2, pairwise_invariance)
    assert_close(expected, alignment_loss(small_world, F), atol=1e-12, rtol=1e-12)


def test_invariance_forms_agree() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    # two global views: each is half the pair's difference from the centre
    assert_close(invariance(np.stack([a, b])), pairwise_invariance(a, b) / 4)
    # one global view: the target is that view itself
    e = rng.standard_normal((4, 5, 3))
    assert_close(invariance(e, n_global=1), np.mean([pairwise_invariance(e[v], e[0]) for v in range(4)]))
    assert invariance(np.stack([a, a, a])) == 0.0
    Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    assert_close(invariance(e @ Q, n_global=2), invariance(e, n_global=2))
    with pytest.raises(ValueError, match="n_global"):
        invariance(e, n_global=5)
    with pytest.raises(ValueError, match="share a shape"):
        pairwise_invariance(a, b[:4])


def test_whitening() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 4)) @ rng.standard_normal((4, 4)) + 3.0
    w = whiten(x)
    assert_close(w.mean(axis=0), np.zeros(4))
    assert_close(covariance(w), np.eye(4))
    assert_close(covariance_penalty(w), 0.0)
    Q = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    assert_close(whiten(x @ Q), w @ Q)  # the symmetric C^{-1/2} is rotation-equivariant
    # uncentred: the second moment is the identity instead
    wu = whiten(x, centred=False)
    assert_close(wu.T @ wu / 40, np.eye(4))
    # stacked batches are whitened one by one
    assert_close(whiten(np.stack([x, 2 * x]))[1], w)


def test_whitening_floor_on_a_rank_deficient_batch() -> None:
    """N = 3 < D = 5: two directions carry variance; the rest (λ ≈ 0) are scaled by 1/√eps, not 1/√λ."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5))
    w = whiten(x, eps=1e-6)
    assert np.all(np.isfinite(w))
    C = covariance(w)
    assert_close(np.sort(np.linalg.eigvalsh(C))[-2:], [1.0, 1.0], atol=1e-8)
    with pytest.raises(ValueError, match="eps"):
        whiten(x, eps=0.0)


def test_covariance_penalty_is_the_frobenius_distance() -> None:
    x = np.random.default_rng(5).standard_normal((30, 3))
    C = np.cov(x, rowvar=False, bias=True)
    assert_close(covariance_penalty(x), np.linalg.norm(C - np.eye(3)) ** 2)
    assert_close(covariance_penalty(x, centred=False), np.linalg.norm(x.T @ x / 30 - np.eye(3)) ** 2)


def test_spectral_contrastive_errors() -> None:
    with pytest.raises(ValueError, match="N >= 2"):
        spectral_contrastive(np.ones((1, 2)), np.ones((1, 2)))


def test_combined_loss_conventions() -> None:
    rng = np.random.default_rng(6)
    e, A = rng.standard_normal((4, 16, 3)), draw_directions(3, 8, seed=6)
    inv, reg = invariance(e, n_global=2), sigreg(e, A)
    assert_close(lejepa_loss(e, A, n_global=2), 0.02 * reg + 0.98 * inv)
    assert_close(lejepa_loss(e, A, n_global=2, lam=0.3, convention="additive"), inv + 0.3 * reg)
    with pytest.raises(ValueError, match="convention"):
        lejepa_loss(e, A, convention="vicreg")
