"""The pieces of the JAX learners: the exact pair list of π, the batch losses, the optimiser and the jitted loop.

Losses (the objectives of this package, called on JAX arrays; nothing is re-implemented):

* ``whiten`` on a minibatch of B pairs ``(z_n, z'_n) ~ π``: the two views are
  embedded, pooled into one batch of 2B rows, whitened with that pooled batch's
  mean and covariance (:func:`prhsim.jepa.whiten`, 1/(2B) moments, centred unless
  ``centred=False``; one affine map for both views), split again and scored with
  :func:`prhsim.jepa.pairwise_invariance`: the batch estimate of
  ``E_π‖f̃(z) − f̃(z')‖²`` under the constraint ``E f̃ f̃ᵀ = I`` (docs/theory.md §1.1).
* ``whiten`` exact (full batch): every state is embedded, centred with the
  p-mean and whitened with the p-covariance (``whiten`` applied to the rows
  ``√(n p_z)·(f(z) − μ_p)`` uncentred, then divided by ``√(n p_z)``, so its 1/n
  moment is ``Cov_p``), and the loss is ``pairwise_invariance`` over the pair
  list of Π with each pair scaled by ``√(m π_i)`` (m pairs): exactly
  ``E_π‖f̃(z) − f̃(z')‖² = 2k − 2 tr(GᵀKG)``, no sampling noise. On a table its
  minimum is ``L* = 2 Σ_{i≤k} (1 − μ_i)`` (Ky Fan).
* ``sigreg`` on a minibatch: :func:`prhsim.jepa.lejepa_loss` of the (2, B, k)
  stack of the views (batch SIGReg ≈ B·EP, LeJEPA's N factor).
* ``sigreg`` exact: the invariance term is :func:`prhsim.jepa.invariance` on the
  scaled pair list (``E_π‖f(z) − f(z')‖² / 4``) and the regulariser is the
  population statistic :func:`prhsim.jepa.population_sigreg` (``mean_j EP(a_j)``
  without the factor N), combined with the same convention; in §7's terms the
  additive convention is ``(1/4)(E_π‖f − f'‖² + 4λ·EP)``, i.e. ``β = 4λ``.

The loop: ``optax.chain(clip_by_global_norm, adamw(warmup + cosine))``, one
``lax.scan`` over a chunk of steps, ``vmap`` over the seeds (params, optimiser
state, data and directions stacked on a leading seed axis; every seed clips its
own gradient), ``jit`` over the whole; compiled runners are cached per
configuration, so equal shapes never compile twice.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import scipy.sparse as sp

from prhsim._budget import ensure_fits
from prhsim.jepa._anticollapse import whiten
from prhsim.jepa._encoders_jax import mlp_apply, tabular_apply
from prhsim.jepa._invariance import invariance, pairwise_invariance
from prhsim.jepa._lejepa import Convention, lejepa_loss
from prhsim.jepa._population_sigreg import population_sigreg
from prhsim.worlds import World

Objective = Literal["whiten", "sigreg"]
Data = Literal["exact", "minibatch"]
#: Most pairs of an exact pair list (the loss gathers 2 x pairs x k embeddings every step).
MAX_PAIRS = 20_000_000
#: Bytes per listed pair: two int64 states, a weight, and two gathered k-vectors per feature.
PAIR_BYTES = 3 * 8


class PairList(NamedTuple):
    """The positive entries of Π: ``rows``, ``cols`` (int64) and weights ``pi`` (sum 1)."""

    rows: np.ndarray
    cols: np.ndarray
    pi: np.ndarray


def pair_list(world: World, *, max_pairs: int = MAX_PAIRS) -> PairList:
    """Every pair ``(z, z')`` with ``π(z, z') > 0`` and its weight (row-major states).

    A finite world lists its stored Π; a product world lists the Kronecker product
    of its factors' Π (``scipy.sparse.kron``, row-major as the world indexes). The
    count is the product of the factors' positive entries, refused above
    ``max_pairs`` before anything is formed.
    """
    factors = world.factors
    counts = [int(np.count_nonzero(f.Pi.data if sp.issparse(f.Pi) else f.Pi)) for f in factors]
    total = math.prod(counts)
    if total > max_pairs:
        raise ValueError(f"the exact pair list of this world has {total:,} pairs (limit {max_pairs:,}); "
                         "use data='minibatch' or a smaller world")
    ensure_fits(3.0 * PAIR_BYTES * total, f"the exact pair list of {total:,} pairs", "use data='minibatch'")
    Pi = sp.coo_array(factors[0].Pi)
    for f in factors[1:]:
        Pi = sp.kron(Pi, sp.coo_array(f.Pi), format="coo")
    Pi = sp.coo_array(Pi)
    keep = Pi.data > 0
    pi = Pi.data[keep]
    return PairList(Pi.row[keep].astype(np.int64), Pi.col[keep].astype(np.int64), pi / pi.sum())


@dataclass(frozen=True)
class Spec:
    """Everything that fixes the compiled loop (hashable: runners are cached on it)."""

    objective: Objective
    data: Data
    encoder: Literal["tabular", "mlp"]
    centred: bool
    convention: Convention
    lr: float
    steps: int
    warmup: int
    end_lr: float
    weight_decay: float
    clip: float


def combine(inv: Any, reg: Any, lam: Any, convention: Convention) -> Any:
    """``λ·reg + (1 − λ)·inv`` ("lejepa") or ``inv + λ·reg`` ("additive"), as :func:`prhsim.jepa.lejepa_loss`."""
    return lam * reg + (1.0 - lam) * inv if convention == "lejepa" else inv + lam * reg


def make_loss(spec: Spec):
    """``loss(params, step_data, shared) -> scalar`` for one seed (see the module docstring)."""
    import jax.numpy as jnp

    apply = tabular_apply if spec.encoder == "tabular" else mlp_apply

    def exact(params: Any, step: Any, shared: Any) -> Any:
        E = apply(params, shared["inputs"])  # (n, k): every state
        rows, cols, scale = shared["rows"], shared["cols"], shared["scale"][:, None]  # scale = √(m π)
        if spec.objective == "sigreg":
            inv = invariance(jnp.stack([scale * E[rows], scale * E[cols]]))
            reg = population_sigreg(E, shared["p"], step["dirs"])
            return combine(inv, reg, shared["lam"], spec.convention)
        root = shared["root"][:, None]  # √(n p)
        X = E - shared["p"] @ E if spec.centred else E
        W = whiten(root * X, centred=False) / root  # (E − μ_p) Cov_p^{-1/2}
        return pairwise_invariance(scale * W[rows], scale * W[cols])

    def minibatch(params: Any, step: Any, shared: Any) -> Any:
        inputs = shared["inputs"]
        a, b = apply(params, inputs[step["z"]]), apply(params, inputs[step["z2"]])
        if spec.objective == "sigreg":
            return lejepa_loss(jnp.stack([a, b]), step["dirs"], lam=shared["lam"],
                               convention=spec.convention)
        W = whiten(jnp.concatenate([a, b]), centred=spec.centred)  # pooled 2B rows, one affine map
        half = a.shape[0]
        return pairwise_invariance(W[:half], W[half:])

    return exact if spec.data == "exact" else minibatch


def make_optimizer(spec: Spec):
    """``clip_by_global_norm(clip)`` then AdamW with linear warmup to ``lr`` and cosine decay to ``end_lr·lr``."""
    import optax

    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=spec.lr, warmup_steps=spec.warmup, decay_steps=spec.steps,
        end_value=spec.end_lr * spec.lr)
    return optax.chain(optax.clip_by_global_norm(spec.clip), optax.adamw(schedule, weight_decay=spec.weight_decay))


class Runner(NamedTuple):
    """The compiled pieces for one :class:`Spec` (all vmapped over a leading seed axis)."""

    init_state: Any  # params -> optimiser state
    run: Any  # (params, state, chunk_data, shared) -> (params, state, losses (S, L))
    loss: Any  # (params, step_data, shared) -> (S,)
    embed: Any  # (params, inputs) -> (S, n, k)


def step_axes(spec: Spec) -> dict[str, int]:
    """vmap axes of the per-step data: the step index is shared, sampled pairs and directions are per seed."""
    axes = {"t": None}
    if spec.data == "minibatch":
        axes.update(z=0, z2=0)
    if spec.objective == "sigreg":
        axes["dirs"] = 0
    return axes


@functools.lru_cache(maxsize=64)
def runner(spec: Spec) -> Runner:
    """Build (once per spec) the jitted, seed-vmapped loop; JAX compiles it once per input shapes."""
    import jax
    import optax

    loss = make_loss(spec)
    opt = make_optimizer(spec)

    def one_step(carry: Any, step: Any, shared: Any) -> tuple[Any, Any]:
        params, state = carry
        value, grads = jax.value_and_grad(loss)(params, step, shared)
        updates, state = opt.update(grads, state, params)
        return (optax.apply_updates(params, updates), state), value

    def run(params: Any, state: Any, chunk: Any, shared: Any) -> tuple[Any, Any, Any]:
        (params, state), values = jax.lax.scan(lambda c, s: one_step(c, s, shared), (params, state), chunk)
        return params, state, values

    axes = step_axes(spec)
    apply = tabular_apply if spec.encoder == "tabular" else mlp_apply
    return Runner(
        init_state=jax.jit(jax.vmap(opt.init)),
        run=jax.jit(jax.vmap(run, in_axes=(0, 0, axes, None))),
        loss=jax.jit(jax.vmap(loss, in_axes=(0, axes, None))),
        embed=jax.jit(jax.vmap(apply, in_axes=(0, None))),
    )
