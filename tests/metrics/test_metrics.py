"""Comparison metrics against naive twins written from the definitions (docs/theory.md §2)."""

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings, strategies as st

from support import assert_close, projector_distance
from prhsim.metrics import (
    canonical_correlations,
    conditional_moments,
    coupled_comparison,
    nuisance_free_dimension,
    orthogonal_map,
    principal_angles,
    procrustes,
    whiten,
)


def random_whitened(n, k, p, rng):
    G, _ = np.linalg.qr(rng.normal(size=(n, k)))
    return G / np.sqrt(p)[:, None]


def random_orthogonal(k, rng):
    Q, _ = np.linalg.qr(rng.normal(size=(k, k)))
    return Q


def _law(n, rng):
    return rng.dirichlet(np.ones(n))


@given(seed=st.integers(0, 10_000), n=st.integers(5, 40), k=st.integers(1, 4))
def test_procrustes_matches_scipy_on_sqrt_p_scaled_tables(seed, n, k):
    rng = np.random.default_rng(seed)
    p = _law(n, rng)
    F1, F2 = rng.normal(size=(n, k)), rng.normal(size=(n, k))
    s = np.sqrt(p)[:, None]
    R, _ = sla.orthogonal_procrustes(s * F2, s * F1)  # argmin ‖(s F2) R − s F1‖
    res = procrustes(F1, F2, p)
    assert_close(res.Q, R, atol=1e-8)
    assert_close(res.residual, np.linalg.norm(s * F1 - s * F2 @ R), atol=1e-10)
    direct = np.sqrt(max(np.sum(p[:, None] * F1**2) + np.sum(p[:, None] * F2**2) - 2 * res.singular_values.sum(), 0))
    assert_close(res.residual, direct, atol=1e-6)


def test_procrustes_direction_matters():
    """F1 ≈ F2 Q with Q = U Vᵀ from svd(F2ᵀDF1); the transpose is the wrong map."""
    rng = np.random.default_rng(0)
    p = _law(30, rng)
    F2 = random_whitened(30, 3, p, rng)
    Q = random_orthogonal(3, rng)
    F1 = F2 @ Q + 0.05 * rng.normal(size=(30, 3))
    res = procrustes(F1, F2, p)
    wrong = np.sqrt(np.sum(p[:, None] * (F1 - F2 @ res.Q.T) ** 2))
    assert res.residual < 0.2 and wrong > res.residual


@given(seed=st.integers(0, 10_000), k=st.integers(1, 5))
def test_rotated_copy_has_zero_residual_including_reflections(seed, k):
    rng = np.random.default_rng(seed)
    p = _law(25, rng)
    F = random_whitened(25, k, p, rng)
    Q = random_orthogonal(k, rng)
    if k > 1 and np.linalg.det(Q) > 0:
        Q[:, 0] *= -1  # a reflection: O(k), not SO(k)
    res = procrustes(F @ Q, F, p)
    assert res.residual < 1e-10
    assert principal_angles(F @ Q, F, p).sin_theta < 1e-10


@given(seed=st.integers(0, 10_000), n=st.integers(6, 30), k=st.integers(1, 4), mix=st.floats(0, 1))
@settings(max_examples=100)
def test_sin_theta_sandwich_for_whitened_tables(seed, n, k, mix):
    """‖sinΘ‖_F ≤ min_Q ‖F1 − F2Q‖_D ≤ √2 ‖sinΘ‖_F."""
    rng = np.random.default_rng(seed)
    p = _law(n, rng)
    F1 = random_whitened(n, k, p, rng)
    F2 = whiten(F1 + mix * rng.normal(size=(n, k)) / np.sqrt(p)[:, None], p, centre=False)
    sin = principal_angles(F1, F2, p).sin_theta
    res = procrustes(F1, F2, p).residual
    assert sin <= res + 1e-9 and res <= np.sqrt(2) * sin + 1e-9


@given(seed=st.integers(0, 10_000), n=st.integers(6, 30), k=st.integers(1, 4))
def test_principal_angles_projector_form_matches_naive_twin(seed, n, k):
    rng = np.random.default_rng(seed)
    p = _law(n, rng)
    F1, F2 = rng.normal(size=(n, k)), rng.normal(size=(n, k))
    s = np.sqrt(p)[:, None]
    A, B = np.linalg.qr(s * F1)[0], np.linalg.qr(s * F2)[0]
    pa = principal_angles(F1, F2, p)
    assert_close(pa.sin_theta, projector_distance(A, B), atol=1e-10)
    assert_close(pa.cosines, np.linalg.svd(A.T @ B, compute_uv=False), atol=1e-10)


def test_small_angles_are_accurate_in_projector_form():
    """sqrt(1 − cos²) cancels at tiny angles; the projector form does not."""
    rng = np.random.default_rng(1)
    n, k = 50, 3
    p = _law(n, rng)
    F1 = random_whitened(n, k, p, rng)
    direction = random_whitened(n, k, p, rng)
    direction -= F1 @ (F1.T @ (p[:, None] * direction))
    t = 1e-9
    F2 = F1 + t * direction
    sin = principal_angles(F1, F2, p).sin_theta
    expected = t * np.linalg.norm(np.sqrt(p)[:, None] * direction)  # first order
    assert sin == pytest.approx(expected, rel=1e-4)


