"""Permutation-null calibration: prhsim's ``calibrate`` against the reference implementation.

The reference is the PyPI package calibrated-similarity 0.1.1 (Gröger, Wen & Brbić 2026,
``calibrated_similarity.calibrate``): it takes a similarity callable and a ``perm_fn``
returning one permutation per call, and recomputes ``sim(X, Y[π])`` for each of the K
permutations, keeping the scores in float32. prhsim's ``calibrate`` computes what a
permutation leaves alone once (neighbour lists, Grams, normalisers) and only the coupling
per permutation (prhsim/metrics/_calibrate.py).

N = 1024 paired rows, d = 768, float64: A Gaussian, B = A·R + 0.5·noise with R a random
orthogonal matrix, K = 200 permutations (the reference's default K), the same (K, N) array
given to both (through ``perm_fn`` to the reference; both permute B as ``B[π]``). For
mutual 10-NN and linear CKA it prints:

* prhsim's ``calibrate`` (best of 3);
* the reference with prhsim's registered metric as its ``sim`` (torch float64 tensors in):
  the same null scores, so p-value and τ must agree (the reference's are float32: they
  agree when they equal prhsim's rounded to float32);
* for scale, the reference with a plain torch float64 metric written the usual way (CKA
  from the three d x d cross products; mutual k-NN from dense N x N cosine similarities and
  ``topk``), and whether its p and τ agree too.

Each reference is timed twice: one run over all K permutations (the one whose p and τ are
compared), and the best of 3 runs over the first K' = 20, scaled to K by (K + 1)/(K' + 1)
(the reference scores the pair K + 1 times, nothing else costs): a single minute-long run
on a shared machine can be slowed several times by other work, and the best of short runs
is the house measure (benchmarks/_timing.py). The speed-up (target: at least 50x) is that
estimate over prhsim's best of 3.

``--reference-k K'`` makes the full run use the first K' permutations only and extrapolates
its time to K (the agreement is then checked against prhsim's ``calibrate`` on the same K').
``--threads T`` caps torch's and the BLAS thread pools at T for both sides (default: the
libraries' own): on a busy machine the spinning threads of torch's OpenMP pool slow the
reference far more than prhsim, and T = 1 compares the work done rather than that.

    python benchmarks/bench_calibrate_vs_reference.py [--reference-k K'] [--threads T]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from calibrated_similarity import calibrate as reference_calibrate
from threadpoolctl import threadpool_info, threadpool_limits

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

from prhsim.metrics._calibrate import calibrate  # noqa: E402
from prhsim.metrics._registry import METRICS  # noqa: E402

N, D, K, KNN_K, ALPHA = 1024, 768, 200, 10, 0.05
K_SHORT = 20  # permutations of the reference's best-of-3 timing


def inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(N, D))
    r, _ = np.linalg.qr(rng.normal(size=(D, D)))
    return a, a @ r + 0.5 * rng.normal(size=(N, D))


def torch_linear_cka(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """‖x̃ᵀỹ‖_F² / (‖x̃ᵀx̃‖_F ‖ỹᵀỹ‖_F) on centred features, recomputed whole at every call."""
    x, y = x - x.mean(0), y - y.mean(0)
    fro = torch.linalg.matrix_norm
    return fro(x.T @ y) ** 2 / (fro(x.T @ x) * fro(y.T @ y))


def torch_mutual_knn(x: torch.Tensor, y: torch.Tensor, k: int = KNN_K) -> float:
    """Mean fraction of shared k nearest neighbours: dense cosine similarities, self excluded, topk."""
    def lists(z: torch.Tensor) -> torch.Tensor:
        z = torch.nn.functional.normalize(z, dim=1)
        g = z @ z.T
        g.fill_diagonal_(-torch.inf)
        return g.topk(k, dim=1).indices

    ia, ib = lists(x), lists(y)
    mask = torch.zeros(x.shape[0], x.shape[0], dtype=torch.bool).scatter_(1, ia, True)
    return mask.gather(1, ib).sum().item() / (x.shape[0] * k)


class Feed:
    """The reference's ``perm_fn``: the rows of a (K, N) array, in order."""

    def __init__(self, perms: np.ndarray) -> None:
        self.perms, self.calls = perms, 0

    def __call__(self, n: int, device: torch.device) -> torch.Tensor:
        p = torch.from_numpy(self.perms[self.calls])
        self.calls += 1
        return p


