"""Sample metrics (CKA, SVCCA, retrieval, the PRH protocol) against slow twins written from their definitions."""

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings, strategies as st

from support import assert_close
from prhsim.metrics import calibrated_protocol
from prhsim.metrics._cka import linear_cka, rbf_cka, unbiased_cka
from prhsim.metrics._protocol import clip_stack, prh_protocol
from prhsim.metrics._registry import METRICS
from prhsim.metrics._retrieval import _recall, retrieval
from prhsim.metrics._svcca import svcca

LIBS = ["numpy", "torch", "jax"]


def convert(lib, x):
    """x (numpy, float64) as an array of ``lib``."""
    if lib == "numpy":
        return np.asarray(x)
    if lib == "torch":
        torch = pytest.importorskip("torch")
        return torch.from_numpy(np.ascontiguousarray(x))
    jnp = pytest.importorskip("jax.numpy")
    return jnp.asarray(x)


def random_orthogonal(k, rng):
    Q, _ = np.linalg.qr(rng.normal(size=(k, k)))
    return Q


def embedding(d, width, rng):
    """A random isometry R^d -> R^width (d x width, orthonormal rows)."""
    return random_orthogonal(width, rng)[:d, :]


def correlated(rng, n, da, db, noise=0.7):
    a = rng.normal(size=(n, da)) @ np.diag(np.linspace(2.0, 0.5, da)) + 0.3
    b = a @ rng.normal(size=(da, db)) + noise * rng.normal(size=(n, db)) - 1.0
    return a, b


# --- slow twins, straight from the definitions --------------------------------------------------

def centring(n):
    return np.eye(n) - np.ones((n, n)) / n


def hsic_biased(K, L):
    H = centring(K.shape[0])
    return np.trace(K @ H @ L @ H) / (K.shape[0] - 1) ** 2


def cka_twin(K, L):
    return hsic_biased(K, L) / np.sqrt(hsic_biased(K, K) * hsic_biased(L, L))


def linear_twin(a, b):
    return cka_twin(a @ a.T, b @ b.T)


def rbf_gram_twin(x, sigma):
    n = x.shape[0]
    d2 = np.array([[np.sum((x[i] - x[j]) ** 2) for j in range(n)] for i in range(n)])
    return np.exp(-d2 / (2.0 * sigma**2 * np.median(d2)))


def rbf_twin(a, b, sigma=1.0):
    return cka_twin(rbf_gram_twin(a, sigma), rbf_gram_twin(b, sigma))


def hsic_unbiased_twin(K, L):
    """Song et al. (2012) with Python sums over the zero-diagonal kernels."""
    n = K.shape[0]
    Kt, Lt = K.copy(), L.copy()
    np.fill_diagonal(Kt, 0.0)
    np.fill_diagonal(Lt, 0.0)
    tr = sum(Kt[i, j] * Lt[j, i] for i in range(n) for j in range(n))
    sk = sum(Kt[i, j] for i in range(n) for j in range(n))
    sl = sum(Lt[i, j] for i in range(n) for j in range(n))
    kl = sum(Kt[i, j] * Lt[j, m] for i in range(n) for j in range(n) for m in range(n))
    return (tr + sk * sl / ((n - 1) * (n - 2)) - 2.0 * kl / (n - 2)) / (n * (n - 3))


def unbiased_twin(a, b):
    K, L = a @ a.T, b @ b.T
    return hsic_unbiased_twin(K, L) / np.sqrt(hsic_unbiased_twin(K, K) * hsic_unbiased_twin(L, L))


def svcca_twin(a, b, keep=0.99):
    """Reduce by the covariance's eigenvectors, then CCA as svd(Caa^{-1/2} Cab Cbb^{-1/2})."""
    reduced = []
    for x in (a, b):
        xc = x - x.mean(axis=0)
        w, V = np.linalg.eigh(xc.T @ xc)
        w, V = w[::-1], V[:, ::-1]
        r = keep if isinstance(keep, int) else int(np.argmax(np.cumsum(w) / np.sum(w) >= keep)) + 1
        reduced.append(xc @ V[:, :r])
    ra, rb = reduced
    n = ra.shape[0]
    Caa, Cbb, Cab = ra.T @ ra / (n - 1), rb.T @ rb / (n - 1), ra.T @ rb / (n - 1)
    M = np.linalg.inv(sla.sqrtm(Caa)) @ Cab @ np.linalg.inv(sla.sqrtm(Cbb))
    return float(np.mean(np.linalg.svd(np.real(M), compute_uv=False)))


