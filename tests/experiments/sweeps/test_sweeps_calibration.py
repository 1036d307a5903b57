"""The calibration sweep: a uniform null, calibrated scores where the truth is known, and the width and depth
confounders that raw scores carry and calibrated scores do not; every number the summary prints against a twin
computed from its definition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import kstest, kstwo

from prhsim.cli import main
from prhsim.experiments.sweeps._calibration import CalibrationSettings, calibration_sweep, summary
from prhsim.experiments.sweeps._calibration_draws import (
    SIGNAL_RANK,
    Scene,
    depth_draw,
    null_draw,
    pair_table,
    signal_noise_variance,
    view_draw,
    width_draw,
)
from prhsim.metrics import calibrate, mutual_knn
from prhsim.worlds import bad

SMALL = dict(samples=64, permutations=39, knn_k=5, n_seeds=300, n_seeds_views=2, n_seeds_confounders=40,
             widths=(4, 16, 64, 256), depths=(1, 4), depth_width=8, seed=0)
#: A test at this level fails on a correct null once in a thousand runs.
SMALL_P = 1e-3


@pytest.fixture(scope="module")
def small():
    return calibration_sweep(**SMALL)


@pytest.fixture(scope="module")
def scene():
    return Scene(0.1)


def cka(a: np.ndarray, b: np.ndarray) -> float:
    """Linear CKA from its definition: ‖ãᵀb̃‖²_F / (‖ãᵀã‖_F ‖b̃ᵀb̃‖_F) on column-centred ã, b̃."""
    a, b = a - a.mean(axis=0), b - b.mean(axis=0)
    return float(np.linalg.norm(a.T @ b) ** 2 / (np.linalg.norm(a.T @ a) * np.linalg.norm(b.T @ b)))


def by_definition(raw: float, null: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """(p, τ, calibrated) from the add-one formula, the ⌈(1 − α)(K + 1)⌉-th smallest score and the clamp."""
    K = null.size
    p = (1 + np.sum(null >= raw)) / (K + 1)
    tau = float(np.sort(np.append(null, raw))[math.ceil((1 - alpha) * (K + 1) - 1e-9) - 1])
    return float(p), tau, min(max((raw - tau) / (1 - tau), 0.0), 1.0)


def three_se(level: float, n: int) -> float:
    return 3 * math.sqrt(level * (1 - level) / n)


# --------------------------------------------------------------------------------------
# the null
# --------------------------------------------------------------------------------------
def test_null_p_values_are_uniform_and_reject_at_the_level(small):
    K = small.permutations
    for c in small.null:
        p = np.asarray(c.p_values)
        assert np.allclose(p * (K + 1), np.round(p * (K + 1)), atol=1e-9) and p.min() >= 1 / (K + 1)
        assert c.ks_p_value > SMALL_P, (c.metric, c.ks_statistic, c.ks_p_value)
        assert abs(c.rejection_rate - small.level) < three_se(small.level, small.n_seeds), c.metric
        assert np.median(c.calibrated) == 0.0


def _null_scores(scene, draws, perms_of):
    """(raw, null) of linear CKA on the null draws, with the permutations ``perms_of(perms)`` instead of the draw's."""
    out = []
    for i in range(draws):
        A, B, perms = null_draw(scene, 7, i, 64, 39)
        c = calibrate("linear_cka", A, B, permutations=perms_of(perms))
        out.append((c.raw, np.asarray(c.null), c.p_value))
    return out


def test_the_ks_test_rejects_a_null_whose_rows_are_not_permuted(scene):
    """Power: p-values from "permutations" that leave the rows in place (all 1), or swap only two rows (the null
    scores sit at the observed one), are far from uniform, and the same KS test rejects them."""
    identity = _null_scores(scene, 60, lambda perms: np.tile(np.arange(perms.shape[1]), (perms.shape[0], 1)))
    assert all(p == 1.0 for _, _, p in identity)
    assert kstest([p for _, _, p in identity], "uniform").pvalue < 1e-12

    def swap_two(perms):
        gen = np.random.default_rng(0)
        out = np.tile(np.arange(perms.shape[1]), (perms.shape[0], 1))
        for row in out:
            i, j = gen.choice(row.size, size=2, replace=False)
            row[[i, j]] = row[[j, i]]
        return out

    swapped = _null_scores(scene, 60, swap_two)
    assert kstest([p for _, _, p in swapped], "uniform").pvalue < SMALL_P
    correct = _null_scores(scene, 60, lambda perms: perms)
    assert kstest([p for _, _, p in correct], "uniform").pvalue > SMALL_P


