"""Equalities behind the inequalities: comparison metrics and report checks on cases computed by hand (docs/theory.md §2, §4).

The suite's sandwich test ``‖sinΘ‖_F ≤ min_Q ‖F1 − F2Q‖_D ≤ √2‖sinΘ‖_F`` (and the report check of the same
sandwich) would still pass with a wrong constant or a wrong Procrustes map that lands inside the bracket.
Here each number is pinned to its closed form.
"""

import numpy as np
import pytest

from support import ATOL, RTOL, assert_close
from prhsim.experiments._checks import RHO_ATOL, pair_checks
from prhsim.experiments._results import PairSummary
from prhsim.metrics import canonical_correlations, coupled_comparison, principal_angles, procrustes

# Two whitened tables with principal angles φ = π/4 and ψ = π/3 (cos: √2/2, 1/2; sin²: 1/2, 3/4).
#   G1 = [e1, e2], G2 = [cos φ e1 + sin φ e3, cos ψ e2 + sin ψ e4] Q0, F_i = D^{-1/2} G_i,
# with e1..e4 orthonormal and orthogonal to √p (so both tables are centred and whitened), and Q0 a reflection.
#   cos θ = σ(G1ᵀG2) = (√2/2, 1/2);  ‖sinΘ‖_F = √(1/2 + 3/4) = √5/2;
#   min_Q ‖F1 − F2Q‖_D is attained at Q = Q0ᵀ (undo Q0, then the 2x2 cross block is diag(cos) > 0):
#   res² = 2(1 − cos φ) + 2(1 − cos ψ) = 2 − √2 + 1 = 3 − √2;  σ(F2ᵀDF1) = (√2/2, 1/2);  det Q̂ = det Q0 = −1.
P5 = np.array([0.1, 0.15, 0.2, 0.25, 0.3])
PHI, PSI = np.pi / 4, np.pi / 3
Q0 = np.array([[0.6, 0.8], [0.8, -0.6]])  # symmetric reflection, det −1


def _basis(p, rng_seed=0):
    """Columns e1..e(n−1): an orthonormal basis of √p^⊥ (any one will do for the identities)."""
    s = np.sqrt(p)
    B = np.linalg.qr(np.column_stack([s, np.random.default_rng(rng_seed).standard_normal((p.size, p.size - 1))]))[0]
    return B[:, 1:]


def _hand_tables():
    e = _basis(P5)
    G1 = e[:, :2]
    G2 = np.column_stack([np.cos(PHI) * e[:, 0] + np.sin(PHI) * e[:, 2], np.cos(PSI) * e[:, 1] + np.sin(PSI) * e[:, 3]])
    s = np.sqrt(P5)[:, None]
    return G1 / s, G2 @ Q0 / s


def test_procrustes_and_angles_by_hand():
    F1, F2 = _hand_tables()
    assert_close(F1.T @ (P5[:, None] * F1), np.eye(2), what="whitened")
    assert_close(P5 @ F2, np.zeros(2), what="centred")
    pr = procrustes(F1, F2, P5)
    assert_close(pr.residual, np.sqrt(3 - np.sqrt(2)), atol=ATOL, rtol=RTOL)
    assert_close(pr.rho, np.sqrt((3 - np.sqrt(2)) / 2))
    assert_close(pr.Q, Q0.T, what="Q̂ = Q0ᵀ (a reflection is symmetric: the direction is pinned by the rotation test below)")
    assert_close(pr.singular_values, [np.sqrt(2) / 2, 0.5])
    assert_close(pr.det_q, -1.0)
    pa = principal_angles(F1, F2, P5)
    assert_close(pa.cosines, [np.sqrt(2) / 2, 0.5])
    assert_close(pa.sin_theta, np.sqrt(5) / 2)
    assert_close(pa.s_theta, np.sqrt(5) / (2 * np.sqrt(2)))
    assert_close(canonical_correlations(F1, F2, P5), [np.sqrt(2) / 2, 0.5])
    assert_close(canonical_correlations(F1, F2, P5, centre=False), [np.sqrt(2) / 2, 0.5])


def test_procrustes_direction_by_hand_with_a_rotation():
    """F1 = F2 R for a rotation R (not symmetric): Q̂ must be R, not Rᵀ = R⁻¹."""
    e = _basis(P5)
    F2 = e[:, :2] / np.sqrt(P5)[:, None]
    R = np.array([[np.cos(0.4), -np.sin(0.4)], [np.sin(0.4), np.cos(0.4)]])
    pr = procrustes(F2 @ R, F2, P5)
    assert_close(pr.Q, R)
    assert pr.residual < ATOL
    assert_close(pr.det_q, 1.0)
    # the transposed map leaves a residual ‖F2 R − F2 Rᵀ‖_D = ‖R − Rᵀ‖_F = 2√2 sin 0.4
    assert_close(np.sqrt(np.sum(P5[:, None] * (F2 @ R - F2 @ pr.Q.T) ** 2)), 2 * np.sqrt(2) * np.sin(0.4))


