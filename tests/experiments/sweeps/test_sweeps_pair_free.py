"""The pair-free sweep (docs/theory.md §9): a designed world whose spectrum is known exactly, the best map, and the
predicted failures of spectral matching (a tie, too few samples, a bad view) against the measured ones."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.experiments.sweeps._pair_free import (
    SUCCESS,
    _Setup,
    designed_world,
    pair_free_sweep,
    predicted_success,
)
from prhsim.optima import top_eigenpairs


def test_the_designed_world_has_the_spectrum_it_was_given():
    designed = designed_world(60, (0.13, 0.08, 0.02), rng=3)
    world = designed.world
    assert np.all(np.asarray(world.Pi) >= 0) and np.allclose(np.asarray(world.Pi).sum(axis=1), world.p, atol=1e-15)
    values = top_eigenpairs(world, 5, centred=True).values
    assert np.allclose(values[:3], [0.13, 0.08, 0.02], atol=1e-12) and np.allclose(values[3:], 0, atol=1e-12)
    H, p = designed.H, world.p
    assert np.allclose(H.T @ (p[:, None] * H), np.eye(3), atol=1e-12) and np.allclose(p @ H, 0, atol=1e-14)
    assert np.all(np.abs(p @ H**3) > 0.1)  # skewed: every sign is identifiable
    with pytest.raises(ValueError, match="too large for these features: Π would have a negative entry"):
        designed_world(60, (0.9, 0.8, 0.5), rng=3)


def test_the_best_map_aligns_a_nuisance_free_b_exactly_and_none_aligns_a_bad_view():
    designed = designed_world(40, (0.15, 0.08, 0.02), rng=1)
    gen = np.random.default_rng(0)
    good = _Setup(designed, 3, 1.0, gen)
    means = [(F.reshape(40, m.n_nuisance, 2) * m.nuisance[None, :, None]).sum(axis=1) for F, m in zip(good.F, good.mods)]
    assert good.alignable and np.allclose(means[0] @ good.Q_true, means[1], atol=1e-10)
    assert np.allclose(good.F[0], np.repeat(means[0], 3, axis=0), atol=1e-10)  # a: a function of the state alone
    bad = _Setup(designed, 3, 0.5, gen)  # nuisance eigenvalue 1 − ε = 0.5 > μ_1: b's features are nuisance
    assert not bad.alignable


def test_predicted_success_is_the_chance_a_normal_angle_stays_below_the_threshold():
    draws = np.random.default_rng(0).standard_normal(200_000)
    for gap, S in ((0.02, 10_000), (0.07, 3000)):
        sd = 1.0 / (gap * math.sqrt(S))
        assert float(predicted_success(gap, S)) == pytest.approx(np.mean(np.abs(sd * draws) < SUCCESS), abs=5e-3)
    assert float(predicted_success(0.0, 10**6)) == 0.0


@pytest.fixture(scope="module")
def small():
    return pair_free_sweep(gaps=(0.0, 0.07), sample_sizes=(300, 100_000), eps_grid=(0.5, 1.0), base_gap=0.07,
                           base_samples=30_000, n=100, n_seeds=3, rng=0)


def test_the_sweep_shows_the_failures_the_theory_predicts(small):
    spectral = [c for c in small.cells if c.method == "spectral"]
    tie = [c for c in spectral if c.axis == "gap" and c.gap == 0.0]
    assert all(c.identifiable is False for c in tie)  # a tie: not identifiable, reported
    assert np.median([c.map_error for c in tie]) > SUCCESS  # and the rotation inside it is a guess
    assert small.rate("gap", "spectral", 0.07) == 1.0 and small.rate("samples", "spectral", 100_000) == 1.0
    def median_error(size):
        return np.median([c.map_error for c in spectral if c.axis == "samples" and c.samples == size])

    assert median_error(300) > 10 * median_error(100_000)  # the error falls like 1/(gap·√S)
    bad = [c for c in small.cells if c.axis == "eps" and c.eps == 0.5]
    assert all(not c.alignable and c.map_error is None and not c.success for c in bad)
    # features alone: the sample's geometry identifies the map even at the tie
    assert small.rate("gap", "iterative", 0.0) == 1.0
    for c in small.cells:
        assert 0 <= c.r1 <= 1 and 0 <= c.r1_true <= 1


def test_the_command_writes_results_a_figure_and_a_summary(tmp_path):
    out = tmp_path / "pf"
    result = CliRunner().invoke(main, ["sweep", "pair-free", "--out", str(out), "--set", "gaps=[0.0, 0.07]",
                                       "--set", "sample_sizes=[1000]", "--set", "eps_grid=[1.0]", "--set", "n_seeds=1",
                                       "--set", "n=50", "--set", "base_samples=2000"])
    assert result.exit_code == 0, result.output
    assert "fraction of seeds, spectral / iterative" in result.output
    document = json.loads((out / "results.json").read_text())
    assert len(document["cells"]) == 2 * (2 + 1 + 1) and (out / "pair-free.png").read_bytes()[:4] == b"\x89PNG"
    wrong = CliRunner().invoke(main, ["sweep", "pair-free", "--out", str(tmp_path / "x"), "--set", "mu_3=0.5"])
    assert wrong.exit_code == 2 and "mu_3 must be below mu_2" in wrong.output


def test_the_spectral_angle_error_has_the_predicted_spread():
    """§9: the map turns by an angle of standard deviation 1/(gap·√S) (40 draws at gap 0.07, S = 30,000)."""
    from prhsim.metrics import map_error, spectral_match

    gap, samples = 0.07, 30_000
    designed = designed_world(200, (0.08 + gap, 0.08, 0.02), rng=11)
    angles = []
    for seed in range(40):
        gen = np.random.default_rng([5, seed])
        setup = _Setup(designed, 3, 1.0, gen)
        xa, pa = setup.draw(0, samples, gen)
        xb, pb = setup.draw(1, samples, gen)
        estimate = spectral_match(xa, pa, xb, pb)
        angles.append(2 * np.arcsin(min(1.0, map_error(estimate.map, setup.Q_true) / 2)))
    spread = float(np.sqrt(np.mean(np.square(angles))))
    predicted = 1 / (gap * np.sqrt(samples))
    assert 0.8 * predicted < spread < 1.5 * predicted, (spread, predicted)
