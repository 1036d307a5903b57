"""The sample-efficiency sweep's cost: the text learner's step against the one it replaced, the predicted curves, the map.

On the sweep's default world (gridscene 4x4, 2 objects, 2 shapes, 2 colours; k = 6), good views and next-token
prediction, the default learner settings (batch 512, hidden 128), ``--steps`` steps (default 300):

* baseline: the step as it was (the first layer a product with the one-hot of (position, token), five seeds under
  ``vmap``), written out here;
* prhsim: ``train_text`` as it is (the first layer gathered, its gradient one segment sum; seeds one after another),
  on the same records;

and the predicted curves of one world (the linear class fitted exactly on every budget and draw of the
sample-efficiency sweep's default grid, no training; target 10 s), on the default world and on the map's, with the
exact 10-NN search selecting each similarity tile's top 10 by partitioning whole rows (baseline) and by a
block-maximum bound, with a descent over distinct values where ties crowd the top (prhsim); the scores must agree.
With ``--full`` it also runs the default
``prhsim sweep sample-efficiency`` (target 120 s; 366 s before this change) and the default ``prhsim sweep
sample-ratio`` (a 5 x 5 map; target 180 s) and prints their wall times beside the targets.

    python benchmarks/bench_sample_efficiency.py [--steps 300] [--full]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

from prhsim.experiments._caption_alignment import caption_target  # noqa: E402
from prhsim.experiments._caption_prediction import OneCaptionScorer, nested_scores  # noqa: E402
from prhsim.experiments.sweeps._sample_efficiency import DEFAULT_BUDGETS, draw_records  # noqa: E402
from prhsim.learners import TextConfig, train_text  # noqa: E402
from prhsim._rng import TEXT_PAIRS  # noqa: E402
from prhsim.learners._text_learners import draw_steps  # noqa: E402
from prhsim.metrics import _knn_search  # noqa: E402
from prhsim.worlds import CaptionStyle, SpanLaw, caption_law, gridscene  # noqa: E402

SEEDS = (0, 1, 2, 3, 4)
K = 6
TARGETS = {"sweep": 120.0, "map": 180.0, "prediction": 10.0}
BEFORE_SWEEP_S = 366.0


def baseline_trainer(law, task: str, config: TextConfig):
    """The step as it was: the one-hot product as first layer, seeds under vmap, one compiled chunk loop."""
    import jax
    import jax.numpy as jnp

    from prhsim.learners._encoders import mlp_apply
    from prhsim.learners._optimiser import Optimiser, scan_steps
    from prhsim.learners._text_learners import _initial_params
    from prhsim.objectives import next_token_cross_entropy, whitened_invariance

    n_ids = law.vocab_size + 1

    def apply(params, ids):
        x = jax.nn.one_hot(ids, n_ids, dtype=jnp.float32).reshape(*ids.shape[:-1], ids.shape[-1] * n_ids)
        return mlp_apply(params, x)

    if task == "ntp":
        def loss(params, step):
            return next_token_cross_entropy(apply(params["encoder"], step["x"]), params["out"], step["y"],
                                            params["bias"])
    else:
        def loss(params, step):
            return whitened_invariance(apply(params, step["x"]), apply(params, step["y"]))
    opt = Optimiser.of(config).build()
    run = jax.jit(jax.vmap(scan_steps(loss, opt)))
    init = jax.jit(jax.vmap(opt.init))
    params = _initial_params(law, K, config, SEEDS)

    def train(records):
        p, state = params, init(params)
        gens = [np.random.default_rng([s, TEXT_PAIRS]) for s in SEEDS]
        for first in range(0, config.steps, config.log_every):
            count = min(config.log_every, config.steps - first)
            data = [draw_steps(r, law, config, count, g) for r, g in zip(records, gens)]
            chunk = {name: jnp.asarray(np.stack([d[name] for d in data])) for name in data[0]}
            p, state, values = run(p, state, chunk)
        jax.block_until_ready(values)

    return train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--full", action="store_true", help="also time the default sweep and the default map")
    args = parser.parse_args()
    scene = gridscene(4, objects=2, shapes=2, colours=2)
    law = caption_law(scene)
    print(f"gridscene 4x4, 2 objects: k = {K}, {args.steps} steps of 512, {len(SEEDS)} seeds")
    for task in ("good", "ntp"):
        config = TextConfig.for_task(task, steps=args.steps, batch_size=512, lr=1e-2, hidden=(128,), min_span=9,
                                     log_every=min(250, args.steps))
        records = [law.sample_pairs(scene.world, 3000, rng=s) if task == "good" else law.sample(3000, 1, rng=s)
                   for s in SEEDS]
        baseline = baseline_trainer(law, task, config)
        baseline(records)  # compiles
        train_text(law, records, K, config, seeds=SEEDS)  # compiles
        before = best_of(lambda: baseline(records), repeats=2)
        now = best_of(lambda: train_text(law, records, K, config, seeds=SEEDS), repeats=2)
        print(row(f"{task}: the step as it was (one-hot product, vmap; baseline)", before))
        print(row(f"{task}: train_text (gathered first layer, one seed at a time; prhsim)", now))
        per = now / (args.steps * len(SEEDS)) * 1e3
        print(f"{task}: {before / now:.2f}x faster; {per:.2f} ms a seed-step")
    worlds = (("the default world, 4,096 states", scene, None, "auto"),
              ("the map's world, 1,296 states (a synonym per word)", gridscene(3, objects=2, shapes=2, colours=2,
                                                                             dependence=0.7),
               CaptionStyle(wording=("word_synonyms",)), 10))
    for label, world, style, k in worlds:
        target = caption_target(world, k=k, style=style, rng=np.random.default_rng([0, 0]))

        def curves() -> list:
            out = []
            for t, task in enumerate(("good", "bad", "ntp")):
                scorer = OneCaptionScorer(target, task)
                for s in range(len(SEEDS)):
                    records = draw_records(world, target, task, DEFAULT_BUDGETS[-1], "world",
                                           np.random.default_rng([t, s]))
                    out.append(nested_scores(target, task, SpanLaw(9), target.k, records, DEFAULT_BUDGETS,
                                             scorer=scorer))
            return out

        blocks = _knn_search.BLOCK_MAX_BLOCKS
        _knn_search.BLOCK_MAX_BLOCKS = 10**9  # every tile too narrow for the bounds: the partition of whole rows
        start = time.perf_counter()
        before_scores = curves()
        before = time.perf_counter() - start
        _knn_search.BLOCK_MAX_BLOCKS = blocks
        start = time.perf_counter()
        scores = curves()
        predicted = time.perf_counter() - start
        if not all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(before_scores, scores)):
            raise AssertionError("the two neighbour selections disagree")
        what = f"predicted curves ({len(DEFAULT_BUDGETS)} budgets x {len(SEEDS)} draws), {label}"
        print(row(f"{what}: partitioned rows (baseline)", before))
        print(row(f"{what}: bound and descent (prhsim)", predicted))
        print(f"{before / predicted:.2f}x faster; target {TARGETS['prediction']:.0f} s: "
              f"{'met' if predicted <= TARGETS['prediction'] else 'NOT met'}")
    if args.full:
        for name, key, extra in (("sample-efficiency", "sweep", []), ("sample-ratio", "map", [])):
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "prhsim", "sweep", name, "--out", str(Path(tmp) / "out"), "-q",
                                *extra], check=True)
                wall = time.perf_counter() - start
            print(row(f"default prhsim sweep {name} (wall)", wall))
            goal = TARGETS[key]
            tail = f"; before this change {BEFORE_SWEEP_S:.0f} s" if key == "sweep" else ""
            print(f"target {goal:.0f} s: {'met' if wall <= goal else 'NOT met'} ({wall / goal:.2f} of it{tail})")


if __name__ == "__main__":
    main()
