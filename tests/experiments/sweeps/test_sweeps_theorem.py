"""The theorem sweeps: known answers, prediction beside observation, figures drawn from the records, one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from prhsim.experiments.sweeps._bad_view import BadViewSweep, bad_view_sweep
from prhsim.experiments.sweeps._gap_sensitivity import GapSensitivity, gap_sensitivity, max_gap
from prhsim.experiments.sweeps._kernel_mismatch import KernelMismatchSweep, kernel_mismatch_sweep
from prhsim.experiments.sweeps._restricted_encoder import (
    RestrictedEncoder,
    encoder_inputs,
    restricted_encoder,
    restricted_optimum,
)
from prhsim.experiments.sweeps import _bad_view_figure as bad_figs
from prhsim.experiments.sweeps import _gap_sensitivity_figure as gap_figs
from prhsim.experiments.sweeps import _kernel_mismatch_figure as mismatch_figs
from prhsim.experiments.sweeps import _restricted_encoder_figure as restricted_figs
from prhsim.worlds import Modality, good, gridscene, path, view_world

EXACT = 1e-8


@pytest.fixture(scope="module")
def bad_views() -> BadViewSweep:
    # ε = 0.1: nuisance fills every slot; 0.23: 1 − ε between the slow 0.78 and 0.76; 0.5 and 1: nuisance-free
    return bad_view_sweep(eps_grid=[0.1, 0.23, 0.5, 1.0])


@pytest.fixture(scope="module")
def mismatch() -> KernelMismatchSweep:
    return kernel_mismatch_sweep(n=12, perturbations=[1e-3, 1e-2, 1e-1], worlds=3)


@pytest.fixture(scope="module")
def gaps() -> GapSensitivity:
    return gap_sensitivity(gaps=[0.0, 1e-4, 0.05])


@pytest.fixture(scope="module")
def restricted() -> RestrictedEncoder:
    return restricted_encoder()


def _line(fig, gid: str):
    found = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid() == gid]
    assert len(found) == 1, f"expected one line with gid {gid!r}, found {len(found)}"
    return found[0]


def _bars(fig, gid: str) -> np.ndarray:
    return np.array([p.get_height() for ax in fig.axes for p in ax.patches if p.get_gid() == gid])


def _nan(values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _one_line_error(call, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- bad views (§4)

def test_bad_view_good_view_predicts_and_observes_zero(bad_views):
    last = bad_views.eps_grid.index(1.0)
    for pair in bad_views.pairs:
        assert pair.predicted_rho_p[last] == 0.0
        assert pair.observed_rho_p[last] < EXACT


def test_bad_view_observed_equals_predicted_wherever_determined(bad_views):
    k = bad_views.k
    assert k == 3
    expected = [np.sqrt(2.0), np.sqrt(2.0 / 3.0), 0.0, 0.0]  # min k_Z = 0, 2, 3, 3
    for pair in bad_views.pairs:
        np.testing.assert_allclose(_nan(pair.predicted_rho_p), expected, atol=1e-15)
        for pred, obs in zip(pair.predicted_rho_p, pair.observed_rho_p):
            if pred is not None:
                assert abs(obs - pred) <= EXACT
    for m in bad_views.modalities:
        for pred, obs in zip(m.predicted_kz, m.observed_kz):
            assert pred is None or pred == obs
    assert bad_views.max_error is not None and bad_views.max_error <= EXACT


def test_bad_view_tie_between_nuisance_and_slow_features_is_undetermined():
    # 1 − ε = 0.78 is the slow shape eigenvalue: the nuisance block and the slow pair tie across k
    result = bad_view_sweep(eps_grid=[0.22])
    pixels = next(m for m in result.modalities if m.name == "pixels")
    assert pixels.predicted_kz == [None]
    assert all(p.predicted_rho_p == [None] for p in result.pairs if "pixels" in (p.a, p.b))


def test_bad_view_sweep_on_a_renderer_free_world():
    mods = [Modality("a", [0.5, 0.5]), Modality("b", [0.2, 0.3, 0.5])]
    result = bad_view_sweep(path(8, move=0.6), mods, eps_grid=[0.05, 1.0], k=2)
    (pair,) = result.pairs
    assert pair.predicted_rho_p[-1] == 0.0 and pair.observed_rho_p[-1] < EXACT
    assert pair.predicted_rho_p[0] is not None and abs(pair.observed_rho_p[0] - pair.predicted_rho_p[0]) <= EXACT
    assert BadViewSweep.model_validate_json(result.model_dump_json()) == result


@pytest.mark.parametrize("kwargs, match", [
    ({"eps_grid": []}, "at least one"), ({"eps_grid": [0.0]}, r"\(0, 1\]"), ({"eps_grid": [1.5]}, r"\(0, 1\]"),
    ({"eps_grid": [0.5, 0.5]}, "distinct"), ({"base": path(5)}, "both base and modalities"),
    ({"base": path(5), "modalities": [Modality("a", [1.0])]}, "at least two"),
])
def test_bad_view_sweep_refuses_bad_arguments(kwargs, match):
    _one_line_error(lambda: bad_view_sweep(**kwargs), match)


# ---------------------------------------------------------------- kernel mismatch (§3)

def test_kernel_mismatch_ratios_never_exceed_one(mismatch):
    for name, worst in mismatch.worst_ratio.items():
        assert worst is not None, name
        assert worst <= 1.0, name
        assert mismatch.median_ratio[name] <= worst
    for c in (c for row in mismatch.cells for c in row):
        assert c.sin_theta <= c.residual + 1e-12  # §2 sandwich
        assert c.yws_sin is None or c.sin_theta <= c.yws_sin


def test_kernel_mismatch_drift_grows_with_the_size(mismatch):
    assert np.all(np.diff(mismatch.median_sin_theta) > 0)
    assert np.all(np.diff(mismatch.median_e_op) > 0)
    for row in mismatch.cells:
        assert row[-1].sin_theta > row[0].sin_theta
        np.testing.assert_allclose([c.e_op / c.perturbation for c in row], row[0].e_op / row[0].perturbation, rtol=1e-8)  # E ∝ t
    assert KernelMismatchSweep.model_validate_json(mismatch.model_dump_json()) == mismatch


@pytest.mark.parametrize("kwargs, match", [
    ({"n": 3}, "n must"), ({"k": 0}, "k must"), ({"n": 6, "k": 5}, "k must"), ({"worlds": 0}, "worlds must"),
    ({"perturbations": [0.0]}, r"\(0, 1\]"), ({"perturbations": [2.0]}, r"\(0, 1\]"),
    ({"perturbations": []}, "at least one"),
])
def test_kernel_mismatch_sweep_refuses_bad_arguments(kwargs, match):
    _one_line_error(lambda: kernel_mismatch_sweep(**kwargs), match)


# ---------------------------------------------------------------- gap sensitivity (§1.2, §3)

def test_gap_sensitivity_tie_gives_solver_dependent_subspaces(gaps):
    tie = gaps.cells[0]
    assert tie.gap == 0.0 and tie.tie
    assert tie.yws_bound is None and tie.dk_bound is None
    assert max(tie.solver_s_theta, tie.start_s_theta) > 1e-3


def test_gap_sensitivity_clear_gap_gives_one_subspace(gaps):
    clear = gaps.cells[-1]
    assert not clear.tie
    np.testing.assert_allclose(clear.observed_gap, 0.05, rtol=1e-9)
    assert clear.solver_s_theta < EXACT and clear.start_s_theta < EXACT
    for c in gaps.cells[1:]:
        np.testing.assert_allclose(c.observed_gap, c.gap, rtol=1e-6)
        assert c.yws_bound is not None and c.perturbed_s_theta <= c.yws_bound
        assert c.dk_bound is None or c.perturbed_s_theta <= c.dk_bound
    assert gaps.cells[-1].perturbed_s_theta < gaps.cells[1].perturbed_s_theta  # drift shrinks as the gap opens
    assert GapSensitivity.model_validate_json(gaps.model_dump_json()) == gaps


@pytest.mark.parametrize("kwargs, match", [
    ({"gaps": [0.2]}, "every gap"), ({"gaps": [-1e-3]}, "every gap"), ({"gaps": []}, "at least one"),
    ({"gaps": [0.0, 0.0]}, "distinct"), ({"perturbation": 0.0}, "perturbation"), ({"n": 2}, "n must"), ({"move": 1.5}, "move"),
])
def test_gap_sensitivity_refuses_bad_arguments(kwargs, match):
    _one_line_error(lambda: gap_sensitivity(**kwargs), match)
    assert 0.08 < max_gap(6, 0.9) < 0.09


# ---------------------------------------------------------------- restricted encoders (§0)

def test_universal_twin_reproduces_the_unrestricted_optimum():
    twin = restricted_encoder(inputs="state")
    for m in twin.modalities:
        assert m.s_theta < EXACT and m.rho_p < EXACT
        np.testing.assert_allclose(m.value, m.optimum_value, atol=1e-10)
        np.testing.assert_allclose(m.ky_fan_fraction, 1.0, atol=1e-12)
    for p in twin.pairs:
        assert p.rho_p < EXACT and p.unrestricted_rho_p < EXACT


def test_restricted_value_never_beats_ky_fan(restricted):
    for m in restricted.modalities:
        assert m.value >= m.optimum_value - 1e-10
        assert m.ky_fan_fraction <= 1.0 + 1e-12
        n = min(len(m.eigenvalues), len(m.optimum_eigenvalues))
        assert np.all(np.array(m.eigenvalues[:n]) <= np.array(m.optimum_eigenvalues[:n]) + 1e-10)  # interlacing
    assert max(m.s_theta for m in restricted.modalities) > 0.1  # linear raw inputs fall short somewhere
    for p in restricted.pairs:
        assert p.unrestricted_rho_p < EXACT and p.predicted_rho_p == 0.0
    assert RestrictedEncoder.model_validate_json(restricted.model_dump_json()) == restricted


def test_restricted_optimum_is_the_generalised_eigenproblem_when_regular():
    scene = gridscene(3, objects=1)
    world = view_world(scene.world, scene.modalities(rng=0)[2], good())  # symbolic: 8 inputs, regular Φᵀ D Φ
    phi = encoder_inputs(world, "raw")
    opt = restricted_optimum(world, phi, 3)
    p = world.p
    centred = phi - p @ phi
    Pi = np.sqrt(p)[:, None] * world.dense_kernel() * np.sqrt(p)[None, :]
    values = sla.eigh(centred.T @ Pi @ centred, centred.T @ (p[:, None] * centred), eigvals_only=True)[::-1]
    np.testing.assert_allclose(opt.values[: opt.rank], values, atol=1e-10)
    np.testing.assert_allclose(opt.features, centred @ opt.weights, atol=1e-10)
    np.testing.assert_allclose(opt.features.T @ (p[:, None] * opt.features), np.eye(3), atol=1e-10)
    with pytest.raises(ValueError, match="fewer than k"):
        restricted_optimum(world, phi[:, :2], 3)


def test_one_hot_tokens_make_the_caption_encoder_exact():
    result = restricted_encoder(inputs={"pixels": "raw", "caption": "onehot", "symbolic": "raw"})
    caption = next(m for m in result.modalities if m.name == "caption")
    assert caption.inputs == "onehot" and caption.s_theta < EXACT


@pytest.mark.parametrize("kwargs, match", [
    ({"inputs": "bogus"}, "inputs of"), ({"inputs": {"pixels": "raw"}}, "every modality"),
    ({"views": [good()]}, "one view per modality"), ({"scene": path(4)}, "GridScene"), ({"k": 0}, "k must"),
])
def test_restricted_encoder_refuses_bad_arguments(kwargs, match):
    _one_line_error(lambda: restricted_encoder(**kwargs), match)


# ---------------------------------------------------------------- figures

def test_bad_view_figure_draws_the_predictions(bad_views):
    from matplotlib.figure import Figure

    fig = bad_figs.bad_view_figure(bad_views)
    assert isinstance(fig, Figure)
    for pair in bad_views.pairs:
        key = f"{pair.a} vs {pair.b}"
        np.testing.assert_array_equal(_line(fig, f"{bad_figs.BAD_VIEW_PREDICTED}-{key}").get_ydata(),
                                      _nan(pair.predicted_rho_p))
        np.testing.assert_array_equal(_line(fig, f"{bad_figs.BAD_VIEW_OBSERVED}-{key}").get_ydata(), pair.observed_rho_p)
    for m in bad_views.modalities:
        np.testing.assert_array_equal(_line(fig, f"{bad_figs.BAD_VIEW_KZ_PREDICTED}-{m.name}").get_ydata(),
                                      _nan(m.predicted_kz))


def test_kernel_mismatch_figure_draws_the_bounds(mismatch):
    fig = mismatch_figs.kernel_mismatch_figure(mismatch)
    for name, medians in mismatch.median_bound.items():
        np.testing.assert_array_equal(_line(fig, f"{mismatch_figs.MISMATCH_BOUND}-{name}").get_ydata(), _nan(medians))
    np.testing.assert_array_equal(_line(fig, f"{mismatch_figs.MISMATCH_OBSERVED}-sin_theta").get_ydata(),
                                  mismatch.median_sin_theta)
    np.testing.assert_array_equal(_line(fig, f"{mismatch_figs.MISMATCH_OBSERVED}-sin_theta").get_xdata(), mismatch.median_e_op)


def test_gap_figure_draws_the_bounds(gaps):
    fig = gap_figs.gap_figure(gaps)
    gapped = [c for c in gaps.cells if not c.tie]
    np.testing.assert_array_equal(_line(fig, f"{gap_figs.GAP_BOUND}-yws").get_ydata(), _nan([c.yws_bound for c in gapped]))
    np.testing.assert_array_equal(_line(fig, f"{gap_figs.GAP_BOUND}-dk").get_ydata(), _nan([c.dk_bound for c in gapped]))
    np.testing.assert_array_equal(_line(fig, f"{gap_figs.GAP_CURVE}-solver").get_xdata(), [c.gap for c in gapped])


def test_restricted_figure_draws_the_records(restricted):
    fig = restricted_figs.restricted_figure(restricted)
    np.testing.assert_array_equal(_bars(fig, restricted_figs.UNRESTRICTED_RHO), [p.unrestricted_rho_p for p in restricted.pairs])
    np.testing.assert_array_equal(_bars(fig, restricted_figs.RESTRICTED_RHO), [p.rho_p for p in restricted.pairs])
    np.testing.assert_array_equal(_bars(fig, restricted_figs.RESTRICTED_S_THETA), [m.s_theta for m in restricted.modalities])
    np.testing.assert_array_equal(_line(fig, restricted_figs.PREDICTED_RHO).get_ydata(),
                                  _nan([p.predicted_rho_p for p in restricted.pairs]))


def test_a_grid_of_eps_is_eps_grid():
    """eps is one probability everywhere; the sweeps take a grid of them as eps_grid (eps= is refused)."""
    assert bad_view_sweep(eps_grid=[0.5, 1.0]).eps_grid == [0.5, 1.0]
    with pytest.raises(TypeError, match="'eps'"):
        bad_view_sweep(eps=[0.5, 1.0])
