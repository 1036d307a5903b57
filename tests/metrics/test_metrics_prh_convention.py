"""``convention="prh"`` of the sample metrics, the clip and the protocol against the float64 twin of the PRH code.

The twin (``prh_twin``, beside this file) re-derives the formulas of the public Platonic Representation
Hypothesis code (``metrics.py``, ``measure_alignment.py``) in plain numpy. The library's ``convention="prh"``
must give the twin's number to 1e-12 (relative above 1) on every float64 input here. On float32 inputs the
library computes in float32, as the PRH code does (it scores ``feats.float()``), while the twin reads the same
float32 values in float64: they agree to float32 rounding, TOL32 = 1e-6 (float32's epsilon is 1.2e-7; the
largest gap measured here was 5e-8). ``convention="prhsim"`` (the default) must differ where the
two definitions differ, so that a convention flag that did nothing would fail here.

The metric inputs are rows as the PRH metric receives them: L2-normalised (its protocol normalises every
row before it calls a metric). The CKA variants and SVCCA are also checked on raw rows, which the PRH
metrics use as they are.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import prh_twin as twin
from prhsim import metrics as pm

#: Agreement of the library's "prh" value with the twin: absolute below 1, relative above (float64 inputs).
TOL = 1e-12
#: The same for float32 inputs, which the library (like the PRH code) scores in float32 (module docstring).
TOL32 = 1e-6
#: Neighbours of the kNN metrics and CKNNA in these tests.
K = 5

METRIC_NAMES = ["mutual_knn", "cycle_knn", "cknna", "linear_cka", "unbiased_cka", "rbf_cka", "svcca"]


def library(name, a, b, **kw):
    """The library's metric ``name`` on (a, b); ``kw`` adds convention= (and sigma=/keep= where given)."""
    if name in ("mutual_knn", "cycle_knn", "cknna"):
        return getattr(pm, name)(a, b, knn_k=kw.pop("knn_k", K), **kw)
    return getattr(pm, name)(a, b, **kw)


def reference(name, a, b, k=K):
    """The twin's PRH value of metric ``name`` on (a, b)."""
    return twin.METRICS[name](a, b, k)


