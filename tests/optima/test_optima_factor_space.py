"""Factor space (docs/theory.md §6): every quantity of a run from factor Grams equals its table twin.

The twins are the table path's own functions (coupled_comparison, alignment_loss,
whitening_error, nuisance_free_dimension) applied to the full feature table over every
modal state, which :meth:`FactorFeatures.table` forms from the definition ``f_i(x) = s_i Π_f T_f[x_f, t_if]``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from prhsim.experiments import rotation_uniqueness
from prhsim.experiments._run import _tie_note
from prhsim.optima import FactorFeatures, alignment_loss, closed_form, factor_comparison, whitening_error
from prhsim.metrics import coupled_comparison, nuisance_free_dimension
from prhsim.worlds import (
    ProductWorld,
    bad,
    codebook,
    good,
    gridscene,
    random_world,
    resampling,
    ring,
    view_world,
)

ATOL = 1e-12


def _random_features(factors, k, gen, tables=None):
    """Arbitrary (not whitened) product features on ``factors``; ``tables`` shares another set's tables."""
    if tables is None:
        tables = tuple(gen.normal(size=(f.n, gen.integers(1, f.n + 1))) for f in factors)
    index = np.column_stack([gen.integers(0, t.shape[1], size=k) for t in tables])
    return FactorFeatures(tables, index, gen.uniform(0.5, 2.0, size=k), tuple(factors))


def _modal_factors(gen, nuisance):
    base = [random_world(3, rng=gen), random_world(4, rng=gen)]
    q = gen.dirichlet(np.full(nuisance, 2.0))
    return base, resampling(q, 0.4)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shared", [True, False])
def test_factor_comparison_equals_the_coupled_comparison_of_the_tables(seed, shared):
    gen = np.random.default_rng(seed)
    base, na = _modal_factors(gen, 3)
    nb = resampling(gen.dirichlet(np.full(2, 2.0)), 0.7)
    a = _random_features((*base, na), 4, gen)
    b = _random_features((*base, nb), 4, gen, tables=(*a.tables[:-1], gen.normal(size=(2, 2))) if shared else None)
    if shared:  # duplicate product functions across the two sets exercise the union's merging
        b = FactorFeatures(b.tables, np.column_stack([a.index[:, :-1], b.index[:, -1]]), b.scales, b.factors)
    p_z = ProductWorld(base).p
    got = factor_comparison(a, b)
    want = coupled_comparison(a.table(), na.p, b.table(), nb.p, p_z)
    assert got.rho_p == pytest.approx(want.rho_p, abs=ATOL, rel=1e-12)
    assert got.s_theta == pytest.approx(want.s_theta, abs=ATOL, rel=1e-12)
    np.testing.assert_allclose(got.correlations, want.correlations, atol=ATOL, rtol=0)


@pytest.mark.parametrize("seed", range(6))
def test_loss_whitening_and_nuisance_freedom_equal_their_table_twins(seed):
    gen = np.random.default_rng(seed)
    base, nuisance = _modal_factors(gen, 3)
    world = ProductWorld([*base, nuisance])
    F = _random_features(world.factors, 3, gen)
    table = F.table()
    assert F.alignment_loss() == pytest.approx(alignment_loss(world, table), abs=ATOL, rel=1e-12)
    assert F.whitening_error() == pytest.approx(whitening_error(world, table), abs=ATOL, rel=1e-12)
    for threshold in (0.1, 0.5, 2.0):
        assert F.nuisance_free_dimension(threshold=threshold) == nuisance_free_dimension(
            table, nuisance.p, ProductWorld(base).p, threshold=threshold)


def test_rows_are_the_table_rows_and_take_picks_columns():
    gen = np.random.default_rng(0)
    base, nuisance = _modal_factors(gen, 2)
    F = _random_features((*base, nuisance), 5, gen)
    table = F.table()
    states = gen.integers(0, table.shape[0], size=17)
    np.testing.assert_array_equal(F.rows(states), table[states])
    np.testing.assert_array_equal(F.take([4, 0, 2]).table(), table[:, [4, 0, 2]])


def test_factor_space_needs_a_kronecker_basis():
    with pytest.raises(ValueError, match="factor-space features need a Kronecker eigenbasis, got the dense backend"):
        FactorFeatures.from_optimum(closed_form(ring(8), 2))


