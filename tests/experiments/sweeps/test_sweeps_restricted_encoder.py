"""The restricted-encoder sweep as cells (prhsim.experiments.sweeps._restricted_encoder): one per modality, computed in
any order, reduce to what the command's run computes."""

from __future__ import annotations

import random

import pytest
from support import untimed

from prhsim.experiments.sweeps import _restricted_encoder as sweep


@pytest.mark.parametrize("settings", [{"size": 2}, {"size": 2, "views": "bad", "inputs": "onehot", "seed": 3}])
def test_cells_in_any_order_reduce_to_the_run(settings):
    s = sweep.RestrictedEncoderSettings(**settings)
    coordinates = sweep.cells(s)
    assert coordinates == [{"modality": "pixels"}, {"modality": "caption"}, {"modality": "symbolic"}]
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
    assert [(p["a"], p["b"]) for p in run["pairs"]] == [("pixels", "caption"), ("pixels", "symbolic"),
                                                        ("caption", "symbolic")]