def test_the_un_add_one_p_value_is_zero_where_no_valid_p_value_can_be(scene):
    """#{s_j ≥ s}/K, without the add-one, is 0 whenever the observed score beats every null score: under the null
    that happens on 1/(K + 1) of the draws, and P(p ≤ 0) = 1/(K + 1) > 0 breaks validity. A KS test against
    U(0, 1) cannot see it (both formulas sit one grid step 1/(K + 1) from the diagonal); counting p = 0 does."""
    scores = _null_scores(scene, 300, lambda perms: perms)
    un_add_one = np.array([np.sum(null >= raw) / null.size for raw, null, _ in scores])
    add_one = np.array([p for _, _, p in scores])
    assert add_one.min() >= 1 / 40
    zero = float(np.mean(un_add_one == 0.0))
    assert 0.0 < zero and abs(zero - 1 / 40) < three_se(1 / 40, 300)


# --------------------------------------------------------------------------------------
# good and bad views
# --------------------------------------------------------------------------------------
def test_good_views_calibrate_near_one_bad_views_between_and_the_null_to_zero(small):
    good = small.find("views", "linear_cka", view="good")
    bad_view = small.find("views", "linear_cka", view="bad")
    assert good.calibrated_mean > 0.95 and good.p_value_max == pytest.approx(1 / (small.permutations + 1))
    assert small.nuisance_free == 7 and bad_view.population == pytest.approx(0.7)
    assert 0.0 < bad_view.calibrated_mean < good.calibrated_mean and abs(bad_view.raw_mean - 0.7) < 0.1
    for view in ("good", "bad"):
        c = small.find("views", "mutual_knn", view=view)
        assert 0.0 < c.calibrated_mean <= 1.0 and c.p_value_max == pytest.approx(1 / (small.permutations + 1))
    assert small.find("views", "mutual_knn", view="good").calibrated_mean > 0.9
    assert small.find("null", "linear_cka").calibrated_mean < 0.01


def test_the_bad_view_s_population_cka_is_k_z_over_k(scene):
    """Brute force over every state: C = Σ_z p(z) E[f_a | z] E[f_b | z]ᵀ under the coupling of independent
    nuisances, and CKA = ‖C‖²_F / (‖Σ_a‖_F ‖Σ_b‖_F) equals k_Z/k of the merge rule."""
    p, k = scene.p, scene.k
    means, covs = [], []
    for opt, mod in ((scene.bad_a, scene.a), (scene.good_b, scene.b)):
        F = opt.features().reshape(p.size, mod.n_nuisance, k)
        means.append(np.einsum("znk,n->zk", F, mod.nuisance))
        covs.append(np.einsum("z,n,zni,znj->ij", p, mod.nuisance, F, F))
    C = means[0].T @ (p[:, None] * means[1])
    population = np.linalg.norm(C) ** 2 / (np.linalg.norm(covs[0]) * np.linalg.norm(covs[1]))
    assert bad(0.1).eps == 0.1 and scene.nuisance_free == 7
    assert population == pytest.approx(scene.nuisance_free / k, abs=1e-10)


