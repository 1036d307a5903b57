"""The sigreg-weight sweep as cells: one per λ, the same numbers in any order as the library's run."""

from __future__ import annotations

import pytest

from support import assert_cells_reduce_to_run

from prhsim._extras import JAX_MODULES

for _module in JAX_MODULES:  # the sweep needs the jax extra
    pytest.importorskip(_module)

from prhsim.experiments.sweeps import _sigreg_weight as sweep  # noqa: E402


def test_cells_in_any_order_reduce_to_the_run():
    s = sweep.SigregWeightSettings.model_validate({"lams": [0.1, 0.01], "world": {"kind": "random", "n": 12},
                                                   "training": {"steps": 50, "n_seeds": 1}})
    coordinates = sweep.cells(s)
    assert coordinates == [{"lam": 0.01}, {"lam": 0.1}]
    assert_cells_reduce_to_run(sweep, s)
