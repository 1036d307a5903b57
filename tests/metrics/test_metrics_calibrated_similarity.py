"""prhsim.metrics.calibrate against the reference implementation, calibrated-similarity 0.1.1.

The reference (``calibrated_similarity.calibrate`` and ``calibrate_layers``, Gröger, Wen &
Brbić 2026) recomputes ``sim(X, Y[π])`` for every permutation. It ships no metric of its
own: ``sim`` is any callable, and ``perm_fn(n, device)`` returns one permutation per call
(K calls, in order; ``calibrate_layers`` calls it once per permutation and applies it to
every layer of Y). ``Y[π]`` has row i equal to row π(i) of Y: prhsim's ``B[perm]``.

So every test hands the reference prhsim's registered metric (torch float64 tensors in,
the metric's float64 score out) and the same (K, N) permutations as prhsim, and the two
nulls are comparable score for score. A recording wrapper keeps each float64 score the
reference's ``sim`` returns and the Y it was given.

The reference keeps every score in float32 (observed, null, τ, p and the calibrated score
are float32 tensors), so the expectations are:

* null: the recorded float64 scores are prhsim's null exactly for the k-NN metrics
  (integer counts) and to 1e-12 for the others (prhsim's fast path reorders the sums,
  and the recorded scores come from torch where prhsim's come from numpy);
* τ: rounding to float32 is monotone, so the order statistic of the rounded scores is the
  rounded order statistic: the reference's τ is float32(prhsim's τ) exactly;
* p: the same count of null scores >= s, so the reference's p is float32(prhsim's p)
  exactly (the float32 quotient of two small integers is the rounding of the float64 one);
* the calibrated score: the reference's float32 arithmetic, redone in numpy float32,
  exactly; prhsim's float64 score within that arithmetic's error bound.

One disagreement is by design: the reference takes τ's rank as ``ceil((1 − α)(K + 1))`` in
binary floating point, prhsim evaluates it up to 1e-9. At α = 0.05, 0.1 and 0.01 the two
ranks agree for every K up to 3000; at decimal levels where (1 − α)(K + 1) is an integer
that binary rounding pushes just above (α = 0.18, K = 149: 123.00000000000001) the
reference's τ is one rank higher (test_tau_rank_differs_where_binary_rounding_lifts_it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

cs = pytest.importorskip("calibrated_similarity")
torch = pytest.importorskip("torch")

from prhsim.metrics import calibrate  # noqa: E402
from prhsim.metrics._calibrate import _rank  # noqa: E402
from prhsim.metrics._registry import METRICS  # noqa: E402

N, D, K, KNN_K, ALPHA = 128, 32, 199, 10, 0.05
#: Single-pair tests: K for the metrics with a fast path, and a smaller K where both sides recompute the metric.
K_FAST, K_RECOMPUTED, RECOMPUTED = K, 39, ("cknna", "svcca")
KNN = ("mutual_knn", "cycle_knn")  # integer counts over N·k or N: both sides compute the same float64 score
#: float32's unit roundoff: the reference's scores carry at most this relative error each.
U32 = 2.0 ** -24


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch and one BLAS thread for this module: the inputs are tiny, and on a busy machine the
    spinning worker threads of torch's OpenMP pool slow the reference's K small calls many times over."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(threads)


# --------------------------------------------------------------------------------------
# data and the reference's hooks
# --------------------------------------------------------------------------------------
def aligned(seed, n=N, d=D, noise=1.5):
    """B = A·R + noise (R a random orthogonal matrix): every metric scores well inside (0, 1)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, d))
    r, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return a, a @ r + noise * rng.normal(size=(n, d))


def independent(seed, n=N, d=D):
    """B drawn independently of A: the null holds."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(n, d + 8))


def perms_of(n, k, seed):
    gen = np.random.default_rng(seed)
    return np.array([gen.permutation(n) for _ in range(k)])


class Feed:
    """The reference's ``perm_fn``: the rows of a (K, N) array in order, counting the calls."""

    def __init__(self, perms):
        self.perms, self.calls = perms, 0

    def __call__(self, n, device):
        assert n == self.perms.shape[1] and device == torch.device("cpu")
        p = torch.from_numpy(self.perms[self.calls])
        self.calls += 1
        return p


class Recorder:
    """The reference's ``sim``: prhsim's registered metric, recording each score and each Y it is given."""

    def __init__(self, name, knn_k=KNN_K):
        self.metric, self.knn_k = METRICS[name], knn_k
        self.scores, self.ys = [], []

    def __call__(self, x, y):
        assert x.dtype == y.dtype == torch.float64  # the reference passes the tensors on uncast
        s = self.metric(x, y, knn_k=self.knn_k)
        self.scores.append(s)
        self.ys.append(y.numpy())
        return s


