"""The map between two modalities without cross-modal pairs (docs/theory.md §9), against the truth of known worlds.

Convention: ``f_a = h Q_a`` and ``f_b = h Q_b`` for the centred whitened eigenfunctions h of one world, so
``f_b = f_a Q_true`` with ``Q_true = Q_aᵀ Q_b`` (maps act on rows).
"""

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from support import assert_close
from prhsim.optima import top_eigenpairs
from prhsim.metrics import (
    chamfer_distance,
    iterative_match,
    map_error,
    mapped_retrieval,
    spectral_match,
    whiten,
)
from prhsim.metrics._pair_free import weighted_moments, whitening
from prhsim.worlds import FiniteWorld, ProductWorld, path, sample_pairs, sinkhorn_world


def haar(k, rng):
    q, r = np.linalg.qr(rng.normal(size=(k, k)))
    return q * np.sign(np.diag(r))


def skewed_world(seed, n=12):
    """A random Sinkhorn world with non-uniform p and self-pairs (seeds 0, 4, 6: simple top spectrum, skewed h)."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(n, 2.0))
    p = np.maximum(p, 1e-3 / n)
    A = rng.uniform(size=(n, n)) ** 3
    return sinkhorn_world((A + A.T) / 2 + 2 * np.eye(n), p / p.sum())


def spectral_world(mu, n, seed):
    """p ~ Dirichlet(5) and ``K = ssᵀ + U diag(mu) Uᵀ`` (U ⊥ s): the centred spectrum is mu, then zeros."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(n, 5.0))
    s = np.sqrt(p)
    U = np.linalg.qr(np.column_stack([s, rng.normal(size=(n, len(mu)))]))[0][:, 1:]
    Pi = s[:, None] * (np.outer(s, s) + (U * np.asarray(mu)) @ U.T) * s[None, :]
    assert Pi.min() >= 0, "this seed gives a negative pair weight"
    return FiniteWorld(p, (Pi + Pi.T) / 2)


def eigenfunctions(world, k):
    """h (n x k), the centred spectrum μ_1..μ_{k+1}, and p."""
    basis = top_eigenpairs(world, k + 1, centred=True, backend="dense")
    return basis.evaluate(None)[:, :k], basis.values, np.asarray(world.p)


def population_inputs(world, fa, fb, order_b):
    """Every state with p and every pair with π, for both modalities (b's states in another order)."""
    Pi = np.asarray(world.Pi.toarray() if hasattr(world.Pi, "toarray") else world.Pi)
    z, z2 = np.nonzero(Pi)
    pairs = lambda f: np.stack([f[z], f[z2]], axis=1)  # noqa: E731
    return dict(xa=fa, pairs_a=pairs(fa), xb=fb[order_b], pairs_b=pairs(fb)[::-1],
                weights_a=world.p, pair_weights_a=Pi[z, z2], weights_b=world.p[order_b], pair_weights_b=Pi[z, z2][::-1])


def sampled_inputs(world, fa, fb, S, rng):
    """S states drawn from p and S pairs drawn from π, independently for each modality."""
    out = {}
    for side, f in (("a", fa), ("b", fb)):
        z, z2 = sample_pairs(world, S, rng=rng)
        out[f"x{side}"] = f[rng.choice(world.n, S, p=world.p)]
        out[f"pairs_{side}"] = np.stack([f[z], f[z2]], axis=1)
    return out


# --- spectral matching: the population ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 4, 6])
def test_the_chosen_worlds_have_a_simple_top_spectrum_and_skewed_features(seed):
    h, mu, p = eigenfunctions(skewed_world(seed), 3)
    assert np.min(-np.diff(mu)) > 0.01
    assert np.min(np.abs(p @ h**3)) > 0.1
    assert_close(h.T @ (p[:, None] * h), np.eye(3))