# --------------------------------------------------------------------------------------
# the confounders
# --------------------------------------------------------------------------------------
def test_raw_null_cka_grows_with_width_while_calibrated_stays_zero(small):
    null = [small.find("widths", "linear_cka", width=d, kind="null") for d in SMALL["widths"]]
    signal = [small.find("widths", "linear_cka", width=d, kind="signal") for d in SMALL["widths"]]
    raw = [c.raw_mean for c in null]
    assert all(b > a for a, b in zip(raw, raw[1:])) and raw[-1] > 0.6, raw
    assert all(c.calibrated_mean < 0.01 for c in null)
    rate, _, draws = small.pooled("widths", "linear_cka")
    assert abs(rate - small.level) < three_se(small.level, draws)
    assert signal[-1].raw_mean - signal[0].raw_mean > 0.2  # the signal's raw score follows the noise up ...
    assert all(abs(c.calibrated_mean - small.signal_cka) < 0.08 for c in signal)  # ... its calibrated one does not


def test_raw_max_grows_with_depth_while_the_null_of_the_max_holds_alpha(small):
    for metric in small.metrics:
        one, four = (small.find("depths", metric, depth=L) for L in (1, 4))
        assert four.raw_mean > one.raw_mean, metric
        rate, _, draws = small.pooled("depths", metric)
        assert abs(rate - small.level) < three_se(small.level, draws), metric
        assert four.naive_rejection_rate > 0.3 and four.naive_predicted == pytest.approx(1 - 0.95**16)


def test_the_signal_s_noise_gives_the_population_cka_it_was_asked_for():
    for width in (4, 8, 100, 4096):
        for c in (0.1, 0.5, 0.9, 1.0):
            v, r = signal_noise_variance(width, c), SIGNAL_RANK
            assert r / (r * (1 + v) ** 2 + (width - r) * v**2) == pytest.approx(c, rel=1e-12)


def test_the_pair_table_is_the_registered_metric_on_every_pair():
    gen = np.random.default_rng(3)
    As, Bs = ([gen.standard_normal((50, 6)) for _ in range(3)] for _ in range(2))
    table = pair_table("mutual_knn", As, Bs, 5)
    assert np.array_equal(table, [[mutual_knn(a, b, knn_k=5) for b in Bs] for a in As])


# --------------------------------------------------------------------------------------
# every printed number against its definition
# --------------------------------------------------------------------------------------
def test_the_draws_calibrate_as_the_definitions_say(small, scene):
    """Draw 0 of each family rebuilt and scored from the definitions: linear CKA by its formula, the null by
    recomputing it on every permuted B (the max over every layer pair for depth), then p, τ and the clamp."""
    alpha = small.alpha
    A, B, perms = null_draw(scene, 0, 0, 64, 39)
    raw = cka(A, B)
    p, tau, calibrated = by_definition(raw, np.array([cka(A, B[q]) for q in perms]), alpha)
    c = small.find("null", "linear_cka")
    assert (c.raw[0], c.p_values[0], c.tau[0], c.calibrated[0]) == pytest.approx((raw, p, tau, calibrated), abs=1e-12)
    good_a, bad_a, B, perms = view_draw(scene, 0, 0, 64, 39)
    for view, A in (("good", good_a), ("bad", bad_a)):
        raw = cka(A, B)
        p, tau, calibrated = by_definition(raw, np.array([cka(A, B[q]) for q in perms]), alpha)
        c = small.find("views", "linear_cka", view=view)
        assert (c.raw[0], c.p_values[0], c.tau[0], c.calibrated[0]) == pytest.approx((raw, p, tau, calibrated),
                                                                                     abs=1e-12)
    noise, signal, perms = width_draw(scene, 0, 16, 0, 64, 39, small.signal_cka)
    for kind, (A, B) in (("null", noise), ("signal", signal)):
        raw = cka(A, B)
        p, _, calibrated = by_definition(raw, np.array([cka(A, B[q]) for q in perms]), alpha)
        c = small.find("widths", "linear_cka", width=16, kind=kind)
        assert (c.raw[0], c.p_values[0], c.calibrated[0]) == pytest.approx((raw, p, calibrated), abs=1e-12)
    As, Bs, perms = depth_draw(0, 4, 0, 64, 39, 8)
    table = np.array([[cka(a, b) for b in Bs] for a in As])
    raw = table.max()
    p, _, calibrated = by_definition(raw, np.array([max(cka(a, b[q]) for a in As for b in Bs) for q in perms]), alpha)
    best = np.unravel_index(int(np.argmax(table)), table.shape)
    naive_p, _, naive = by_definition(raw, np.array([cka(As[best[0]], Bs[best[1]][q]) for q in perms]), alpha)
    c = small.find("depths", "linear_cka", depth=4)
    assert (c.raw[0], c.p_values[0], c.calibrated[0]) == pytest.approx((raw, p, calibrated), abs=1e-12)
    assert (c.naive_p_values[0], c.naive_calibrated[0]) == pytest.approx((naive_p, naive), abs=1e-12)


