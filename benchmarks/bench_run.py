"""End-to-end time of `prhsim run --world gridscene --modalities 3`, start-up included (target: 10 s).

Runs the installed console script as a subprocess, beside a bare `python -c "import prhsim.cli"`
to show how much of the time is interpreter and import start-up.

    python benchmarks/bench_run.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

TARGET_S = 10.0


def main() -> None:
    prhsim = shutil.which("prhsim") or str(Path(sys.executable).parent / "prhsim")
    out = Path(tempfile.mkdtemp(prefix="prhsim-bench-"))

    def full_run() -> None:
        subprocess.run([prhsim, "run", "--world", "gridscene", "--modalities", "3", "--out", str(out),
                        "--overwrite"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start_up() -> None:
        subprocess.run([sys.executable, "-c", "import prhsim.cli, prhsim.experiments"], check=True)

    run_s = best_of(full_run, repeats=3)
    boot_s = best_of(start_up, repeats=3)
    print(row("import start-up (python -c 'import prhsim.cli')", boot_s))
    print(row("prhsim run --world gridscene --modalities 3 (best of 3)", run_s))
    print(f"{'target':<58s} {TARGET_S:9.3f} s   run / target = {run_s / TARGET_S:.2f}")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
