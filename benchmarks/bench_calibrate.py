"""Permutation-null calibration (prhsim/metrics/_calibrate.py): the fast paths against recomputing the metric.

N = 1024 paired rows, d = 768, float64: A Gaussian, B = A·R + 0.5·noise with R a random
orthogonal matrix (aligned, but neither score is 0 or 1), K = 1000 permutations. For
mutual 10-NN and linear CKA it prints the time of one raw score (the registered metric),
of ``calibrate`` (fast path: the neighbour lists searched once and relabelled per
permutation; the Grams formed once and one N x N gather per permutation), their ratio,
and the naive null, ``metric(A, B[π_j])`` recomputed for the first 20 of the same
permutations, extrapolated to K = 1000 (raw + 1000 null scores), with the speed-up. The
20 naive null scores are checked against the fast path's first 20 (exactly for k-NN, to
1e-12 for CKA).

    python benchmarks/bench_calibrate.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

from prhsim.metrics._calibrate import calibrate  # noqa: E402
from prhsim.metrics._registry import METRICS  # noqa: E402

N, D, K, K_NAIVE, KNN_K = 1024, 768, 1000, 20, 10


def inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(N, D))
    r, _ = np.linalg.qr(rng.normal(size=(D, D)))
    return a, a @ r + 0.5 * rng.normal(size=(N, D))


def main() -> None:
    a, b = inputs()
    gen = np.random.default_rng(1)
    perms = np.array([gen.permutation(N) for _ in range(K)])
    print(f"N = {N}, d = {D}, K = {K} permutations, float64; naive null timed at K = {K_NAIVE}")
    for name, label in (("mutual_knn", f"mutual {KNN_K}-NN"), ("linear_cka", "linear CKA")):
        metric = METRICS[name]
        raw_s = best_of(lambda m=metric: m(a, b, knn_k=KNN_K), repeats=3)
        start = time.perf_counter()
        cal = calibrate(name, a, b, permutations=perms, knn_k=KNN_K)
        fast_s = time.perf_counter() - start
        start = time.perf_counter()
        naive = np.array([metric(a, b[p], knn_k=KNN_K) for p in perms[:K_NAIVE]])
        naive_s = time.perf_counter() - start
        naive_full = raw_s + naive_s * K / K_NAIVE
        gap = float(np.max(np.abs(naive - cal.null[:K_NAIVE])))
        assert gap <= (0.0 if name == "mutual_knn" else 1e-12), f"{name}: fast and naive null differ by {gap}"
        print(f"\n{label}: raw {cal.raw:.4f}, p {cal.p_value:.4g}, tau {cal.tau:.4f}, "
              f"calibrated {cal.calibrated:.4f} (fast = naive on the first {K_NAIVE}: max gap {gap:.1e})")
        print(row("  one raw score", raw_s))
        print(row(f"  calibrate, K = {K} (fast path)", fast_s))
        print(f"  {'ratio calibrate / raw score':<66s} {fast_s / raw_s:9.1f} x")
        print(row(f"  naive null, K = {K_NAIVE} (measured)", naive_s))
        print(row(f"  naive calibration, K = {K} (extrapolated)", naive_full))
        print(f"  {'speed-up of the fast path over the naive one':<66s} {naive_full / fast_s:9.1f} x")


if __name__ == "__main__":
    main()