def retrieval_twin(a, b, fit, ks):
    """Explicit pipeline: fit-mean centring, unit rows, eigh PCA, scipy Procrustes, a loop over ranks."""
    n = a.shape[0]
    fit = np.asarray(fit)
    held = np.array([i for i in range(n) if i not in set(fit.tolist())])
    m = min(a.shape[1], b.shape[1], fit.size - 1)  # full-rank random data
    sides = []
    for x in (a, b):
        x = x - x[fit].mean(axis=0)
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        w, V = np.linalg.eigh(x[fit].T @ x[fit])
        x = x @ V[:, ::-1][:, :m]
        sides.append(x)
    A, B = sides
    Q, _ = sla.orthogonal_procrustes(A[fit], B[fit])  # argmin ‖A Q − B‖

    def recall(queries, keys):
        t = len(queries)
        out = {k: 0.0 for k in ks}
        for i in range(t):
            scores = [queries[i] @ keys[j] / (np.linalg.norm(queries[i]) * np.linalg.norm(keys[j])) for j in range(t)]
            g = sum(1 for j in range(t) if scores[j] > scores[i])
            e = sum(1 for j in range(t) if j != i and scores[j] == scores[i])
            for k in ks:
                out[k] += min(1.0, max(0.0, (k - g) / (e + 1))) / t
        return out

    return recall(A[held] @ Q, B[held]), recall(B[held] @ Q.T, A[held])


# --- twins on numpy, torch and JAX -----------------------------------------------------------------

@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("shape", [(12, 3, 5), (7, 15, 11)])  # feature route, N x N Gram route
def test_linear_and_unbiased_cka_match_kernel_twins(lib, shape):
    n, da, db = shape
    a, b = correlated(np.random.default_rng(n), n, da, db)
    assert_close(linear_cka(convert(lib, a), convert(lib, b)), linear_twin(a, b), atol=1e-12)
    assert_close(unbiased_cka(convert(lib, a), convert(lib, b)), unbiased_twin(a, b), atol=1e-11)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("sigma", [None, 0.5, 2.0])
def test_rbf_cka_matches_kernel_twin(lib, sigma):
    for n in (11, 12):  # odd and even N² (the median of an even count averages the middle two)
        a, b = correlated(np.random.default_rng(n), n, 3, 5)
        got = rbf_cka(convert(lib, a), convert(lib, b), sigma=sigma)
        assert_close(got, rbf_twin(a, b, 1.0 if sigma is None else sigma), atol=1e-12)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("keep", [0.99, 0.8, 2])
def test_svcca_matches_cca_twin(lib, keep):
    a, b = correlated(np.random.default_rng(3), 60, 5, 6, noise=1.0)
    assert_close(svcca(convert(lib, a), convert(lib, b), keep=keep), svcca_twin(a, b, keep), atol=1e-10)


@pytest.mark.parametrize("lib", LIBS)
def test_retrieval_matches_rank_loop_twin(lib):
    rng = np.random.default_rng(5)
    a, b = correlated(rng, 50, 4, 6, noise=1.5)
    fit = rng.permutation(50)[:20]  # shapes shared with the next test (fewer JAX compilations)
    got = retrieval(convert(lib, a), convert(lib, b), fit=fit, ks=(1, 3, 10))
    fwd, back = retrieval_twin(a, b, np.sort(fit), (1, 3, 10))
    for k in (1, 3, 10):
        assert_close(got.a_to_b[k], fwd[k], what=f"a->b R@{k}")
        assert_close(got.b_to_a[k], back[k], what=f"b->a R@{k}")
    assert 0.0 < got.a_to_b[1] < 1.0  # not a trivial case
    mask = np.zeros(50, dtype=bool)
    mask[fit] = True
    assert retrieval(convert(lib, a), convert(lib, b), fit=mask, ks=(1, 3, 10)) == got


def test_float32_and_float16_torch_inputs_agree_with_float64():
    torch = pytest.importorskip("torch")
    a, b = correlated(np.random.default_rng(8), 40, 4, 5)
    at, bt = torch.from_numpy(a).float(), torch.from_numpy(b).half()
    for f in (linear_cka, unbiased_cka, rbf_cka, svcca):
        assert_close(f(at, bt), f(a, b), atol=1e-3, rtol=0)


# --- invariances and self-similarity ---------------------------------------------------------------

