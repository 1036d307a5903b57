"""The population Epps–Pulley statistic of a finite law (docs/theory.md §7): closed form vs its defining integral."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import binom

from support import assert_close
from prhsim import ResourceError, memory_limit
from prhsim.objectives import COLLAPSE_EP, epps_pulley_quadrature, population_epps_pulley, population_sigreg


def ep_by_quadrature(s: np.ndarray, p: np.ndarray) -> float:
    """``∫_ℝ |φ_s(t) − e^{−t²/2}|² e^{−t²/2} dt`` by scipy.integrate.quad (even integrand: twice [0, 12])."""
    def integrand(t):
        re = np.sum(p * np.cos(t * s)) - np.exp(-t * t / 2)
        im = np.sum(p * np.sin(t * s))
        return (re * re + im * im) * np.exp(-t * t / 2)
    value, _ = quad(integrand, 0.0, 12.0, limit=400, epsabs=1e-14, epsrel=1e-12)
    return 2 * value  # e^{−72} beyond 12: nothing left


def trapezoid_of_law(s: np.ndarray, p: np.ndarray) -> float:
    """LeJEPA's 17-knot rule on [0, 3] (T/N) applied to the exact characteristic function of the law."""
    t, w = epps_pulley_quadrature()
    phi = (p[:, None] * np.exp(1j * s[:, None] * t)).sum(axis=0)
    return float(np.sum(w * np.abs(phi - np.exp(-t**2 / 2)) ** 2))


def test_closed_form_matches_the_integral() -> None:
    rng = np.random.default_rng(0)
    F, p = rng.standard_normal((5, 3)), rng.dirichlet(np.ones(5))
    A = rng.standard_normal((3, 4))
    A /= np.linalg.norm(A, axis=0)
    values = population_epps_pulley(F, p, A)
    assert values.shape == (4,)
    for j in range(4):
        assert_close(values[j], ep_by_quadrature(F @ A[:, j], p), atol=1e-8, rtol=0)
    assert_close(population_sigreg(F, p, A), values.mean())
    assert_close(population_epps_pulley(F, p, A[:, 0]), values[0])


def test_collapse_and_the_two_laws_of_the_theory() -> None:
    assert_close(COLLAPSE_EP, np.sqrt(2 * np.pi) - 2 * np.sqrt(np.pi) + np.sqrt(2 * np.pi / 3))
    assert round(COLLAPSE_EP, 3) == 0.409
    assert_close(population_epps_pulley(np.zeros((4, 2)), np.full(4, 0.25), np.array([0.6, 0.8])), COLLAPSE_EP,
                 atol=1e-12, rtol=0)
    assert_close(COLLAPSE_EP, ep_by_quadrature(np.zeros(1), np.ones(1)), atol=1e-8, rtol=0)
    # two whitened 1-D laws: Rademacher 0.109, the 3-point law (1/6, 2/3, 1/6) on (−√3, 0, √3) 0.028
    rademacher = population_epps_pulley(np.array([[-1.0], [1.0]]), np.array([0.5, 0.5]), np.ones(1))
    three = population_epps_pulley(np.sqrt(3) * np.array([[-1.0], [0.0], [1.0]]), np.array([1, 4, 1]) / 6, np.ones(1))
    assert (round(float(rademacher), 3), round(float(three), 3)) == (0.109, 0.028)


@pytest.mark.parametrize("m", [4, 8, 20])
def test_lejepa_trapezoid_is_within_one_percent_on_near_gaussian_laws(m: int) -> None:
    """Standardised Binomial(m, 1/2): the 17-knot rule on [0, 3] is within 1% of the full-line value.

    The rule misses the tail |t| > 3, where the weight e^{−t²/2} < 0.011 and
    φ_s ≈ e^{−t²/2} for a law close to N(0, 1); its discretisation error is
    O(Δ²), Δ = 3/16. (Measured: −0.25%, −0.09%, −0.13% for m = 4, 8, 20.) A coarse
    lattice is different: its φ_s is periodic (period 2π/spacing) and returns to
    |φ_s| = 1 just past t = 3 for spacing √3, so the 3-point law of §7 is 20% off.
    """
    k = np.arange(m + 1)
    s, p = (k - m / 2) / np.sqrt(m / 4), binom.pmf(k, m, 0.5)
    full = float(population_epps_pulley(s[:, None], p, np.ones(1)))
    assert_close(full, ep_by_quadrature(s, p), atol=1e-8, rtol=0)
    assert abs(trapezoid_of_law(s, p) / full - 1) < 0.01


def test_blocks_do_not_change_the_value() -> None:
    rng = np.random.default_rng(1)
    F, p = rng.standard_normal((9, 2)), rng.dirichlet(np.ones(9))
    A = np.linalg.qr(rng.standard_normal((2, 2)))[0]
    assert_close(population_epps_pulley(F, p, A, block=5), population_epps_pulley(F, p, A), atol=1e-14, rtol=0)


def test_rotation_invariance() -> None:
    """EP depends on the law of aᵀf only: rotating features and directions together changes nothing."""
    rng = np.random.default_rng(2)
    F, p = rng.standard_normal((7, 3)), rng.dirichlet(np.ones(7))
    A = rng.standard_normal((3, 5))
    A /= np.linalg.norm(A, axis=0)
    Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    assert_close(population_epps_pulley(F @ Q, p, Q.T @ A), population_epps_pulley(F, p, A))


def test_memory_guard_and_shape_errors() -> None:
    F, p = np.zeros((1000, 2)), np.full(1000, 1e-3)
    with memory_limit(10_000), pytest.raises(ResourceError, match="lower block"):
        population_epps_pulley(F, p, np.ones((2, 3)))
    with pytest.raises(ValueError, match="p must have shape"):
        population_epps_pulley(F, p[:-1], np.ones(2))
    with pytest.raises(ValueError, match="directions must have shape"):
        population_epps_pulley(F, p, np.ones(3))
