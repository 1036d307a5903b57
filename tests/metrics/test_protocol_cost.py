"""The rough time of the PRH protocol (prhsim.metrics.protocol_seconds) against a twin written from its definition,
and the note `prhsim prh score` and `table` print before a long protocol."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from prhsim.cli import main
from prhsim.metrics import PRH_METRICS, protocol_seconds
from prhsim.metrics._protocol_cost import LAYER


def _twin(metric: str, n: int, widths_a: list[int], widths_b: list[int], k: int, permutations: int) -> float:
    """Each layer's own work once, LAYER·N²·d, plus every layer pair's score and its K permuted scores."""
    pair_and_permutation = np.array([[PRH_METRICS[metric].cost(n, da, db, k) for db in widths_b] for da in widths_a])
    own = sum(LAYER * n * n * d for d in [*widths_a, *widths_b])
    return float(own + pair_and_permutation[..., 0].sum() + permutations * pair_and_permutation[..., 1].sum())


@settings(max_examples=60, deadline=None)
@given(metric=st.sampled_from(sorted(PRH_METRICS)), n=st.integers(2, 100_000),
       widths_a=st.lists(st.integers(1, 4096), min_size=1, max_size=6),
       widths_b=st.lists(st.integers(1, 4096), min_size=1, max_size=6),
       k=st.integers(1, 100), permutations=st.integers(0, 100_000))
def test_protocol_seconds_is_its_definition(metric, n, widths_a, widths_b, k, permutations):
    got = protocol_seconds(metric, n, widths_a, widths_b, knn_k=k, permutations=permutations)
    assert got == pytest.approx(_twin(metric, n, widths_a, widths_b, k, permutations), rel=1e-12)
    # more permutations, samples or layers never cost less
    assert protocol_seconds(metric, n, widths_a, widths_b, knn_k=k, permutations=permutations + 1) >= got
    assert protocol_seconds(metric, n + 1, widths_a, widths_b, knn_k=k, permutations=permutations) >= got
    assert protocol_seconds(metric, n, [*widths_a, 1], widths_b, knn_k=k, permutations=permutations) > got


def test_every_registered_metric_has_a_cost_and_an_unknown_one_is_refused():
    assert all(m.cost is not None for m in PRH_METRICS.values())
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        protocol_seconds("nope", 10, [4], [4])


@pytest.fixture
def features(tmp_path):
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((40, 2, 8)).astype(np.float32))
    return tmp_path


def _slow(monkeypatch, seconds_per_pair: float):
    """mutual_knn's registry cost made ``seconds_per_pair`` a layer pair, so tiny files estimate as long."""
    metric = PRH_METRICS["mutual_knn"]
    monkeypatch.setitem(PRH_METRICS, "mutual_knn", dataclasses.replace(metric, cost=lambda *a: (seconds_per_pair, 0.0)))


def test_a_long_score_says_its_time_class_before_it_scores(features, monkeypatch):
    _slow(monkeypatch, 100.0)  # 4 layer pairs: about 400 s, "minutes"
    result = CliRunner().invoke(main, ["prh", "score", str(features / "a.npy"), str(features / "b.npy")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("note: this score may take minutes: mutual_knn on N = 40, layers 2 x 2"), lines
    assert "about 400 s estimated" in lines[0] and lines[1].startswith("mutual_knn = ")
    _slow(monkeypatch, 1.0)  # seconds: no note
    quick = CliRunner().invoke(main, ["prh", "score", str(features / "a.npy"), str(features / "b.npy")])
    assert quick.exit_code == 0 and quick.output.startswith("mutual_knn = "), quick.output


def test_a_long_table_says_its_time_class_and_an_eta_weighted_by_each_cells_cost(features, monkeypatch, tmp_path):
    _slow(monkeypatch, 100.0)
    out = tmp_path / "table"
    result = CliRunner().invoke(main, ["prh", "table", str(features), "--out", str(out), "--no-figures"])
    assert result.exit_code == 0, result.output
    assert "note: this table may take minutes: 2 x 2 entries, mutual_knn (about 1,600 s estimated" in result.output
    cells = [line for line in result.output.splitlines() if " vs " in line]
    assert len(cells) == 4 and "ETA" not in cells[0] and all("ETA" in line for line in cells[1:]), cells
    assert (out / "results.json").is_file()


def test_a_feature_file_too_large_for_the_memory_limit_is_refused_before_it_is_read(features, tmp_path):
    from support import assert_one_line_refusal, refusal

    result, peak = refusal(["prh", "score", str(features / "a.npy"), str(features / "b.npy"),
                            "--memory-limit", "0.000001"])
    assert_one_line_refusal(result, peak, [f"reading {features / 'a.npy'}", "on disk) would need",
                                           "use a smaller feature file"])
    out = tmp_path / "t"
    result, peak = refusal(["prh", "table", str(features), "--out", str(out), "--memory-limit", "0.000001"])
    assert_one_line_refusal(result, peak, ["would need", "use a smaller feature file"])
    assert not out.exists()
