"""SGD learners to the closed form: today's defaults (stopping on convergence, the preconditioned heavy ball)
beside the earlier defaults (AdamW at lr 0.1 for a fixed budget of steps), in one process each case.

For each documented `prhsim run --learner` case, both settings run as fresh processes
(`python -m prhsim run ... --no-figures --json`); the table prints the largest s_Θ to the closed form over every
modality and seed, the step the seeds stopped at, the convergence verdicts, and the CPU time (user +
system, from wait4), with the ratio of CPU times.

Targets (docs/learning.md): ring(64) at k = 2 reaches s_Θ < 1e-3 in under 10 s of CPU time; the default
gridscene with two seeds reaches s_Θ < 1e-3 on every modality in under 60 s (the earlier default took
6 minutes for one seed and is run here only with --slow-baseline).

    python benchmarks/bench_convergence.py [--slow-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: The earlier defaults: AdamW on the budget's cosine schedule, every step taken.
BEFORE = ["--set", "training.method=adamw", "--set", "training.stop=false"]

CASES = {
    "ring(64), k = 2, whiten": ["--world", "ring", "--n", "64", "--k", "2", "--learner", "whiten"],
    "ring(64), --learner all --steps 1000 (prhsim run --help)": ["--world", "ring", "--n", "64", "--learner", "all",
                                                                "--steps", "1000"],
    "ring(16), 2 modalities, --learner all (README)": ["--world", "ring", "--n", "16", "--modalities", "2",
                                                       "--learner", "all"],
    "default gridscene, whiten, 2 seeds": ["--learner", "whiten", "--seeds", "2"],
}
#: Cases whose earlier default runs for minutes: their baseline needs --slow-baseline.
SLOW = {"default gridscene, whiten, 2 seeds"}


def run(args: list[str]) -> tuple[dict, float]:
    """One `prhsim run` in a fresh process: its JSON results and its CPU time."""
    out = Path(tempfile.mkdtemp(prefix="bench-conv-"))
    try:
        cmd = [sys.executable, "-m", "prhsim", "run", *args, "--no-figures", "--json", "--out", str(out / "run")]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        text = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed")
        return json.loads(text), usage.ru_utime + usage.ru_stime
    finally:
        shutil.rmtree(out, ignore_errors=True)


def summary(result: dict) -> tuple[float, str, str]:
    """(largest s_Θ of hard whitening, the steps it stopped at, its convergence verdicts)."""
    whiten = next(s for s in result["learned"] if s["learner"] == "whiten")
    s_theta = max(v for m in whiten["modalities"] for v in m["s_theta"] if v is not None)
    stops = sorted({t for m in whiten["modalities"] for t in m["stopped_at"]})
    verdicts = sorted({c["verdict"] for c in result["checks"] if c["claim"].startswith("SGD reaches")})
    return s_theta, f"{stops[0]}-{stops[-1]}" if len(stops) > 1 else str(stops[0]), "/".join(verdicts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow-baseline", action="store_true", help="also run the minutes-long earlier defaults")
    args = parser.parse_args()
    print(f"{'case':58s} {'settings':8s} {'max s_Theta':>11s} {'stopped at':>11s} {'verdicts':>18s} {'CPU s':>7s}")
    for name, case in CASES.items():
        rows = []
        for label, extra in (("now", []), ("before", BEFORE)):
            if label == "before" and name in SLOW and not args.slow_baseline:
                print(f"{name:58s} {label:8s} {'(run with --slow-baseline)':>50s}")
                continue
            result, cpu = run(case + extra)
            s_theta, stops, verdicts = summary(result)
            rows.append(cpu)
            print(f"{name:58s} {label:8s} {s_theta:11.2e} {stops:>11s} {verdicts:>18s} {cpu:7.1f}")
        if len(rows) == 2:
            print(f"{'':58s} {'ratio':8s} {'':>11s} {'':>11s} {'':>18s} {rows[1] / rows[0]:6.1f}x")


if __name__ == "__main__":
    main()
