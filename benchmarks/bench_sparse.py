"""Automatic eigen-backend on sparse worlds against dense numpy.linalg.eigh (target: 10x at n = 4000).

    python benchmarks/bench_sparse.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

from prhsim.jepa import choose_backend, top_eigenpairs  # noqa: E402
from prhsim.worlds import random_world  # noqa: E402

K_TOP = 16
TARGET_RATIO = 10.0


def main() -> None:
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
    big = random_world(100_000, degree=8, rng=1)
    t_big = best_of(lambda: top_eigenpairs(big, K_TOP + 1), repeats=1)
    print(row(f"n = 100000, nnz = {big.Pi.nnz}, top-{K_TOP + 1} centred, auto ({choose_backend(big, K_TOP + 1)})", t_big))


if __name__ == "__main__":
    main()
