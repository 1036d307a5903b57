"""The restricted-encoder sweep as cells (prhsim.experiments.sweeps._restricted_encoder): one per modality, computed in
any order, reduce to what the command's run computes."""

from __future__ import annotations

import pytest
from support import assert_cells_reduce_to_run

from prhsim.experiments.sweeps import _restricted_encoder as sweep


@pytest.mark.parametrize("settings", [{"size": 2}, {"size": 2, "views": "bad", "inputs": "onehot", "seed": 3}])
def test_cells_in_any_order_reduce_to_the_run(settings):
    s = sweep.RestrictedEncoderSettings(**settings)
    coordinates = sweep.cells(s)
    assert coordinates == [{"modality": "pixels"}, {"modality": "caption"}, {"modality": "symbolic"}]
    run = assert_cells_reduce_to_run(sweep, s)
    assert [(p["a"], p["b"]) for p in run["pairs"]] == [("pixels", "caption"), ("pixels", "symbolic"),
                                                        ("caption", "symbolic")]