def test_comparing_different_worlds_is_refused():
    gen = np.random.default_rng(0)
    base, nuisance = _modal_factors(gen, 2)
    a = _random_features((*base, nuisance), 2, gen)
    other = _random_features((ring(5), nuisance), 2, gen)
    with pytest.raises(ValueError, match=r"both modalities must share the factors of Z, got \(3, 4\) and \(5,\)"):
        factor_comparison(a, other)
    with pytest.raises(ValueError, match="both modalities need the same number of features, got 2 and 3"):
        factor_comparison(a, _random_features((*base, nuisance), 3, gen))


def _worlds():
    scene = gridscene(size=2, objects=1)
    yield "gridscene", scene.world, list(scene.modalities(rng=0)), [good(), bad(0.1), bad(0.3)], "auto"
    yield "gridscene good", scene.world, list(scene.modalities(rng=0)), [good(), good(), good()], 4  # a tie
    base = random_world(30, rng=3)  # not a product: Z is one factor of each modal world
    yield "random", base, [codebook(30, 3, name="a", rng=1), codebook(30, 2, name="b", rng=2)], [bad(0.2), good()], 3
    base = ring(12)  # ties: k = 2 splits nothing, k = 3 splits a cosine pair
    yield "ring tie", base, [codebook(12, 2, name="a", rng=1), codebook(12, 3, name="b", rng=2)], [good(), bad(0.5)], 3


@pytest.mark.filterwarnings("ignore::prhsim.optima.TieWarning")  # the ties are the point of two cases
@pytest.mark.parametrize("name, base, modalities, views, k", list(_worlds()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_run_in_factor_space_equals_the_table_path(name, base, modalities, views, k):
    fast = rotation_uniqueness(base, modalities, views, k, rng=0)
    slow = rotation_uniqueness(base, modalities, views, k, tables=True, rng=0)
    assert fast.k == slow.k
    for f, s in zip(fast.modalities, slow.modalities):
        assert f.factor is not None and s.factor is None and s.table is not None
        np.testing.assert_array_equal(f.optimum.eigenvalues, s.optimum.eigenvalues)
        assert (f.unique, f.nuisance_free, f.predicted.nuisance_free) == (s.unique, s.nuisance_free,
                                                                           s.predicted.nuisance_free)
        assert f.loss == pytest.approx(s.loss, abs=ATOL, rel=1e-12)
        assert f.whitening_error < 1e-12 and s.whitening_error < 1e-12
        np.testing.assert_allclose(f.features, s.features, atol=ATOL, rtol=0)
        if not f.unique:
            assert _s_theta(_tie_note(f)) == pytest.approx(_s_theta(_tie_note(s)), abs=1e-3)
    for f, s in zip(fast.pairs, slow.pairs):
        assert f.comparison.rho_p == pytest.approx(s.comparison.rho_p, abs=ATOL)
        assert f.comparison.s_theta == pytest.approx(s.comparison.s_theta, abs=ATOL)
        np.testing.assert_allclose(f.comparison.correlations, s.comparison.correlations, atol=ATOL, rtol=0)
        assert f.predicted_rho == s.predicted_rho


def _s_theta(note: str) -> float:
    return float(re.search(r"s_Theta = ([0-9.]+)", note).group(1))


@pytest.mark.filterwarnings("ignore::prhsim.optima.TieWarning")
def test_a_tie_is_named_in_factor_space_with_its_second_optimum():
    base = ring(12)
    out = rotation_uniqueness(base, [codebook(12, 2, name="a", rng=1)], [good()], 3, rng=0)
    note = _tie_note(out.modalities[0])
    assert note.startswith("k=3 splits a tie")
    assert _s_theta(note) == pytest.approx(np.sqrt(1 / 3), abs=1e-3)  # one angle of pi/2 among three


def test_the_modal_world_of_a_good_view_is_never_materialised():
    """4 objects on a 3 x 3 grid: 344,373,768 caption states; factor space touches factor tables only."""
    scene = gridscene(size=3, objects=4)
    world = view_world(scene.world, scene.modalities(rng=0)[1], good())
    opt = closed_form(world, "auto")
    assert world.n == 344_373_768 and opt.unique
    F = FactorFeatures.from_optimum(opt)
    assert F.whitening_error() < 1e-12
    assert F.alignment_loss() == pytest.approx(opt.value, abs=1e-12)
    assert F.nuisance_free_dimension() == opt.k
    assert "_p" not in world.__dict__  # the modal law was never formed
