"""``convention=``: one switch between prhsim's definitions and the PRH code's, checked wherever a metric is called.

The PRH code's formulas themselves are checked against an independent twin in
test_metrics_prh_convention.py; here: the switch is validated everywhere, reaches every
path (registry, protocol, calibration's fast paths), and the protocol reads per-layer lists.
"""

from __future__ import annotations

import numpy as np
import pytest

from prhsim.metrics import (
    CONVENTIONS,
    PRH_METRICS,
    calibrate,
    clip_stack,
    cknna,
    cknna_agnostic,
    cknna_biased,
    cycle_knn,
    linear_cka,
    mutual_knn,
    prh_protocol,
    rbf_cka,
    svcca,
    unbiased_cka,
)
from prhsim.metrics._registry import Metric


def _pair(n: int = 48, da: int = 12, db: int = 11, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, da))
    return a, a[:, :db] @ rng.normal(size=(db, db)) + 0.8 * rng.normal(size=(n, db))


def test_the_conventions_are_prhsim_first_then_prh():
    assert CONVENTIONS == ("prhsim", "prh")


@pytest.mark.parametrize("fn", [mutual_knn, cycle_knn, cknna, linear_cka, unbiased_cka, rbf_cka, svcca])
def test_an_unknown_convention_is_a_one_line_error_naming_the_choices(fn):
    a, b = _pair()
    with pytest.raises(ValueError, match=r"^convention must be one of 'prhsim', 'prh', got 'PRH'$"):
        fn(a, b, convention="PRH")


def test_the_protocol_clip_and_calibration_refuse_an_unknown_convention():
    a, b = _pair()
    for call in (lambda: prh_protocol(a[:, None], b[:, None], convention="x"),
                 lambda: clip_stack(a, 0.9, convention="x"),
                 lambda: calibrate("linear_cka", a, b, permutations=3, convention="x")):
        with pytest.raises(ValueError, match="convention must be one of"):
            call()


@pytest.mark.parametrize("name", sorted(n for n, m in PRH_METRICS.items() if "prh" in m.conventions))
def test_the_registry_passes_the_convention_to_the_function(name):
    a, b = _pair()
    direct = {"mutual_knn": lambda c: mutual_knn(a, b, knn_k=5, convention=c),
              "cycle_knn": lambda c: cycle_knn(a, b, knn_k=5, convention=c),
              "cknna": lambda c: cknna(a, b, knn_k=5, convention=c),
              "cknna_agnostic": lambda c: cknna_agnostic(a, b, knn_k=5, convention=c),
              "cknna_biased": lambda c: cknna_biased(a, b, knn_k=5, convention=c),
              "linear_cka": lambda c: linear_cka(a, b, convention=c),
              "unbiased_cka": lambda c: unbiased_cka(a, b, convention=c),
              "rbf_cka": lambda c: rbf_cka(a, b, convention=c),
              "svcca": lambda c: svcca(a, b, convention=c)}[name]
    for convention in CONVENTIONS:
        assert PRH_METRICS[name](a, b, knn_k=5, convention=convention) == direct(convention)


@pytest.mark.parametrize("name", ["cknna", "unbiased_cka", "rbf_cka", "svcca"])
def test_the_prh_convention_changes_every_metric_the_prh_code_defines_otherwise(name):
    a, b = _pair()
    mine, theirs = (PRH_METRICS[name](a, b, knn_k=5, convention=c) for c in CONVENTIONS)
    assert abs(mine - theirs) > 1e-9, (name, mine, theirs)


def test_linear_cka_under_the_prh_convention_is_shrunk_by_exactly_its_epsilon():
    """HSIC_kl/(s + 1e-6) against HSIC_kl/s, s = √(HSIC_kk·HSIC_ll): visible on small features."""
    a, b = (0.01 * x for x in _pair())
    ac, bc = a - a.mean(0), b - b.mean(0)
    s = np.linalg.norm(ac.T @ ac) * np.linalg.norm(bc.T @ bc)
    mine, theirs = linear_cka(a, b), linear_cka(a, b, convention="prh")
    assert theirs == pytest.approx(mine * s / (s + 1e-6), rel=1e-12)
    assert mine - theirs > 1e-4


def test_a_users_metric_without_conventions_scores_under_prhsim_and_refuses_prh_by_name():
    a, b = _pair()
    metric = Metric("mine", lambda x, y, *, knn_k: float(np.sum(x[:, 0] * y[:, 0])))
    assert metric(a, b, knn_k=3) == pytest.approx(float(a[:, 0] @ b[:, 0]), rel=1e-15)
    with pytest.raises(ValueError, match=r"metric 'mine' has no 'prh' convention \(it has: prhsim\)"):
        metric(a, b, knn_k=3, convention="prh")