def test_every_summary_number_is_its_definition(small):
    K, alpha = small.permutations, small.alpha
    m = math.ceil((1 - alpha) * (K + 1) - 1e-9)
    assert small.level == pytest.approx((K + 1 - m) / (K + 1)) and small.p_floor == pytest.approx(1 / (K + 1))
    for c in small.null:
        x, n = np.sort(c.p_values), len(c.p_values)
        i = np.arange(1, n + 1)
        d = max(np.max(i / n - x), np.max(x - (i - 1) / n))  # sup |F_n − F| for F the U(0, 1) CDF
        assert c.ks_statistic == pytest.approx(d, abs=1e-12)
        assert c.ks_p_value == pytest.approx(kstwo.sf(d, n), rel=1e-6)
        rejected = np.asarray(c.raw) > np.asarray(c.tau)  # calibrated > 0 exactly when s > τ
        assert np.array_equal(rejected, np.asarray(c.calibrated) > 0)
        assert c.rejection_rate == pytest.approx(rejected.mean())
        assert c.rejection_se == pytest.approx(math.sqrt(rejected.mean() * (1 - rejected.mean()) / n))
        assert (c.raw_mean, c.calibrated_mean) == pytest.approx((np.mean(c.raw), np.mean(c.calibrated)))
        clamp = np.clip((np.asarray(c.raw) - c.tau) / (1 - np.asarray(c.tau)), 0, 1)
        assert np.allclose(c.calibrated, clamp, atol=1e-12)
    for c in small.views:
        assert (c.raw_mean, c.calibrated_mean, c.p_value_max) == pytest.approx(
            (np.mean(c.raw), np.mean(c.calibrated), max(c.p_values)))
    for family in ("widths", "depths"):
        for c in getattr(small, family):
            rate = np.mean(np.asarray(c.calibrated) > 0)
            assert (c.raw_mean, c.calibrated_mean, c.rejection_rate) == pytest.approx(
                (np.mean(c.raw), np.mean(c.calibrated), rate))
            assert c.rejection_se == pytest.approx(math.sqrt(rate * (1 - rate) / len(c.calibrated)))
        for metric in small.metrics:
            pooled = [x for c in getattr(small, family) if c.metric == metric and getattr(c, "kind", "null") == "null"
                      for x in c.calibrated]
            rate = np.mean(np.asarray(pooled) > 0)
            assert small.pooled(family, metric) == pytest.approx((rate, math.sqrt(rate * (1 - rate) / len(pooled)),
                                                                  len(pooled)))
    for c in small.depths:
        rate = np.mean(np.asarray(c.naive_calibrated) > 0)
        assert (c.naive_rejection_rate, c.naive_predicted) == pytest.approx((rate, 1 - (1 - small.level) ** c.pairs))
        assert c.naive_rejection_se == pytest.approx(math.sqrt(rate * (1 - rate) / len(c.naive_calibrated)))
    text = "\n".join(summary(small))
    null = small.find("null", "linear_cka")
    assert f"KS D = {null.ks_statistic:.3f}" in text and f"rejected {null.rejection_rate:.3f}" in text
    assert f"k_Z = {small.nuisance_free} of {small.k}" in text


def test_the_figure_draws_every_panel(small):
    from prhsim.experiments.sweeps._calibration_figure import calibration_figure

    fig = calibration_figure(small)
    gids = {artist.get_gid() for ax in fig.axes for artist in [*ax.lines, *ax.patches, *ax.collections]}
    for metric in small.metrics:
        assert {f"calibration-a-{metric}", f"calibration-b-raw-null-{metric}", f"calibration-c-raw-{metric}",
                f"calibration-d-calibrated-{metric}"} <= gids


