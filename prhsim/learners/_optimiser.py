"""The one optimiser of every SGD learner: its validated record and its scanned step loop.

Every learner of this package (the tables and MLPs of :func:`prhsim.learners.train`, the
text learners, the caption decoder) takes optimiser steps the same way. With
``method="adamw"`` (every learner's default) the gradient is clipped to global norm
``clip``, then AdamW (decoupled weight decay ``weight_decay``) steps with a learning rate
that rises linearly from 0 to ``lr`` over the first ``round(warmup · steps)`` steps and
decays along a cosine to ``end_lr · lr`` at ``steps`` (docs/learning.md). With
``method="precond"`` (tables on exact data, :func:`prhsim.learners.train`) the loss's
gradient is first preconditioned (docs/theory.md §1.5), then heavy-ball SGD steps with
the constant step ``lr`` and momentum ``momentum``, unclipped. :class:`Optimiser` is that
record, checked once; :func:`scan_steps` is the loop, one ``lax.scan`` of
``value_and_grad`` → (precondition) → update → apply, which each learner ``jit``s (and
``vmap``s over its seeds) around its own loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np


def positive_int(name: str, value: Any) -> int:
    """``value`` as an int, or a one-line ValueError naming ``name`` unless it is a positive integer."""
    try:
        ok = not isinstance(value, bool) and int(value) == value and value >= 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


#: The optimiser's methods: clipped AdamW on a warmup-cosine schedule, or heavy-ball SGD on a preconditioned gradient.
Method = Literal["adamw", "precond"]


@dataclass(frozen=True, kw_only=True)
class Optimiser:
    """Clipped AdamW with linear warmup and cosine decay, or preconditioned heavy-ball SGD (validated; hashable).

    Attributes:
        steps: optimiser steps (the schedule's length; a learner that stops on convergence
            takes it as its budget).
        lr: peak learning rate (``precond``: the constant step η).
        warmup: fraction of the steps spent in the linear warmup from 0 to ``lr`` (adamw).
        end_lr: the cosine decay ends at ``end_lr · lr`` (adamw).
        weight_decay: AdamW's decoupled weight decay (0: the objective alone).
        clip: ``clip_by_global_norm`` threshold (adamw).
        method: "adamw", or "precond": heavy-ball SGD on the preconditioned gradient (module docstring).
        momentum: the heavy-ball momentum β of ``precond``, in [0, 1) (adamw: 0).

    Every learner's config is an Optimiser with its own fields after these
    (:class:`prhsim.learners.TrainConfig`, :class:`~prhsim.learners.TextConfig`,
    :class:`~prhsim.learners.DecoderConfig`), so the six are declared and checked here alone;
    every field of these records is keyword-only.

    Example:
        >>> Optimiser(steps=100, lr=0.1, warmup=0.05).warmup_steps
        5
    """

    steps: int = 1000
    lr: float = 1e-2
    warmup: float = 0.05
    end_lr: float = 0.0
    weight_decay: float = 0.0
    clip: float = 1.0
    method: Method = "adamw"
    momentum: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", positive_int("steps", self.steps))
        if self.method not in ("adamw", "precond"):
            raise ValueError(f"method must be 'adamw' or 'precond', got {self.method!r}")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum must lie in [0, 1), got {self.momentum!r}")
        if self.method == "adamw" and self.momentum:
            raise ValueError("momentum is the heavy-ball momentum of method='precond'; AdamW keeps its own moments")
        for name in ("lr", "clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        for name in ("warmup", "end_lr"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {getattr(self, name)!r}")
        if self.warmup_steps >= self.steps:
            raise ValueError(f"warmup must leave steps for the cosine decay: warmup {self.warmup} of {self.steps} steps")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be non-negative, got {self.weight_decay!r}")
        if self.method == "precond" and self.weight_decay:
            raise ValueError("weight_decay is AdamW's; method='precond' steps on the objective alone")
        for name in ("lr", "warmup", "end_lr", "weight_decay", "clip", "momentum"):
            object.__setattr__(self, name, float(getattr(self, name)))

    @classmethod
    def of(cls, config: Any) -> "Optimiser":
        """The optimiser alone of a learner's config (any record with the six fields): a cache key."""
        return cls(steps=config.steps, lr=config.lr, warmup=config.warmup, end_lr=config.end_lr,
                   weight_decay=config.weight_decay, clip=config.clip, method=config.method,
                   momentum=config.momentum)

    @property
    def warmup_steps(self) -> int:
        return int(round(self.warmup * self.steps))

    def rate(self, t: int) -> float:
        """The schedule's learning rate at step t, as optax's ``warmup_cosine_decay_schedule`` computes it
        (the twin of :meth:`build`'s schedule for a loop outside optax, such as the torch learner);
        ``precond``'s step is ``lr`` at every t.

        With a warmup, optax's value is float32 even under ``jax_enable_x64``: the warmup line divides
        the int32 step count in float32, and joining it with the (weakly typed) cosine keeps float32.
        The same rounding here keeps two loops on one trajectory (otherwise they part by ~1e-8).
        """
        if self.method == "precond":
            return self.lr
        warmup = self.warmup_steps
        peak, end = self.lr, self.end_lr * self.lr
        if t < warmup:
            frac = np.float32(1) - np.float32(min(max(t, 0), warmup)) / np.float32(warmup)
            return float(np.float32(0.0 - peak) * frac + np.float32(peak))
        decay = float(self.steps - warmup)
        alpha = 0.0 if peak == 0.0 else end / peak
        cosine = 0.5 * (1 + math.cos(math.pi * min(float(t - warmup), decay) / decay))
        value = peak * ((1 - alpha) * cosine + alpha)
        return float(np.float32(value)) if warmup > 0 else value

    def build(self):
        """The optax transformation: ``clip_by_global_norm(clip)`` then AdamW on the warmup-cosine schedule
        (``precond``: SGD with constant step ``lr`` and heavy-ball momentum, on the preconditioned gradient)."""
        import optax

        if self.method == "precond":
            return optax.sgd(self.lr, momentum=self.momentum or None)

        schedule = optax.warmup_cosine_decay_schedule(
            init_value=0.0, peak_value=self.lr, warmup_steps=self.warmup_steps, decay_steps=self.steps,
            end_value=self.end_lr * self.lr)
        return optax.chain(optax.clip_by_global_norm(self.clip), optax.adamw(schedule, weight_decay=self.weight_decay))


def scan_steps(loss: Callable[..., Any], opt: Any,
               precondition: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """``run(params, state, chunk, *shared) -> (params, state, values)``: one ``lax.scan`` of optimiser steps.

    Step ``t`` of the scan takes ``loss(params, chunk[t], *shared)``'s value and gradient in
    ``params``, maps the gradient through ``precondition(grads, params, *shared)`` when given,
    then ``opt``'s update; ``values`` holds each step's loss (before its update).
    Not jitted: the caller ``jit``s (and ``vmap``s) it with its own axes.
    """
    import jax
    import optax

    def one_step(carry: Any, step: Any, shared: tuple[Any, ...]) -> tuple[Any, Any]:
        params, state = carry
        value, grads = jax.value_and_grad(loss)(params, step, *shared)
        if precondition is not None:
            grads = precondition(grads, params, *shared)
        updates, state = opt.update(grads, state, params)
        return (optax.apply_updates(params, updates), state), value

    def run(params: Any, state: Any, chunk: Any, *shared: Any) -> tuple[Any, Any, Any]:
        (params, state), values = jax.lax.scan(lambda c, s: one_step(c, s, shared), (params, state), chunk)
        return params, state, values

    return run
