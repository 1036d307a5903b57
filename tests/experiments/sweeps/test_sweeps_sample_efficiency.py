"""The sample-efficiency sweep: ratios against a brute-force twin, the alignment scores on known cases, the sweep,
its figure and its command line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from prhsim.cli import main
from prhsim.experiments._caption_alignment import caption_alignment, caption_target
from prhsim.experiments.sweeps._sample_efficiency import sample_efficiency
from prhsim.experiments.sweeps._sample_ratios import bootstrap_ratio, sample_ratio, samples_needed
from prhsim.worlds import gridscene

pytest.importorskip("jax")


def _brute_needed(budgets, curve, target):
    """The first crossing by scanning a fine grid of log-budgets between consecutive budgets."""
    if curve[0] >= target:
        return budgets[0], "at_most"
    for i in range(1, len(budgets)):
        if curve[i] >= target:
            for u in np.linspace(0.0, 1.0, 200001):
                value = (1.0 - u) * curve[i - 1] + u * curve[i]  # exactly curve[i] at u = 1
                if value >= target:
                    return math.exp(math.log(budgets[i - 1]) + u * math.log(budgets[i] / budgets[i - 1])), "exact"
    return budgets[-1], "more_than"


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6), st.floats(0.0, 1.0))
def test_samples_needed_matches_a_scan(curve, target):
    budgets = [10 * 3 ** i for i in range(len(curve))]
    needed = samples_needed(budgets, curve, target)
    value, kind = _brute_needed(budgets, curve, target)
    assert needed.kind == kind
    assert needed.value == pytest.approx(value, rel=1e-4)


@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)), min_size=2, max_size=6), st.floats(0.2, 1.0))
def test_sample_ratio_reads_both_curves_at_what_the_task_reaches(points, fraction):
    """The ratio, from its definition: a = fraction x the task's last value, each curve's first crossing by a scan."""
    budgets = [10 * 3 ** i for i in range(len(points))]
    good, task = [p[0] for p in points], [p[1] for p in points]
    r = sample_ratio(budgets, good, task, fraction=fraction)
    a = fraction * task[-1]
    mine, mine_kind = _brute_needed(budgets, task, a)
    theirs, theirs_kind = _brute_needed(budgets, good, a)
    assert r.target == pytest.approx(a) and mine_kind != "more_than"  # the task reaches its own last value
    assert r.task_samples == pytest.approx(mine, rel=1e-4) and r.good_samples == pytest.approx(theirs, rel=1e-4)
    assert r.ratio == pytest.approx(mine / theirs, rel=2e-4)
    expected = {("exact", "exact"): "exact", ("exact", "at_most"): "at_least", ("exact", "more_than"): "at_most",
                ("at_most", "exact"): "at_most", ("at_most", "more_than"): "at_most",
                ("at_most", "at_most"): "undetermined"}[mine_kind, theirs_kind]
    assert r.kind == expected


def test_ratio_examples_and_refusals():
    r = sample_ratio([100, 1000, 10000], [0.1, 0.3, 0.5], [0.0, 0.1, 0.2])  # the task reaches 0.2 at 10,000
    assert r.kind == "exact" and r.good_samples == pytest.approx(math.sqrt(10) * 100)
    assert r.ratio == pytest.approx(10000 / (math.sqrt(10) * 100))
    assert sample_ratio([100, 1000], [0.5, 0.6], [0.0, 0.01], floor=0.02).kind == "none"
    with pytest.raises(ValueError, match="increasing"):
        samples_needed([100, 100], [0.1, 0.2], 0.1)
    with pytest.raises(ValueError, match="one length"):
        samples_needed([100, 1000], [0.1], 0.1)
    with pytest.raises(ValueError, match="fraction"):
        sample_ratio([100, 1000], [0.1, 0.2], [0.1, 0.2], fraction=0.0)


def test_the_bootstrap_interval_holds_the_ratio_of_every_seed_pair_it_resamples():
    """Identical seeds give a zero-width interval at the estimate; spread seeds an interval around it."""
    budgets = [100, 300, 1000, 3000]
    good = np.array([[0.1, 0.2, 0.3, 0.4]] * 4)
    task = np.array([[0.05, 0.1, 0.15, 0.2]] * 4)
    same = bootstrap_ratio(budgets, good, task, resamples=50, rng=0)
    assert same.low == same.high == pytest.approx(same.estimate.ratio) and same.exact_share == 1.0
    noisy = bootstrap_ratio(budgets, good + np.linspace(-0.03, 0.03, 4)[:, None], task, resamples=400, rng=0)
    assert noisy.low < noisy.estimate.ratio < noisy.high


@pytest.fixture(scope="module")
def target():
    return caption_target(gridscene(3, objects=1, shapes=3, colours=3), n_fit=40, rng=0)


def test_the_image_itself_is_perfectly_aligned(target):
    law = target.law
    F = np.repeat(target.image, law.modality.n_nuisance, axis=0)  # every caption of z gets the image of z
    score = caption_alignment(target, F)
    assert score.rho_p == pytest.approx(0.0, abs=1e-10)
    assert score.mutual_knn == score.mutual_knn_mean
    assert score.rank == target.k and score.nuisance_free == target.k
    # the image has fewer distinct rows than states (ties), so R@1 of the image against itself is the
    # tie-broken chance among equal rows: the mean over held-out states of 1 / (copies of its row)
    held = target.image[~target.fit]
    copies = np.array([np.sum(np.all(np.isclose(held, row, atol=1e-9), axis=1)) for row in held])
    assert score.r1 == pytest.approx(np.mean(1.0 / copies), abs=1e-9) and score.r5 >= score.r1


def test_a_wording_only_representation_carries_no_state():
    """Exact ties (|N| distinct rows) are broken in a random state order, so they score near chance."""
    target = caption_target(gridscene(4, objects=2, shapes=2, colours=2), rng=0)
    law = target.law
    wording = np.random.default_rng(0).normal(size=(law.modality.n_nuisance, target.k))
    score = caption_alignment(target, np.tile(wording, (law.n_states, 1)))
    assert score.nuisance_free == 0 and score.rho_p is None
    assert score.mutual_knn < 3 * target.knn_chance and score.mutual_knn_mean < 3 * target.knn_chance
    assert score.r1 < 5 * target.r1_chance


def test_the_settings_and_the_library_share_their_default_budgets():
    from prhsim.experiments.sweeps._sample_efficiency import SampleEfficiencySettings
    from prhsim.experiments.sweeps._sample_efficiency import DEFAULT_BUDGETS

    assert SampleEfficiencySettings().budgets == list(DEFAULT_BUDGETS)


def test_scores_refuse_a_table_of_the_wrong_size(target):
    with pytest.raises(ValueError, match="one row per caption"):
        caption_alignment(target, np.zeros((5, target.k)))


@pytest.fixture(scope="module")
def small_sweep():
    return sample_efficiency(gridscene(3, objects=1, shapes=3, colours=3), budgets=(100, 1000), n_seeds=2, steps=200,
                             batch_size=128, hidden=(32,), min_span=3, n_fit=40, rng=0)


def test_the_sweep_records_every_cell_and_a_ratio_per_learner(small_sweep):
    r = small_sweep
    assert len(r.cells) == 3 * 2 * 2 and {c.task for c in r.cells} == {"good", "bad", "ntp"}
    assert all(c.alignment is not None and c.predicted is not None for c in r.cells)
    assert [c.tokens_per_sample for c in r.curves if c.source == "learner"] == [18, 18, 9]  # two captions, or one
    assert {(x.task, x.source) for x in r.ratios} == {(t, s) for t in ("bad", "ntp") for s in ("learner", "prediction")}
    assert set(r.closed_forms) == set(r.untrained) == set(r.limits) == {"good", "bad", "ntp"}
    good = r.closed_forms["good"]
    assert good.unique and good.alignment.rho_p < 1e-8 and good.alignment.nuisance_free == r.k  # the pixels' own
    assert r.closed_forms["bad"].alignment.nuisance_free == 0 and r.closed_forms["ntp"].alignment.nuisance_free == 0
    for x in r.ratios:
        assert x.kind == "none" or x.token_ratio == pytest.approx(x.ratio * (18 if x.task == "bad" else 9) / 18)
    assert {(a.task, a.budget) for a in r.agreement} == {(t, b) for t in ("good", "bad", "ntp") for b in (100, 1000)}
    for a in r.agreement:
        assert a.difference == pytest.approx(a.learner - a.predicted)


def test_the_prediction_of_a_cell_is_the_linear_class_on_its_own_records(small_sweep):
    """Each cell's prediction is reproduced from its records alone (drawn again from the cell's key)."""
    from prhsim.experiments._caption_prediction import predicted_alignment
    from prhsim.experiments.sweeps._sample_efficiency import draw_records
    from prhsim.worlds import SpanLaw

    r = small_sweep
    scene = gridscene(3, objects=1, shapes=3, colours=3)
    target = caption_target(scene, n_fit=40, rng=np.random.default_rng([0, 0]))
    cell = next(c for c in r.cells if c.task == "bad" and c.budget == 100 and c.seed == 1)
    records = draw_records(scene, target, "bad", 100, "world", np.random.default_rng([0, 2, 100, 1]))
    assert predicted_alignment(target, "bad", SpanLaw(3), r.k, records) == cell.predicted


def test_predictions_alone_run_without_the_learners():
    r = sample_efficiency(gridscene(3, objects=1, shapes=3, colours=3), budgets=(50, 200), n_seeds=2, min_span=3,
                          n_fit=40, learn=False, closed_forms=False, rng=1)
    assert all(c.alignment is None and c.predicted is not None for c in r.cells)
    assert {c.source for c in r.curves} == {"prediction"} and not r.untrained and not r.agreement


def test_the_figure_shows_both_sources_and_the_ratios(small_sweep):
    from prhsim.experiments.sweeps._sample_efficiency_figure import CURVE, LIMIT, RATIO_TEXT, sample_efficiency_figure

    fig = sample_efficiency_figure(small_sweep)
    gids = {a.get_gid() for ax in fig.axes for a in [*ax.lines, *ax.texts]}
    assert {f"{CURVE}-{x}" for x in ("good", "bad", "ntp")} <= gids and RATIO_TEXT in gids
    assert {f"{CURVE}-{x}-prediction" for x in ("good", "bad", "ntp")} | {f"{LIMIT}-good"} <= gids


def test_the_command_writes_one_folder(tmp_path):
    out = tmp_path / "se"
    result = CliRunner().invoke(main, ["sweep", "sample-efficiency", "--budgets", "100,300", "--seeds", "1",
                                       "--set", "steps=40", "--set", "batch_size=64", "--set", "hidden=[16]",
                                       "--set", "world.size=2", "--set", "world.objects=1",
                                       "--set", "closed_forms=false", "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["cells.csv", "cells.parquet", "config.json", "results.json",
                                                     "sample-efficiency.png"]
    document = json.loads((out / "results.json").read_text())
    assert document["budgets"] == [100, 300] and len(document["seeds"]) == 1
    bad = CliRunner().invoke(main, ["sweep", "sample-efficiency", "--world", "ring", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "caption renderer" in bad.output and not (tmp_path / "x").exists()
