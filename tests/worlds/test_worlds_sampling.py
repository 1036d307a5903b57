"""Pair sampling: (z, z') ~ π and V views per anchor from finite, product and modal worlds (docs/theory.md §0, §4, §6).

Each law is checked by a chi-square goodness-of-fit test against π formed densely
here (the naive twin: np.kron of the factors' Π for product worlds), and each
such test is shown to have power: a deliberately wrong sampler on the same
number of draws is rejected.
"""

from functools import reduce

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import chisquare

from support import dense
from prhsim.worlds import (
    FiniteWorld,
    ModalPairs,
    Modality,
    ProductWorld,
    bad,
    codebook,
    good,
    gridscene,
    pair_sampler,
    path,
    pixels,
    random_world,
    ring,
    sample_modal_pairs,
    sample_pairs,
    split_modal,
    view_world,
)

B = 200_000
ACCEPT = 1e-3  # the correct sampler's p-value must exceed this
REJECT = 1e-6  # a wrong sampler's p-value must fall below this


def chi2_pvalue(observed, prob) -> float:
    """Chi-square goodness-of-fit p-value of counts against a law; cells expecting < 5 draws are pooled.

    A pooled cell of zero probability that was drawn is an impossible event: p-value 0.
    """
    observed = np.asarray(observed, dtype=float).ravel()
    prob = np.asarray(prob, dtype=float).ravel()
    expected = observed.sum() * prob / prob.sum()
    small = expected < 5
    obs, exp = observed[~small], expected[~small]
    if small.any():
        o, e = observed[small].sum(), expected[small].sum()
        if e == 0 and o > 0:
            return 0.0
        if e > 0:
            obs, exp = np.append(obs, o), np.append(exp, e)
    return float(chisquare(obs, exp).pvalue)


def pair_counts(z, z2, n: int) -> np.ndarray:
    return np.bincount(np.asarray(z) * n + np.asarray(z2), minlength=n * n).reshape(n, n)


def dense_pi(world) -> np.ndarray:
    """π as a dense n x n table: the naive twin (np.kron of the factors' Π, row-major)."""
    return reduce(np.kron, [dense(f.Pi) for f in world.factors])


def dense_p(world) -> np.ndarray:
    return reduce(np.kron, [f.p for f in world.factors])


WORLDS = {
    "ring7-dense": lambda: ring(7),
    "ring7-sparse": lambda: ring(7, sparse=True),
    "path5-sparse": lambda: path(5, sparse=True),
    "random6-dense": lambda: random_world(6, rng=0),
    "random30-sparse": lambda: random_world(30, degree=3, rng=1),
    "ring3xpath4": lambda: ProductWorld([ring(3), path(4)]),
    "modal-codebook-bad": lambda: view_world(path(4), codebook(4, 3, rng=0), bad(0.3)),
    "modal-gridscene-bad": lambda: (lambda s: view_world(s.world, pixels(s), bad(0.4)))(
        gridscene(size=2, objects=1, shapes=2, colours=2)),
}


@pytest.fixture(scope="module", params=sorted(WORLDS))
def drawn(request):
    """A world, its dense π and p, and B pairs drawn with seed 1."""
    world = WORLDS[request.param]()
    z, z2 = pair_sampler(world).pairs(B, rng=1)
    return request.param, world, dense_pi(world), dense_p(world), z, z2


def test_pairs_follow_pi_and_a_wrong_sampler_is_rejected(drawn):
    name, world, Pi, p, z, z2 = drawn
    n = world.n
    assert z.dtype == z2.dtype == np.int64 and z.shape == z2.shape == (B,)
    assert 0 <= min(z.min(), z2.min()) and max(z.max(), z2.max()) < n
    assert chi2_pvalue(pair_counts(z, z2, n), Pi) > ACCEPT, name
    # wrong 1: z' ~ p independently of z (the second half of an independent batch)
    _, other = pair_sampler(world).pairs(B, rng=2)
    assert chi2_pvalue(pair_counts(z, other, n), Pi) < REJECT, name
    # wrong 2: z' drawn from the neighbouring anchor's row
    assert chi2_pvalue(pair_counts((z + 1) % n, z2, n), Pi) < REJECT, name


def test_both_marginals_are_p(drawn):
    name, world, _, p, z, z2 = drawn
    for side in (z, z2):
        assert chi2_pvalue(np.bincount(side, minlength=world.n), p) > ACCEPT, name
    if not np.allclose(p, p[0]):  # power: a non-uniform p is told apart from the uniform law
        assert chi2_pvalue(np.bincount(z, minlength=world.n), np.ones(world.n)) < REJECT, name


