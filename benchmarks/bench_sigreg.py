"""SIGReg forward + backward in torch (docs/theory.md §7): prhsim's sigreg_torch against the direct evaluation.

N = 1024 embeddings of dimension D = 512, M = 1024 directions, 17 knots on [0, 3],
float32 on the CPU. The baseline is SIGReg written from its description: project,
take cos and sin of the (N, M, 17) phases, average over N, weight, and let torch
autograd do the backward pass. Beside it, prhsim's ``sigreg_torch`` (the knot
recurrence and the closed-form backward, O(N·M) memory) and, for reference,
the array-API ``prhsim.objectives.sigreg`` on torch tensors (the same direct
evaluation). Targets: sigreg_torch at least 2x faster than the baseline and at
most 1/4 of its peak memory.

Time: the best of several forward + backward passes, the variants interleaved
round by round (the machine is shared and noisy), with torch's default number
of threads and again on one thread (with several threads, every parallel
operation waits for all of them, and a core held by another process makes that
wait a scheduler time slice: the one-thread figures are the steadier comparison
on a shared machine).

Peak memory: each variant runs in a fresh subprocess (Linux) started with
``MALLOC_MMAP_THRESHOLD_=65536``, so that glibc serves every array of 64 kB or
more with its own mmap and returns it to the system when freed (with the
default, dynamic threshold, freed arrays may stay in the heap and hide the next
peak). The subprocess imports torch and prhsim, allocates the inputs and runs
one forward + backward pass (thread pools, lazy initialisation), then resets the
resident-set high-water mark (``echo 5 > /proc/self/clear_refs``), runs a second
pass and reports ``VmHWM − VmRSS`` read from ``/proc/self/status`` just before
it: the peak of the resident memory the pass added on top of the inputs. Where
the mark cannot be reset, the subprocess skips the warm-up and measures the first
pass (that figure includes the one-time initialisation).

    python benchmarks/bench_sigreg.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

from prhsim._budget import format_bytes  # noqa: E402
from prhsim.objectives import draw_directions, sigreg
from prhsim.objectives._sigreg_torch import sigreg_torch  # noqa: E402

N, D, M, KNOTS, T_MAX = 1024, 512, 1024, 17, 3.0
REPEATS = 5
TARGET_SPEEDUP = 2.0
TARGET_MEMORY = 0.25

# The quadrature from its description: 17 knots on [0, 3], trapezoid weights doubled (1 at the ends, 2 inside).
_T = np.linspace(0.0, T_MAX, KNOTS)
_W = (_T[1] - _T[0]) * np.exp(-_T**2 / 2) * np.r_[1.0, np.full(KNOTS - 2, 2.0), 1.0]


def baseline(E: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """SIGReg from its description: the (N, M, K) phases, their cos and sin, the weighted sum."""
    t = torch.as_tensor(_T, dtype=E.dtype)
    w = torch.as_tensor(_W, dtype=E.dtype)
    phase = (E @ A)[..., None] * t  # (N, M, K)
    C, S = torch.cos(phase).mean(dim=0), torch.sin(phase).mean(dim=0)
    T = E.shape[0] * torch.sum(w * ((C - torch.exp(-t * t / 2)) ** 2 + S**2), dim=-1)
    return T.mean()


VARIANTS = {
    "baseline": baseline,
    "sigreg_torch": sigreg_torch,
    "array-API sigreg": sigreg,
}
LABELS = {
    "baseline": "direct cos/sin of (N, M, 17) phases, torch autograd (baseline)",
    "sigreg_torch": "prhsim sigreg_torch (knot recurrence, closed-form backward)",
    "array-API sigreg": "prhsim.objectives.sigreg on torch tensors (array API, autograd)",
}


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    E = torch.randn(N, D, generator=torch.Generator().manual_seed(0)).requires_grad_()
    A = torch.as_tensor(draw_directions(D, M, seed=0), dtype=torch.float32)
    return E, A


def step(fn, E: torch.Tensor, A: torch.Tensor) -> tuple[float, torch.Tensor]:
    """One forward + backward pass; the value and the gradient with respect to the embeddings."""
    E.grad = None
    value = fn(E, A)
    value.backward()
    return float(value.detach()), E.grad


def _status(key: str) -> int:
    """A field of /proc/self/status in bytes."""
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def _child(name: str) -> None:
    """Subprocess mode: print the peak resident memory one pass of variant ``name`` adds (see the docstring)."""
    E, A = inputs()
    fn = VARIANTS[name]
    try:
        step(fn, E, A)
        E.grad = None
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        warm = True
    except OSError:
        warm = False
    before = _status("VmRSS")
    step(fn, E, A)
    print(_status("VmHWM") - before, int(warm))


def peak_memory(name: str) -> tuple[int, bool] | None:
    """(bytes, measured after a warm-up) for one variant, from a fresh subprocess; None where unavailable."""
    if not Path("/proc/self/status").exists():
        return None
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    result = subprocess.run([sys.executable, __file__, "--memory", name], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        return None
    peak, warm = result.stdout.split()
    return int(peak), bool(int(warm))


def timings(E: torch.Tensor, A: torch.Tensor) -> dict[str, float]:
    """Best forward + backward time of each variant, the variants interleaved round by round."""
    times = {name: float("inf") for name in VARIANTS}
    for _ in range(REPEATS):
        for name, fn in VARIANTS.items():
            times[name] = min(times[name], best_of(lambda: step(fn, E, A), repeats=1))
    return times


def main() -> None:
    E, A = inputs()
    results = {name: step(fn, E, A) for name, fn in VARIANTS.items()}  # warm-up, and the values to compare
    threads = torch.get_num_threads()
    times = timings(E, A)
    memory = {name: peak_memory(name) for name in VARIANTS}

    print(f"SIGReg forward + backward, N = {N}, D = {D}, M = {M}, {KNOTS} knots, float32, "
          f"{threads} threads, best of {REPEATS}")
    for name in VARIANTS:
        mem = memory[name]
        extra = "peak memory n/a" if mem is None else f"peak memory {format_bytes(mem[0])}" + (
            "" if mem[1] else " (first pass, includes initialisation)")
        print(row(LABELS[name], times[name]) + f"   {extra}")
    ref_value, ref_grad = results["baseline"]
    for name in ("sigreg_torch", "array-API sigreg"):
        value, grad = results[name]
        err_v = abs(value - ref_value) / abs(ref_value)
        err_g = float((grad - ref_grad).abs().max() / ref_grad.abs().max())
        print(f"{name} vs baseline: value {value:.6f} vs {ref_value:.6f} (relative difference {err_v:.1e}), "
              f"gradient max difference {err_g:.1e} of its max")
    speedup = times["baseline"] / times["sigreg_torch"]
    line = f"sigreg_torch vs baseline: {speedup:.1f}x faster (target {TARGET_SPEEDUP:.0f}x)"
    if memory["baseline"] and memory["sigreg_torch"]:
        fraction = memory["sigreg_torch"][0] / memory["baseline"][0]
        line += f", {fraction:.3f} of its peak memory (target at most {TARGET_MEMORY:.2f})"
    print(line)
    print(f"sigreg_torch vs array-API sigreg: {times['array-API sigreg'] / times['sigreg_torch']:.1f}x faster")
    if threads > 1:  # the same on one thread: no OpenMP regions to wait for when another process holds a core
        torch.set_num_threads(1)
        single = timings(E, A)
        torch.set_num_threads(threads)
        print("the same on 1 thread:")
        for name in VARIANTS:
            print(row(LABELS[name], single[name]))
        print(f"sigreg_torch vs baseline on 1 thread: {single['baseline'] / single['sigreg_torch']:.1f}x faster")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--memory":
        _child(sys.argv[2])
    else:
        main()
