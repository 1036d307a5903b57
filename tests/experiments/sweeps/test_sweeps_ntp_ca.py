"""The ntp-ca sweep as cells: one per world, the same numbers in any order as the library's run."""

from __future__ import annotations

import random

from support import untimed

from prhsim.experiments.sweeps import _ntp_ca as sweep


def test_cells_in_any_order_reduce_to_the_run():
    s = sweep.NtpCaSettings(strengths=[0.1, 1.0], worlds=3, restarts=1)
    coordinates = sweep.cells(s)
    assert coordinates == [{"world": 0}, {"world": 1}, {"world": 2}]
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


def test_a_world_gives_the_same_numbers_with_more_worlds():
    one = sweep.run(sweep.NtpCaSettings(strengths=[0.1, 1.0], worlds=1, restarts=1)).cells
    two = sweep.run(sweep.NtpCaSettings(strengths=[0.1, 1.0], worlds=2, restarts=1)).cells
    assert one[0] == two[0]
