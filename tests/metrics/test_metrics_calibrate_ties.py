"""The permutation null's tie rule and its Type-I error: rounding never decides a p-value.

Under the null hypothesis (A and B unrelated), the add-one p-value of K permutations rejects at level α at most a
fraction α of the time; where every score is the same number (degenerate inputs), it never rejects.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from prhsim.metrics import calibrate
from prhsim.metrics._calibrate import TIE_TOL, null_verdict
from prhsim.metrics._registry import METRICS

#: Every registered metric under every convention it has (R@1 fits on part of the rows: the same rule applies).
CASES = [(name, convention) for name, record in METRICS.items() for convention in record.conventions]


@pytest.mark.parametrize("raw", [0.0, 0.37, 1.0, -0.8, 3.5])
def test_a_null_score_just_inside_the_tolerance_ties_and_one_just_outside_does_not(raw):
    tie = TIE_TOL * max(1.0, abs(raw))
    inside, outside = raw - 0.5 * tie, raw - 2.0 * tie
    assert null_verdict(raw, np.array([inside, -5.0, -5.0]), 0.25)[0] == 2 / 4
    assert null_verdict(raw, np.array([outside, -5.0, -5.0]), 0.25)[0] == 1 / 4
    assert null_verdict(raw, np.array([raw + 2 * tie, -5.0, -5.0]), 0.25)[0] == 2 / 4


def test_a_calibrated_score_within_the_tolerance_of_the_critical_value_is_zero():
    raw = 1.0 - 1e-13  # tau lies 0.5e-13 below raw, 1e-13 below s_max: noise, not a calibrated score of 0.5
    p, tau, calibrated = null_verdict(raw, np.full(19, 1.0 - 1.5e-13), 0.05)
    assert (p, tau, calibrated) == (1.0, 1.0 - 1.5e-13, 0.0)
    assert null_verdict(0.9, np.full(19, 0.5), 0.05) == (0.05, 0.5, pytest.approx(0.8))  # far from a tie: as defined


def _unrelated(n, rng, kind):
    if kind == "gaussian":
        return rng.normal(size=(n, 14)), rng.normal(size=(n, 12))
    if kind == "duplicates":  # every row twice on each side, the two sides' twins paired at random (exchangeable):
        a, b = rng.normal(size=(n // 2, 14)), rng.normal(size=(n // 2, 12))  # kernels and neighbour lists full of ties
        return np.repeat(a, 2, axis=0), np.repeat(b, 2, axis=0)[rng.permutation(n // 2 * 2)]
    # "far apart": raw rows at a scale where the PRH RBF bandwidth makes both kernels the identity to float64
    return 1e3 * rng.normal(size=(n, 14)), 1e3 * rng.normal(size=(n, 12))


@pytest.mark.parametrize("name, convention", CASES)
@pytest.mark.parametrize("n, kind", [(16, "gaussian"), (40, "gaussian"), (24, "duplicates"), (16, "far apart")])
def test_type_one_error_is_at_most_alpha_for_every_metric(name, convention, n, kind):
    """60 unrelated pairs, K = 19, α = 0.25 (α(K + 1) = 5, so P(p <= α) = α exactly for distinct scores): the
    rejections are at most what Binomial(60, 0.25) reaches with probability 1e-4."""
    rng = np.random.default_rng([n, len(name), len(kind), len(convention)])
    trials, rejected = 60, 0
    for trial in range(trials):
        a, b = _unrelated(n, rng, kind)
        cal = calibrate(name, a, b, permutations=19, alpha=0.25, knn_k=3, convention=convention, rng=trial)
        rejected += cal.p_value <= 0.25
    assert rejected <= binom.ppf(1 - 1e-4, trials, 0.25), (name, convention, kind, rejected)


@pytest.mark.parametrize("n", [20, 60, 200])
def test_where_every_score_is_the_same_number_rounding_does_not_decide_the_p_value(n):
    """RBF CKA under the PRH convention on rows far apart: both kernels are the identity to float64 and every null
    score is the observed one. The registered score of float64 rows is the null route's identity, bit for bit (it was
    another float64 route, 1.9e-15 to 4.9e-14 away at N = 20 to 200); a score from another route (torch below, or a
    difference of that size either way) still ties with the null: p = 1."""
    rng = np.random.default_rng(n)
    a, b = 1e3 * rng.normal(size=(n, 14)), 1e3 * rng.normal(size=(n, 12))
    cal = calibrate("rbf_cka", a, b, permutations=19, alpha=0.25, convention="prh")
    assert np.all(cal.null == cal.raw) and (cal.p_value, cal.calibrated) == (1.0, 0.0)
    assert METRICS["rbf_cka"](a, b, knn_k=3, convention="prh") == cal.raw
    for observed in (cal.raw - 2.4e-16 * n, cal.raw + 2.4e-16 * n):
        assert observed != cal.raw and null_verdict(observed, cal.null, 0.25) == (1.0, pytest.approx(cal.raw), 0.0)


def test_a_torch_score_compared_with_the_float64_null_ties():
    """Another library computes the same score by its own route; against the null it ties, as the rule says."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    a, b = 1e3 * rng.normal(size=(60, 14)), 1e3 * rng.normal(size=(60, 12))
    cal = calibrate("rbf_cka", a, b, permutations=19, alpha=0.25, convention="prh")
    observed = METRICS["rbf_cka"](torch.from_numpy(a), torch.from_numpy(b), knn_k=3, convention="prh")
    assert abs(observed - cal.raw) <= TIE_TOL
    assert null_verdict(observed, cal.null, 0.25) == (1.0, pytest.approx(cal.raw), 0.0)
