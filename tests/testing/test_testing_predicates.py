"""prhsim.testing's predicates catch wrong claims: a user's wrong merge rule, a wrong bound constant and a
mis-rotated representation each fail through the public API with a message that names the claim, its section,
the predicted and observed values and the tolerance; the right claims pass on the same inputs."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from prhsim.experiments import merge_rule
from prhsim.testing import (
    ATOL,
    CLEAR_GAP,
    SOLVER_ATOL,
    ClaimFailed,
    assert_ky_fan,
    assert_merge_rule,
    assert_mismatch_bounds,
    assert_rotation_unique,
    assert_sin_theta_sandwich,
    gap_atol,
)
from prhsim.testing.strategies import nuisance_setups, perturbed_pairs, tables_at_known_angles, worlds
from prhsim.worlds import Modality, bad, good, grid, ring

#: Enough examples to meet a counterexample; no shrinking (the message is the point, not the smallest example).
RUN = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck),
               phases=[Phase.explicit, Phase.reuse, Phase.generate])


def _first_failure(prop) -> ClaimFailed:
    with pytest.raises(ClaimFailed) as info:
        prop()
    return info.value


def test_a_wrong_merge_rule_fails_with_the_claim_and_both_numbers():
    """The user's rule forgets the (1 − ε)λ(K_Z) copies of the nuisance directions: every feature would be
    nuisance-free, k_Z = k; the predicate finds a world where the modal spectrum is not that."""

    def forgetful(base_values, view, n_nuisance, k, **kw):
        pred = merge_rule(base_values, good(), n_nuisance, k)  # a good view's merge, whatever the view
        return dataclasses.replace(pred, nuisance_free=k)

    @RUN
    @given(setup=nuisance_setups())
    def prop(setup):
        base, k, mods, views = setup
        assert_merge_rule(base, mods, views, k, rule=forgetful)

    message = str(_first_failure(prop))
    assert "(docs/theory.md §4)" in message and "predicted" in message and "observed" in message
    assert "tolerance" in message and ("merge" in message or "k_Z" in message)


def test_the_right_merge_rule_passes_where_the_wrong_one_fails():
    base, k = grid([4, 4], move=[0.5, 0.25]), 3
    mods = [Modality("a", [0.5, 0.5]), Modality("b", [0.25, 0.75])]
    views = [bad(0.1), good()]
    assert_merge_rule(base, mods, views, k)
    assert_merge_rule(base, mods, views, k, rule=merge_rule)
    with pytest.raises(ClaimFailed, match=r"docs/theory.md §4"):
        assert_merge_rule(base, mods, views, k, rule=lambda lam, view, nn, kk: merge_rule(lam, good(), nn, kk))


def test_a_bound_with_too_small_a_constant_fails_on_some_perturbation():
    """Halving every perturbation bound (a user's conjectured constant) is caught; the real bounds hold."""

    @RUN
    @given(pair=perturbed_pairs(), data=st.data())
    def prop(pair, data):
        w1, w2, _ = pair
        k = data.draw(st.integers(1, w1.n - 2))
        assert_mismatch_bounds(w1, w2, k)  # the theorem's constant: holds
        assert_mismatch_bounds(w1, w2, k, bound_scale=0.5)

    message = str(_first_failure(prop))
    assert "(docs/theory.md §3)" in message and "bounds" in message and "predicted at most" in message


def test_a_mis_rotated_representation_is_not_the_same_representation():
    """A user claims F2 = F1 Q (angles 0) but applies Q on the wrong side (to the states): the sandwich's
    identity ‖sinΘ‖_F = √(Σ sin²θ) fails with predicted 0."""

    @RUN
    @given(world=worlds(), data=st.data())
    def prop(world, data):
        p = np.asarray(world.p)
        k = data.draw(st.integers(1, (p.size - 1) // 2))
        F1, _, _ = data.draw(tables_at_known_angles(p, k, True))
        Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(k, k)))
        assert_sin_theta_sandwich(F1, F1 @ Q, p, np.zeros(k))  # the right rotation: angles 0
        P = np.random.default_rng(1).permutation(p.size)
        assert_sin_theta_sandwich(F1, F1[P], p, np.zeros(k))  # rotated (permuted) over the states instead

    message = str(_first_failure(prop))
    assert "‖sinΘ‖_F = √(Σ sin²θ) (docs/theory.md §2)" in message and "predicted 0" in message


def test_rotation_uniqueness_refuses_bad_views_as_a_premise_not_a_failure():
    base, k = ring(8, laziness=0.2), 2
    mods = [Modality("a", [0.5, 0.5]), Modality("b", [1.0])]
    with pytest.raises(ValueError, match="good views only"):
        assert_rotation_unique(base, mods, [bad(0.1), good()], k)
    with pytest.raises(ValueError, match="needs a gap at k = 1"):
        assert_rotation_unique(base, mods, [good(), good()], 1)  # a ring's μ_1 = μ_2: a tie, no gap at k = 1
    assert_rotation_unique(base, mods, [good(), good()], k)


def test_ky_fan_refuses_an_unwhitened_table_as_a_premise():
    world = ring(9, laziness=0.3)
    with pytest.raises(ValueError, match=r"tables\[0\] is not whitened"):
        assert_ky_fan(world, 2, tables=[np.ones((9, 2))])
    with pytest.raises(ValueError, match=r"k = 8 must lie in 1..7"):
        assert_ky_fan(world, 8)


def test_the_tolerances_are_named_once_and_scale_with_the_gap():
    assert (ATOL, SOLVER_ATOL, CLEAR_GAP) == (1e-10, 1e-8, 1e-4)
    assert gap_atol(1.0) == SOLVER_ATOL and gap_atol(CLEAR_GAP) == SOLVER_ATOL
    assert gap_atol(CLEAR_GAP / 10) == pytest.approx(10 * SOLVER_ATOL, rel=1e-15)
    with pytest.raises(ValueError, match="gap must be a positive number"):
        gap_atol(0.0)


def test_without_hypothesis_the_import_is_one_line_naming_the_extra():
    code = ("import sys\nclass Block:\n    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'hypothesis' or name.startswith('hypothesis.'):\n"
            "            raise ImportError('blocked')\n"
            "sys.meta_path.insert(0, Block())\nimport prhsim.testing\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "ImportError: prhsim.testing needs hypothesis: pip install 'prhsim[testing]'")
