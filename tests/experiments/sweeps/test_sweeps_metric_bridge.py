"""The metric-bridge sweep as cells: computed in any order, its cells reduce to what the library computes."""

from __future__ import annotations

import json
import random

from prhsim.experiments.sweeps import _metric_bridge as bridge
from support import untimed


def test_cells_in_a_shuffled_order_reduce_to_the_library_s_result():
    s = bridge.MetricBridgeSettings(levels=4, samples=200)
    coordinates = bridge.cells(s)
    assert [c["family"] for c in coordinates] == [f for f in bridge.FAMILIES for _ in range(4)]
    order = list(range(len(coordinates)))
    random.Random(3).shuffle(order)
    records = {i: json.loads(json.dumps(bridge.cell(s, coordinates[i]))) for i in order}  # JSON, as a worker's
    reduced = bridge.reduce(s, [records[i] for i in range(len(coordinates))]).model_dump(mode="json")
    direct = bridge.run(s).model_dump(mode="json")
    assert set(reduced) == set(direct)
    for key in direct:
        if key != "seconds":
            assert untimed(reduced[key]) == untimed(direct[key]), key
