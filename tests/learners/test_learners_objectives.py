"""Every registered SGD objective on every small kind of world, exact and on minibatches (a table of cases, as optax
keeps one for its optimisers against known optima), read from the registry so a new objective is tested at once.

Known answers (docs/theory.md §1.1, §1.5): whatever an objective learns, its features whitened under p have an
alignment loss of at least L* = 2 Σ_{i≤k}(1 − μ_i) (Ky Fan), and the training loss falls from a random start; an
objective the theorem covers reaches the closed form (s_Θ → 0) on a table trained on the exact law. The records'
own claims are checked against what the code does: a step carries directions exactly when the record says so, and
the plan's cost is the record's.
"""

from __future__ import annotations

import numpy as np
import pytest

from prhsim.learners import LEARNERS
from prhsim.learners._objectives import OBJECTIVES
from prhsim.metrics import whiten
from prhsim.optima import alignment_loss, closed_form
from prhsim.worlds import bad, gridscene, ring, view_world

jax = pytest.importorskip("jax")
pytest.importorskip("optax")

from prhsim.learners import TrainConfig, train  # noqa: E402
from prhsim.learners._jax_runner import Spec, step_axes  # noqa: E402
from prhsim.learners._optimiser import Optimiser  # noqa: E402

_SCENE = gridscene(2, objects=1)
#: One world of each kind the learners train on: a finite world (one factor, its pairs listed), a product world
#: (π applied factor by factor) and a modal world (a bad view's nuisance factor beside the scene's).
WORLDS = {"finite": ring(12), "product": _SCENE.world,
          "modal": view_world(_SCENE.world, _SCENE.modalities()[1], bad(0.3))}
K = 2


def _ky_fan_ratio(world, features: np.ndarray, value: float) -> float:
    """The alignment loss of the p-whitened features over L*."""
    return alignment_loss(world, whiten(features, world.p)) / value


#: Every world kind on the exact law (each applies π its own way); minibatches draw pairs alike on every kind, so
#: one (the modal world, the largest) stands for them.
CASES = [(kind, "exact") for kind in sorted(WORLDS)] + [("modal", "minibatch")]


@pytest.mark.parametrize("world_kind, data", CASES)
@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_every_objective_learns_on_every_world_kind(objective, world_kind, data):
    world = WORLDS[world_kind]
    optimum = closed_form(world, K)
    config = TrainConfig(objective=objective, data=data, steps=100, lr=0.05, batch_size=64, num_directions=8,
                         log_every=50)
    result = train(world, K, config, seeds=(0,), reference=optimum)
    assert np.all(np.isfinite(result.features)) and not result.any_collapsed
    assert result.loss[0, -1] < result.loss[0, 0], (objective, world_kind, data, result.loss[0])
    assert _ky_fan_ratio(world, result.features[0], optimum.value) >= 1.0 - 1e-9


@pytest.mark.parametrize("world_kind", sorted(WORLDS))
@pytest.mark.parametrize("objective", sorted(o for o, r in OBJECTIVES.items() if r.covered))
def test_a_covered_objective_reaches_the_closed_form_on_exact_data(objective, world_kind):
    world = WORLDS[world_kind]
    optimum = closed_form(world, K)
    assert optimum.unique
    record = OBJECTIVES[objective]
    config = (TrainConfig.preconditioned(optimum.eigenvalues, objective=objective, steps=600, log_every=50, tol=1e-7)
              if record.eigen_residual else TrainConfig(objective=objective, steps=3000, lr=0.05, log_every=100))
    result = train(world, K, config, seeds=(0,), reference=optimum)
    assert np.all(result.distance[:, -1] < 1e-5), result.distance[:, -1]
    assert np.allclose(_ky_fan_ratio(world, result.features[0], optimum.value), 1.0, atol=1e-8)


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_the_records_claims_are_what_the_code_does(objective):
    record = OBJECTIVES[objective]
    assert LEARNERS[objective].objective is record and LEARNERS[objective].covered == record.covered
    for data in ("exact", "minibatch"):
        spec = Spec(objective, data, "tabular", True, "lejepa", Optimiser())
        assert ("dirs" in step_axes(spec)) == record.directions
    if record.min_batch > 1:
        with pytest.raises(ValueError, match=f"the {objective} objective on a minibatch needs batch_size >= "
                                             f"{record.min_batch}"):
            TrainConfig(objective=objective, data="minibatch", batch_size=record.min_batch - 1)
    assert record.step_flops("exact", 100, 2, 1, 64, 16) > 0 and record.step_flops("minibatch", 100, 2, 1, 64, 16) > 0