@pytest.mark.parametrize("name", ["linear_cka", "unbiased_cka", "rbf_cka", "mutual_knn", "cycle_knn", "cknna"])
def test_calibration_under_the_prh_convention_is_the_prh_metric_recomputed_per_permutation(name):
    """The fast paths (CKA: the 1e-6, no clip, the fixed bandwidth; k-NN: inner products of rows of unequal
    norms, where the conventions' lists differ) give the null of recomputing the metric."""
    a, b = _pair(n=40)
    rng = np.random.default_rng(3)
    a = a * rng.uniform(0.2, 3.0, size=(40, 1))
    perms = np.array([rng.permutation(40) for _ in range(12)])
    cal = calibrate(name, a, b, permutations=perms, knn_k=4, convention="prh")
    naive = np.array([PRH_METRICS[name](a, b[p], knn_k=4, convention="prh") for p in perms])
    np.testing.assert_allclose(cal.null, naive, rtol=0, atol=1e-12)
    assert cal.raw == pytest.approx(PRH_METRICS[name](a, b, knn_k=4, convention="prh"), abs=1e-12)


def test_the_prh_tensor_clip_takes_the_order_statistic_where_prhsim_interpolates():
    """At 12 entries and q = 0.95 the PRH code takes sorted |x|[int(11.4)] = the largest; prhsim interpolates."""
    x = np.arange(1.0, 13.0).reshape(3, 4) * np.array([1, -1, 1, -1])
    prh, mine = clip_stack(x, 0.95, convention="prh"), clip_stack(x, 0.95)
    assert np.max(np.abs(prh)) == 12.0  # index int(0.95 * 12) = 11 of 0..11
    assert np.max(np.abs(mine)) == pytest.approx(11 + 0.45, abs=1e-12)  # 0.95 * 11 = 10.45 -> 11 + 0.45 * 1
    np.testing.assert_array_equal(clip_stack(x, 0.5, convention="prh"), np.clip(x, -7.0, 7.0))  # index 6: 7
    np.testing.assert_array_equal(clip_stack(x, 1.0, convention="prh"), x)


def test_a_list_of_layers_is_clipped_layer_by_layer_and_may_mix_widths():
    rng = np.random.default_rng(1)
    layers_a = [rng.standard_t(3, size=(30, 6)), 5.0 * rng.standard_t(3, size=(30, 9))]
    layers_b = [rng.normal(size=(30, 4))]
    got = prh_protocol(layers_a, layers_b, metric="linear_cka", clip_quantile=0.9)
    expected = [linear_cka(*(x / np.linalg.norm(x, axis=1, keepdims=True) for x in
                             (clip_stack(layer, 0.9), clip_stack(layers_b[0], 0.9)))) for layer in layers_a]
    np.testing.assert_allclose(got.table[:, 0], expected, rtol=1e-13)
    # one stacked layer is the same as a list of that one layer
    one = prh_protocol(layers_a[:1], layers_b, metric="mutual_knn", knn_k=3)
    stacked = prh_protocol(layers_a[0][:, None], layers_b[0][:, None], metric="mutual_knn", knn_k=3)
    assert one.best == stacked.best


def test_a_list_of_layers_is_checked_layer_by_layer():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match=r"feats_a\[1\] must be a 2-D layer"):
        prh_protocol([rng.normal(size=(8, 3)), rng.normal(size=(8, 3, 1))], rng.normal(size=(8, 1, 3)))
    with pytest.raises(ValueError, match="the layers of feats_a must have one number of samples N, got"):
        prh_protocol([rng.normal(size=(8, 3)), rng.normal(size=(9, 3))], rng.normal(size=(8, 1, 3)))
    with pytest.raises(ValueError, match="feats_b is an empty list of layers"):
        prh_protocol(rng.normal(size=(8, 1, 3)), [])
    bad = rng.normal(size=(8, 3))
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"feats_a\[0\]"):
        prh_protocol([bad], rng.normal(size=(8, 1, 3)))


def test_a_metric_with_one_definition_refuses_the_prh_convention_in_one_line():
    a, b = _pair()
    with pytest.raises(ValueError, match=r"^metric 'retrieval_r1' has no 'prh' convention \(it has: prhsim\)$"):
        PRH_METRICS["retrieval_r1"](a, b, knn_k=5, convention="prh")