def _transforms(rng, a):
    n, d = a.shape
    return {
        "orthogonal": (a @ random_orthogonal(d, rng), None),
        "scaling": (3.7 * a, None),
        "permutation": (None, rng.permutation(n)),
    }


@pytest.mark.parametrize("metric,invariances", [
    (linear_cka, ("orthogonal", "scaling", "permutation")),
    (unbiased_cka, ("orthogonal", "scaling", "permutation")),
    (svcca, ("orthogonal", "scaling", "permutation")),
    (rbf_cka, ("orthogonal", "scaling", "permutation")),  # σ scales with the median distance
])
def test_invariances_and_self_similarity(metric, invariances):
    rng = np.random.default_rng(11)
    a, b = correlated(rng, 30, 4, 5)
    base = metric(a, b)
    for name, (moved, perm) in _transforms(rng, a).items():
        if name not in invariances:
            continue
        value = metric(moved, b) if perm is None else metric(a[perm], b[perm])
        assert_close(value, base, atol=1e-10, what=name)
    assert_close(metric(a, a), 1.0, atol=1e-12)
    assert_close(metric(a, 2.0 * a @ embedding(4, 7, rng)), 1.0, atol=1e-10)


@settings(max_examples=30)
@given(seed=st.integers(0, 10_000), n=st.integers(4, 25), da=st.integers(1, 8), db=st.integers(1, 8))
def test_linear_cka_is_a_bounded_rotation_invariant_twin(seed, n, da, db):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(n, da)), rng.normal(size=(n, db))
    value = linear_cka(a, b)
    assert 0.0 <= value <= 1.0
    assert_close(value, linear_twin(a, b), atol=1e-9)
    assert_close(linear_cka(a @ random_orthogonal(da, rng), -2.5 * b), value, atol=1e-9)


@pytest.mark.parametrize("lib,n_fit", [(lib, 20) for lib in LIBS] + [("numpy", 4)])  # m = d_a; m = |fit| − 1 < d_a
def test_retrieval_of_an_embedded_rotated_copy_is_perfect(lib, n_fit):
    rng = np.random.default_rng(13)
    a = rng.normal(size=(50, 4))
    b = a @ random_orthogonal(4, rng) @ embedding(4, 6, rng)  # a different width
    r = retrieval(convert(lib, a), convert(lib, b), fit=np.arange(n_fit))
    assert r.a_to_b == {1: 1.0, 5: 1.0, 10: 1.0}
    assert r.b_to_a == {1: 1.0, 5: 1.0, 10: 1.0}


def test_retrieval_tie_rule_is_the_expected_rank_under_random_tie_breaks():
    q = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    keys = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    # query 0, 1: partner ties with 2 others, 1 lower: (k-0)/3; query 2: partner (score 0) ties
    # with 2 others, one higher: (k-1)/3; query 3: all four score 1/√2: k/4
    got = _recall(np, q, keys, (1, 2, 3, 4))
    expect = {k: (2 * min(1, k / 3) + max(0, min(1, (k - 1) / 3)) + k / 4) / 4 for k in (1, 2, 3, 4)}
    for k in expect:
        assert_close(got[k], expect[k], what=f"R@{k}")
    a = np.random.default_rng(0).normal(size=(30, 3))
    collapsed = retrieval(a, np.ones((30, 4)), fit=np.arange(10), ks=(1, 5, 25))
    assert collapsed.a_to_b == {1: 1 / 20, 5: 5 / 20, 25: 1.0} == collapsed.b_to_a


# --- the PRH protocol ------------------------------------------------------------------------------

def _stacks(rng, n=40):
    A = rng.normal(size=(n, 4, 6))
    B = rng.normal(size=(n, 3, 5))
    A[:, 2, :] = B[:, 1, :] @ embedding(5, 6, rng) * 3.0  # layer (2, 1): a rotated copy
    return A, B


@pytest.mark.parametrize("lib", LIBS)
def test_protocol_finds_the_rotated_layer_pair(lib):
    A, B = _stacks(np.random.default_rng(17))
    score = prh_protocol(convert(lib, A), convert(lib, B), metric="linear_cka", clip_quantile=None)
    assert score.layers == (2, 1)
    assert_close(score.best, 1.0, atol=1e-12)
    assert score.table.shape == (4, 3) and score.chance is None
    assert np.all(np.delete(score.table.ravel(), 2 * 3 + 1) < 0.6)