class Recorder:
    """A ``sim`` that keeps each score it returns (the reference itself returns only p, τ and the score)."""

    def __init__(self, sim) -> None:
        self.sim, self.scores = sim, []

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> float:
        s = float(self.sim(x, y))
        self.scores.append(s)
        return s


def run_reference(sim, a: np.ndarray, b: np.ndarray, perms: np.ndarray):
    """One timed run of the reference on the given permutations: (seconds, (score, p, τ), recorded scores)."""
    rec = Recorder(sim)
    start = time.perf_counter()
    out = reference_calibrate(torch.from_numpy(a), torch.from_numpy(b), rec, K=len(perms), alpha=ALPHA,
                              perm_fn=Feed(perms))
    return time.perf_counter() - start, tuple(float(v) for v in out), np.array(rec.scores)


def agreement(cal, out, scores) -> str:
    """Whether the reference's float32 p and τ are prhsim's rounded to float32, and the largest null gap."""
    _, p, tau = out
    same = p == float(np.float32(cal.p_value)) and tau == float(np.float32(cal.tau))
    gap = float(np.max(np.abs(scores[1:] - cal.null)))
    return (f"p {p:.6g}, tau {tau:.6f}: {'agree' if same else 'DISAGREE'} with prhsim "
            f"(max null gap {gap:.1e})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-k", type=int, default=K, help="permutations the reference runs (default K)")
    parser.add_argument("--threads", type=int, default=None, help="torch and BLAS threads (default: theirs)")
    args = parser.parse_args()
    if args.threads is None:
        run(min(K, args.reference_k))
        return
    torch.set_num_threads(args.threads)
    with threadpool_limits(args.threads):
        run(min(K, args.reference_k))


def run(ref_k: int) -> None:
    a, b = inputs()
    gen = np.random.default_rng(1)
    perms = np.array([gen.permutation(N) for _ in range(K)])
    scale, short_scale = (K + 1) / (ref_k + 1), (K + 1) / (K_SHORT + 1)
    note = "one run" if ref_k == K else f"K' = {ref_k}, extrapolated to K"
    print(f"N = {N}, d = {D}, K = {K} permutations, float64 inputs, alpha = {ALPHA}; "
          f"torch {torch.__version__} with {torch.get_num_threads()} threads, BLAS with "
          f"{max(i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas')}; "
          f"load average {os.getloadavg()[0]:.2f}")
    plain = {"mutual_knn": torch_mutual_knn, "linear_cka": torch_linear_cka}
    for name, label in (("mutual_knn", f"mutual {KNN_K}-NN"), ("linear_cka", "linear CKA")):
        metric = METRICS[name]
        cal = calibrate(name, a, b, permutations=perms, alpha=ALPHA, knn_k=KNN_K)
        fast_s = best_of(lambda n=name: calibrate(n, a, b, permutations=perms, alpha=ALPHA, knn_k=KNN_K))
        check = cal if ref_k == K else calibrate(name, a, b, permutations=perms[:ref_k], alpha=ALPHA, knn_k=KNN_K)
        print(f"\n{label}: raw {cal.raw:.4f}, p {cal.p_value:.4g}, tau {cal.tau:.4f}, "
              f"calibrated {cal.calibrated:.4f}")
        print(row("  prhsim calibrate (best of 3)", fast_s))
        for what, sim in (("prhsim's metric", lambda x, y, m=metric: m(x, y, knn_k=KNN_K)),
                          ("a plain torch metric", plain[name])):
            ref_s, out, scores = run_reference(sim, a, b, perms[:ref_k])
            short_s = min(run_reference(sim, a, b, perms[:K_SHORT])[0] for _ in range(3))
            print(row(f"  reference with {what} ({note})", ref_s * scale))
            print(row(f"    best of 3 at K' = {K_SHORT}, scaled to K", short_s * short_scale))
            print(f"  {'  speed-up of prhsim (best of 3 over best of 3)':<64s} "
                  f"{short_s * short_scale / fast_s:9.1f} x")
            print(f"    {agreement(check, out, scores)}")
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