def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def sample(seed, n, da, db, aligned, dtype=np.float64, normalise=True):
    """Two paired samples: b = a·R + noise (aligned) or independent of a; unit rows unless ``normalise=False``."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, da)) * np.linspace(2.0, 0.5, da)
    if aligned:
        b = a @ rng.normal(size=(da, db)) / np.sqrt(da) + 0.4 * rng.normal(size=(n, db))
    else:
        b = rng.standard_t(5, size=(n, db))
    if normalise:
        a, b = unit(a), unit(b)
    else:
        a, b = a * rng.uniform(0.3, 3.0, size=(n, 1)), b + 0.5
    return a.astype(dtype), b.astype(dtype)


def assert_agrees(actual, expected, what, single=False):
    """|actual − expected| <= tol · max(1, |expected|), tol = TOL (TOL32 for float32 inputs), with both numbers
    and their difference in the message."""
    actual, expected = float(actual), float(expected)
    tol = TOL32 if single else TOL
    assert abs(actual - expected) <= tol * max(1.0, abs(expected)), (
        f"{what}: library {actual!r}, twin {expected!r}, difference {actual - expected:.3e}")


# (seed, N, d_a, d_b, aligned, dtype): aligned and independent pairs, float64 and float32, d >= 10 for SVCCA
CASES = [
    (0, 40, 12, 16, True, np.float64),
    (1, 40, 12, 16, False, np.float64),
    (2, 64, 24, 11, True, np.float32),
    (3, 64, 24, 11, False, np.float32),
    (4, 25, 10, 30, True, np.float64),
]


def case_id(case):
    seed, n, da, db, aligned, dtype = case
    return f"seed{seed}-N{n}-{da}x{db}-{'aligned' if aligned else 'independent'}-{np.dtype(dtype).name}"


# --- the metrics ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("name", METRIC_NAMES)
def test_prh_convention_equals_the_twin(name, case):
    a, b = sample(*case)
    assert_agrees(library(name, a, b, convention="prh"), reference(name, a, b), f"{name} {case_id(case)}",
                  single=a.dtype == np.float32)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", METRIC_NAMES)
def test_prh_convention_on_raw_rows(name, seed):
    """The PRH metrics use the rows they are given (no normalisation; neighbours by inner product): so must
    "prh"."""
    a, b = sample(seed, 36, 12, 14, seed == 0, normalise=False)
    assert_agrees(library(name, a, b, convention="prh"), reference(name, a, b), f"{name} raw rows seed {seed}")


@pytest.mark.parametrize("k", [2, 7, 35])
@pytest.mark.parametrize("name", ["mutual_knn", "cycle_knn", "cknna"])
def test_prh_neighbour_metrics_at_every_k(name, k):
    a, b = sample(5, 36, 10, 12, True)
    assert_agrees(library(name, a, b, knn_k=k, convention="prh"), reference(name, a, b, k), f"{name} k={k}")


@pytest.mark.parametrize("name", ["mutual_knn", "cycle_knn", "cknna"])
def test_prh_neighbour_metrics_with_ties(name):
    """±1 rows of width 16: unit rows of ±1/4 entries, exact inner products, many ties (rule: (−⟨x_i, x_j⟩, j))."""
    rng = np.random.default_rng(6)
    a = rng.choice([-1.0, 1.0], size=(30, 16)) / 4.0
    b = np.where(rng.random((30, 16)) < 0.2, -a, a)
    assert_agrees(library(name, a, b, knn_k=K, convention="prh"), reference(name, a, b), f"{name} with ties")


def test_prh_rbf_bandwidth_and_svcca_directions_are_parameters():
    a, b = sample(7, 40, 14, 12, True)
    assert_agrees(pm.rbf_cka(a, b, sigma=0.6, convention="prh"), twin.rbf_cka(a, b, sigma=0.6), "rbf_cka sigma=0.6")
    assert_agrees(pm.svcca(a, b, keep=6, convention="prh"), twin.svcca(a, b, cca_dim=6), "svcca keep=6")


def test_prh_cknna_refuses_a_single_neighbour():
    a, b = sample(8, 20, 10, 10, True)
    with pytest.raises(ValueError):
        pm.cknna(a, b, knn_k=1, convention="prh")


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(14, 40), da=st.integers(10, 18), db=st.integers(10, 18),
       aligned=st.booleans(), single=st.booleans(), name=st.sampled_from(METRIC_NAMES))
def test_prh_convention_equals_the_twin_on_any_draw(seed, n, da, db, aligned, single, name):
    a, b = sample(seed, n, da, db, aligned, np.float32 if single else np.float64)
    assert_agrees(library(name, a, b, convention="prh"), reference(name, a, b),
                  f"{name} seed={seed} N={n} d=({da}, {db}) aligned={aligned} float32={single}", single=single)


# --- where the conventions differ (and where they must not) -----------------------------------------------------

def test_unbiased_cka_conventions_differ_by_the_epsilon():
    """prh = r·s/(s + 1e-6) with r the prhsim value and s = √(u(K,K)·u(L,L)): the epsilon's effect, no more."""
    a, b = sample(0, 40, 12, 16, True)
    K_, L_ = a @ a.T, b @ b.T
    s = np.sqrt(twin.hsic_unbiased(K_, K_) * twin.hsic_unbiased(L_, L_))
    r = twin.hsic_unbiased(K_, L_) / s
    prhsim, prh = pm.unbiased_cka(a, b), pm.unbiased_cka(a, b, convention="prh")
    assert_agrees(prhsim, r, "prhsim unbiased CKA (no epsilon)")
    assert abs(prh - prhsim) > 1e-6, (prh, prhsim)
    assert_agrees(prh * (s + 1e-6) / s, prhsim, "prh value with the epsilon taken out")


