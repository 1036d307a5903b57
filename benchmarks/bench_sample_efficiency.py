"""The sample-efficiency sweep's cost: three seeds under ``vmap`` against three runs of one, and one compile for every budget.

On the sweep's default world (gridscene 4x4, 2 objects, 2 shapes, 2 colours; k = 6), good views,
the default learner settings, ``--steps`` steps (default 500, a sixth of the sweep's):

* baseline: ``train_text`` once per seed, one after another (three calls of one seed);
* prhsim: one ``train_text`` call with the three seeds under ``vmap``;
* compile reuse: the first call at a new budget (records of another size, same shapes of the
  step data) against a repeat call, which shows the loop compiles once for every budget.

With ``--full`` it also runs the default ``prhsim sweep sample-efficiency`` (about 6 minutes) and
prints its wall time beside the target, 600 s on a 2-core machine.

Measured (2 shared CPU cores, float32, 500 steps): three seeds under vmap 3.7 s against 3.3 s one
after another (0.90x: on this CPU XLA runs the seed-batched products no faster than three
separate ones, so vmap buys one compiled loop and one host loop, not speed); the first call 7.9 s
with its compile, a call at another budget 3.6 s (no recompilation). The default sweep: 366 s wall
(target 600 s: met).

    python benchmarks/bench_sample_efficiency.py [--steps 500] [--full]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

from prhsim.learners import TextConfig, train_text
from prhsim.worlds import caption_law, gridscene  # noqa: E402

SEEDS = (0, 1, 2)
K = 6
TARGET_S = 600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--full", action="store_true", help="also time the default sweep (about 6 minutes)")
    args = parser.parse_args()
    scene = gridscene(4, objects=2, shapes=2, colours=2)
    law = caption_law(scene)
    config = TextConfig(views="good", steps=args.steps, batch_size=512, lr=1e-2, hidden=(128,), min_span=9)
    records = {n: [law.sample_pairs(scene.world, n, rng=s) for s in SEEDS] for n in (1000, 3000)}

    start = time.perf_counter()
    train_text(law, records[1000], K, config, seeds=SEEDS)  # compiles the three-seed loop
    first = time.perf_counter() - start
    start = time.perf_counter()
    train_text(law, records[3000], K, config, seeds=SEEDS)  # another budget: no new compile
    other_budget = time.perf_counter() - start
    train_text(law, records[1000][:1], K, config, seeds=SEEDS[:1])  # compiles the one-seed loop
    vmapped = best_of(lambda: train_text(law, records[1000], K, config, seeds=SEEDS), repeats=2)
    one_by_one = best_of(lambda: [train_text(law, [r], K, config, seeds=(s,)) for r, s in zip(records[1000], SEEDS)],
                         repeats=2)
    print(f"gridscene 4x4, 2 objects: good views, k = {K}, {args.steps} steps of {config.batch_size}, "
          f"{len(SEEDS)} seeds")
    print(row("three seeds, one after another (baseline)", one_by_one))
    print(row("three seeds under vmap (prhsim)", vmapped))
    print(f"vmap vs one after another: {one_by_one / vmapped:.2f}x faster")
    print(row("first call, 1,000 records (compile included)", first))
    print(row("next call, 3,000 records (the compiled loop reused)", other_budget))
    if args.full:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "prhsim", "sweep", "sample-efficiency", "--out",
                            str(Path(tmp) / "se"), "-q"], check=True)
            wall = time.perf_counter() - start
        print(row("default prhsim sweep sample-efficiency (wall)", wall))
        print(f"target {TARGET_S:.0f} s: {'met' if wall <= TARGET_S else 'NOT met'} ({wall / TARGET_S:.2f} of it)")


if __name__ == "__main__":
    main()
