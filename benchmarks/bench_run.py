"""End-to-end `prhsim run`, start-up included: CPU time, wall time, peak memory and the phase split.

Each case runs the installed console script in a fresh process (best of a few runs; the
machine is shared and noisy) and reads the child's CPU time (user + system) and peak
resident memory from ``wait4``. Beside it, a bare ``python -c "import prhsim.cli,
prhsim.experiments"`` (the import floor) and, for the default run, the same run with
``--tables`` (the full-table path the factor-space closed form replaces). The phase split
comes from the run's own progress lines (``prhsim run [   0.9 s] stage``).

Targets: the default run under 1.0 s of CPU time without figures and under 1.5 s with
them; gridscene size 8 with 2 objects under 5 s and 1 GB; a 3-object gridscene (size 4,
about 3 million base states, modal worlds up to 24 million) under 30 s and 2 GB.

    python benchmarks/bench_run.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

STAGE = re.compile(r"^prhsim run \[\s*([0-9.]+) s\] (.*)$")


@dataclass(frozen=True)
class Measured:
    wall: float
    cpu: float
    peak_bytes: int
    stages: list[tuple[str, float]]


def measure(args: list[str]) -> Measured:
    """Run ``args`` once; CPU time and peak RSS of the child from wait4, stages from its stderr."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{err}")
    marks = [(m.group(2), float(m.group(1))) for m in map(STAGE.match, err.splitlines()) if m]
    stages = []
    for (name, t0), (_, t1) in zip(marks, marks[1:] + [("end", marks[-1][1] if marks else 0.0)]):
        stages.append((name, t1 - t0))
    return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, stages)


def best(args: list[str], repeats: int) -> Measured:
    runs = [measure(args) for _ in range(repeats)]
    return min(runs, key=lambda r: r.cpu)


def phases(m: Measured, top: int = 6) -> str:
    """The longest stages, merged by kind (the text before the first colon)."""
    merged: dict[str, float] = {}
    for name, seconds in m.stages:
        key = name.split(":")[0]
        merged[key] = merged.get(key, 0.0) + seconds
    parts = sorted(merged.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {v:.2f} s" for k, v in parts)


def line(label: str, m: Measured, cpu_target: float | None = None, memory_target: float | None = None) -> str:
    verdict = []
    if cpu_target is not None:
        verdict.append(f"CPU / target = {m.cpu / cpu_target:.2f}")
    if memory_target is not None:
        verdict.append(f"peak / target = {m.peak_bytes / memory_target:.2f}")
    return (f"{label:<52s} CPU {m.cpu:6.2f} s  wall {m.wall:6.2f} s  peak {m.peak_bytes / 1e9:5.2f} GB  "
            + "  ".join(verdict))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the default run and the import floor")
    opts = parser.parse_args()
    prhsim = shutil.which("prhsim") or str(Path(sys.executable).parent / "prhsim")
    out = Path(tempfile.mkdtemp(prefix="prhsim-bench-"))

    def run(*extra: str) -> list[str]:
        return [prhsim, "run", "--world", "gridscene", "--out", str(out / "run"), "--overwrite", *extra]

    if sys.flags.dont_write_bytecode:
        print("note: PYTHONDONTWRITEBYTECODE is set, so each process compiles prhsim's modules anew unless a cached "
              "copy is there (about 0.15 s of CPU a run on a 2-core machine); an installed prhsim has its bytecode")
    floor = best([sys.executable, "-c", "import prhsim.cli, prhsim.experiments"], 3)
    print(line("import floor (import prhsim.cli, prhsim.experiments)", floor))
    default = best(run("--modalities", "3", "--no-figures"), 3)
    print(line("prhsim run --modalities 3 --no-figures", default, cpu_target=1.0))
    print(f"{'':<52s} phases: {phases(default)}")
    figures = best(run("--modalities", "3"), 3)
    print(line("prhsim run --modalities 3 (figures)", figures, cpu_target=1.5))
    tables = best(run("--modalities", "3", "--no-figures", "--tables"), 1)
    print(line("  baseline: the same with --tables (full tables)", tables))
    print(f"{'':<52s} factor space / tables: CPU {default.cpu / tables.cpu:.2f}, "
          f"peak {default.peak_bytes / tables.peak_bytes:.2f}")
    if not opts.quick:
        big = best(run("--size", "8", "--modalities", "3", "--no-figures"), 1)
        print(line("gridscene size 8, 2 objects, --no-figures", big, cpu_target=5.0, memory_target=1e9))
        print(f"{'':<52s} phases: {phases(big)}")
        three = best(run("--objects", "3", "--modalities", "3", "--no-figures"), 1)
        print(line("gridscene size 4, 3 objects, --no-figures", three, cpu_target=30.0, memory_target=2e9))
        print(f"{'':<52s} phases: {phases(three)}")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