def test_linear_cka_conventions_differ_by_the_epsilon():
    """prh = r·s/(s + 1e-6) with s = ‖HKH‖_F‖HLH‖_F (the PRH biased HSIC has no 1/(N − 1)² factor, so s is large)."""
    a, b = sample(0, 40, 12, 16, True)
    K_, L_ = a @ a.T, b @ b.T
    s = np.sqrt(twin.hsic_biased(K_, K_) * twin.hsic_biased(L_, L_))
    prhsim, prh = pm.linear_cka(a, b), pm.linear_cka(a, b, convention="prh")
    assert abs(prh - prhsim) > 1e-9, (prh, prhsim)
    assert_agrees(prh * (s + 1e-6) / s, prhsim, "prh value with the epsilon taken out")


@pytest.mark.parametrize("name", ["cknna", "rbf_cka", "svcca"])
def test_conventions_differ(name):
    a, b = sample(2, 48, 16, 12, True)
    prhsim, prh = library(name, a, b), library(name, a, b, convention="prh")
    assert abs(prh - prhsim) > 1e-3, f"{name}: prh {prh!r} and prhsim {prhsim!r} should differ"


@pytest.mark.parametrize("name", ["mutual_knn", "cycle_knn"])
def test_neighbour_counts_are_one_definition(name):
    a, b = sample(2, 48, 16, 12, True)
    assert library(name, a, b) == library(name, a, b, convention="prh")


def test_cknna_and_cycle_knn_are_not_symmetric():
    """The orientation of the protocol matters for these two (the PRH CKNNA's 1ᵀK̃L̃1 term is not symmetric)."""
    a, b = sample(3, 60, 10, 10, True)
    assert abs(twin.cknna(a, b, 10) - twin.cknna(b, a, 10)) > 1e-4
    assert twin.cycle_knn(a, b, 5) != twin.cycle_knn(b, a, 5)
    assert_agrees(pm.cknna(b, a, knn_k=10, convention="prh"), twin.cknna(b, a, 10), "cknna(b, a)")


@pytest.mark.parametrize("fn, args", [
    (pm.mutual_knn, {"knn_k": K}), (pm.cycle_knn, {"knn_k": K}), (pm.cknna, {"knn_k": K}),
    (pm.linear_cka, {}), (pm.unbiased_cka, {}), (pm.rbf_cka, {}), (pm.svcca, {}),
], ids=lambda v: getattr(v, "__name__", ""))
def test_default_convention_is_prhsim_and_others_are_refused(fn, args):
    a, b = sample(1, 30, 12, 12, True)
    assert fn(a, b, **args) == fn(a, b, convention="prhsim", **args)
    for bad in ("PRH", "other", "", None):
        with pytest.raises(ValueError):
            fn(a, b, convention=bad, **args)


def test_clip_and_protocol_refuse_other_conventions():
    x = np.random.default_rng(0).normal(size=(12, 2, 3))
    with pytest.raises(ValueError):
        pm.clip_stack(x, 0.95, scope="tensor", convention="other")
    with pytest.raises(ValueError):
        pm.prh_protocol(x, x, metric="mutual_knn", knn_k=3, convention="other")
    assert np.array_equal(pm.clip_stack(x, 0.9), pm.clip_stack(x, 0.9, convention="prhsim"))


# --- the clip ---------------------------------------------------------------------------------------------------

CLIP_SHAPES = [(12, 1, 1), (12, 2, 3), (30, 4, 5), (7, 13), (50, 3, 8)]


