"""Mutual k-nearest neighbours (docs/theory.md §10): prhsim's tiled mutual_knn against the dense computation.

Time: N = 10^4 samples, d = 768, k = 10, float32 numpy. The reference is written
from the usual description: normalise, a dense N x N similarity matrix for each
side, a full argsort of every row, the top k after removing self, dense N x N
boolean masks for each side, intersected. Beside it, prhsim's ``mutual_knn`` as
it runs by default (the screen with a proven error bound and an exact re-rank:
bf16 rows and products where the CPU has bf16 matrix units, float32 products
truncated to bf16 keys on other CPUs; prhsim/metrics/_knn_screen.py), the
screen at each width forced (the float32 width is what a CPU without bf16
matrix units runs), and with ``screen=False`` (exact float32 tiles, each pair of row blocks
multiplied once, partial selection), both without an N x N array; and the floors
of any method that forms the similarities: one N x N x d product in float32
(numpy and torch) and in bf16 (torch; prhsim needs about one in all: half a
product per side). Target: at least 10x faster than the reference.

Peak memory: ``mutual_knn`` at N = 10^5, d = 768 (float32) in a fresh
subprocess started with ``MALLOC_MMAP_THRESHOLD_=65536`` (freed arrays go back
to the system at once): the peak of the memory numpy allocates during the call
on top of its inputs (tracemalloc; torch's tensors, such as the screen's bf16
copy and tiles, are not traced), the peak resident set the call adds (the
high-water mark reset through ``/proc/self/clear_refs`` just before it, where
Linux allows), and the whole process's resident-set peak during the call
(inputs, interpreter and libraries included; not ``ru_maxrss``, which after
fork and exec also counts the parent's memory). Target: under 2 GB (the dense reference would need
40 GB for one similarity matrix). ``--memory-n N`` runs the memory part at
another N and prints the extrapolation to 10^5.

    python benchmarks/bench_knn.py [--memory-n N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

from prhsim._budget import format_bytes  # noqa: E402
from prhsim.metrics import _knn_screen  # noqa: E402
from prhsim.metrics._knn import mutual_knn  # noqa: E402

N, D, K = 10_000, 768, 10
N_MEMORY = 100_000
REPEATS = 5
TARGET_SPEEDUP = 10.0
TARGET_MEMORY = 2e9


def inputs(n: int, d: int = D, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two float32 views of a shared 32-dimensional latent (so the score is neither 0 nor 1).

    The noise is added in row chunks, so making them needs no N x d temporary.
    """
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 32), dtype=np.float32)
    views = []
    for _ in range(2):
        x = z @ rng.standard_normal((32, d), dtype=np.float32)
        for r0 in range(0, n, 8192):
            x[r0:r0 + 8192] += 2.0 * rng.standard_normal((min(8192, n - r0), d), dtype=np.float32)
        views.append(x)
    return views[0], views[1]