@given(world_seed=st.sampled_from([0, 4, 6]), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=40)
def test_population_spectral_match_is_exact_for_any_rotations(world_seed, seed):
    world = skewed_world(world_seed)
    h, mu, _ = eigenfunctions(world, 3)
    rng = np.random.default_rng(seed)
    Qa, Qb = haar(3, rng), haar(3, rng)
    res = spectral_match(**population_inputs(world, h @ Qa, h @ Qb, rng.permutation(world.n)))
    assert res.identifiable and res.ambiguities == ()
    assert map_error(res.map, Qa.T @ Qb) < 1e-10
    assert_close(res.eigenvalues_a, mu[:3])
    assert_close(res.eigenvalues_b, mu[:3])
    assert np.all(res.skewness_a > 0.1) and np.all(res.skewness_b > 0.1)


def test_apply_maps_raw_features_through_both_whitenings():
    """Raw features ``h Q_m L_m + c_m`` (any invertible L_m): apply(x_a) is b's raw features of the same state."""
    world = skewed_world(6)
    h, _, _ = eigenfunctions(world, 3)
    rng = np.random.default_rng(5)
    ra = h @ haar(3, rng) @ rng.normal(size=(3, 3)) + rng.normal(size=3)
    rb = h @ haar(3, rng) @ rng.normal(size=(3, 3)) + rng.normal(size=3)
    res = spectral_match(**population_inputs(world, ra, rb, np.arange(world.n)))
    assert res.identifiable
    assert_close(res.apply(ra), rb, atol=1e-9)
    assert_close(res.map.T @ res.map, np.eye(3))


def test_a_tie_between_identical_factors_is_not_identifiable():
    """K ⊗ K: the top centred eigenvalue comes twice (h ⊗ 1 and 1 ⊗ h), and swapping the factors is a symmetry."""
    factor = spectral_world([0.5, 0.25], 6, 27)
    world = ProductWorld([factor, factor]).to_finite()
    h, mu, _ = eigenfunctions(world, 2)
    assert abs(mu[0] - mu[1]) < 1e-12 and mu[1] - mu[2] > 0.1
    rng = np.random.default_rng(0)
    res = spectral_match(**population_inputs(world, h @ haar(2, rng), h @ haar(2, rng), rng.permutation(world.n)))
    assert not res.identifiable
    assert any(re.match(r"features 1, 2 tied", line) for line in res.ambiguities), res.ambiguities
    assert "not identifiable" in res.ambiguities[0]


def test_a_symmetric_feature_is_reported_unsigned_and_an_odd_statistic_signs_the_other():
    """Uniform p on a reflecting path: h_1 is antisymmetric under z ↦ n−1−z, so every odd statistic of it with
    (h_1, h_2) vanishes; h_2 is symmetric with E[h_2³] = 0 too, but E[h_2 h_1²] ≠ 0 signs it."""
    world = path(6)
    h, _, p = eigenfunctions(world, 2)
    assert_close(p @ h**3, np.zeros(2), atol=1e-12)
    rng = np.random.default_rng(1)
    Qa, Qb = haar(2, rng), haar(2, rng)
    res = spectral_match(**population_inputs(world, h @ Qa, h @ Qb, rng.permutation(world.n)))
    assert not res.identifiable
    assert len(res.ambiguities) == 1 and res.ambiguities[0].startswith("feature 1 unsigned"), res.ambiguities
    # the reflection flips h_1 alone: either sign of feature 1 is a true map, feature 2's sign is recovered
    candidates = [Qa.T @ np.diag(s) @ Qb for s in ([1.0, 1.0], [-1.0, 1.0])]
    assert min(map_error(res.map, Q) for Q in candidates) < 1e-10


# --- spectral matching: finite samples ----------------------------------------------------------------------------


