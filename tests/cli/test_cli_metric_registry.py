"""A metric registered once reaches every consumer: the run's pair table and results.json, the metric bridge and
``prhsim prh score`` (``prhsim real eval``: tests/real/test_real_train.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.metrics import PRH_METRICS, Metric, register_metric, reported_metrics


def _mean_gap(a, b, *, knn_k):
    """A toy metric: 1 − |mean row norm of a − mean row norm of b| (written here, known to nobody else)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(1.0 - abs(np.linalg.norm(a, axis=1).mean() - np.linalg.norm(b, axis=1).mean()))


@pytest.fixture
def toy():
    """The toy metric registered (reported) for one test, then gone."""
    from prhsim.cli import _prh  # the command line imported before the metric is registered

    assert "toy_gap" not in _prh.METRIC_CHOICE.choices
    yield register_metric(Metric("toy_gap", _mean_gap, label="toy gap", reported=True))
    del PRH_METRICS["toy_gap"]


def test_a_registered_metric_is_in_the_run_results_and_its_report(toy, tmp_path):
    assert reported_metrics() == ("mutual_knn", "linear_cka", "retrieval_r1", "toy_gap")
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--world", "ring", "--n", "16", "--no-figures", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "toy gap" in res.output
    pairs = json.loads((out / "results.json").read_text())["pairs"]
    assert pairs and all(set(p["metrics"]) == {"mutual_knn", "linear_cka", "retrieval_r1", "toy_gap"} for p in pairs)
    assert all(0.0 <= p["metrics"]["toy_gap"] <= 1.0 for p in pairs)


def test_a_registered_metric_is_in_the_bridge_and_prh_score(toy, tmp_path):
    from prhsim.experiments.sweeps._metric_bridge import metric_bridge

    bridge = metric_bridge(levels=3, samples=40)
    assert bridge.metrics == ["mutual_knn", "linear_cka", "retrieval_r1", "toy_gap", "cknna"]
    assert all("toy_gap" in cell.metrics for cell in bridge.cells)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(30, 2, 4)), rng.normal(size=(30, 1, 5))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    res = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                                    "--metric", "toy_gap", "--json", "--no-clip"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    unit = [x / np.linalg.norm(x, axis=-1, keepdims=True) for x in (a, b)]
    assert doc["metric"] == "toy_gap" and doc["table"] == [[_mean_gap(unit[0][:, i], unit[1][:, 0], knn_k=10)]
                                                            for i in range(2)]


def test_registering_refuses_a_taken_name_and_a_name_that_cannot_key_a_file(toy):
    with pytest.raises(ValueError, match="metric 'toy_gap' is already registered; pass replace=True"):
        register_metric(Metric("toy_gap", _mean_gap))
    with pytest.raises(ValueError, match="must be an identifier"):
        register_metric(Metric("toy gap", _mean_gap))
    with pytest.raises(TypeError, match="takes a Metric record"):
        register_metric("toy")