@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99, 1.0])
@pytest.mark.parametrize("shape", CLIP_SHAPES, ids=str)
def test_prh_tensor_clip_is_the_order_statistic(shape, q):
    x = np.random.default_rng(len(shape) + shape[0]).standard_t(3, size=shape)
    for dtype in (np.float64, np.float32):
        xd = x.astype(dtype)
        got = np.asarray(pm.clip_stack(xd, q, scope="tensor", convention="prh"), dtype=np.float64)
        assert np.array_equal(got, twin.clip_exact(xd, q)), (shape, q, dtype)


@pytest.mark.parametrize("q", [0.5, 0.95, 1.0])
@pytest.mark.parametrize("shape", CLIP_SHAPES, ids=str)
def test_prh_sample_mean_clip(shape, q):
    x = np.random.default_rng(shape[0]).standard_t(3, size=shape)
    got = pm.clip_stack(x, q, scope="sample_mean", convention="prh")
    np.testing.assert_allclose(got, twin.clip_sample_mean(x, q), rtol=0, atol=TOL)


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 30), rest=st.lists(st.integers(1, 6), max_size=2),
       q=st.floats(0.01, 0.999))
def test_prh_tensor_clip_on_any_draw(seed, n, rest, q):
    x = np.random.default_rng(seed).standard_t(2, size=(n, *rest))
    assert np.array_equal(pm.clip_stack(x, q, scope="tensor", convention="prh"), twin.clip_exact(x, q))


def test_tensor_clip_thresholds_differ_at_twelve_entries():
    """12 entries, q = 0.95: the PRH index ⌊0.95·12⌋ = 11 is the largest |x| (no clip); prhsim interpolates at 10.45."""
    x = np.random.default_rng(0).normal(size=(12, 1, 1))
    prh = pm.clip_stack(x, 0.95, scope="tensor", convention="prh")
    prhsim = pm.clip_stack(x, 0.95, scope="tensor")
    assert np.array_equal(prh, x)
    assert np.max(np.abs(prhsim)) < np.max(np.abs(x))
    s = np.sort(np.abs(x).ravel())
    assert np.max(np.abs(prhsim)) == pytest.approx(s[10] + 0.45 * (s[11] - s[10]), rel=1e-14)


# --- the protocol -----------------------------------------------------------------------------------------------

def models(seed, n=30, stacked=True):
    """Two models' features of the same N inputs: x (3 layers) and y (2 layers), heavy-tailed, sharing a signal."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 10))
    def layers(widths):
        return [base @ rng.normal(size=(10, w)) + 0.7 * rng.standard_t(3, size=(n, w)) for w in widths]
    if stacked:
        return np.stack(layers([12] * 3), axis=1), np.stack(layers([14] * 2), axis=1)
    return layers([12, 10, 16]), layers([11, 14])


PROTOCOL_SCOPES = {"tensor": "exact", "sample_mean": "sample_mean"}


def check_protocol(x, y, metric, scope, what, q=0.95):
    """Library ``prh_protocol(y, x)`` (its documented PRH orientation) against the twin's ``protocol(x, y)``."""
    ref = twin.protocol(x, y, metric, k=K, clip=PROTOCOL_SCOPES[scope], q=q)
    got = pm.prh_protocol(y, x, metric=metric, knn_k=K, clip_quantile=q, clip_scope=scope, convention="prh")
    single = np.asarray(x if not isinstance(x, list) else x[0]).dtype == np.float32
    tol = TOL32 if single else TOL
    assert_agrees(got.best, ref.best, f"{what}: best", single=single)
    assert (None if got.layers is None else tuple(got.layers)) == ref.prh_indices, (
        f"{what}: layers {got.layers} != PRH's {ref.prh_indices}")
    np.testing.assert_allclose(got.table, ref.table.T, rtol=tol, atol=tol, err_msg=f"{what}: table")


@pytest.mark.parametrize("scope", ["tensor", "sample_mean"])
@pytest.mark.parametrize("metric", METRIC_NAMES)
def test_prh_protocol_equals_the_twin_on_stacks(metric, scope):
    x, y = models(10)
    check_protocol(x, y, metric, scope, f"{metric} stack {scope}")


