"""The metric-bridge sweep as cells: computed in any order, its cells reduce to what the library computes."""

from __future__ import annotations

from prhsim.experiments.sweeps import _metric_bridge as bridge
from support import assert_cells_reduce_to_run


def test_cells_in_a_shuffled_order_reduce_to_the_library_s_result():
    s = bridge.MetricBridgeSettings(levels=4, samples=200)
    coordinates = bridge.cells(s)
    assert [c["family"] for c in coordinates] == [f for f in bridge.FAMILIES for _ in range(4)]
    assert_cells_reduce_to_run(bridge, s, seed=3)
