"""The injectivity check on gridscene (docs/theory.md §0): the old approach beside prhsim's.

The old approach is written here from its description: render every (z, n) state
(a uniform sample of 400,000 above that), in chunks of 65,536, view each rendered
row as one raw byte key, join the keys, sort them (stable argsort) and compare
neighbours. prhsim's ``injectivity_check`` decides pixels and caption from the
renders of their declared parts (one object's slot or clause at a time) and checks
symbolic, whose random affine map mixes the objects, with 64-bit keys (hashed
chunk by chunk, sorted, every shared key compared exactly). Also shown: prhsim's
generic hashed check forced on every modality (``by_parts=False``).

Worlds: the default gridscene (4x4 grid, 2 objects, 3 shapes, 3 colours: 20,736
states) and size 8 with 2 objects (331,776 states; pixels 1.3 M modal states of
3,072 bytes, so both generic checks sample 400,000 of them, while the parts decide
all). Times are the best of several repeats (the machine is shared and noisy), each on
freshly built modalities, so the parts' tables are built inside every timed check. Both
approaches call the same renderers (gridscene's, now assembled from their parts, which
render pixels about twice as fast as before; the old approach's times here are
therefore lower than they were with the old renderers).

    python benchmarks/bench_injectivity.py [--repeats R]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from prhsim.worlds import gridscene, injectivity_check

LIMIT = 400_000
CHUNK = 65_536


def old_check(modality, n_states: int, limit: int = LIMIT, rng: int = 0, max_report: int = 10):
    """The old approach: raw byte keys of every render, joined, sorted, neighbours compared."""
    total = n_states * modality.n_nuisance
    if total <= limit:
        states = np.arange(total, dtype=np.int64)
    else:
        states = np.sort(np.random.default_rng(rng).choice(total, size=limit, replace=False))
    keys = []
    for i in range(0, states.size, CHUNK):
        rows = np.ascontiguousarray(modality.render_states(states[i:i + CHUNK]))
        rows = rows.reshape(rows.shape[0], -1)
        keys.append(rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel())
    keys = np.concatenate(keys)
    order = np.argsort(keys, kind="stable")
    same = keys[order[1:]] == keys[order[:-1]]
    return [(states[order[j]], states[order[j + 1]]) for j in np.flatnonzero(same)[:max_report]], int(states.size)


def best_fresh(scene, which: int, check, repeats: int) -> float:
    """Best time of ``check(modality)`` over fresh modalities (built untimed), so that nothing a
    modality caches on first use (gridscene's part tables) is reused between timed calls."""
    best = float("inf")
    for _ in range(repeats):
        m = scene.modalities(rng=0)[which]
        start = time.perf_counter()
        check(m)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per entry (best kept)")
    args = parser.parse_args()
    print(f"{'world':<22s} {'modality':<9s} {'old: sorted raw keys':>27s} {'new: injectivity_check':>31s} "
          f"{'ratio':>7s} {'generic hashed':>15s}")
    for label, scene in (("default (4x4, 2 obj)", gridscene()), ("size 8, 2 objects", gridscene(8, 2))):
        old_total = new_total = 0.0
        for which, m in enumerate(scene.modalities(rng=0)):
            collisions, old_checked = old_check(m, scene.n)
            assert not collisions, (m.name, collisions)
            report = injectivity_check(m, scene.n)
            assert report.injective, report
            old = best_fresh(scene, which, lambda m: old_check(m, scene.n), args.repeats)
            new = best_fresh(scene, which, lambda m: injectivity_check(m, scene.n), args.repeats)
            generic = best_fresh(scene, which, lambda m: injectivity_check(m, scene.n, by_parts=False), args.repeats)
            old_total, new_total = old_total + old, new_total + new
            print(f"{label:<22s} {m.name:<9s} {old:8.3f} s ({old_checked:>9,} rendered) "
                  f"{new:8.4f} s ({report.checked:>10,} {report.method:<10s}) {old / new:6.0f}x {generic:11.3f} s")
        print(f"{label:<22s} {'all three':<9s} {old_total:8.3f} s {'':20s} {new_total:8.4f} s {'':24s} "
              f"{old_total / new_total:6.0f}x")


if __name__ == "__main__":
    main()
