"""The PRH sample metrics of a run's modality pairs (docs/theory.md §10) and the metric bridge.

Known answers: under good views every modality's optimum is the same function of z up to a
rotation, so paired observations score mutual k-NN = CKA = R@1 = 1; under bad views the
metrics fall with ρ_P. The rows are exactly what the definition says (a twin draws them again).
"""

from __future__ import annotations

import numpy as np
import pytest

from prhsim.config import RunConfig
from prhsim.experiments import run_experiment
from prhsim.experiments._pair_metrics import KNN_K, pair_metrics
from prhsim.metrics._cka import linear_cka
from prhsim.metrics._knn import mutual_knn
from prhsim.metrics._retrieval import retrieval

SMALL = {"world": {"kind": "gridscene", "size": 3, "objects": 1}}


def test_good_views_score_the_maximum_and_bad_views_fall_with_rho():
    """Default gridscene (k = 10 features separate the states): all three metrics 1. On gridscene(3, 1 object)
    k = 3 features leave many states with equal features, so R@1 is a tie among them (measured 0.22) while
    mutual k-NN and CKA stay 1: retrieval needs features that tell the states apart."""
    good = run_experiment(RunConfig())
    for p in good.pairs:
        assert p.samples == 2000 and p.knn_k == 10 and p.chance["mutual_knn"] == pytest.approx(10 / 1999)
        assert p.chance["retrieval_r1"] == pytest.approx(1 / 1000) and "linear_cka" not in p.chance
        assert p.metrics == pytest.approx({"mutual_knn": 1.0, "linear_cka": 1.0, "retrieval_r1": 1.0})
    small = run_experiment(RunConfig.model_validate(SMALL))
    assert all(p.samples == 81 and p.metrics["mutual_knn"] == pytest.approx(1.0) and p.metrics["retrieval_r1"] < 0.5
               for p in small.pairs)
    bad = run_experiment(RunConfig.model_validate({**SMALL, "views": "bad", "eps": 0.1}))
    for p in bad.pairs:
        assert p.rho_p > 1.0 and p.metrics["mutual_knn"] < 0.5 and p.metrics["linear_cka"] < 0.9


