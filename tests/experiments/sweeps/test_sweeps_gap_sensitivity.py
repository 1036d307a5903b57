"""The gap-sensitivity sweep as cells: one per gap, the same numbers in any order as the library's run."""

from __future__ import annotations

import random

from support import untimed

from prhsim.experiments.sweeps import _gap_sensitivity as sweep


def test_cells_in_any_order_reduce_to_the_run():
    s = sweep.GapSensitivitySettings(gaps=[0.01, 0.0, 1e-4])
    coordinates = sweep.cells(s)
    assert coordinates == [{"gap": 0.0}, {"gap": 1e-4}, {"gap": 0.01}]
    order = list(range(len(coordinates)))
    random.Random(1).shuffle(order)
    records = {i: sweep.cell(s, coordinates[i]) for i in order}
    assert all(r["seconds"] >= 0 for r in records.values())
    reduced = sweep.reduce(s, [records[i] for i in range(len(coordinates))]).model_dump(mode="json")
    run = sweep.run(s).model_dump(mode="json")
    assert reduced.keys() == run.keys()
    for key in run:
        if key != "seconds":
            assert untimed(reduced[key]) == untimed(run[key]), key


def test_a_gap_gives_the_same_numbers_in_another_grid():
    one = sweep.run(sweep.GapSensitivitySettings(gaps=[0.0, 0.01])).cells
    other = sweep.run(sweep.GapSensitivitySettings(gaps=[0.0, 1e-4, 0.01])).cells
    assert one[0] == other[0] and one[1] == other[2]
