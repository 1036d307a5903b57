"""`make bench` (the README's "Benchmarks") runs every script of benchmarks/, and names no script that is not there."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_bench_runs_every_benchmark_script():
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^bench:.*\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert target, "the Makefile has no bench target"
    named = re.findall(r"benchmarks/(bench_\w+\.py)", target.group(1))
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("bench_*.py"))
    assert sorted(named) == scripts
    assert len(named) == len(set(named)), "a script is run twice"