# --------------------------------------------------------------------------------------
# settings
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--set", "widths=[]"], "widths: List should have at least 1 item"),
    (["--set", "depths=[]"], "depths: List should have at least 1 item"),
    (["--set", "metrics=[]"], "metrics: List should have at least 1 item"),
    (["--set", "samples=16"], "knn_k = 10 needs more than 20 samples, got samples = 16"),
    (["--set", "alpha=1.5"], "alpha: Input should be less than 1"),
    (["--set", "alpha=0"], "alpha: Input should be greater than 0"),
    (["--set", 'metrics=["cka"]'], "unknown metric 'cka'"),
    (["--set", "permutations=9"],
     "K = 9 permutations cannot reject at alpha 0.05: the smallest p-value is 1/(K + 1) = 0.1; use K >= 19"),
    (["--set", "widths=[2]"], "widths[0]: Input should be greater than or equal to 4"),
])
def test_bad_settings_are_one_line_errors(tmp_path, args, message):
    result = CliRunner().invoke(main, ["sweep", "calibration", *args, "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


@pytest.mark.parametrize("kwargs, message", [
    (dict(widths=()), "widths is empty"), (dict(alpha=1.0), "alpha must be a number in (0, 1)"),
    (dict(samples=20, knn_k=10), "knn_k = 10 needs more than 20 samples"), (dict(metrics=()), "metrics is empty"),
])
def test_the_library_function_checks_its_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        calibration_sweep(**kwargs)


def test_the_defaults_are_the_documented_ones():
    s = CalibrationSettings()
    assert (s.samples, s.permutations, s.alpha, s.knn_k, s.metrics) == (256, 199, 0.05, 10, ["linear_cka", "mutual_knn"])
    assert (s.widths, s.depths, s.n_seeds, s.n_seeds_confounders) == ([8, 32, 128, 512], [1, 2, 4, 8], 200, 40)


# --------------------------------------------------------------------------------------
# cells
# --------------------------------------------------------------------------------------
def test_cells_in_a_shuffled_order_reduce_to_the_library_s_result():
    from prhsim.experiments.sweeps import _calibration as calibration
    from support import assert_cells_reduce_to_run

    s = CalibrationSettings(samples=64, permutations=19, n_seeds=6, n_seeds_views=1, n_seeds_confounders=2,
                            widths=[4, 16], depths=[1, 2], knn_k=5, depth_width=4)
    coordinates = calibration.cells(s)
    assert coordinates == [{"family": "null"}, {"family": "views"}, {"family": "width", "width": 4},
                           {"family": "width", "width": 16}, {"family": "depth", "depth": 1},
                           {"family": "depth", "depth": 2}]
    assert_cells_reduce_to_run(calibration, s, seed=3)


def test_a_cell_that_cannot_fit_is_refused_before_any_work_and_the_estimate_bounds_a_measured_cell():
    import tracemalloc

    from prhsim import memory_limit
    from prhsim._budget import ResourceError
    from prhsim.experiments.sweeps import SWEEPS, plan_sweep
    from prhsim.experiments.sweeps import _calibration as calibration

    sweep = SWEEPS["calibration"]
    with memory_limit(6e9):
        with pytest.raises(ResourceError, match=r"^a cell of 20,000 samples .* would need 13.1 GB \(limit 6 GB\); "
                                                r"lower samples$"):
            plan_sweep(sweep, CalibrationSettings(samples=20000))
        plan_sweep(sweep, CalibrationSettings())  # the defaults fit
    s = CalibrationSettings(samples=1000, permutations=19, n_seeds=1, n_seeds_views=1, n_seeds_confounders=1,
                            widths=[512], depths=[2])
    bound = calibration.CELL_BYTES_PER_N2 * 1000**2 + 8 * calibration.CELL_COPIES_PER_WIDTH * 1000 * 512
    for coordinates in calibration.cells(s):
        tracemalloc.start()
        try:
            calibration.cell(s, coordinates)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= bound, (coordinates, peak, bound)