def test_protocol_clip_keeps_the_pair_but_breaks_exactness():
    A, B = _stacks(np.random.default_rng(17))
    clipped = prh_protocol(A, B, metric="linear_cka")  # a coordinate-wise clip is not rotation equivariant
    assert clipped.layers == (2, 1) and 0.9 < clipped.best < 1.0


@pytest.mark.parametrize("lib", LIBS)
def test_clip_matches_numpy_quantile_twin(lib):
    x = np.random.default_rng(19).standard_t(3, size=(20, 3, 7))
    q = np.quantile(np.abs(x), 0.95)
    assert_close(clip_stack(convert(lib, x), 0.95), np.clip(x, -q, q))
    q_mean = np.mean(np.quantile(np.abs(x.reshape(20, -1)), 0.9, axis=1))
    assert_close(clip_stack(convert(lib, x), 0.9, scope="sample_mean"), np.clip(x, -q_mean, q_mean))
    assert_close(clip_stack(convert(lib, x), None), x)


def test_protocol_table_is_every_pair_of_clipped_unit_rows():
    A, B = _stacks(np.random.default_rng(23), n=25)
    prep = []
    for X in (A, B):
        q = np.quantile(np.abs(X), 0.95)
        X = np.clip(X, -q, q)
        prep.append(X / np.linalg.norm(X, axis=-1, keepdims=True))
    for metric, f in (("unbiased_cka", unbiased_cka), ("svcca", svcca), ("rbf_cka", rbf_cka)):
        score = prh_protocol(A, B, metric=metric)
        expect = np.array([[f(prep[0][:, i], prep[1][:, j]) for j in range(3)] for i in range(4)])
        assert_close(score.table, expect, atol=1e-12, what=metric)
        assert score.best == score.table.max() and score.table[score.layers] == score.best


def test_registry_names_and_unknown_metric():
    assert set(METRICS) == {"mutual_knn", "cycle_knn", "cknna", "cknna_agnostic", "cknna_biased", "linear_cka",
                            "unbiased_cka", "rbf_cka", "svcca", "retrieval_r1"}
    A, B = _stacks(np.random.default_rng(0), n=10)
    with pytest.raises(ValueError,
                       match=r"^unknown metric 'cca'; known: cknna, cknna_agnostic, cknna_biased, cycle_knn, .*, unbiased_cka$"):
        prh_protocol(A, B, metric="cca")


def test_protocol_knn_metrics_and_chance():
    knn = pytest.importorskip("prhsim.metrics._knn")
    A, B = _stacks(np.random.default_rng(29), n=30)
    score = prh_protocol(A, B, metric="mutual_knn", knn_k=5, clip_quantile=None)
    assert score.layers == (2, 1) and score.chance == knn.knn_chance(30, 5)
    unit = [X / np.linalg.norm(X, axis=-1, keepdims=True) for X in (A, B)]
    assert_close(score.table[0, 2], knn.mutual_knn(unit[0][:, 0], unit[1][:, 2], knn_k=5))
    cycle = prh_protocol(A, B, metric="cycle_knn", knn_k=5, clip_quantile=None)
    assert cycle.chance is None and cycle.table.shape == (4, 3)
    assert_close(cycle.table[3, 0], knn.cycle_knn(unit[0][:, 3], unit[1][:, 0], knn_k=5))


def test_protocol_cknna():
    cknna_module = pytest.importorskip("prhsim.metrics._cknna")
    A, B = _stacks(np.random.default_rng(31), n=30)
    score = prh_protocol(A, B, metric="cknna", knn_k=5, clip_quantile=None)
    unit = [X / np.linalg.norm(X, axis=-1, keepdims=True) for X in (A, B)]
    assert score.chance is None and score.table.shape == (4, 3) and score.layers == (2, 1)
    assert_close(score.table[3, 0], cknna_module.cknna(unit[0][:, 3], unit[1][:, 0], knn_k=5))


# --- errors: one line each -------------------------------------------------------------------------

def _one_line_error(call, pattern):
    with pytest.raises(ValueError, match=pattern) as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("metric", [linear_cka, rbf_cka, unbiased_cka, svcca])
def test_input_errors(metric):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(10, 3)), rng.normal(size=(10, 2))
    what = "SVCCA" if metric is svcca else "CKA"
    _one_line_error(lambda: metric(np.full((10, 3), 0.1), b), f"^a has zero variance: {what} is undefined$")
    _one_line_error(lambda: metric(a, np.ones((10, 2))), f"^b has zero variance: {what} is undefined$")
    _one_line_error(lambda: metric(a, b[:9]), "same number of rows N, got 10 and 9")
    _one_line_error(lambda: metric(a[:, 0], b), "must be 2-D")
    bad = a.copy()
    bad[3, 1] = np.nan
    _one_line_error(lambda: metric(bad, b), "^a contains NaN or inf$")
    bad[3, 1] = np.inf
    _one_line_error(lambda: metric(a, bad), "^b contains NaN or inf$")