@pytest.mark.parametrize("scope", ["tensor", "sample_mean"])
@pytest.mark.parametrize("metric", ["cycle_knn", "cknna", "unbiased_cka", "svcca"])
def test_prh_protocol_equals_the_twin_on_lists(metric, scope):
    """Lists of layers of different widths: the PRH code clips each layer on its own."""
    x, y = models(11, stacked=False)
    check_protocol(x, y, metric, scope, f"{metric} list {scope}")


def test_prh_protocol_float32_stacks():
    x, y = models(12)
    check_protocol(x.astype(np.float32), y.astype(np.float32), "cknna", "tensor", "cknna float32 stack")


def test_prh_protocol_ties_follow_the_prh_loop_order():
    """x = [X, Y], y = [Y, X]: two pairs score exactly 1; PRH keeps the first of its loop (y layer 0, x layer 1)."""
    X, Y = models(13)[0][:, :2, :].transpose(1, 0, 2)
    x, y = np.stack([X, Y], axis=1), np.stack([Y, X], axis=1)
    ref = twin.protocol(x, y, "mutual_knn", k=K)
    assert ref.best == 1.0 and ref.prh_indices == (0, 1)
    check_protocol(x, y, "mutual_knn", "tensor", "ties")


def test_prh_protocol_orientation_matters():
    """prh_protocol(x, y) is not the PRH number for cycle kNN: the metric's first argument is y's layer."""
    x, y = models(14, stacked=False)
    ref = twin.protocol(x, y, "cycle_knn", k=K)
    swapped = twin.protocol(y, x, "cycle_knn", k=K)
    assert not np.allclose(ref.table, swapped.table.T)
    wrong = pm.prh_protocol(x, y, metric="cycle_knn", knn_k=K, convention="prh")
    assert not np.allclose(wrong.table, ref.table)


def test_prh_and_prhsim_protocols_differ_through_the_tensor_clip():
    """On a small stack the order statistic and the interpolated quantile clip differently, and the table shows it."""
    rng = np.random.default_rng(15)
    x = np.concatenate([rng.standard_t(2, size=(12, 2, 1)) * 3, rng.normal(size=(12, 2, 3))], axis=2)
    y = x[:, ::-1, :] + 0.3 * rng.normal(size=x.shape)
    got = pm.prh_protocol(y, x, metric="linear_cka", knn_k=K, convention="prh")
    ref = twin.protocol(x, y, "linear_cka", k=K)
    np.testing.assert_allclose(got.table, ref.table.T, rtol=TOL, atol=TOL)

    def interpolated(stack):  # prhsim's tensor clip, then the PRH normalisation
        return twin.l2_normalise(np.asarray(pm.clip_stack(stack, 0.95, scope="tensor")))
    xi, yi = interpolated(x), interpolated(y)
    other = np.array([[twin.linear_cka(yi[:, i], xi[:, j]) for j in range(2)] for i in range(2)])
    assert np.max(np.abs(other - got.table)) > 1e-6, (other, got.table)


def test_prh_protocol_without_a_positive_score_gives_prh_zero():
    """The PRH best starts at 0 and moves only on a larger score: no positive score gives (0, None)."""
    for seed in range(20):
        rng = np.random.default_rng(seed)
        x, y = rng.normal(size=(16, 1, 12)), rng.normal(size=(16, 1, 12))
        ref = twin.protocol(x, y, "unbiased_cka")
        if ref.prh_indices is None:
            break
    else:  # pragma: no cover - the draws above hold a negative score
        pytest.fail("no draw with a negative unbiased CKA")
    assert ref.best == 0.0 and ref.table[0, 0] < 0
    got = pm.prh_protocol(y, x, metric="unbiased_cka", convention="prh")
    assert got.best == 0.0 and got.layers is None, (got.best, got.layers)