def float32_calibrated(s32, tau32):
    """The reference's calibrated score, its float32 operations in order (smax = 1)."""
    denom = max(np.float32(1.0) - tau32, np.float32(1e-12))
    return min(max((s32 - tau32) / denom, np.float32(0.0)), np.float32(1.0))


def float32_bound(raw, tau, delta=None):
    """|calibrated(float32) − calibrated(float64)| when the reference's s and τ are each within delta of
    prhsim's (default: one rounding, u·max(|s|, |τ|)): (s − τ)/(1 − τ) moves by at most 1/(1 − τ) per unit
    of either (for s >= τ; the clamp is 1-Lipschitz), and its three float32 operations add about 3u."""
    if delta is None:
        delta = U32 * max(abs(raw), abs(tau))
    return 2.0 * delta / (1.0 - tau - delta) + 4 * U32


def null_tolerance(name):
    return 0.0 if name in KNN else 1e-12


# --------------------------------------------------------------------------------------
# one pair of representations
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["aligned", "independent"])
@pytest.mark.parametrize("name", sorted(METRICS))
def test_scalar_calibration_matches_the_reference(name, case):
    """Same permutations, prhsim's metric inside the reference: same null, p, τ and calibrated score."""
    a, b = aligned(1) if case == "aligned" else independent(2)
    K = K_RECOMPUTED if name in RECOMPUTED else K_FAST  # both sides recompute cknna and svcca per permutation
    perms = perms_of(N, K, 3)
    cal = calibrate(name, a, b, permutations=perms, alpha=ALPHA, knn_k=KNN_K)
    feed, rec = Feed(perms), Recorder(name)
    score, p, tau = cs.calibrate(torch.from_numpy(a), torch.from_numpy(b), rec, K=K, alpha=ALPHA, perm_fn=feed)
    assert feed.calls == K and len(rec.scores) == K + 1
    # the reference scored (A, B) first, then (A, B[π_j]) with B[π_j] = b[perms[j]]: prhsim's orientation
    assert np.array_equal(rec.ys[0], b)
    assert all(np.array_equal(y, b[q]) for y, q in zip(rec.ys[1:], perms, strict=True))
    seen = np.array(rec.scores, dtype=np.float64)
    np.testing.assert_allclose(seen[1:], cal.null, rtol=0, atol=null_tolerance(name))
    assert abs(seen[0] - cal.raw) <= null_tolerance(name)
    assert p.dtype == tau.dtype == score.dtype == torch.float32
    assert tau.item() == np.float32(cal.tau)
    assert p.item() == np.float32(cal.p_value)
    assert round(p.item() * (K + 1)) == round(cal.p_value * (K + 1))  # the same count of null scores >= s
    s32 = np.float32(seen[0])  # the reference's observed score
    assert score.item() == float32_calibrated(s32, tau.numpy())
    assert abs(score.item() - cal.calibrated) <= float32_bound(cal.raw, cal.tau)
    if case == "aligned":
        assert 0.0 < cal.raw < 1.0 and cal.p_value == 1 / (K + 1) and 0.0 < cal.calibrated < 1.0
    else:
        assert cal.p_value > ALPHA and cal.calibrated == 0.0 == score.item()


def test_the_comparison_sees_the_orientation():
    """π and π⁻¹ give different nulls, so the exact agreement above pins the reference's B[π] to prhsim's."""
    a, b = aligned(1)
    perms = perms_of(N, 20, 3)
    inverse = np.argsort(perms, axis=1)
    forward = calibrate("mutual_knn", a, b, permutations=perms).null
    backward = calibrate("mutual_knn", a, b, permutations=inverse).null
    assert np.count_nonzero(forward != backward) >= 10


