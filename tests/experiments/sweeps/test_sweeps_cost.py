"""A sweep's cost plan on N workers: each running cell gets its share of the memory limit, before and during work."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from prhsim import memory_limit
from prhsim._budget import ResourceError, current_memory_limit, format_bytes
from prhsim.cli import main
from prhsim.experiments.sweeps import SWEEPS, plan_sweep, run_sweep
from prhsim.experiments.sweeps._executors import cell_task
from prhsim.experiments.sweeps._sample_efficiency import caption_law

EFFICIENCY = SWEEPS["sample-efficiency"]
BAD_VIEW = SWEEPS["bad-view"]
#: sample-efficiency at a tiny setting whose largest budget's records dominate one cell's memory.
TINY = {"budgets": [100, 200000], "n_seeds": 2, "steps": 40, "batch_size": 64, "hidden": [16],
        "world": {"kind": "gridscene", "size": 2, "objects": 1}}


def _efficiency():
    settings = EFFICIENCY.settings_model().model_validate(TINY)
    law = caption_law(settings.world.build_scene(), settings.captions.build())
    return settings, settings.n_seeds * law.records_bytes(max(settings.budgets), 2)  # its own check's bytes


def test_a_cell_that_fits_the_limit_fits_one_worker_and_not_two_that_share_it():
    settings, cell = _efficiency()
    with memory_limit(1.5 * cell):
        plan = plan_sweep(EFFICIENCY, settings, 1)
        assert (plan.at_once, plan.share) == (1, int(1.5 * cell))
        with pytest.raises(ResourceError, match=r"^on 2 workers each cell has .* of the limit: the training records "
                                                r".* lower budgets, or run --workers 1 \(or raise --memory-limit\)$"):
            plan_sweep(EFFICIENCY, settings, 2)
    with memory_limit(2.5 * cell):  # two fit, three do not
        assert plan_sweep(EFFICIENCY, settings, 2).share == int(2.5 * cell) // 2
        with pytest.raises(ResourceError, match=r"run --workers 2 or fewer"):
            plan_sweep(EFFICIENCY, settings, 3)


def test_a_cell_that_cannot_fit_alone_is_refused_with_the_sweep_s_own_message():
    settings, cell = _efficiency()
    with memory_limit(0.5 * cell), pytest.raises(ResourceError) as refused:
        plan_sweep(EFFICIENCY, settings, 4)
    message = str(refused.value)
    assert message.startswith("the training records of the largest budget") and "--workers" not in message


def test_workers_beyond_the_cells_do_not_divide_the_limit_and_the_time_is_over_the_workers():
    settings = BAD_VIEW.settings_model().model_validate({"eps_grid": [0.5, 1.0]})
    with memory_limit(4e9):
        one, many = plan_sweep(BAD_VIEW, settings, 1), plan_sweep(BAD_VIEW, settings, 8)
    assert (one.cells, one.at_once, many.at_once, many.share) == (2, 1, 2, 2 * 10**9)
    assert many.seconds == pytest.approx(one.seconds / 2, rel=1e-12)
    assert one.seconds == pytest.approx(BAD_VIEW.estimate(settings).seconds, rel=1e-12)


def test_every_running_cell_computes_under_its_share(monkeypatch):
    """On threads of this process and in a worker's task, a cell sees the limit over the cells running at once.
    (The cells' records are computed first, one at a time: bad-view's cells silence a warning, and
    ``warnings.catch_warnings`` is not thread-safe, so its real cells are not run on threads here.)"""
    settings = BAD_VIEW.settings_model().model_validate({"eps_grid": [0.2, 0.5, 1.0]})
    module = BAD_VIEW.module_object()
    records = {c["eps"]: module.cell(settings, c) for c in module.cells(settings)}
    seen = []

    def watched(s, coordinates):
        seen.append(current_memory_limit())
        return records[coordinates["eps"]]

    monkeypatch.setattr(module, "cell", watched)
    with memory_limit(6e9):
        run_sweep(BAD_VIEW, settings, threads=2)
        assert seen == [3 * 10**9] * 3
        seen.clear()
        run_sweep(BAD_VIEW, settings)
        assert seen == [6 * 10**9] * 3
    seen.clear()
    cell_task(BAD_VIEW.module, BAD_VIEW.settings, settings.model_dump(mode="json"), 0, {"eps": 0.2}, None,
              7 * 10**9 + 1)
    assert seen == [7 * 10**9 + 1]


def test_the_command_refuses_workers_that_cannot_share_the_limit_before_any_work(tmp_path):
    for module in EFFICIENCY.requires:  # without one, the sweep refuses first (tests/cli/test_cli_extras.py)
        pytest.importorskip(module)
    settings, cell = _efficiency()
    args = ["sweep", "sample-efficiency", "--budgets", "100,200000", "--seeds", "2", "--set", "steps=40",
            "--set", "batch_size=64", "--set", "hidden=[16]", "--set", "world.size=2", "--set", "world.objects=1",
            "--memory-limit", f"{1.5 * cell / 1e9:.6f}", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, [*args, "--workers", "2"])
    assert result.exit_code == 2 and "run --workers 1" in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.cells").exists()


def test_workers_that_cannot_help_a_cell_too_large_for_the_whole_limit_get_its_own_refusal():
    """A cell over the whole limit is refused with the whole limit named, not with a worker's share."""
    settings, cell = _efficiency()
    with memory_limit(0.8 * cell), pytest.raises(ResourceError) as refused:
        plan_sweep(EFFICIENCY, settings, 2)
    assert f"(limit {format_bytes(int(0.8 * cell))})" in str(refused.value) and "--workers" not in str(refused.value)


def test_a_sweep_beyond_the_horizon_is_refused_unless_insisted_and_the_command_says_so_in_one_line(tmp_path):
    from prhsim._budget import HORIZON_SECONDS
    from prhsim.experiments.sweeps._cost import BeyondHorizon

    sweep = SWEEPS["calibration"]
    huge = sweep.settings_model().model_validate({"samples": 20000, "permutations": 100000})
    with memory_limit(1e12):  # memory enough: the time is what refuses it
        with pytest.raises(BeyondHorizon, match=r"^this sweep would take about [0-9,]+ days \(.*\), beyond the 7-day "
                                                r"horizon: lower its settings, or pass --insist$"):
            plan_sweep(sweep, huge)
        plan = plan_sweep(sweep, huge, insist=True)
    assert plan.seconds > HORIZON_SECONDS and any("may take hours" in note for note in plan.notes)
    assert plan_sweep(sweep, sweep.settings_model()()).seconds < HORIZON_SECONDS  # the default runs without it
    out = tmp_path / "cal"
    refused = CliRunner().invoke(main, ["sweep", "calibration", "--set", "samples=20000", "--set",
                                        "permutations=100000", "--memory-limit", "1000", "--out", str(out)])
    assert refused.exit_code == 2 and "pass --insist" in refused.output
    assert len(refused.output.strip().splitlines()) == 1 and not out.exists()
