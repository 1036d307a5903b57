"""Properties of the mathematics on drawn worlds (docs/theory.md §1–§4, §6), through the public ``prhsim.testing``.

Each test draws its inputs from ``prhsim.testing.strategies`` and checks one claim with its predicate
(``prhsim.testing.assert_...``), as a user's own property test would. Neighbouring property tests on narrower
inputs, not repeated here: the Ky Fan value on dense random worlds against the double-sum loss
(tests/optima/), Davis–Kahan and Yu–Wang–Samworth on random worlds mixed with another coupling
(tests/experiments/), Kronecker against ``np.kron`` of random factors (tests/optima/test_optima_kronecker.py),
and the sinΘ sandwich on random whitened tables (tests/metrics/).

Example counts scale with the hypothesis profile (conftest.py): the counts below are for the default and "ci"
profiles (100 examples per test); PRHSIM_HYPOTHESIS=thorough multiplies them by ten.
"""

from __future__ import annotations

import numpy as np
from hypothesis import event, given, settings, strategies as st

from support import assert_close
from prhsim.experiments import merge_rule
from prhsim.testing import (
    assert_factor_space_equals_table,
    assert_ky_fan,
    assert_kronecker_top,
    assert_merge_rule,
    assert_mismatch_bounds,
    assert_rotation_unique,
    assert_sin_theta_sandwich,
)
from prhsim.testing.strategies import (
    feasible_tables,
    modal_worlds,
    nuisance_setups,
    perturbed_pairs,
    product_worlds,
    tables_at_known_angles,
    worlds,
)
from prhsim.optima import whitened_optimum
from prhsim.worlds import bad


def examples(count: int) -> int:
    """``count`` examples under a 100-example profile, scaled by the loaded profile's max_examples."""
    return max(1, round(count * settings().max_examples / 100))


# --- §1.1: the closed form attains the Ky Fan value ----------------------------------------------------------------


@given(world=st.one_of(worlds(), modal_worlds()), centred=st.booleans(), data=st.data())
@settings(max_examples=examples(100))
def test_closed_form_attains_the_ky_fan_value_and_no_feasible_table_beats_it(world, centred, data):
    """§1.1 (Ky Fan), for every k, ties included: L* = 2 Σ_{i≤k} (1 − μ_i) from an independent eigh, the optimum
    whitened (and centred when asked), and no feasible table, random or a tilt of the optimum, is lower."""
    k = data.draw(st.integers(1, world.n - 2 if centred else world.n - 1), label="k")
    import warnings

    from prhsim.optima import TieWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)
        opt = whitened_optimum(world, k, centred=centred)
    event("k splits a tie" if not opt.unique else "k at a gap")
    tables = [data.draw(feasible_tables(world.p, k, centred, near=near), label="feasible table")
              for near in (None, opt.F)]
    assert_ky_fan(world, k, centred=centred, tables=tables)


# --- §2, §4: rotation uniqueness across modalities, and its failure under bad views ---------------------------------


@given(setup=nuisance_setups(good_only=True))
@settings(max_examples=examples(50))
def test_good_views_of_one_world_at_a_gap_give_one_representation(setup):
    """§2, §4: with good views of one π_Z and a positive gapped centred top-k of K_Z, every modality's optimum is
    nuisance-free, so every pair has ρ_P = s_Θ = 0 and canonical correlations 1."""
    base, k, mods, views = setup
    assert_rotation_unique(base, mods, views, k)


@given(setup=nuisance_setups())
@settings(max_examples=examples(100))
def test_observed_misalignment_equals_the_merge_rule_prediction(setup):
    """§4 (merge rule): the modal spectra, k_Z where determined and every predicted pair's ρ_P and s_Θ
    (good/good, bad/good and bad/bad pairs). A tie at k mixing the two kinds of candidate leaves k_Z
    undetermined: see test_merge_rule_reports_a_mixed_tie_at_k_as_undetermined."""
    base, k, mods, views = setup
    assert_merge_rule(base, mods, views, k)


