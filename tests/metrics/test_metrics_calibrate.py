"""Permutation-null calibration (prhsim.metrics._calibrate) against a naive twin and the definition.

The twin takes the same explicit permutations and recomputes the registered metric
on (A, B[π_j]) for every j, layer pair by layer pair; the fast paths must give its
null scores exactly (k-NN metrics) or to 1e-12 (CKA), on Gaussian data and on data
full of exact ties (±1 rows of dimension 16, copies of rows), through every route
(Gram gather or feature products; mask or sorted codes for A's relation). p, τ and
the calibrated score are recomputed from the definition in the tests.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from prhsim.metrics import _calibrate, _cka_permuted, _calibrate_knn, _registry
from prhsim.metrics._calibrate import Calibration, calibrate
from prhsim.metrics._registry import METRICS, Metric

KNN = ("mutual_knn", "cycle_knn")
KERNEL = ("linear_cka", "unbiased_cka", "rbf_cka")


# --------------------------------------------------------------------------------------
# twins and data
# --------------------------------------------------------------------------------------
def twin_null(name, a, b, perms, knn_k=10, aggregate=None):
    """metric(A, B[π_j]) recomputed for every j (layer lists: the aggregate of the permuted table)."""
    score = METRICS[name]
    if aggregate is None:
        return np.array([score(a, b[p], knn_k=knn_k) for p in perms])
    agg = _aggregate_of(aggregate)
    return np.array([agg(np.array([[score(x, y[p], knn_k=knn_k) for y in b] for x in a])) for p in perms])


def _aggregate_of(aggregate):
    """The aggregate as a function of one (L_a, L_b) table, from its definition."""
    return aggregate if callable(aggregate) else (np.max if aggregate == "max" else np.mean)


def best_match(table):
    """Each layer of A's best layer of B, averaged (a callable aggregate)."""
    return table.max(axis=1).mean()


def by_hand(raw, null, alpha):
    """p, τ and the calibrated score from the definition (s_max = 1; a null score within 1e-12 · max(1, |s|) below s
    is a tie, and counts against s)."""
    k, tie = len(null), 1e-12 * max(1.0, abs(raw))
    p = (1 + sum(1 for s in null if s >= raw - tie)) / (k + 1)
    m = int(np.ceil(round((1 - alpha) * (k + 1), 9)))
    tau = sorted([raw, *null])[m - 1]
    cal = 0.0 if raw - tau <= tie or 1.0 - tau <= tie else min(max((raw - tau) / (1.0 - tau), 0.0), 1.0)
    return p, tau, cal


def perms_of(n, k, seed):
    gen = np.random.default_rng(seed)
    return np.array([gen.permutation(n) for _ in range(k)])


def correlated(n, rng, da=6, db=5):
    """Two noisy views of a shared 3-dimensional latent (no exact ties)."""
    z = rng.normal(size=(n, 3))
    return (z @ rng.normal(size=(3, da)) + 0.3 * rng.normal(size=(n, da)),
            z @ rng.normal(size=(3, db)) + 0.5 * rng.normal(size=(n, db)))


