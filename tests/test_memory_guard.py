"""Allocation guards: a call that cannot fit raises ResourceError naming the argument to lower, before allocating.

Every case runs under a small ``memory_limit`` (or asks for far more than any machine has), so no test
allocates more than a few megabytes.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from prhsim import ResourceError, memory_limit
from prhsim._budget import current_memory_limit
from prhsim.optima import closed_form, kronecker_top, top_eigenpairs
from prhsim.metrics import conditional_moments, coupled_comparison
from prhsim.worlds import (
    FiniteWorld,
    ProductWorld,
    codebook,
    injectivity_check,
    path,
    random_world,
    resampling,
    ring,
    sinkhorn_world,
)

KB = 1_000
NEEDS = r"would need [\d.]+ [kMGTP]?B \(limit [\d.]+ [kMGTP]?B\); "


def _refused(call, message, limit=KB):
    with memory_limit(limit):
        with pytest.raises(ResourceError, match=message):
            call()


@pytest.mark.parametrize("call, message", [
    (lambda: ring(10_000), "a sparse ring of 10,000 states " + NEEDS + "lower n$"),
    (lambda: path(10_000), "a sparse path of 10,000 states " + NEEDS + "lower n$"),
    (lambda: ring(300, sparse=False), "a dense ring of 300 states " + NEEDS + "lower n or pass sparse=True"),
    (lambda: random_world(2_000), "a dense random world of 2,000 states " + NEEDS + "lower n, or pass degree"),
    (lambda: random_world(100_000, degree=6), "a sparse random world of 100,000 states x degree 6 " + NEEDS
     + "lower n or degree"),
    (lambda: resampling(np.full(1_000, 1e-3), 0.5), "a resampling world of 1,000 values " + NEEDS
     + "lower the number of values of q"),
    (lambda: codebook(10_000, 3), "a codebook of 10,000 states x 8 dimensions " + NEEDS + "lower n_states or dim"),
])
def test_builders_refuse_before_allocating(call, message):
    _refused(call, message)


def test_sinkhorn_world_guards_by_the_affinity_it_is_given():
    p = np.full(40, 1 / 40)
    _refused(lambda: sinkhorn_world(np.ones((40, 40)), p), "Sinkhorn scaling of a dense affinity over 40 states "
             + NEEDS + "use a smaller or sparse affinity")
    _refused(lambda: sinkhorn_world(sp.csr_array(np.eye(40)), p), "of a sparse affinity over 40 states " + NEEDS
             + "use a smaller affinity", limit=100)


def test_kernel_caches_are_guarded_and_not_poisoned_by_a_refusal():
    dense_world = ring(200, sparse=False)
    _refused(dense_world.kernel_matrix, "the dense kernel of a world of 200 states " + NEEDS + "use a sparse Pi")
    assert dense_world.kernel_matrix().shape == (200, 200)  # outside the limit it is built as usual
    sparse_world = ring(5_000)
    _refused(sparse_world.kernel_matrix, "the sparse kernel of a world with 15,000 pairs " + NEEDS)
    _refused(sparse_world.dense_kernel, "a dense copy of the kernel of a world of 5,000 states " + NEEDS
             + r"use the kernel operator \(world.kernel\)", limit=10**7)


def test_product_worlds_guard_p_the_operator_and_densification():
    big = ProductWorld([ring(100)] * 3)
    _refused(lambda: big.p, "p of a product world of 1,000,000 states " + NEEDS + r"use a smaller world, or p_at")
    _refused(lambda: big.kernel, "the kernel operator's vectors for a product world of 1,000,000 states " + NEEDS)
    small = ProductWorld([ring(20)] * 2)
    _refused(small.kernel_matrix, "the dense kernel of a product world of 400 states " + NEEDS)
    _refused(small.to_finite, "a dense copy of a product world of 400 states " + NEEDS)
    with pytest.raises(ValueError, match="refusing to materialise p"):  # the state-count limit still comes first
        ProductWorld([ring(1000)] * 3).p


def test_features_and_eigenfunctions_are_guarded_but_a_few_states_still_fit():
    opt = closed_form(ring(500), 2)
    _refused(lambda: opt.F, "features of 500 states x 2 " + NEEDS + r"evaluate on fewer states: features\(states\)")
    _refused(opt.basis.evaluate, "eigenfunctions of 500 states x 3 features " + NEEDS + "evaluate on fewer states")
    with memory_limit(KB):
        assert opt.features(np.arange(5)).shape == (5, 2)
    product = ProductWorld([ring(40), ring(50)])
    basis = kronecker_top(product, 3)
    _refused(basis.evaluate, "eigenfunctions of 2,000 states x 3 features " + NEEDS)
    with memory_limit(KB):
        assert basis.evaluate(np.array([0, 7])).shape == (2, 3)


def test_eigen_backends_are_guarded():
    w = ring(300, sparse=False)
    _refused(lambda: top_eigenpairs(w, 3, backend="dense"), "dense eigh of a world of 300 states " + NEEDS
             + "use backend='sparse'")
    big = ring(3_000)
    _refused(lambda: top_eigenpairs(big, 3, backend="sparse"), "Lanczos with 23 vectors of 3,000 states " + NEEDS
             + r"lower the number of eigenpairs m \(or k\)")


def test_factor_spectra_and_enumeration_are_guarded(monkeypatch):
    import prhsim.optima._kronecker as kr

    factor = random_world(100, rng=0)
    _refused(lambda: kr.factor_spectrum(factor), "the full spectrum of a factor of 100 states " + NEEDS
             + "use smaller factors")
    monkeypatch.setattr(kr, "FULL_FACTOR_UP_TO", 10)
    medium = random_world(30, rng=1)
    _refused(lambda: kr.factor_spectrum(medium, 4), r"Lanczos on a factor of 30 states \(5 pairs\) "
             + NEEDS + "lower k")
    # twelve factors with spectrum {1, 0}: only the trivial product is positive, so every product is enumerated
    flat = ProductWorld([resampling([0.5, 0.5], 1.0)] * 12)
    _refused(lambda: kronecker_top(flat, 4), r"enumerating all 4,096 eigenvalues \(fewer than 4 are positive\) "
             + NEEDS + "lower k", limit=20 * KB)


def test_injectivity_check_guards_its_keys():
    m = codebook(1_000, 3, rng=0)
    _refused(lambda: injectivity_check(m, 1_000), r"the injectivity check of modality 'codebook' \(3,000 observations "
             r"of 64 bytes\) " + NEEDS + r"lower limit \(the number of states checked\)", limit=10 * KB)
    with memory_limit(10 * KB):
        assert injectivity_check(m, 1_000, limit=10, rng=0).checked == 10  # lowering limit is the way out


def test_coupled_comparison_is_guarded():
    rng = np.random.default_rng(0)
    p_z, q = np.full(100, 0.01), np.array([0.5, 0.5])
    F = rng.normal(size=(200, 3))
    _refused(lambda: coupled_comparison(F, q, F, q, p_z), "comparing modal features of 600 and 600 values " + NEEDS
             + "lower k or the number of states")
    _refused(lambda: conditional_moments(F, q, 100), "the conditional moments of 200 x 3 features " + NEEDS)


@pytest.mark.parametrize("call, what", [
    (lambda: ring(10**9), "a sparse ring of 1,000,000,000 states"),
    (lambda: path(10**9), "a sparse path of 1,000,000,000 states"),
    (lambda: random_world(10**7), "a dense random world of 10,000,000 states"),
    (lambda: codebook(10**9, 3), "a codebook of 1,000,000,000 states x 8 dimensions"),
])
def test_huge_requests_are_refused_under_the_default_limit(call, what):
    if current_memory_limit() > 60e9:  # pragma: no cover - a machine with more than ~120 GB could build these
        pytest.skip("the default limit of this machine fits the request")
    with pytest.raises(ResourceError, match=what + " would need"):
        call()


def test_guards_leave_ordinary_results_unchanged():
    """Under a limit that fits, the guarded builders and solvers return exactly what they did unguarded."""
    with memory_limit(10**8):
        a = closed_form(random_world(30, rng=2), 3)
    b = closed_form(random_world(30, rng=2), 3)
    np.testing.assert_array_equal(a.F, b.F)
    w = FiniteWorld(np.full(4, 0.25), np.full((4, 4), 1 / 16))
    with memory_limit(10**6):
        assert w.kernel_matrix().shape == (4, 4)