def test_sandwich_ends_are_attained():
    """Lower end: tiny angles (res ≈ ‖sinΘ‖); upper end: orthogonal subspaces, res = √2‖sinΘ‖ = √(2k)."""
    e = _basis(P5)
    s = np.sqrt(P5)[:, None]
    F1, F2 = e[:, :2] / s, e[:, 2:4] / s
    pr, pa = procrustes(F1, F2, P5), principal_angles(F1, F2, P5)
    assert_close(pa.sin_theta, np.sqrt(2))
    assert_close(pr.residual, 2.0, what="√(2k)")
    assert_close(pr.residual, np.sqrt(2) * pa.sin_theta)
    # one small angle t: res = 2 sin(t/2), ‖sinΘ‖ = sin t; res/‖sinΘ‖ = 1/cos(t/2) → 1
    t = 1e-3
    F3 = np.column_stack([np.cos(t) * e[:, 0] + np.sin(t) * e[:, 2], e[:, 1]]) / s
    assert_close(procrustes(F1, F3, P5).residual, 2 * np.sin(t / 2))
    assert_close(principal_angles(F1, F3, P5).sin_theta, np.sin(t))


@pytest.mark.parametrize("seed", range(5))
def test_whitened_sandwich_identities_on_random_tables(seed):
    """res² = 2Σ(1 − cos θ_j) and ‖sinΘ‖² = Σ(1 − cos² θ_j), with cos θ from a naive SVD of G1ᵀG2 (§2)."""
    rng = np.random.default_rng(seed)
    n, k = 12, 3
    p = rng.dirichlet(np.ones(n))
    s = np.sqrt(p)[:, None]
    G1 = np.linalg.qr(rng.standard_normal((n, k)))[0]
    G2 = np.linalg.qr(G1 + 0.7 * rng.standard_normal((n, k)))[0]
    F1, F2 = G1 / s, G2 / s
    cos = np.linalg.svd(G1.T @ G2, compute_uv=False)
    pr, pa = procrustes(F1, F2, p), principal_angles(F1, F2, p)
    assert_close(pr.residual ** 2, 2 * np.sum(1 - cos))
    assert_close(pa.sin_theta ** 2, np.sum(1 - cos**2))
    assert_close(pa.cosines, cos)
    assert_close(pr.singular_values, cos, what="whitened: Procrustes σ are the cosines")


def test_coupled_comparison_by_hand_with_one_nuisance_feature():
    """§4 bad/good: f1 = (h1, h2)(z) nuisance-free, f2 = (h1(z), t(n2)) with E[t] = 0, E[t²] = 1.

    M = E_γ[f2ᵀ f1] = diag(1, 0): correlations (1, 0); res² = 2k − 2Σσ = 2 so ρ_P = 1 = √(2(k − k_Z)/k);
    f2 − f1 Mᵀ = (0, t) so ‖sinΘ‖² = 1 and s_Θ = 1/√2.
    """
    rng = np.random.default_rng(7)
    p_z = np.array([0.1, 0.2, 0.3, 0.4])
    q1, q2 = np.array([0.3, 0.7]), np.array([0.2, 0.5, 0.3])
    h = _basis(p_z)[:, :2] / np.sqrt(p_z)[:, None]  # whitened, centred functions of z
    t = rng.standard_normal(3)
    t -= q2 @ t
    t /= np.sqrt(q2 @ t**2)
    F1 = np.repeat(h, q1.size, axis=0)  # row z·|N1| + n
    F2 = np.column_stack([np.repeat(h[:, 0], q2.size), np.tile(t, p_z.size)])
    comp = coupled_comparison(F1, q1, F2, q2, p_z)
    assert_close(comp.correlations, [1.0, 0.0])
    assert_close(comp.rho_p, 1.0)
    assert_close(comp.s_theta, 1 / np.sqrt(2))
    # without the nuisance feature the two agree exactly, up to the reflection diag(1, −1)
    F2_free = np.repeat(h * [1.0, -1.0], q2.size, axis=0)
    free = coupled_comparison(F1, q1, F2_free, q2, p_z)
    assert free.rho_p < ATOL and free.s_theta < ATOL
    assert_close(free.Q, np.diag([1.0, -1.0]))
    assert_close(free.det_q, -1.0)


def _pair(rho_p, s_theta, predicted=None):
    return PairSummary(a="x", b="y", rho_p=rho_p, s_theta=s_theta, mean_correlation=0.5, det_q=1.0,
                       predicted_rho_p=predicted)


@pytest.mark.parametrize("ratio, verdict", [(1.0, "PASS"), (1.2, "PASS"), (np.sqrt(2), "PASS"), (1.4143, "FAIL"),
                                            (1.5, "FAIL"), (0.999, "FAIL")])
def test_report_sandwich_check_uses_exactly_sqrt2(ratio, verdict):
    """The report's sandwich check flags res/‖sinΘ‖ outside [1, √2], and only there."""
    k, s_theta = 2, 0.3
    rotation, sandwich = pair_checks(_pair(ratio * s_theta, s_theta), k)
    assert sandwich.verdict == verdict, (ratio, sandwich)
    assert rotation.verdict == "N/A"


def test_report_rotation_check_tolerance():
    k = 3
    assert pair_checks(_pair(0.5, 0.4, predicted=0.5 + 0.5 * RHO_ATOL), k)[0].verdict == "PASS"
    assert pair_checks(_pair(0.5, 0.4, predicted=0.5 + 2 * RHO_ATOL), k)[0].verdict == "FAIL"