def signs(n, d, rng):
    """±1 rows (d = 16: exact normalisation and inner products), a third of them copies of others."""
    x = rng.choice([-1.0, 1.0], size=(n, d))
    x[: n // 3] = x[rng.integers(n // 3, n, size=n // 3)]
    return x


def data(kind, n, rng):
    if kind == "gaussian":
        return correlated(n, rng)
    if kind == "float32":
        return tuple(x.astype(np.float32) for x in correlated(n, rng))
    if kind == "signs":  # exact ties everywhere, half the rows shared by the two sides
        a, b = signs(n, 16, rng), signs(n, 16, rng)
        b[: n // 2] = a[: n // 2]
        return a, b
    # "copies": a few distinct rows, each repeated: the k-th place shared by whole groups
    a, b = correlated(n // 5, rng)
    return a[rng.integers(0, n // 5, size=n)], b[rng.integers(0, n // 5, size=n)]


# --------------------------------------------------------------------------------------
# the null scores against the twin
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", KNN)
@pytest.mark.parametrize("kind", ["gaussian", "float32", "signs", "copies"])
@pytest.mark.parametrize("relation", ["mask", "codes"])
def test_knn_null_equals_the_twin_exactly(name, kind, relation, monkeypatch):
    if relation == "codes":
        monkeypatch.setattr(_calibrate_knn, "MASK_ENTRIES", 0)
    rng = np.random.default_rng(7)
    a, b = data(kind, 60, rng)
    perms = perms_of(60, 25, 1)
    for knn_k in (1, 5, 10, 59):
        cal = calibrate(name, a, b, permutations=perms, knn_k=knn_k)
        assert np.array_equal(cal.null, twin_null(name, a, b, perms, knn_k))
        assert cal.raw == METRICS[name](a, b, knn_k=knn_k)


def test_knn_tie_path_is_exercised():
    """The tied data above do put boundary ties into B's lists (the relabelling rule is tested)."""
    rng = np.random.default_rng(7)
    for kind in ("signs", "copies"):
        _, b = data(kind, 60, rng)
        assert _calibrate_knn._open_lists("b", b, 10).tied_rows.size > 10


def test_knn_on_many_random_tied_inputs():
    """Small random shapes, k and tie patterns: every null score equals the twin's."""
    rng = np.random.default_rng(2)
    for _ in range(40):
        n, d = int(rng.integers(3, 30)), int(rng.choice([1, 4, 16]))
        k = int(rng.integers(1, n))
        a, b = (rng.choice([-1.0, 1.0], size=(n, d)) for _ in range(2))
        perms = perms_of(n, 4, int(rng.integers(1 << 30)))
        for name in KNN:
            cal = calibrate(name, a, b, permutations=perms, knn_k=k)
            assert np.array_equal(cal.null, twin_null(name, a, b, perms, k)), (name, n, d, k)


@pytest.mark.parametrize("name", KERNEL)
@pytest.mark.parametrize("kind", ["gaussian", "copies"])
@pytest.mark.parametrize("route", ["gram", "features"])
def test_kernel_null_matches_the_twin(name, kind, route, monkeypatch):
    monkeypatch.setattr(_cka_permuted, "GATHER_COST", 0 if route == "gram" else 10**9)
    rng = np.random.default_rng(3)
    a, b = data(kind, 60, rng)
    perms = perms_of(60, 30, 2)
    cal = calibrate(name, a, b, permutations=perms)
    np.testing.assert_allclose(cal.null, twin_null(name, a, b, perms), rtol=0, atol=1e-12)
    assert abs(cal.raw - METRICS[name](a, b, knn_k=10)) <= 1e-12


@pytest.mark.parametrize("name", ["svcca", "cknna"])
def test_generic_path_is_the_twin(name):
    a, b = correlated(40, np.random.default_rng(4))
    perms = perms_of(40, 8, 3)
    cal = calibrate(name, a, b, permutations=perms, knn_k=5)
    assert np.array_equal(cal.null, twin_null(name, a, b, perms, 5))


def test_fast_paths_never_recompute_the_metric(monkeypatch):
    """CKA never calls the metric; the k-NN paths search each side once, whatever K."""
    def forbidden(*args, **kwargs):
        raise AssertionError("the fast path recomputed the metric")

    for fn in ("linear_cka", "unbiased_cka", "rbf_cka"):
        monkeypatch.setattr(_registry, fn, forbidden)
    a, b = correlated(50, np.random.default_rng(5))
    for name in KERNEL:
        calibrate(name, a, b, permutations=20)

    searches = []
    search = _calibrate_knn.knn_search  # patched where the k-NN path looks it up

    def counted(*args, **kwargs):
        searches.append(1)
        return search(*args, **kwargs)

    monkeypatch.setattr(_calibrate_knn, "knn_search", counted)
    for count in (5, 100):
        searches.clear()
        calibrate("mutual_knn", a, b, permutations=count)
        assert len(searches) == 2


def test_a_replaced_registry_entry_takes_the_generic_path(monkeypatch):
    calls = []

    def score(a, b, *, knn_k):
        calls.append(1)
        return _registry.linear_cka(a, b)

    monkeypatch.setitem(METRICS, "linear_cka", Metric("linear_cka", score))
    a, b = correlated(30, np.random.default_rng(6))
    calibrate("linear_cka", a, b, permutations=7)
    assert len(calls) == 8  # the observed score and 7 null scores


# --------------------------------------------------------------------------------------
# layer tables
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [*KNN, *KERNEL, "svcca"])
@pytest.mark.parametrize("aggregate", ["max", "mean", best_match])
def test_layer_tables_share_the_permutation(name, aggregate):
    rng = np.random.default_rng(8)
    n = 50
    layers_a = [rng.normal(size=(n, d)) for d in (4, 7, 3)]
    layers_b = [layers_a[0] @ rng.normal(size=(4, 5)) + 0.1 * rng.normal(size=(n, 5)),
                rng.normal(size=(n, 70))]  # d_a·d_b on both sides of the Gram/feature threshold
    perms = perms_of(n, 3 if name == "svcca" else 15, 4)  # svcca: the generic path, K + 1 tables
    cal = calibrate(name, layers_a, layers_b, permutations=perms, aggregate=aggregate, knn_k=5)
    np.testing.assert_allclose(cal.null, twin_null(name, layers_a, layers_b, perms, 5, aggregate),
                               rtol=0, atol=1e-12)
    raw = _aggregate_of(aggregate)(np.array([[METRICS[name](x, y, knn_k=5) for y in layers_b] for x in layers_a]))
    assert abs(cal.raw - raw) <= 1e-12
    assert (cal.p_value, cal.tau, cal.calibrated) == pytest.approx(by_hand(cal.raw, cal.null, 0.05), abs=1e-15)


def test_an_array_beside_a_sequence_is_one_layer():
    rng = np.random.default_rng(9)
    a, b = correlated(40, rng)
    perms = perms_of(40, 10, 5)
    one = calibrate("linear_cka", a, b, permutations=perms)
    for pair in (([a], b), (a, (b,)), ([a], [b])):
        for aggregate in ("max", "mean"):
            table = calibrate("linear_cka", *pair, permutations=perms, aggregate=aggregate)
            np.testing.assert_allclose(table.null, one.null, rtol=0, atol=1e-15)


# --------------------------------------------------------------------------------------
# p, τ and the calibrated score
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("count, alpha, rank", [(19, 0.05, 19), (99, 0.05, 95), (999, 0.05, 950), (9, 0.3, 7),
                                                (10, 0.5, 6), (1, 0.5, 1), (4, 0.01, 5), (1, 0.05, 2)])
def test_critical_rank(count, alpha, rank):
    """m = ⌈(1 − α)(K + 1)⌉, with a decimal α read as meant."""
    assert _calibrate._rank(alpha, count) == rank


@pytest.mark.parametrize("name", ["mutual_knn", "linear_cka", "cycle_knn"])
@pytest.mark.parametrize("alpha", [0.05, 0.3])
def test_p_tau_and_calibrated_follow_the_definition(name, alpha):
    rng = np.random.default_rng(10)
    # weakly dependent data: the observed score lies inside the null; k-NN scores tie with it often
    z = rng.normal(size=(40, 2))
    a, b = z + 2.0 * rng.normal(size=(40, 2)), z + 2.0 * rng.normal(size=(40, 2))
    for count in (19, 99):
        cal = calibrate(name, a, b, permutations=count, alpha=alpha, rng=count, knn_k=3)
        p, tau, calibrated = by_hand(cal.raw, list(cal.null), alpha)
        assert cal.p_value == p and cal.tau == tau and cal.calibrated == pytest.approx(calibrated, abs=1e-15)
        assert cal.alpha == alpha and cal.permutations == count and cal.null.shape == (count,)


def test_calibrated_is_zero_when_tau_reaches_the_maximum():
    x = np.random.default_rng(11).normal(size=(20, 3))
    cal = calibrate("linear_cka", x, x, permutations=1)  # m = 2: τ = max(s, s_1) = s = 1
    assert cal.raw == 1.0 and cal.tau == 1.0 and cal.calibrated == 0.0 and cal.p_value == 0.5


def test_drawn_permutations_follow_the_generator(monkeypatch):
    a, b = correlated(30, np.random.default_rng(12))
    perms = perms_of(30, 40, 123)
    explicit = calibrate("mutual_knn", a, b, permutations=perms, knn_k=4)
    assert np.array_equal(calibrate("mutual_knn", a, b, permutations=40, rng=123, knn_k=4).null, explicit.null)
    assert np.array_equal(calibrate("mutual_knn", a, b, permutations=40, rng=np.random.default_rng(123),
                                    knn_k=4).null, explicit.null)
    monkeypatch.setattr(_calibrate, "CHUNK_ENTRIES", 7 * 30)  # chunks of 7 permutations
    assert np.array_equal(calibrate("mutual_knn", a, b, permutations=40, rng=123, knn_k=4).null, explicit.null)
    assert np.array_equal(calibrate("mutual_knn", a, b, permutations=perms, knn_k=4).null, explicit.null)
    assert np.array_equal(calibrate("mutual_knn", a, b, permutations=40, knn_k=4).null,
                          calibrate("mutual_knn", a, b, permutations=40, rng=0, knn_k=4).null)  # None: seed 0


# --------------------------------------------------------------------------------------
# the null and the alternative
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["linear_cka", "mutual_knn"])
def test_independent_representations_give_uniform_p_values(name):
    ps, zeros = [], 0
    for seed in range(50):
        rng = np.random.default_rng(1000 + seed)
        a, b = rng.normal(size=(60, 5)), rng.normal(size=(60, 4))
        cal = calibrate(name, a, b, permutations=99, rng=seed, knn_k=5)
        ps.append(cal.p_value)
        zeros += cal.calibrated == 0.0
    assert stats.kstest(ps, "uniform").pvalue > 1e-3
    assert zeros >= 40


def test_a_rotated_copy_is_significant_and_calibrates_high():
    rng = np.random.default_rng(13)
    a = rng.normal(size=(200, 20))
    q, _ = np.linalg.qr(rng.normal(size=(20, 20)))
    b = a @ q + 0.1 * rng.normal(size=(200, 20))
    cal = calibrate("linear_cka", a, b, permutations=199, rng=1)
    assert cal.p_value == 1 / 200
    assert cal.calibrated > 0.5
    assert cal.raw > cal.tau > cal.quantile(0.5)


# --------------------------------------------------------------------------------------
# the record and bad inputs
# --------------------------------------------------------------------------------------
def test_the_record():
    a, b = correlated(30, np.random.default_rng(14))
    cal = calibrate("linear_cka", a, b, permutations=50)
    assert isinstance(cal, Calibration) and cal.metric == "linear_cka"
    assert cal.null.dtype == np.float64 and not cal.null.flags.writeable
    with pytest.raises(ValueError):
        cal.null[0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        cal.raw = 0.0
    for q in (0.0, 0.25, 0.95, 1.0):
        assert cal.quantile(q) == np.quantile(cal.null, q)
    for q in (-0.1, 1.5, "0.5"):
        with pytest.raises(ValueError, match="q must be a number in"):
            cal.quantile(q)


X = np.random.default_rng(15).normal(size=(20, 3))
Y = np.random.default_rng(16).normal(size=(20, 4))


@pytest.mark.parametrize("args, kwargs, message", [
    (("nope", X, Y), {}, r"unknown metric 'nope'; known: cknna, cknna_agnostic, cknna_biased, cycle_knn"),
    (("linear_cka", X, Y), {"alpha": 0.0}, r"alpha must be a number in \(0, 1\), got 0.0"),
    (("linear_cka", X, Y), {"alpha": 1.5}, r"alpha must be a number in \(0, 1\), got 1.5"),
    (("linear_cka", X, Y), {"alpha": True}, r"alpha must be a number in \(0, 1\)"),
    (("linear_cka", X, Y), {"permutations": 0}, r"permutations must be an integer of at least 1, got 0"),
    (("linear_cka", X, Y), {"permutations": True}, r"permutations must be an int K or an integer array"),
    (("linear_cka", X, Y), {"permutations": np.zeros((3, 20))}, r"integer array \(K, N\), got dtype float64"),
    (("linear_cka", X, Y), {"permutations": np.arange(20)}, r"shape \(K, N\) with N = 20, got shape \(20,\)"),
    (("linear_cka", X, Y), {"permutations": np.zeros((3, 19), int)}, r"with N = 20, got shape \(3, 19\)"),
    (("linear_cka", X, Y), {"permutations": np.zeros((0, 20), int)}, r"at least 1 permutation, got 0 rows"),
    (("linear_cka", X, Y), {"permutations": np.stack([np.arange(20), np.r_[0, 0, np.arange(2, 20)]])},
     r"row 1 of permutations is not a permutation of range\(20\)"),
    (("linear_cka", X[:, 0], Y), {}, r"a must be a 2-D array \(N, d\) or a sequence of them, got shape \(20,\)"),
    (("linear_cka", X, Y[None]), {}, r"b must be a 2-D array .* got shape \(1, 20, 4\)"),
    (("linear_cka", X, np.where(Y > 1, np.nan, Y)), {}, r"b contains NaN or inf"),
    (("linear_cka", X, Y[:19]), {}, r"a and b must have the same number of rows N, got 20 and 19"),
    (("linear_cka", X[:1], Y[:1]), {}, r"calibrate needs at least 2 rows, got N = 1"),
    (("linear_cka", X, np.array([["x"] * 4] * 20)), {}, r"b must hold real numbers"),
    (("linear_cka", [X, X[:19]], [Y]), {"aggregate": "max"}, r"every layer must have the same N rows: a\[1\] has 19"),
    (("linear_cka", [], [Y]), {"aggregate": "max"}, r"a is an empty sequence of layers"),
    (("linear_cka", [X], [Y]), {}, r"layer sequences: pass aggregate='max' or aggregate='mean'"),
    (("linear_cka", [X], [Y]), {"aggregate": "sum"},
     r"aggregate must be None, 'max', 'mean' or a callable of the layer table, got 'sum'"),
    (("linear_cka", [X], [Y, Y]), {"aggregate": lambda t: t.max(axis=0)},
     r"aggregate must return one finite real number for a layer table, got array"),
    (("linear_cka", [X], [Y]), {"aggregate": lambda t: float("nan")},
     r"aggregate must return one finite real number for a layer table, got nan"),
    (("linear_cka", X, Y), {"aggregate": "max"}, r"aggregate='max' is for layer sequences"),
    (("mutual_knn", X, Y), {"knn_k": 20}, r"knn_k must be an integer with 1 <= knn_k < N = 20, got 20"),
    (("cycle_knn", X, Y), {"knn_k": 0}, r"knn_k must be an integer with 1 <= knn_k < N = 20, got 0"),
    (("mutual_knn", X, Y), {"knn_k": 2.0}, r"knn_k must be an integer"),
    (("linear_cka", X, np.ones((20, 4))), {}, r"b has zero variance: CKA is undefined"),
    (("unbiased_cka", X[:3], Y[:3]), {}, r"unbiased CKA needs at least 4 rows, got N = 3"),
    (("mutual_knn", X, np.where(np.arange(20)[:, None] == 3, 0.0, Y)), {}, r"row 3 of b is zero"),
    (("linear_cka", [X], [Y, np.ones((20, 2))]), {"aggregate": "mean"}, r"b\[1\] has zero variance"),
    (("svcca", [X], [Y, np.ones((20, 2))]), {"aggregate": "mean"},
     r"layer pair \(0, 1\): b has zero variance: SVCCA is undefined"),
])
def test_bad_inputs(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        calibrate(*args, **kwargs)


def test_a_callable_aggregate_equal_to_a_named_one_gives_its_calibration():
    rng = np.random.default_rng(12)
    layers_a = [rng.normal(size=(30, 3)) for _ in range(2)]
    layers_b = [layers_a[1] + 0.3 * rng.normal(size=(30, 3)), rng.normal(size=(30, 4))]
    perms = perms_of(30, 9, 3)
    for name, function in (("max", np.max), ("mean", np.mean)):
        named = calibrate("mutual_knn", layers_a, layers_b, permutations=perms, aggregate=name, knn_k=4)
        called = calibrate("mutual_knn", layers_a, layers_b, permutations=perms, aggregate=function, knn_k=4)
        assert (called.raw, called.p_value, called.tau) == (named.raw, named.p_value, named.tau)
        np.testing.assert_array_equal(called.null, named.null)