def test_the_rows_are_paired_observations_of_states_drawn_from_p():
    """A twin draws the same states and nuisances with the same generator and scores them directly."""
    rng = np.random.default_rng(0)
    n_z, k = 300, 3
    p_z = rng.dirichlet(np.ones(n_z))
    q_a, q_b = np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5])
    h = rng.standard_normal((n_z, k))
    F_a = np.repeat(h, 2, axis=0)  # nuisance-free: F(z, n) = h(z)
    F_b = np.repeat(h @ np.linalg.qr(rng.standard_normal((k, k)))[0], 3, axis=0) + 0.3 * rng.standard_normal((n_z * 3, k))
    got = pair_metrics(F_a, q_a, F_b, q_b, p_z, rng=np.random.default_rng(7))
    twin = np.random.default_rng(7)
    z = np.sort(twin.choice(n_z, size=n_z, replace=False, p=p_z))
    na, nb = twin.choice(2, size=n_z, p=q_a), twin.choice(3, size=n_z, p=q_b)
    A, B = F_a[z * 2 + na], F_b[z * 3 + nb]
    fit = np.zeros(n_z, dtype=bool)
    fit[twin.permutation(n_z)[: n_z // 2]] = True
    recall = retrieval(A, B, fit=fit, ks=(1,))
    assert got.samples == n_z and got.knn_k == KNN_K
    assert got.scores["mutual_knn"] == pytest.approx(mutual_knn(A, B, knn_k=KNN_K), abs=1e-12)
    assert got.scores["linear_cka"] == pytest.approx(linear_cka(A, B), abs=1e-12)
    assert got.scores["retrieval_r1"] == pytest.approx((recall.a_to_b[1] + recall.b_to_a[1]) / 2, abs=1e-12)
    assert got.chance == pytest.approx({"mutual_knn": KNN_K / (n_z - 1), "retrieval_r1": 1 / (n_z - n_z // 2)})
    assert 0.0 < got.scores["mutual_knn"] < 1.0 and 0.0 <= got.scores["retrieval_r1"] <= 1.0
    assert pair_metrics(F_a[:10], q_a, F_b[:15], q_b, np.full(5, 0.2), rng=np.random.default_rng(0)) is None


def test_the_metric_bridge_starts_aligned_and_maps_knn_to_rho():
    from prhsim.experiments.sweeps._metric_bridge import metric_bridge

    result = metric_bridge(levels=4, samples=300)
    for family in ("noise", "kernel", "bad-view"):
        cells = [c for c in result.cells if c.family == family]
        assert cells[0].rho_p < 1e-8 and cells[0].metrics["linear_cka"] == pytest.approx(1.0, abs=1e-8)
        assert cells[-1].rho_p > 0.5 and cells[-1].metrics["mutual_knn"] < cells[0].metrics["mutual_knn"]
        assert list(cells[0].metrics) == result.metrics == ["mutual_knn", "linear_cka", "retrieval_r1", "cknna"]
    noise = [c for c in result.cells if c.family == "noise"]
    assert all(a.rho_p < b.rho_p for a, b in zip(noise, noise[1:]))  # the noise path is monotone in ρ_P
    for table in result.rho_at_mutual_knn.values():
        assert set(table) == {"0.1", "0.2", "0.4", "0.6", "0.8"}


def test_calibrated_pair_metrics_are_the_null_of_the_same_rows_and_leave_the_raw_ones_alone():
    """With permutations K the rows, the raw metrics and every other field are those of K = 0; the calibration is
    prhsim.metrics.calibrate on the same paired rows (a twin draws them again), with the seed drawn last."""
    from prhsim.metrics import calibrate

    rng = np.random.default_rng(0)
    n_z, k = 300, 3
    p_z = rng.dirichlet(np.ones(n_z))
    q_a, q_b = np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5])
    h = rng.standard_normal((n_z, k))
    F_a = np.repeat(h, 2, axis=0)
    F_b = np.repeat(h @ np.linalg.qr(rng.standard_normal((k, k)))[0], 3, axis=0) + 0.3 * rng.standard_normal((n_z * 3, k))
    plain = pair_metrics(F_a, q_a, F_b, q_b, p_z, rng=np.random.default_rng(7))
    got = pair_metrics(F_a, q_a, F_b, q_b, p_z, rng=np.random.default_rng(7), permutations=99)
    for field in ("samples", "knn_k", "scores", "chance"):
        assert getattr(got, field) == getattr(plain, field)
    assert plain.permutations is None and got.permutations == 99
    twin = np.random.default_rng(7)
    z = np.sort(twin.choice(n_z, size=n_z, replace=False, p=p_z))
    na, nb = twin.choice(2, size=n_z, p=q_a), twin.choice(3, size=n_z, p=q_b)
    A, B = F_a[z * 2 + na], F_b[z * 3 + nb]
    twin.permutation(n_z)  # the retrieval's fit/test split
    seed = int(twin.integers(2**31))
    knn = calibrate("mutual_knn", A, B, permutations=99, knn_k=KNN_K, rng=seed)
    cka = calibrate("linear_cka", A, B, permutations=99, rng=seed)
    assert knn.raw == pytest.approx(got.scores["mutual_knn"], abs=1e-12)
    assert set(got.calibrations) == {"mutual_knn", "linear_cka"}  # R@1 fits a map: not calibrated
    for name, twin_calibration in (("mutual_knn", knn), ("linear_cka", cka)):
        mine = got.calibrations[name]
        assert (mine.calibrated, mine.p_value) == (twin_calibration.calibrated, twin_calibration.p_value)
    assert knn.p_value == 0.01 and cka.p_value == 0.01  # aligned rows beat every permutation


def test_the_run_reports_calibrated_pair_metrics_when_asked():
    plain = run_experiment(RunConfig.model_validate(SMALL))
    calibrated = run_experiment(RunConfig.model_validate({**SMALL, "calibrate": 49}))
    for p, q in zip(plain.pairs, calibrated.pairs):
        assert p.metrics == q.metrics and p.chance == q.chance
        assert p.permutations is None and q.permutations == 49 and q.p_values == {"mutual_knn": 0.02, "linear_cka": 0.02}
        assert 0.9 < q.calibrated["linear_cka"] <= 1.0 and not p.calibrated and not p.p_values


def test_the_run_draws_fewer_rows_than_the_bf16_screen_starts_at():
    """The run's k-NN metrics go through the registry with the default screen choice; its sample stays below the
    screen's first size, so the search is the exact one and a run never imports torch for it."""
    from prhsim.experiments._pair_metrics import SAMPLES
    from prhsim.metrics._knn_screen import MIN_ROWS

    assert SAMPLES < MIN_ROWS
