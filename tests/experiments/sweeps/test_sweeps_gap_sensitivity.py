"""The gap-sensitivity sweep as cells: one per gap, the same numbers in any order as the library's run."""

from __future__ import annotations

from support import assert_cells_reduce_to_run

from prhsim.experiments.sweeps import _gap_sensitivity as sweep


def test_cells_in_any_order_reduce_to_the_run():
    s = sweep.GapSensitivitySettings(gaps=[0.01, 0.0, 1e-4])
    coordinates = sweep.cells(s)
    assert coordinates == [{"gap": 0.0}, {"gap": 1e-4}, {"gap": 0.01}]
    assert_cells_reduce_to_run(sweep, s)


def test_a_gap_gives_the_same_numbers_in_another_grid():
    one = sweep.run(sweep.GapSensitivitySettings(gaps=[0.0, 0.01])).cells
    other = sweep.run(sweep.GapSensitivitySettings(gaps=[0.0, 1e-4, 0.01])).cells
    assert one[0] == other[0] and one[1] == other[2]