@given(seed=st.integers(0, 10_000))
def test_canonical_correlations_invariant_to_invertible_maps(seed):
    rng = np.random.default_rng(seed)
    n, k = 40, 3
    p = _law(n, rng)
    F1, F2 = rng.normal(size=(n, k)), rng.normal(size=(n, k))
    A, B = rng.normal(size=(k, k)) + 3 * np.eye(k), rng.normal(size=(k, k)) + 3 * np.eye(k)
    cc = canonical_correlations(F1, F2, p)
    assert_close(canonical_correlations(F1 @ A + 1.0, F2 @ B - 2.0, p), cc, atol=1e-8)
    assert np.all((cc >= 0) & (cc <= 1))


def test_whiten_rejects_collapsed_features():
    p = np.full(10, 0.1)
    with pytest.raises(ValueError, match="singular"):
        whiten(np.ones((10, 2)), p)


def test_bad_shapes():
    with pytest.raises(ValueError, match="same shape"):
        procrustes(np.ones((4, 2)), np.ones((4, 3)), np.full(4, 0.25))
    with pytest.raises(ValueError, match="weights"):
        principal_angles(np.ones((4, 2)), np.ones((4, 2)), np.full(3, 1 / 3))


def naive_coupled(F1, q1, F2, q2, p_z):
    """The coupling written out on Z x N1 x N2: joint law γ, then Procrustes and projection."""
    n1, n2 = q1.size, q2.size
    rows1, rows2, w = [], [], []
    for z in range(p_z.size):
        for a in range(n1):
            for b in range(n2):
                rows1.append(F1[z * n1 + a])
                rows2.append(F2[z * n2 + b])
                w.append(p_z[z] * q1[a] * q2[b])
    X1, X2, w = np.array(rows1), np.array(rows2), np.array(w)
    res = procrustes(X1, X2, w)
    return res.rho, principal_angles(X1, X2, w).s_theta, res.singular_values


@given(seed=st.integers(0, 10_000), n1=st.integers(1, 3), n2=st.integers(1, 3), k=st.integers(1, 3))
@settings(max_examples=50)
def test_coupled_comparison_matches_joint_space_twin(seed, n1, n2, k):
    rng = np.random.default_rng(seed)
    nz = 6
    p_z, q1, q2 = _law(nz, rng), _law(n1, rng), _law(n2, rng)
    F1 = whiten(rng.normal(size=(nz * n1, k)), np.kron(p_z, q1))
    F2 = whiten(rng.normal(size=(nz * n2, k)), np.kron(p_z, q2))
    comp = coupled_comparison(F1, q1, F2, q2, p_z)
    rho, s_theta, sv = naive_coupled(F1, q1, F2, q2, p_z)
    assert_close(comp.rho_p, rho, atol=1e-9)
    assert_close(comp.s_theta, s_theta, atol=1e-9)
    assert_close(comp.correlations, sv, atol=1e-9)


def test_coupled_with_no_nuisance_is_plain_procrustes():
    rng = np.random.default_rng(3)
    p = _law(20, rng)
    F1, F2 = random_whitened(20, 3, p, rng), random_whitened(20, 3, p, rng)
    comp = coupled_comparison(F1, np.ones(1), F2, np.ones(1), p)
    assert_close(comp.rho_p, procrustes(F1, F2, p).rho)
    assert_close(comp.s_theta, principal_angles(F1, F2, p).s_theta)


def test_nuisance_free_dimension_counts_functions_of_z():
    rng = np.random.default_rng(4)
    nz, nn = 8, 3
    p_z, q = _law(nz, rng), _law(nn, rng)
    free = random_whitened(nz, 2, p_z, rng)
    pure = rng.normal(size=(nz, nn))
    pure -= (pure @ q)[:, None]  # E[h | z] = 0
    F = np.concatenate([np.repeat(free, nn, axis=0), pure.reshape(-1, 1)], axis=1)
    assert nuisance_free_dimension(F, q, p_z) == 2


def _poisoned(bad_value):
    rng = np.random.default_rng(0)
    p_z, q = _law(6, rng), np.array([0.5, 0.5])
    F = random_whitened(12, 2, np.kron(p_z, q), rng)
    G = F.copy()
    G[3, 1] = bad_value
    return F, G, q, p_z


@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf])
def test_non_finite_features_are_named_at_every_entry_point(bad_value):
    F, G, q, p_z = _poisoned(bad_value)
    p = np.kron(p_z, q)
    calls = [
        lambda: coupled_comparison(F, q, G, q, p_z),
        lambda: coupled_comparison(G, q, F, q, p_z),
        lambda: nuisance_free_dimension(G, q, p_z),
        lambda: conditional_moments(G, q, p_z.size),
        lambda: whiten(G, p),
        lambda: canonical_correlations(F, G, p),
        lambda: procrustes(F, G, p),
        lambda: principal_angles(G, F, p),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="^features contain NaN or inf$"):
            call()


def test_non_finite_weights_are_named():
    F, _, q, p_z = _poisoned(0.0)
    bad_p = p_z.copy()
    bad_p[0] = np.nan
    with pytest.raises(ValueError, match="^weights contain NaN or inf$"):
        coupled_comparison(F, q, F, q, bad_p)
    with pytest.raises(ValueError, match="^nuisance weights contain NaN or inf$"):
        coupled_comparison(F, np.array([np.nan, 0.5]), F, q, p_z)
    with pytest.raises(ValueError, match="^weights contain NaN or inf$"):
        whiten(F, np.kron(bad_p, q))
    with pytest.raises(ValueError, match="^cross-covariances contain NaN or inf$"):
        orthogonal_map(np.array([[1.0, np.nan], [0.0, 1.0]]))
