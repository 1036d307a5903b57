"""Automatic eigen-backend on sparse worlds against dense numpy.linalg.eigh (target: 10x at n = 4000),
and the sparse backend against raw ``scipy.sparse.linalg.eigsh`` at n = 10^5 (target: no slower).

The second part times prhsim's centred top-16 (Lanczos on ``K − 3ssᵀ``, docs/theory.md §1.1, under one BLAS
thread: SOLVER_BLAS_THREADS) beside the same with the BLAS pools left alone, raw eigsh on the same sparse K
without deflation (k = 17: the trivial pair plus the 16) with the same start vector, tolerance and number of
Lanczos vectors under default threading, and the old deflation (``np.outer(s, s @ X)`` on every matvec, which
wakes the BLAS thread pool twice per matvec). The runs are interleaved (the machine's load drifts) and both
the best and the median are printed. For each it prints the number of matvecs, the best time of one matvec,
and the ratio of the best solve to (matvecs x one matvec): how much of the time is spent outside the
operator (ARPACK's orthogonalisation and restarts).

    python benchmarks/bench_sparse.py [--large-only]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse.linalg as spla

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

import prhsim.optima._basis as basis  # noqa: E402
import prhsim.optima._spectrum as spectrum  # noqa: E402
from prhsim.optima import choose_backend, top_eigenpairs
from prhsim.optima._basis import EIGSH_TOL  # noqa: E402
from prhsim.worlds import random_world  # noqa: E402

K_TOP = 16
TARGET_RATIO = 10.0
BIG_N = 100_000
REPEATS = 3


class Counted(spla.LinearOperator):
    """An operator that counts its matvecs (a block of c columns counts c)."""

    def __init__(self, op: spla.LinearOperator) -> None:
        super().__init__(np.float64, op.shape)
        self.op, self.count = op, 0

    def _matvec(self, x):
        self.count += 1
        return self.op.matvec(x)

    def _matmat(self, X):
        self.count += X.shape[1]
        return self.op.matmat(X)

    _rmatvec = _matvec


def naive_deflated(world) -> spla.LinearOperator:
    """The old operator: ``K X − 3 s (sᵀX)`` with np.outer and BLAS on every call."""
    K, s = world.kernel, world.sqrt_p

    def matmat(X):
        X = np.asarray(X, dtype=np.float64).reshape(world.n, -1)
        return K.matmat(X) - 3.0 * np.outer(s, s @ X)

    return spla.LinearOperator(K.shape, matvec=lambda x: matmat(x).ravel(), matmat=matmat,
                               rmatvec=lambda x: matmat(x).ravel(), dtype=np.float64)


def prhsim_matvecs(world, m: int) -> int:
    """Matvecs of one prhsim solve: count them through the operator the sparse backend builds."""
    built = []
    original = spectrum.centred_operator

    def counting(w):
        built.append(Counted(original(w)))
        return built[-1]

    spectrum.centred_operator = counting
    try:
        top_eigenpairs(world, m, backend="sparse")
    finally:
        spectrum.centred_operator = original
    return built[0].count


def solve_row(label: str, seconds: float, matvecs: int, one: float) -> str:
    return (row(label, seconds) + f"  {matvecs:5d} matvecs x {1e3 * one:6.3f} ms"
            f"  total/(matvecs x one) = {seconds / (matvecs * one):5.2f}")


def main() -> None:
    if "--large-only" not in sys.argv:
        small()
    large()


def small() -> None:
    world = random_world(4000, degree=8, rng=0)
    backend = choose_backend(world, K_TOP + 1)
    t_auto = best_of(lambda: top_eigenpairs(world, K_TOP + 1), repeats=3)
    K = world.kernel_matrix().toarray()
    s = world.sqrt_p
    deflated = K - 3 * np.outer(s, s)
    t_dense = best_of(lambda: np.linalg.eigh(deflated), repeats=1)
    ref = np.linalg.eigvalsh(deflated)[::-1][: K_TOP + 1]
    agree = np.allclose(top_eigenpairs(world, K_TOP + 1).values, ref, atol=1e-8)
    print(row(f"n = 4000, nnz = {world.Pi.nnz}, top-{K_TOP + 1} centred, auto ({backend})", t_auto))
    print(row("same matrix, dense numpy.linalg.eigh (baseline)", t_dense))
    print(f"auto vs dense: {t_dense / t_auto:.0f}x faster (target {TARGET_RATIO:.0f}x), eigenvalues agree: {agree}")


def interleaved(fns: dict, repeats: int) -> dict:
    """Wall times of each function, run in turn (round-robin) so that a change in the machine's load hits all."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def large() -> None:
    big = random_world(BIG_N, degree=8, rng=1)
    m = K_TOP
    ncv = min(big.n, max(2 * m + 1, 20 + m))  # what the sparse backend uses for m pairs
    v0 = np.random.default_rng(0).standard_normal(big.n)  # the start vector of rng=None
    Kbig = big.kernel_matrix()
    old = naive_deflated(big)
    x = v0.copy()
    one = {"prhsim": best_of(lambda: spectrum.centred_operator(big).matvec(x), repeats=50),
           "csr": best_of(lambda: Kbig @ x, repeats=50),
           "raw": best_of(lambda: spla.aslinearoperator(Kbig).matvec(x), repeats=50),
           "old": best_of(lambda: old.matvec(x), repeats=50)}

    def prhsim_threads(threads, fn=lambda: top_eigenpairs(big, m, backend="sparse")):
        def run():
            saved = basis.SOLVER_BLAS_THREADS
            basis.SOLVER_BLAS_THREADS = threads
            try:
                return fn()
            finally:
                basis.SOLVER_BLAS_THREADS = saved
        return run

    def raw(op, k):
        counted = Counted(spla.aslinearoperator(op))
        spla.eigsh(counted, k=k, which="LA", v0=v0, tol=EIGSH_TOL, ncv=ncv, maxiter=big.n * 20)
        return counted.count

    label = f"n = {BIG_N}, nnz = {big.Pi.nnz}, top-{m} centred"
    rows = {
        f"{label}, prhsim (K − 3ssᵀ, 1 BLAS thread)": (prhsim_threads(1), lambda: prhsim_matvecs(big, m), "prhsim"),
        "same, prhsim with SOLVER_BLAS_THREADS = None (default threads)": (
            prhsim_threads(None), prhsim_threads(None, lambda: prhsim_matvecs(big, m)), "prhsim"),
        f"same K, raw eigsh k = {m + 1} un-deflated, default threads (baseline)": (
            lambda: spla.eigsh(Kbig, k=m + 1, which="LA", v0=v0, tol=EIGSH_TOL, ncv=ncv, maxiter=big.n * 20),
            lambda: raw(Kbig, m + 1), "csr"),
        f"same K, eigsh k = {m} on the old np.outer deflation, default threads": (
            lambda: spla.eigsh(old, k=m, which="LA", v0=v0, tol=EIGSH_TOL, ncv=ncv, maxiter=big.n * 20),
            lambda: raw(old, m), "old"),
    }
    times = interleaved({name: fn for name, (fn, _, _) in rows.items()}, repeats=REPEATS)
    print(f"\n{REPEATS} interleaved runs each; best (median); matvecs x best single matvec; "
          "total/(matvecs x one) from the best run:")
    best = {}
    for name, (_, count, kind) in rows.items():
        t, med, matvecs = min(times[name]), float(np.median(times[name])), count()
        best[name] = (t, med)
        print(row(name, t) + f" ({med:6.3f})  {matvecs:4d} x {1e3 * one[kind]:5.3f} ms"
              f"  ratio {t / (matvecs * one[kind]):5.2f}")
    print(f"one matvec: csr {1e3 * one['csr']:.3f} ms, un-deflated operator {1e3 * one['raw']:.3f} ms, "
          f"prhsim's deflated {1e3 * one['prhsim']:.3f} ms, old deflated {1e3 * one['old']:.3f} ms")
    (ours, ours_med), (_, none_med), (base, base_med), (old_t, old_med) = best.values()
    print(f"prhsim vs raw eigsh (target <= 1): best {ours / base:.2f}, median {ours_med / base_med:.2f}; "
          f"vs the old deflation: best {old_t / ours:.1f}x, median {old_med / ours_med:.1f}x faster")


if __name__ == "__main__":
    main()