def test_merge_rule_reports_a_mixed_tie_at_k_as_undetermined():
    """§4: λ(K_Z) = (1, .9, .8, .5, .4), bad(.2), |N| = 3, k = 3: the candidates .9 (free), then .8 (free) and
    .8, .8 ((1 − ε)·1, nuisance) tie across k, so the top-3 subspace takes any two directions of a 3-dimensional
    eigenspace mixing the kinds and k_Z is undetermined. The merge rule once named k_Z = 2 because positions 3
    and 4 are both nuisance. (Found by the property above on grid([4, 4], move=[0.5, 0.3125]), k = 5, bad(0.3125),
    |N| = 3: predicted 4, observed 3.) A tie of one kind at k leaves k_Z determined."""
    pred = merge_rule(np.array([1.0, 0.9, 0.8, 0.5, 0.4]), bad(0.2), 3, 3)
    assert_close(pred.values, [0.9, 0.8, 0.8, 0.8])
    assert pred.nuisance_free is None
    same_kind = merge_rule(np.array([1.0, 0.9, 0.5, 0.4, 0.3]), bad(0.2), 3, 2)  # .8, .8 nuisance tie at k = 2
    assert_close(same_kind.values, [0.9, 0.8, 0.8])
    assert same_kind.nuisance_free == 1


@given(setup=nuisance_setups(max_modalities=2))
@settings(max_examples=examples(30))
def test_factor_space_gives_the_numbers_of_the_full_tables(setup):
    """§6 (factor space): rotation uniqueness without any table over Z × N equals the full tables' numbers."""
    base, k, mods, views = setup
    assert_factor_space_equals_table(base, mods, views, k)


# --- §3: kernel-mismatch bounds on perturbed worlds ----------------------------------------------------------------


@given(pair=perturbed_pairs(), centred=st.booleans(), data=st.data())
@settings(max_examples=examples(100))
def test_observed_drift_never_exceeds_either_bound_for_any_perturbation(pair, centred, data):
    """§3: Yu–Wang–Samworth, Davis–Kahan with Weyl and classical Davis–Kahan bound the observed drift, and the
    sinΘ sandwich holds (§2), for Π mixed with another coupling, moved by ±δ on pairs, or made lazier, over every
    world kind (named and product worlds with exact ties included)."""
    w1, w2, kind = pair
    k = data.draw(st.integers(1, w1.n - 2 if centred else w1.n - 1), label="k")
    event(kind)
    assert_mismatch_bounds(w1, w2, k, centred=centred)


# --- §2: the sinΘ sandwich, with its two identities, at known angles -----------------------------------------------


@given(world=worlds(), centred=st.booleans(), data=st.data())
@settings(max_examples=examples(100))
def test_sin_theta_sandwich_at_known_principal_angles(world, centred, data):
    """§2: tables whitened under p at known principal angles θ: ‖sinΘ‖_F, the Procrustes residual and its
    singular values from θ, and ‖sinΘ‖_F ≤ min_Q ‖F1 − F2Q‖_D ≤ √2‖sinΘ‖_F (the laws p of the drawn worlds)."""
    p = np.asarray(world.p)
    k = data.draw(st.integers(1, (p.size - 1) // 2), label="k")
    F1, F2, theta = data.draw(tables_at_known_angles(p, k, centred), label="tables")
    assert_sin_theta_sandwich(F1, F2, p, theta)


# --- §6: Kronecker top-m equals the dense eigenproblem -------------------------------------------------------------


@given(world=st.one_of(product_worlds(), modal_worlds()), centred=st.booleans(), data=st.data())
@settings(max_examples=examples(100))
def test_kronecker_top_equals_dense_on_small_product_worlds(world, centred, data):
    """§6: the heap's top-m eigenpairs of ⊗K_f are those of the dense world (ties included)."""
    m = data.draw(st.integers(1, world.n - 1 if centred else world.n), label="m")
    assert_kronecker_top(world, m, centred=centred)