def test_finite_samples_recover_the_map_better_with_more_samples():
    world = spectral_world([0.5, 0.25], 6, 27)
    h, _, _ = eigenfunctions(world, 2)
    rng = np.random.default_rng(3)
    Qa, Qb = haar(2, rng), haar(2, rng)
    errors = {}
    for S in (2000, 20000):
        runs = [spectral_match(**sampled_inputs(world, h @ Qa, h @ Qb, S, np.random.default_rng(10 + rep)))
                for rep in range(4)]
        assert all(r.identifiable for r in runs), [r.ambiguities for r in runs]
        errors[S] = [map_error(r.map, Qa.T @ Qb) for r in runs]
    assert max(errors[20000]) < 0.1
    assert np.mean(errors[20000]) < np.mean(errors[2000])


def test_a_small_gap_in_few_samples_is_reported_as_a_tie():
    world = skewed_world(6)
    h, _, _ = eigenfunctions(world, 3)
    rng = np.random.default_rng(4)
    res = spectral_match(**sampled_inputs(world, h @ haar(3, rng), h @ haar(3, rng), 200, rng))
    assert not res.identifiable and any("tied" in line for line in res.ambiguities)


# --- the iterative method -----------------------------------------------------------------------------------------


def random_cloud(seed, n=30, k=3):
    """n random points in R^k, whitened under a non-uniform p: no non-trivial isometry."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(n, 2.0))
    return whiten(rng.normal(size=(n, k)), p), p, haar(k, rng)


@pytest.mark.parametrize("matching", ["nearest", "assignment"])
def test_iterative_match_is_exact_on_a_population_without_symmetry(matching):
    X, p, Q = random_cloud(0)
    perm = np.random.default_rng(1).permutation(X.shape[0])
    weights = dict(weights_a=p, weights_b=p[perm]) if matching == "nearest" else {}
    res = iterative_match(X, X[perm] @ Q, matching=matching, rng=2, **weights)
    assert map_error(res.map, Q) < 1e-10 and res.criterion < 1e-12
    assert res.criteria.shape == res.iterations.shape == res.converged.shape == (16 + 4,)
    assert res.criterion == res.criteria.min() == res.criteria[res.chosen]
    assert np.any(res.criteria > 0.3), "some start ends at a wrong local optimum"


def test_iterative_random_starts_alone_recover_a_planar_map():
    X, p, Q = random_cloud(3, k=2)
    res = iterative_match(X, X @ Q, weights_a=p, weights_b=p, starts=32, moments=False, rng=0)
    assert map_error(res.map, Q) < 1e-10


def test_iterative_match_from_unpaired_samples_and_its_criterion_prefers_the_truth():
    X, p, Q = random_cloud(1)
    rng = np.random.default_rng(7)
    xa, xb = X[rng.choice(30, 3000, p=p)], X[rng.choice(30, 3000, p=p)] @ Q
    res = iterative_match(xa, xb, rng=0)
    assert map_error(res.map, Q) < 0.05
    ya, yb = res.whitening_a.whiten(xa), res.whitening_b.whiten(xb)
    truth = chamfer_distance(ya @ Q, yb)
    wrong = min(chamfer_distance(ya @ haar(3, rng), yb) for _ in range(10))
    assert truth < 0.2 * wrong
    assert res.criterion < 1.01 * truth  # a Procrustes fixed point, not the chamfer minimum: near the truth's


def test_iterative_match_records_a_seeded_run():
    X, p, Q = random_cloud(2)
    a = iterative_match(X, X @ Q, weights_a=p, weights_b=p, starts=5, rng=9)
    b = iterative_match(X, X @ Q, weights_a=p, weights_b=p, starts=5, rng=9)
    assert_close(a.criteria, b.criteria, atol=0, rtol=0)
    assert a.method == "iterative nearest" and a.converged.all() and a.iterations.max() <= 50


# --- evaluation helpers and naive twins ---------------------------------------------------------------------------


def test_map_error_is_the_operator_norm():
    rng = np.random.default_rng(0)
    Q, R = haar(4, rng), haar(4, rng)
    assert_close(map_error(Q, R), np.sqrt(np.max(np.linalg.eigvalsh((Q - R).T @ (Q - R)))))
    assert map_error(Q, Q) == 0 and abs(map_error(Q, -Q) - 2) < 1e-12


def test_weighted_moments_and_whitening_match_loops():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(7, 3)), rng.dirichlet(np.ones(7))
    m = sum(w[s] * x[s] for s in range(7))
    C = sum(w[s] * np.outer(x[s] - m, x[s] - m) for s in range(7))
    got_m, got_C = weighted_moments(x, w)
    assert_close(got_m, m)
    assert_close(got_C, C)
    white = whitening(x, w, "x")
    y = white.whiten(x)
    assert_close(sum(w[s] * np.outer(y[s], y[s]) for s in range(7)), np.eye(3))
    assert_close(white.colour(y), x)


def test_chamfer_distance_matches_loops():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(6, 2)), rng.normal(size=(4, 2))
    wa, wb = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(4))
    ab = sum(wa[i] * min(np.linalg.norm(a[i] - b[j]) for j in range(4)) for i in range(6))
    ba = sum(wb[j] * min(np.linalg.norm(a[i] - b[j]) for i in range(6)) for j in range(4))
    assert_close(chamfer_distance(a, b, weights_a=wa, weights_b=wb), (ab + ba) / 2)


def test_mapped_retrieval_matches_a_loop_with_ties():
    """Tie-aware recall by distance: clip((k − g)/(e + 1), 0, 1) with g closer and e equally close candidates."""
    world = skewed_world(6)
    h, _, _ = eigenfunctions(world, 3)
    rng = np.random.default_rng(2)
    Qa, Qb = haar(3, rng), haar(3, rng)
    res = spectral_match(**population_inputs(world, h @ Qa, h @ Qb, np.arange(world.n)))
    states = np.concatenate([np.arange(world.n), [0, 0, 3]])  # repeated states: exact ties
    got = mapped_retrieval(res, h[states] @ Qa, h[states] @ Qb, ks=(1, 5))
    ya, yb = h[states], h[states]  # both whitenings are the identity map onto h's coordinates here
    for k in (1, 5):
        scores = []
        for i in range(states.size):
            d = np.array([np.sum((ya[i] - yb[j]) ** 2) for j in range(states.size)])
            g = np.sum(d < d[i] - 1e-12)
            e = np.sum(np.abs(d - d[i]) <= 1e-12) - 1
            scores.append(np.clip((k - g) / (e + 1), 0, 1))
        assert_close(got.a_to_b[k], np.mean(scores))
        assert_close(got.b_to_a[k], np.mean(scores))
    assert got.a_to_b[5] == 1.0


def test_bad_shapes_are_one_line_errors_naming_the_argument():
    x, pairs = np.ones((5, 2)), np.ones((4, 2, 2))
    with pytest.raises(ValueError, match=r"^pairs_a must have shape \(P, 2, 2\)"):
        spectral_match(x, np.ones((4, 2)), x, pairs)
    with pytest.raises(ValueError, match=r"^xb must have shape \(S, 2\)"):
        spectral_match(x, pairs, np.ones((5, 3)), pairs)
    with pytest.raises(ValueError, match=r"^weights_b must have shape \(5,\)"):
        spectral_match(x, pairs, x, pairs, weights_b=np.ones(4))
    with pytest.raises(ValueError, match="^cannot whiten xa"):
        spectral_match(x, pairs, x, pairs)
    with pytest.raises(ValueError, match=r"^Q_true must have shape \(2, 2\)"):
        map_error(np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="^matching='assignment' needs"):
        iterative_match(np.ones((5, 2)), np.ones((6, 2)), matching="assignment")
    with pytest.raises(ValueError, match=r"^starts\[0\] must be an orthogonal matrix of shape \(2, 2\)"):
        iterative_match(np.random.default_rng(0).normal(size=(5, 2)), np.random.default_rng(1).normal(size=(5, 2)),
                        starts=[np.ones((2, 2))])