# --------------------------------------------------------------------------------------
# layer tables
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("aggregate", ["max", "mean"])
@pytest.mark.parametrize("name", ["mutual_knn", "linear_cka"])
def test_layer_table_calibration_matches_the_reference(name, aggregate):
    """calibrate_layers against prhsim's aggregate: one permutation for every layer of B, the same null tables.

    "max": the max of float32-rounded scores is the rounded max, so p and τ agree as for one pair.
    "mean": the reference averages the float32 table in float32; its aggregates are rebuilt from the
    recorded tables exactly, and prhsim's τ lies within that mean's rounding error of the reference's.
    """
    rng = np.random.default_rng(4)
    k, la, lb = 99, 2, 2
    a0, b0 = aligned(5, noise=1.0)
    layers_a = [a0, np.tanh(a0[:, :16]) + 0.5 * rng.normal(size=(N, 16))]
    layers_b = [b0, b0[:, :24] @ rng.normal(size=(24, 20)) + 2.0 * rng.normal(size=(N, 20))]
    perms = perms_of(N, k, 6)
    cal = calibrate(name, layers_a, layers_b, permutations=perms, aggregate=aggregate, alpha=ALPHA, knn_k=KNN_K)
    feed, rec = Feed(perms), Recorder(name)
    score, p, tau = cs.calibrate_layers([torch.from_numpy(x) for x in layers_a],
                                        [torch.from_numpy(y) for y in layers_b],
                                        rec, agg=aggregate, K=k, alpha=ALPHA, perm_fn=feed)
    assert feed.calls == k and len(rec.scores) == (k + 1) * la * lb
    for t, q in enumerate([np.arange(N), *perms]):  # table t: every layer of B permuted by the same π
        ys = rec.ys[t * la * lb:(t + 1) * la * lb]
        assert all(np.array_equal(ys[i * lb + j], layers_b[j][q]) for i in range(la) for j in range(lb))
    tables = np.array(rec.scores, dtype=np.float64).reshape(k + 1, la, lb)
    agg64 = tables.max(axis=(1, 2)) if aggregate == "max" else tables.mean(axis=(1, 2))
    np.testing.assert_allclose(agg64[1:], cal.null, rtol=0,
                               atol=0.0 if (name in KNN and aggregate == "max") else 1e-12)
    assert abs(agg64[0] - cal.raw) <= 1e-12
    t32 = torch.tensor(tables, dtype=torch.float32)  # the reference's float32 tables
    agg32 = t32.amax(dim=(1, 2)) if aggregate == "max" else torch.stack([s.mean() for s in t32])
    assert tau.item() == torch.sort(agg32).values[_rank(ALPHA, k) - 1].item()
    assert p.item() == np.float32(cal.p_value)
    assert score.item() == float32_calibrated(agg32[0].numpy(), tau.numpy())
    if aggregate == "max":
        assert tau.item() == np.float32(cal.tau)
        delta = None
    else:  # each float32 mean is within (la·lb + 1)·u·max|S| of the float64 one, and so is each order statistic
        delta = (la * lb + 1) * U32 * float(np.abs(tables).max())
        assert abs(tau.item() - cal.tau) <= delta and abs(agg32[0].item() - cal.raw) <= delta
    assert abs(score.item() - cal.calibrated) <= float32_bound(cal.raw, cal.tau, delta)
    assert cal.p_value == 1 / (k + 1) and 0.0 < cal.calibrated < 1.0


# --------------------------------------------------------------------------------------
# τ's rank
# --------------------------------------------------------------------------------------
def reference_rank(alpha, k):
    """The reference's 1-based rank of τ among the K + 1 scores (its ceil in binary floating point)."""
    return max(0, min(math.ceil((1.0 - alpha) * (k + 1)) - 1, k)) + 1


def test_tau_rank_agrees_at_the_usual_levels():
    for alpha in (0.01, 0.05, 0.1):
        assert all(reference_rank(alpha, k) == _rank(alpha, k) for k in range(1, 3001)), alpha


def test_tau_rank_differs_where_binary_rounding_lifts_it():
    """α = 0.18, K = 149: (1 − α)(K + 1) is 123 but evaluates to 123.00000000000001, so the reference's τ
    is the 124th smallest score where prhsim's (and the definition's ⌈(1 − α)(K + 1)⌉) is the 123rd."""
    alpha, k = 0.18, 149
    assert (1.0 - alpha) * (k + 1) > 123 and reference_rank(alpha, k) == 124 and _rank(alpha, k) == 123
    a, b = aligned(7, n=64, d=16, noise=3.0)
    perms = perms_of(64, k, 8)
    cal = calibrate("linear_cka", a, b, permutations=perms, alpha=alpha)
    _, p, tau = cs.calibrate(torch.from_numpy(a), torch.from_numpy(b), Recorder("linear_cka"), K=k, alpha=alpha,
                             perm_fn=Feed(perms))
    ranked = np.sort(np.append(cal.null, cal.raw))
    assert cal.tau == ranked[122] and tau.item() == np.float32(ranked[123]) and ranked[123] > ranked[122]
    assert p.item() == np.float32(cal.p_value)  # the p-value does not depend on the rank
