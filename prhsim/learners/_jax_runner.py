"""The pieces of the JAX learner: the optimiser and the jitted, seed-vmapped loop.

The losses are :func:`prhsim.learners._losses.make_loss` (shared with the torch loop; what each objective
computes is stated in its record, :mod:`prhsim.learners._objectives`) called on JAX arrays.

The loop: the learners' one optimiser and step loop (:class:`prhsim.learners._optimiser.Optimiser`,
:func:`~prhsim.learners._optimiser.scan_steps`: clipped AdamW on a warmup-cosine schedule, or
heavy-ball SGD on the covariance-preconditioned gradient of a table,
:func:`prhsim.learners._losses.covariance_precondition`; one ``lax.scan`` over a chunk of steps), ``vmap`` over the seeds (params, optimiser
state, data and directions stacked on a leading seed axis; every seed clips its
own gradient), ``jit`` over the whole; compiled runners are cached per
configuration, so equal shapes never compile twice.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from prhsim.learners import _losses as losses
from prhsim.learners._encoders import mlp_apply, tabular_apply
from prhsim.learners._optimiser import Optimiser, scan_steps
from prhsim.objectives import Convention
from prhsim.learners._losses import Data, SGDObjective
from prhsim.learners._objectives import objective_record


@dataclass(frozen=True)
class Spec:
    """Everything that fixes the compiled loop (hashable: runners are cached on it)."""

    objective: SGDObjective
    data: Data
    encoder: Literal["tabular", "mlp"]
    centred: bool
    convention: Convention
    optimiser: Optimiser
    factor_shape: tuple[int, ...] | None = None
    dims: Literal["sum", "mean"] = "sum"
    rendered: bool = False


def make_loss(spec: Spec):
    """``loss(params, step_data, shared) -> scalar`` for one seed, on JAX arrays."""
    apply = tabular_apply if spec.encoder == "tabular" else mlp_apply
    return losses.make_loss(spec.objective, spec.data, centred=spec.centred, convention=spec.convention,
                            apply=apply, factor_shape=spec.factor_shape, dims=spec.dims, rendered=spec.rendered)


class Runner(NamedTuple):
    """The compiled pieces for one :class:`Spec` (all vmapped over a leading seed axis)."""

    init_state: Any  # params -> optimiser state
    run: Any  # (params, state, chunk_data, shared) -> (params, state, losses (S, L))
    loss: Any  # (params, step_data, shared) -> (S,)
    embed: Any  # (params, inputs) -> (S, n, k)


def step_axes(spec: Spec) -> dict[str, int]:
    """vmap axes of the per-step data: the step index is shared, sampled pairs and (for an objective whose steps
    carry them) directions are per seed."""
    axes = {"t": None}
    if spec.data == "minibatch":
        axes.update(x=0, x2=0) if spec.rendered else axes.update(z=0, z2=0)
    if objective_record(spec.objective).directions:
        axes["dirs"] = 0
    return axes


@functools.lru_cache(maxsize=64)
def runner(spec: Spec) -> Runner:
    """Build (once per spec) the jitted, seed-vmapped loop; JAX compiles it once per input shapes."""
    import jax

    loss = make_loss(spec)
    opt = spec.optimiser.build()
    precondition = losses.covariance_precondition(spec.centred) if spec.optimiser.method == "precond" else None
    run = scan_steps(loss, opt, precondition)  # run(params, state, chunk, shared)
    axes = step_axes(spec)
    apply = tabular_apply if spec.encoder == "tabular" else mlp_apply
    return Runner(
        init_state=jax.jit(jax.vmap(opt.init)),
        run=jax.jit(jax.vmap(run, in_axes=(0, 0, axes, None))),
        loss=jax.jit(jax.vmap(loss, in_axes=(0, axes, None))),
        embed=jax.jit(jax.vmap(apply, in_axes=(0, None))),
    )
