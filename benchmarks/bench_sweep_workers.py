"""Sweeps on local workers and on Ray against the same sweep in one process (equal numbers; the time is not).

For each sweep below, ``prhsim sweep NAME`` in this process (the baseline) and with ``--workers 2`` (two spawned
worker processes, one BLAS thread and JAX on one core each), through the library's executor
(:func:`prhsim.experiments.sweeps.run_sweep`, what the command runs), printing both wall times and the ratio, and
checking that the two results are equal field by field (timings aside). Then Ray's start-up overhead: the tiny
bad-view sweep in this process against ``--executor ray --workers 2`` (a local Ray started for the sweep), when the
ray extra is installed.

The sweeps: the default bad-view (25 cells of a few milliseconds: the workers' start-up dominates), the default
kernel-mismatch (8 worlds of 30 states: the same), kernel-mismatch at n = 600 (8 cells of similar cost), the default
pair-free (19 cells, the samples axis costing more per cell), and sample-efficiency with ``--quick``'s budgets
(``--full``: its default, about 6-13 minutes in one process).

    python benchmarks/bench_sweep_workers.py [--quick] [--full]
"""

from __future__ import annotations

import argparse
import time

from prhsim.config import resolve_settings
from prhsim.experiments.sweeps import SWEEPS, run_sweep

CASES = {
    "bad-view (default, 25 cells)": ("bad-view", []),
    "kernel-mismatch (default, 8 cells)": ("kernel-mismatch", []),
    "kernel-mismatch n = 600 (8 cells)": ("kernel-mismatch", ["n=600"]),
    "pair-free (default, 19 cells)": ("pair-free", []),
    "sample-efficiency budgets 100..3000, 2 seeds (15 cells)": (
        "sample-efficiency", ["budgets=[100, 300, 1000, 3000]", "n_seeds=2", "threads=1"]),
}
QUICK = {"pair-free": ["n_seeds=6"], "sample-efficiency": ["steps=600"]}
FULL = {"sample-efficiency (default, 21 cells)": ("sample-efficiency", ["threads=1"])}


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _timed(name, settings, **executor):
    """Wall seconds, the result without timings, the cells, and the cores this process kept busy (its CPU seconds,
    every thread's, over the wall seconds: above 1 where JAX's or the BLAS's threads already share the work)."""
    start, cpu = time.perf_counter(), time.process_time()
    run = run_sweep(SWEEPS[name], settings, **executor)
    wall = time.perf_counter() - start
    return wall, _untimed(run.result.model_dump(mode="json")), len(run.cells), (time.process_time() - cpu) / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds (pair-free) and steps (sample-efficiency)")
    parser.add_argument("--full", action="store_true", help="also the default sample-efficiency sweep")
    args = parser.parse_args()
    cases = {**CASES, **(FULL if args.full else {})}
    print(f"{'sweep':<58s} {'cells':>5s} {'in-process':>11s} {'cores':>6s} {'2 workers':>10s} {'speed-up':>9s}  equal")
    for label, (name, sets) in cases.items():
        sets = [*sets, *(QUICK.get(name, []) if args.quick else [])]
        settings = resolve_settings(SWEEPS[name].settings_model(), {}, sets)
        here, result_here, cells, cores = _timed(name, settings)
        there, result_there, _, _ = _timed(name, settings, workers=2)
        equal = result_here == result_there
        print(f"{label:<58s} {cells:5d} {here:10.2f}s {cores:6.2f} {there:9.2f}s {here / there:8.2f}x  {equal}")
    print("cores: the in-process run's CPU seconds over its wall seconds (its JAX and BLAS threads); the speed-up "
          "of 2 workers on 2 cores is about 2 / cores at best")
    try:
        import ray  # noqa: F401
    except ImportError:
        print("Ray: not installed (pip install 'prhsim[ray]')")
        return
    settings = resolve_settings(SWEEPS["bad-view"].settings_model(), {}, ["eps_grid=[0.1, 0.5, 1.0]"])
    here, result_here, _, cores = _timed("bad-view", settings)
    there, result_there, _, _ = _timed("bad-view", settings, executor="ray", workers=2)
    print(f"{'bad-view, 3 cells: in-process vs a local Ray started for it':<58s} {3:5d} {here:10.2f}s {cores:6.2f} "
          f"{there:9.2f}s "
          f"{here / there:8.2f}x  {result_here == result_there}   (Ray's start-up: {there - here:.1f} s)")


if __name__ == "__main__":
    main()