def test_unbiased_cka_needs_four_rows_and_a_positive_self_hsic():
    rng = np.random.default_rng(1)
    _one_line_error(lambda: unbiased_cka(rng.normal(size=(3, 2)), rng.normal(size=(3, 2))),
                    "^unbiased CKA needs at least 4 rows, got N = 3$")
    # K̃_ij = f_i + f_j off the diagonal: the U-centred kernel vanishes, so HSIC_u(K, K) = 0
    a = np.array([[1.0], [1.0], [1.0], [-1.0]])
    _one_line_error(lambda: unbiased_cka(a, rng.normal(size=(4, 2))), "^a has a non-positive unbiased self-HSIC")


def test_other_argument_errors():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(20, 3)), rng.normal(size=(20, 4))
    _one_line_error(lambda: rbf_cka(a, b, sigma=0.0), "sigma must be a positive")
    _one_line_error(lambda: svcca(a, b, keep=1.5), "keep must be")
    _one_line_error(lambda: svcca(a, b, keep=4), "keep=4 exceeds the numerical rank 3 of a")
    _one_line_error(lambda: retrieval(a, b, fit=np.arange(20)), "at least 2 held-out rows")
    _one_line_error(lambda: retrieval(a, b, fit=[3]), "fitting subset needs at least 2 rows, got 1")
    _one_line_error(lambda: retrieval(a, b, fit=[1, 1, 2]), "distinct")
    _one_line_error(lambda: retrieval(a, b, fit=np.ones(5, dtype=bool)), "mask must have shape")
    _one_line_error(lambda: retrieval(a, b, fit=[0, 1], ks=(0,)), "ks must be positive")
    _one_line_error(lambda: prh_protocol(a, b, metric="linear_cka"), "must be a 3-D stack")
    A = np.ones((10, 2, 3))  # every layer constant (one constant layer is left out: test_protocol_leaves_...)
    _one_line_error(lambda: prh_protocol(A, rng.normal(size=(10, 2, 3)), metric="linear_cka"),
                    r"^feats_a: every layer has zero variance")


def test_the_protocol_takes_neighbours_as_knn_k():
    gen = np.random.default_rng(3)
    A, B = gen.normal(size=(30, 2, 4)), gen.normal(size=(30, 2, 5))
    assert prh_protocol(A, B, metric="mutual_knn", knn_k=4).chance == 4 / 29
    with pytest.raises(TypeError, match="'k'"):
        prh_protocol(A, B, metric="mutual_knn", k=4)


@pytest.mark.parametrize("metric", ["mutual_knn", "linear_cka"])
def test_protocol_leaves_constant_layers_out(metric):
    """A layer whose rows are all equal (a class token before the first block) has no metric: its cells are NaN,
    the best is over the other pairs, and the calibration's null maxes over the same pairs. A model with no other
    layer is refused in one line. (Such a layer ended the whole protocol with the metric's refusal.)"""
    rng = np.random.default_rng(40)
    A, B = _stacks(rng)
    A[:, 0, :] = 1.0  # constant
    B[:, 2, :] = 3.0 * rng.normal(size=5)  # every row the same vector: constant
    score = prh_protocol(A, B, metric=metric, knn_k=5)
    assert np.isnan(score.table[0]).all() and np.isnan(score.table[:, 2]).all()
    assert not np.isnan(np.delete(np.delete(score.table, 0, axis=0), 2, axis=1)).any()
    assert score.layers == (2, 1)
    unclipped = prh_protocol(A, B, metric=metric, knn_k=5, clip_quantile=None)  # the clip sees every layer
    assert unclipped.best == prh_protocol(A[:, 1:], B[:, :2], metric=metric, knn_k=5, clip_quantile=None).best
    calibrated = calibrated_protocol(A, B, metric=metric, knn_k=5, permutations=19)
    assert calibrated.calibration.raw == score.best
    with pytest.raises(ValueError, match=r"^feats_b: every layer has zero variance \(all rows equal\)"):
        prh_protocol(A, np.ones((40, 2, 5)), metric=metric, knn_k=5)