def test_product_states_are_the_row_major_ravel():
    """Column-major flattening of the same factor draws is rejected: the index is ravel_multi_index (C order)."""
    world = ProductWorld([ring(3), path(4)])
    z, z2 = sample_pairs(world, B, rng=0)
    Pi = dense_pi(world)
    fortran = [np.ravel_multi_index(np.unravel_index(s, world.shape), world.shape, order="F") for s in (z, z2)]
    assert chi2_pvalue(pair_counts(z, z2, world.n), Pi) > ACCEPT
    assert chi2_pvalue(pair_counts(*fortran, world.n), Pi) < REJECT


def test_dense_and_sparse_copies_of_a_world_draw_the_same_pairs():
    """The tables hold only Π's positive entries in row-major order, so storage does not change a draw."""
    for make in (lambda sparse: ring(9, sparse=sparse), lambda sparse: path(6, sparse=sparse)):
        a, b = sample_pairs(make(False), 5000, rng=7), sample_pairs(make(True), 5000, rng=7)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_seeded_reproducibility():
    s = pair_sampler(random_world(30, degree=3, rng=1))
    a, b = s.pairs(1000, rng=5), s.pairs(1000, rng=5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    c = s.pairs(1000, rng=6)
    assert not np.array_equal(a[0], c[0]) and not np.array_equal(a[1], c[1])
    gen = np.random.default_rng(5)
    first, second = s.pairs(1000, rng=gen), s.pairs(1000, rng=gen)
    assert all(np.array_equal(x, y) for x, y in zip(first, a)), "a Generator seeded 5 gives the seed-5 pairs"
    assert not np.array_equal(first[0], second[0]), "a passed Generator advances"
    assert np.array_equal(sample_pairs(ProductWorld([ring(3), path(4)]), 50, rng=None)[1],
                          sample_pairs(ProductWorld([ring(3), path(4)]), 50, rng=0)[1]), "None is seed 0"
    anchors, views = s.views(1000, 1, rng=5)
    assert np.array_equal(anchors, a[0]) and np.array_equal(views[:, 0], a[1]), "pairs are views with V = 1"


def test_a_product_of_10_to_the_12_states_is_sampled_from_its_factors_alone():
    world = ProductWorld([ring(10**4)] * 3)
    assert world.n == 10**12
    sampler = pair_sampler(world)
    assert sampler._factors[0] is sampler._factors[1] is sampler._factors[2], "one table per factor world"
    z, z2 = sampler.pairs(1000, rng=0)
    anchors, views = sampler.views(200, 4, rng=1)
    for a, b in ((z, z2), (anchors[:, None], views)):
        assert 0 <= min(a.min(), b.min()) and max(a.max(), b.max()) < world.n
        for ca, cb in zip(np.unravel_index(a, world.shape), np.unravel_index(b, world.shape)):
            assert set(np.unique((cb - ca) % 10**4).tolist()) <= {0, 1, 10**4 - 1}  # ring neighbours or stay
    assert len(np.unique(z)) == 1000  # 10^12 states: no collisions in 1000 uniform draws (w.p. 1 - 5e-7)
    with pytest.raises(ValueError, match="int64"):
        pair_sampler(ProductWorld([ring(10**4)] * 5))  # 10^20 states


def test_default_gridscene_world_samples_each_factor_by_its_own_pi():
    scene = gridscene()
    z, z2 = sample_pairs(scene.world, 50_000, rng=0)
    assert scene.n == 20_736 and z.max() < scene.n and z2.max() < scene.n
    for f, a, b in zip(scene.world.factors, scene.world.unravel(z), scene.world.unravel(z2)):
        assert chi2_pvalue(pair_counts(a, b, f.n), dense(f.Pi)) > ACCEPT


def _persistence(world, q, eps):
    pairs = sample_modal_pairs(world, B, rng=3)
    assert isinstance(pairs, ModalPairs) and pairs.z.shape == pairs.n2.shape == (B,)
    expected = (1 - eps) + eps * np.sum(q**2)
    frac = np.mean(pairs.n == pairs.n2)
    assert abs(frac - expected) < 5 * np.sqrt(expected * (1 - expected) / B), (frac, expected)
    return pairs


@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_bad_view_keeps_the_nuisance_at_the_derived_rate(eps):
    """P(n' = n) = (1-ε) + ε Σ q² (n' = n w.p. 1-ε, else n' ~ q); ε = 1 is the good view: Σ q²."""
    base = random_world(5, rng=2, self_loop=1.0)
    modality = codebook(5, 6, rng=0)
    q = modality.nuisance
    world = view_world(base, modality, bad(eps) if eps < 1 else good())
    pairs = _persistence(world, q, eps)
    rho = (1 - eps) * np.diag(q) + eps * np.outer(q, q)
    assert chi2_pvalue(pair_counts(pairs.n, pairs.n2, q.size), rho) > ACCEPT
    assert chi2_pvalue(pair_counts(pairs.z, pairs.z2, base.n), dense(base.Pi)) > ACCEPT
    wrong = (1 - 0.5) * np.diag(q) + 0.5 * np.outer(q, q)  # another view's ρ
    assert chi2_pvalue(pair_counts(pairs.n, pairs.n2, q.size), wrong) < REJECT
    # the nuisance pair is independent of the base pair: joint counts match π_Z ⊗ ρ
    joint = pair_counts(pairs.z * q.size + pairs.n, pairs.z2 * q.size + pairs.n2, world.n)
    assert chi2_pvalue(joint, np.kron(dense(base.Pi), rho)) > ACCEPT


def test_gridscene_pixels_bad_view_persistence():
    scene = gridscene()
    modality = pixels(scene)
    _persistence(view_world(scene.world, modality, bad(0.2)), modality.nuisance, 0.2)


def test_split_modal_inverts_the_modal_index():
    w = view_world(ring(3), Modality("text", [0.2, 0.3, 0.5]), good())
    z, n = split_modal(w, np.arange(w.n))
    assert np.array_equal(z * 3 + n, np.arange(w.n)) and z.max() == 2 and n.max() == 2
    with pytest.raises(ValueError, match="world must be a ModalWorld"):
        split_modal(ring(3), np.arange(3))
    with pytest.raises(ValueError, match="world must be a ModalWorld"):
        sample_modal_pairs(ring(3), 10, rng=0)


@pytest.mark.parametrize("make", [lambda: random_world(5, rng=3), lambda: ProductWorld([ring(3), path(3)])],
                         ids=["random5", "ring3xpath3"])
def test_views_are_positives_of_the_anchor_and_independent_given_it(make):
    world = make()
    n, V = world.n, 3
    Pi, p = dense_pi(world), dense_pi(world).sum(axis=1)
    anchors, views = pair_sampler(world).views(B, V, rng=4)
    assert anchors.shape == (B,) and views.shape == (B, V) and views.dtype == np.int64
    for j in (0, V - 1):
        assert chi2_pvalue(pair_counts(anchors, views[:, j], n), Pi) > ACCEPT
    # P(z, a, b) = Π[z, a] Π[z, b] / p(z): views 0 and 1 independent given the anchor
    law = Pi[:, :, None] * Pi[:, None, :] / p[:, None, None]
    cells = (anchors * n + views[:, 0]) * n + views[:, 1]
    assert chi2_pvalue(np.bincount(cells, minlength=n**3), law) > ACCEPT
    same = (anchors * n + views[:, 0]) * n + views[:, 0]  # wrong: one view repeated
    assert chi2_pvalue(np.bincount(same, minlength=n**3), law) < REJECT


def test_explicit_zeros_of_a_sparse_pi_are_never_drawn():
    Pi = sp.csr_array((np.array([0.3, 0.0, 0.0, 0.2, 0.0, 0.5]), np.array([0, 1, 2, 1, 0, 2]),
                       np.array([0, 3, 4, 6])), shape=(3, 3))
    world = FiniteWorld(np.array([0.3, 0.2, 0.5]), Pi)
    assert world.is_sparse and world.Pi.nnz == 6
    z, z2 = sample_pairs(world, 10_000, rng=0)
    assert np.array_equal(z, z2)
    anchors, views = pair_sampler(world).views(1000, 5, rng=0)
    assert np.array_equal(np.broadcast_to(anchors[:, None], views.shape), views)


@pytest.mark.parametrize("call, match", [
    (lambda s: s.pairs(0, rng=0), "B must be a positive integer, got 0"),
    (lambda s: s.pairs(2.5, rng=0), "B must be a positive integer, got 2.5"),
    (lambda s: s.pairs(True, rng=0), "B must be a positive integer"),
    (lambda s: s.views(4, 0, rng=0), "V must be a positive integer, got 0"),
    (lambda s: s.views(-1, 2, rng=0), "B must be a positive integer, got -1"),
    (lambda s: s.pairs(4, rng="seed"), "rng must be an int seed or a numpy Generator"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call(pair_sampler(ring(4)))


def test_memory_guard_refuses_a_batch_that_cannot_fit():
    from prhsim import ResourceError, memory_limit

    sampler, big = pair_sampler(ring(4)), random_world(300, rng=0)
    with memory_limit(10**6):
        sampler.views(1000, 4, rng=0)
        with pytest.raises(ResourceError, match="lower B or V"):
            sampler.views(10**5, 10, rng=0)
        with pytest.raises(ResourceError, match="pair sampler of a dense world"):
            pair_sampler(big)


def test_a_non_world_is_refused():
    for bad_world in (np.eye(3), "ring", None):
        with pytest.raises(ValueError, match="world must be a FiniteWorld or ProductWorld"):
            pair_sampler(bad_world)
        with pytest.raises(ValueError, match="world must be a FiniteWorld or ProductWorld"):
            sample_pairs(bad_world, 10, rng=0)




@pytest.mark.parametrize("name", sorted(WORLDS))
def test_alias_tables_reproduce_pi_exactly(name):
    """The probabilities the tables imply (cell keep probabilities and aliases, summed per outcome) are π's:
    the pair table's are Π's positive entries over their sum, each row table's are Π[z, ·]/p(z)."""
    for factor in WORLDS[name]().factors:
        sampler = pair_sampler(factor)._factors[0]
        Pi = dense(factor.Pi)
        rows, cols = np.nonzero(Pi > 0)  # the positive entries, row-major
        np.testing.assert_array_equal(sampler.rows, rows)
        np.testing.assert_array_equal(sampler.cols, cols)
        weights = Pi[rows, cols]
        np.testing.assert_allclose(sampler.pairs.implied(), weights / weights.sum(), atol=1e-15, rtol=0)
        np.testing.assert_allclose(sampler.views.implied(), weights / Pi.sum(axis=1)[rows], atol=1e-15, rtol=0)
        for table in (sampler.pairs, sampler.views):
            assert np.all((table.prob >= 0) & (table.prob <= 1))
            segment = np.repeat(np.arange(table.length.size), table.length)
            assert np.array_equal(segment[table.alias], segment), "an alias stays in its cell's segment"


@pytest.mark.parametrize("weights, lengths", [
    (np.full(5, 0.3), [5]),  # equal weights whose shares all round below 1/m (the largest is kept heavy)
    (np.array([1e-300, 1.0, 1e-12, 2.0, 3.0]), [5]),  # a light outcome far below the others
    (np.array([1.0, 1.0, 2.0, 2.0, 5.0, 1e-9, 1e-9, 3.0]), [1, 3, 4]),  # ties, a one-outcome segment
    (np.random.default_rng(0).random(500) ** 20, np.full(50, 10)),  # skewed, many segments
], ids=["equal", "tiny", "segments", "skewed"])
def test_walker_tables_match_their_laws(weights, lengths):
    from prhsim.worlds._sampling import walker

    table = walker(weights, np.asarray(lengths))
    segment = np.repeat(np.arange(len(lengths)), lengths)
    law = weights / np.bincount(segment, weights=weights)[segment]
    np.testing.assert_allclose(table.implied(), law, atol=1e-15, rtol=0)
    assert np.array_equal(segment[table.alias], segment)
    # draws at the ends of [0, 1) stay in the segment; u·m rounding up to m takes the last cell's alias
    u = np.array([0.0, np.nextafter(1.0, 0.0)])
    for g in range(len(lengths)):
        drawn = table.draw(u, np.full(2, g)) if len(lengths) > 1 else table.draw(u)
        assert np.all(segment[drawn] == g)


@pytest.mark.parametrize("B, steps", [(16, 4), (16, 1100), (10_000, 2)], ids=["one-block", "blocks", "wide"])
@pytest.mark.parametrize("world", [ring(7), ProductWorld([ring(3), path(4)])], ids=["ring7", "ring3xpath4"])
def test_batches_equal_back_to_back_pairs_calls(world, B, steps):
    """Drawn a block of steps at a time (several blocks when B·steps is large, one step per block when B is)."""
    sampler = pair_sampler(world)
    gen_a, gen_b = np.random.default_rng(5), np.random.default_rng(5)
    anchors, views = sampler.batches(B, steps, rng=gen_a)
    assert anchors.shape == views.shape == (steps, B) and anchors.dtype == views.dtype == np.int64
    for j in range(steps):
        z, z2 = sampler.pairs(B, rng=gen_b)
        np.testing.assert_array_equal(anchors[j], z)
        np.testing.assert_array_equal(views[j], z2)
    assert gen_a.random() == gen_b.random()  # both generators advanced alike
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        sampler.batches(16, 0)


@pytest.mark.parametrize("world", [ring(7), ProductWorld([ring(3), path(4)])], ids=["ring7", "ring3xpath4"])
def test_batches_for_stacks_one_stream_per_generator(world):
    """Stream s is ``batches(rng=rngs[s])`` and depends on its generator alone (not on the others, nor their number)."""
    sampler = pair_sampler(world)
    gens = [np.random.default_rng([s, 1]) for s in (4, 0, 9)]
    anchors, views = sampler.batches_for(16, 700, gens)  # 3 x 700 steps of 16 pairs: several blocks
    assert anchors.shape == views.shape == (3, 700, 16) and anchors.dtype == np.int64
    for s, seed in enumerate((4, 0, 9)):
        alone = np.random.default_rng([seed, 1])
        a, v = sampler.batches(16, 700, rng=alone)
        np.testing.assert_array_equal(anchors[s], a)
        np.testing.assert_array_equal(views[s], v)
        assert gens[s].random() == alone.random()  # each generator advanced as its own batches() call
