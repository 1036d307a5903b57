"""The bias of minibatch hard whitening against the batch size: the s_Θ to the closed form where the loss
plateaus, beside the exact (full-batch) loss on the same world, in one process.

Batch whitening is a nonlinear function of the batch, so its expected loss is not the population loss and
SGD on it stops at a distance from the optimum that shrinks with B. Each batch size trains four seeds
(AdamW, lr 3e-2 on a cosine schedule, a budget of 3000 steps, stopped on a plateau of the loss once the step has fallen to a tenth) on path(8), k = 2, float64; the exact
loss (the preconditioned heavy ball) is the baseline that reaches rounding.

    python benchmarks/bench_minibatch_bias.py
"""

from __future__ import annotations

import time

import jax

jax.config.update("jax_enable_x64", True)

from prhsim.learners import TrainConfig, train  # noqa: E402
from prhsim.optima import whitened_optimum  # noqa: E402
from prhsim.worlds import path  # noqa: E402

WORLD, K = path(8), 2
SEEDS = (0, 1, 2, 3)


def main() -> None:
    opt = whitened_optimum(WORLD, K)
    print(f"{'data':24s} {'median s_Theta':>15s} {'range':>22s} {'stopped at':>12s} {'seconds':>8s}")
    start = time.perf_counter()
    exact = train(WORLD, K, TrainConfig.preconditioned(opt.eigenvalues, steps=2000, log_every=20, tol=1e-8),
                  seeds=SEEDS, reference=opt)
    d = sorted(exact.distance[:, -1])
    print(f"{'exact (precond)':24s} {d[1]:15.2e} {f'[{d[0]:.1e}, {d[-1]:.1e}]':>22s} "
          f"{int(max(exact.stop.at)):12d} {time.perf_counter() - start:8.1f}")
    for batch in (64, 256, 1024):
        start = time.perf_counter()
        result = train(WORLD, K, TrainConfig(data="minibatch", batch_size=batch, steps=3000, lr=3e-2, log_every=100,
                                             tol=1e-4), seeds=SEEDS, reference=opt)
        d = sorted(result.distance[:, -1])
        median = (d[1] + d[2]) / 2
        print(f"{f'minibatch B = {batch}':24s} {median:15.2e} {f'[{d[0]:.1e}, {d[-1]:.1e}]':>22s} "
              f"{int(max(result.stop.at)):12d} {time.perf_counter() - start:8.1f}")


if __name__ == "__main__":
    main()