def reference(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """Mutual kNN from its usual description: dense similarities, full argsort, dense masks."""

    def knn(x: np.ndarray) -> np.ndarray:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        s = x @ x.T
        np.fill_diagonal(s, -np.inf)  # remove self
        return np.argsort(-s, axis=1)[:, :k]

    ka, kb = knn(a), knn(b)
    n = a.shape[0]
    rows = np.arange(n)[:, None]
    mask_a = np.zeros((n, n), dtype=bool)
    mask_b = np.zeros((n, n), dtype=bool)
    mask_a[rows, ka] = True
    mask_b[rows, kb] = True
    return float((mask_a & mask_b).sum(axis=1).mean() / k)


def _status(key: str) -> int:
    """A field of /proc/self/status in bytes (Linux)."""
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def _child(n: int) -> None:
    """Subprocess mode: one mutual_knn at N = n; prints its peak memory and time as JSON."""
    a, b = inputs(n)
    # first-call allocations (torch's import and thread pools, caches) outside the measurement
    mutual_knn(a[:2000], b[:2000], K, screen=_knn_screen.wanted(a, K) or None)
    try:  # reset the resident-set high-water mark, so VmHWM below is the peak during the call
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        rss_before = _status("VmRSS")
    except OSError:
        rss_before = None
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    score = mutual_knn(a, b, K)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    hwm = None if rss_before is None else _status("VmHWM")
    print(json.dumps({"n": n, "peak": peak, "inputs": a.nbytes + b.nbytes, "rss_before": rss_before,
                      "rss_peak": hwm, "seconds": seconds, "score": score}))


def memory(n: int) -> dict | None:
    """The child's report; glibc then returns every freed array of 64 kB or more to the system at once."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    result = subprocess.run([sys.executable, __file__, "--child", str(n)], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-n", type=int, default=N_MEMORY, help="N of the peak-memory run (default 10^5)")
    args = parser.parse_args()

    a, b = inputs(N)
    screened = _knn_screen.wanted(a, K)
    ours = mutual_knn(a, b, K)
    exact = mutual_knn(a, b, K, screen=False)
    theirs = reference(a, b, K)
    def at_width(width: str) -> float:
        _knn_screen.WIDTH = width
        try:
            return mutual_knn(a, b, K, screen=True)
        finally:
            _knn_screen.WIDTH = None

    widths = {width: at_width(width) for width in ("bf16", "float32")}
    runs = {"reference": lambda: reference(a, b, K), "prhsim": lambda: mutual_knn(a, b, K),
            "exact": lambda: mutual_knn(a, b, K, screen=False), "bf16": lambda: at_width("bf16"),
            "float32": lambda: at_width("float32")}
    times = dict.fromkeys(runs, float("inf"))
    for _ in range(REPEATS):  # interleaved: the machine is shared and noisy
        for name, run in runs.items():
            times[name] = min(times[name], best_of(run, repeats=1))
    x = a / np.linalg.norm(a, axis=1, keepdims=True)
    y = x.copy()  # x @ x.T alone would be numpy's symmetric product (syrk): half the multiply-adds
    floors = {"numpy float32": best_of(lambda: x @ y.T, repeats=REPEATS)}
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None:
        xt = torch.from_numpy(x)
        xb = xt.to(torch.bfloat16)
        yt, yb = xt.clone(), xb.clone()
        floors["torch float32"] = best_of(lambda: xt @ yt.T, repeats=REPEATS)
        floors["torch bf16"] = best_of(lambda: xb @ yb.T, repeats=REPEATS)

    print(f"mutual {K}-NN, N = {N}, d = {D}, float32 numpy, best of {REPEATS} "
          f"(torch {torch.get_num_threads() if torch else '-'} threads)")
    print(row("reference: dense N x N similarities, full argsort, dense masks", times["reference"]))
    default = f"{_knn_screen.width(a)} screen + exact re-rank" if screened else "exact tiles"
    print(row(f"prhsim mutual_knn, default ({default})", times["prhsim"]))
    print(row("prhsim mutual_knn, screen at the bf16 width (bf16 rows and products)", times["bf16"]))
    print(row("prhsim mutual_knn, screen at the float32 width (CPUs without bf16 units)", times["float32"]))
    print(row("prhsim mutual_knn, screen=False (exact float32 tiles)", times["exact"]))
    for name, seconds in floors.items():
        print(row(f"floor: one N x N x d product in {name} (x @ yᵀ)", seconds))
    same = ours == exact == theirs == widths["bf16"] == widths["float32"]
    print(f"scores: prhsim {ours:.6f}, bf16 width {widths['bf16']:.6f}, float32 width {widths['float32']:.6f}, "
          f"exact tiles {exact:.6f}, reference {theirs:.6f} ({'equal' if same else 'DIFFERENT'})")
    speedup = times["reference"] / times["prhsim"]
    floor32, floor16 = floors["numpy float32"], floors.get("torch bf16", float("nan"))
    print(f"prhsim vs reference: {speedup:.1f}x faster (target {TARGET_SPEEDUP:.0f}x); bf16 width: "
          f"{times['reference'] / times['bf16']:.1f}x, float32 width: {times['reference'] / times['float32']:.1f}x, "
          f"exact tiles: {times['reference'] / times['exact']:.1f}x")
    print(f"  in products: reference = {times['reference'] / floor32:.2f} float32 floors; bf16 width = "
          f"{times['bf16'] / floor16:.2f} bf16 floors, float32 width = {times['float32'] / floor32:.2f} float32 "
          f"floors, exact tiles = {times['exact'] / floor32:.2f} float32 floors")

    result = memory(args.memory_n)
    if result is None:
        print("peak memory: n/a (the subprocess failed)")
        return
    n = result["n"]
    print(f"mutual_knn at N = {n}, d = {D}, float32: {result['seconds']:.1f} s, score {result['score']:.4f}")
    if result["rss_peak"] is None:
        resident = "resident set n/a (the high-water mark cannot be reset here)"
    else:
        resident = (f"{format_bytes(result['rss_peak'] - result['rss_before'])} (resident set); whole process "
                    f"peak {format_bytes(result['rss_peak'])} during the call, of which the inputs a and b are "
                    f"{format_bytes(result['inputs'])} (plus the interpreter and libraries)")
    print(f"  peak memory added by the call: {format_bytes(result['peak'])} (tracemalloc), {resident}; "
          f"target under {format_bytes(TARGET_MEMORY)}")
    if n != N_MEMORY:
        # the normalised and bf16 copies grow with N·d, the neighbour lists with N·k; a tile does not grow
        scale = N_MEMORY / n
        added = max(result["peak"], 0 if result["rss_peak"] is None else result["rss_peak"] - result["rss_before"])
        print(f"  EXTRAPOLATED to N = {N_MEMORY}: peak added at most about {format_bytes(added * scale)} "
              f"(linear in N; the tiles do not grow), time about {result['seconds'] * scale**2:.0f} s (N²)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(int(sys.argv[2]))
    else:
        main()
