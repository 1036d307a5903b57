"""The ntp-ca sweep as cells: one per world, the same numbers in any order as the library's run."""

from __future__ import annotations

from support import assert_cells_reduce_to_run

from prhsim.experiments.sweeps import _ntp_ca as sweep


def test_cells_in_any_order_reduce_to_the_run():
    s = sweep.NtpCaSettings(strengths=[0.1, 1.0], worlds=3, restarts=1)
    coordinates = sweep.cells(s)
    assert coordinates == [{"world": 0}, {"world": 1}, {"world": 2}]
    assert_cells_reduce_to_run(sweep, s)


def test_a_world_gives_the_same_numbers_with_more_worlds():
    one = sweep.run(sweep.NtpCaSettings(strengths=[0.1, 1.0], worlds=1, restarts=1)).cells
    two = sweep.run(sweep.NtpCaSettings(strengths=[0.1, 1.0], worlds=2, restarts=1)).cells
    assert one[0] == two[0]
