"""SGD learners in JAX + optax for finite worlds: train an encoder on the objectives of this package (docs/theory.md §1.1, §7).

:func:`train` fits a table or an MLP (:mod:`prhsim.learners._encoders`) with the
hard-whitening objective (the one the theorem covers, docs/theory.md §1.1) or
LeJEPA's SIGReg objective (§7), on the exact pair law (full batch, no sampling
noise) or on minibatches of B pairs from :func:`prhsim.worlds.pair_sampler`, for
several seeds at once (``jax.vmap`` over the seed axis). What each objective
computes is stated in :mod:`prhsim.learners._train_jax`.

Randomness, per seed s (independent of how seeds are grouped and of ``log_every``):

* init: ``jax.random.key(s)``;
* minibatch pairs at step t: the (t+1)-th of consecutive ``pair_sampler(world).pairs(B, rng=gen)``
  calls on seed s's one generator ``gen = default_rng([s, SGD_PAIRS])`` (:mod:`prhsim._rng`) (the final loss, at step
  ``steps``, takes the next call's). They are drawn on the host in numpy, one chunk of
  ``log_every`` steps at a time (:meth:`prhsim.worlds.PairSampler.batches_for`: one
  ``gen.random`` call per seed and one alias-table lookup for all the seeds; the same pairs
  as the consecutive calls), the next chunk while the current one runs, and fed to one
  jitted ``lax.scan`` over each chunk;
* SIGReg directions at step t: ``draw_directions(k, M, seed=s, step=t)`` (numpy, outside
  jit, passed in with the chunk); with ``directions="fixed"`` step 0's for every step.

jax and optax are imported when :func:`train` runs, never at module import.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace
from typing import Any, Literal, Sequence

import numpy as np

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import SGD_EVAL, SGD_PAIRS, RngLike, check_rng
from prhsim.optima import Optimum
from prhsim.learners._encoders import (
    Encoder,
    RenderedInputs,
    mlp_encoder,
    observation_inputs,
    rendered_encoder,
    rendered_inputs,
    tabular_encoder,
)
from prhsim.objectives import LAMBDA, Convention
from prhsim.learners._learned import subspace_distance, trace_covariance
from prhsim.learners._learner import Representation
from prhsim.objectives import draw_directions
from prhsim.learners._convergence import (
    PLATEAU_LR_FRACTION,
    PLATEAU_PATIENCE,
    PLATEAU_STEPS,
    LawOperator,
    StopReport,
    heavy_ball,
    plateaued,
    residual_of,
)
from prhsim.learners._exact_law import FactorLaw, exact_law, exact_tables
from prhsim.learners._losses import Data, SGDObjective
from prhsim.learners._optimiser import Optimiser, positive_int
from prhsim.learners._train_jax import Spec, runner
from prhsim.optima import FEATURE_LIMIT
from prhsim.worlds import ModalWorld, PairSampler, World, pair_sampler
from prhsim.learners._objectives import OBJECTIVES, objective_record

#: States drawn from p (one sample for every seed) that a learner on rendered observations is evaluated on.
EVAL_SAMPLE = 16_384


@dataclass(frozen=True, kw_only=True)
class TrainConfig(Optimiser):
    """Hyperparameters of :func:`train` (validated on construction): an :class:`prhsim.learners.Optimiser`
    (steps, lr, warmup, end_lr, weight_decay, clip, checked there) and what the tables and MLPs add.

    Attributes:
        objective: a name of :data:`prhsim.learners._objectives.OBJECTIVES`: "whiten" (hard whitening,
            docs/theory.md §1.1) or "sigreg" (LeJEPA, §7).
        encoder: "tabular" (one vector per state) or "mlp" (on :func:`observation_inputs`).
        data: "exact" (every pair of Π, weighted by π) or "minibatch" (B sampled pairs per step).
        steps: optimiser steps.
        batch_size: B, pairs per minibatch step.
        lr: peak learning rate.
        warmup: fraction of the steps spent in the linear warmup from 0 to ``lr``.
        end_lr: the cosine decay ends at ``end_lr · lr``.
        weight_decay: AdamW's decoupled weight decay (0: the objective alone, as the theory states it).
        clip: ``clip_by_global_norm`` threshold, per seed.
        log_every: the loss (and the distance to a reference) is logged every this many steps.
        centred: whiten after centring (the centred optimum, §1.1); also the closed form compared against.
        lam: SIGReg weight λ (LeJEPA: 0.02).
        convention: "lejepa" ``λ·SIGReg + (1 − λ)·inv`` or "additive" ``inv + λ·SIGReg``.
        invariance_dims: SIGReg's invariance summed over the k coordinates ("sum") or averaged
            ("mean": LeJEPA's code, which makes the regulariser k times stronger at a given λ).
        num_directions: M, SIGReg's directions.
        directions: "resample" (new directions every step, LeJEPA) or "fixed" (step 0's throughout).
        hidden: the MLP's hidden widths.
        init_scale: standard deviation of the table's initial entries.
        collapse_tol: a seed is *collapsed* when ``tr Cov_p f < collapse_tol · k`` at the end.
        tol: stop on convergence (None: take every step of the budget ``steps``). Hard whitening
            on exact data stops a seed when the Davis–Kahan bound on its ``s_Θ`` to the optimum
            (:mod:`prhsim.learners._convergence`; with ``μ_{k+1}`` from ``train``'s ``spectrum`` or
            reference) is at most ``tol``, or, with no spectrum, when its residual ``r/√k`` is;
            every other objective or data mode when its loss plateaus (``plateau``).
        plateau: the relative change of the mean loss between two windows (whole logging chunks
            of at least :data:`~prhsim.learners._convergence.PLATEAU_STEPS` steps) below which (or
            within twice its standard error) a loss has plateaued, for
            :data:`~prhsim.learners._convergence.PLATEAU_PATIENCE` windows in a row.
        observations: the MLP's inputs as a table of every state ("table", :func:`observation_inputs`),
            or rendered batch by batch ("rendered", :func:`prhsim.learners._encoders.rendered_inputs`:
            minibatches of a modal world, with the features evaluated on a sample of
            :data:`EVAL_SAMPLE` states drawn from p); "auto": rendered above
            :data:`prhsim.optima.FEATURE_LIMIT` states.

    ``method="precond"`` (heavy-ball steps on the covariance-preconditioned gradient,
    docs/theory.md §1.5) trains a table on the exact whitened loss; :meth:`preconditioned` picks
    its step and momentum from the spectrum.
    """

    steps: int = 2000
    objective: SGDObjective = "whiten"
    encoder: Literal["tabular", "mlp"] = "tabular"
    data: Data = "exact"
    batch_size: int = 256
    log_every: int = 100
    centred: bool = True
    lam: float = LAMBDA
    convention: Convention = "lejepa"
    invariance_dims: Literal["sum", "mean"] = "sum"
    num_directions: int = 256
    directions: Literal["resample", "fixed"] = "resample"
    hidden: tuple[int, ...] = (128, 128)
    init_scale: float = 1.0
    collapse_tol: float = 1e-2
    tol: float | None = None
    plateau: float = 1e-5
    observations: Literal["auto", "table", "rendered"] = "auto"

    def __post_init__(self) -> None:
        for name, allowed in (("objective", tuple(OBJECTIVES)), ("encoder", ("tabular", "mlp")),
                              ("data", ("exact", "minibatch")), ("convention", ("lejepa", "additive")),
                              ("invariance_dims", ("sum", "mean")),
                              ("directions", ("resample", "fixed"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        super().__post_init__()  # steps, lr, warmup, end_lr, weight_decay, clip: checked once, for every learner
        for name in ("batch_size", "log_every", "num_directions"):
            positive_int(name, getattr(self, name))
        for name in ("init_scale", "collapse_tol"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if not self.lam >= 0:
            raise ValueError(f"lam must be non-negative, got {self.lam}")
        if self.convention == "lejepa" and self.lam >= 1:
            raise ValueError(f"lam must be below 1 in the lejepa convention (lam·SIGReg + (1 − lam)·inv), got {self.lam}")
        record = objective_record(self.objective)
        if self.data == "minibatch" and self.batch_size < record.min_batch:
            raise ValueError(f"the {self.objective} objective on a minibatch needs batch_size >= {record.min_batch}")
        if self.method == "precond" and not (self.encoder == "tabular" and record.eigen_residual
                                             and self.data == "exact"):
            raise ValueError("method='precond' preconditions a table on an exact loss whose gradient is the "
                             "eigen-residual: it needs encoder='tabular', data='exact' and such an objective "
                             f"({', '.join(o.name for o in OBJECTIVES.values() if o.eigen_residual)})")
        if self.observations not in ("auto", "table", "rendered"):
            raise ValueError(f"observations must be 'auto', 'table' or 'rendered', got {self.observations!r}")
        if self.observations == "rendered" and (self.encoder, self.data) != ("mlp", "minibatch"):
            raise ValueError("observations='rendered' feeds an MLP minibatch by minibatch: it needs encoder='mlp', "
                             "data='minibatch'")
        if self.tol is not None and not 0 < self.tol < 1:
            raise ValueError(f"tol must lie in (0, 1) (or be None: the whole budget), got {self.tol!r}")
        if not 0 < self.plateau < 1:
            raise ValueError(f"plateau must lie in (0, 1), got {self.plateau!r}")
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))

    @classmethod
    def preconditioned(cls, spectrum: Sequence[float] | None = None, **fields: Any) -> "TrainConfig":
        """An exact table trained by ``method="precond"``, its step η and momentum β from ``spectrum``.

        ``spectrum``: the eigenvalues ``μ_1 ≥ … ≥ μ_{k+1}`` of the world's pair operator (centred
        when the training is; e.g. an optimum's ``eigenvalues``); with them η, β are
        :func:`prhsim.learners._convergence.heavy_ball` of ``gap = μ_k − μ_{k+1}`` and
        ``spread = μ_1 + 1`` (every eigenvalue is at least −1); without, η = 1 and β = 0 (one
        step of subspace iteration per step). ``fields`` set any other field (an ``lr`` or
        ``momentum`` given there wins).
        """
        lr, momentum = 1.0, 0.0
        if spectrum is not None:
            mu = [float(v) for v in spectrum]
            if len(mu) >= 2 and mu[-2] - mu[-1] > 0:
                lr, momentum = heavy_ball(mu[-2] - mu[-1], mu[0] + 1.0)
        values = {"encoder": "tabular", "objective": "whiten", "data": "exact", "lr": lr, "momentum": momentum,
                  "warmup": 0.0, "method": "precond", **fields}
        return cls(**values)

    def spec(self, factor_shape: tuple[int, ...] | None = None, rendered: bool = False) -> Spec:
        """The compiled loop's key; ``factor_shape`` when the exact loss applies π factor by factor,
        ``rendered`` when the minibatches carry their inputs."""
        return Spec(self.objective, self.data, self.encoder, bool(self.centred), self.convention,
                    Optimiser.of(self), factor_shape, self.invariance_dims, rendered)

    def renders(self, world: World) -> bool:
        """Whether training on ``world`` renders the MLP's inputs batch by batch (see ``observations``)."""
        if self.observations == "rendered":
            return True
        return (self.observations == "auto" and (self.encoder, self.data) == ("mlp", "minibatch")
                and isinstance(world, ModalWorld) and world.n > FEATURE_LIMIT)


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` returns (arrays write-protected; the leading axis is the seed).

    Attributes:
        config: the hyperparameters.
        k: number of features.
        seeds: the seeds, in the order of the leading axis.
        params: the final parameters (a pytree of numpy arrays, leading axis = seed).
        features: ``f(z)`` of every state at the end, (S, n, k), or of the sampled ``states`` (S, M, k).
        logged: the logged steps (L,): 0, log_every, 2·log_every, …, steps (the last one is
            the final parameters); the loss at step t is that of the parameters after t updates.
        loss: the training loss at the logged steps, (S, L) (a minibatch loss on that step's batch).
        distance: ``s_Θ`` between the centred features and the reference's at the logged steps,
            (S, L), or None without a reference.
        trace_cov: ``tr Cov_p f`` at the end, (S,).
        collapsed: ``trace_cov < collapse_tol · k``, (S,): report collapse, not success.
        seconds: wall time of the whole call (compilation included).
        stop: how each seed stopped (:class:`prhsim.learners._convergence.StopReport`: converged,
            the step, the reason, the residual and its bound at the logged steps).
        states: None when ``features`` (and ``distance``, ``trace_cov``) cover every state; with
            rendered observations, the :data:`EVAL_SAMPLE` states drawn from p they were evaluated on
            (each state weighs 1/M there).
    """

    config: TrainConfig
    k: int
    seeds: tuple[int, ...]
    params: Any
    features: np.ndarray
    logged: np.ndarray
    loss: np.ndarray
    distance: np.ndarray | None
    trace_cov: np.ndarray
    collapsed: np.ndarray
    seconds: float
    stop: StopReport | None = None
    states: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("features", "logged", "loss", "distance", "trace_cov", "collapsed"):
            value = getattr(self, name)
            if value is not None:
                value.setflags(write=False)

    @property
    def any_collapsed(self) -> bool:
        return bool(np.any(self.collapsed))


def build_encoder(world: World, k: int, config: TrainConfig, inputs: np.ndarray | None = None) -> Encoder:
    """The encoder ``config`` asks for on ``world`` (an MLP sees ``inputs``, by default :func:`observation_inputs`)."""
    if config.encoder == "tabular":
        if inputs is not None:
            raise ValueError("inputs are read by the MLP encoder; the tabular encoder has none")
        return tabular_encoder(world.n, k, scale=config.init_scale)
    if inputs is None:
        inputs = observation_inputs(world)
    elif np.shape(inputs)[0] != world.n:
        raise ValueError(f"inputs must have one row per state ({world.n:,}), got shape {np.shape(inputs)}")
    return mlp_encoder(inputs, k, hidden=config.hidden)


def train(world: World, k: int, config: TrainConfig | None = None, *, seeds: Sequence[int] = (0,),
          reference: Optimum | None = None, init_params: Any = None, inputs: np.ndarray | None = None,
          spectrum: Sequence[float] | None = None, **overrides: Any) -> TrainResult:
    """Train an encoder of k features on ``world`` for every seed at once (see the module docstring).

    Args:
        world: a finite or product world (a modal world for an MLP on rendered observations).
        k: number of features, 1 ≤ k < n.
        config: hyperparameters; ``overrides`` replace its fields (``train(w, 2, steps=500)``).
        seeds: non-negative integer seeds, one trained encoder each (vmapped together).
        reference: a closed-form optimum of ``world`` with the same k; the ``s_Θ`` of the
            (centred, when ``reference.centred``) features to it is logged.
        init_params: start here instead of the seeded init: a pytree of the encoder's params
            stacked on a leading seed axis (e.g. ``TrainResult.params``; a table is ``{"table": (S, n, k)}``).
        inputs: the MLP's input of every state, (n, d), instead of :func:`observation_inputs`
            (e.g. the token one-hots of a span world, :func:`prhsim.learners.token_one_hot`).
        spectrum: the eigenvalues ``μ_1 ≥ … ≥ μ_{k+1}`` of the world's pair operator (centred when
            the training is): ``μ_{k+1}`` turns the residual into a bound on ``s_Θ`` (default: the
            reference's eigenvalues). Values only: no learner reads an eigenvector.

    Hard whitening on exact data logs the eigen-residual of every seed (and its bound) at the
    logged steps; with ``config.tol`` each seed stops on convergence (see :class:`TrainConfig`)
    and is frozen there while the others go on; the call ends when every seed has stopped.

    Raises:
        ValueError: on a bad argument, or when the loss or the parameters stop being finite:
            the message names the step and the seed.
    """
    import jax
    import jax.numpy as jnp

    start = time.perf_counter()
    config, seeds, k = check_request(world, k, config, seeds, reference, overrides)
    law = exact_law(world, k) if config.data == "exact" else None
    rendered = _rendered(world, config, inputs)
    spec = config.spec(law.shape if isinstance(law, FactorLaw) else None, rendered is not None)
    run = runner(spec)
    encoder = build_encoder(world, k, config, inputs) if rendered is None else \
        rendered_encoder(rendered, k, hidden=config.hidden)
    dtype = jnp.zeros(()).dtype  # float64 when jax_enable_x64, else float32
    shared: dict[str, Any] = {"inputs": jnp.asarray(encoder.inputs, dtype=None if encoder.kind == "tabular" else dtype),
                              "lam": jnp.asarray(config.lam, dtype=dtype)}
    if rendered is None:
        p = np.asarray(world.p)
        eval_states, eval_inputs = None, shared["inputs"]
    else:  # a sample of states drawn from p stands for every state (each weighs 1/M)
        eval_states = pair_sampler(world).pairs(EVAL_SAMPLE, rng=np.random.default_rng([SGD_EVAL]))[0]
        eval_inputs = jnp.asarray(rendered(eval_states), dtype=dtype)
        p = np.full(eval_states.size, 1.0 / eval_states.size)
    if law is not None:
        shared.update(jax.tree.map(lambda a: jnp.asarray(a) if a.dtype.kind == "i" else jnp.asarray(a, dtype=dtype),
                                   exact_tables(law)))
        shared.update(p=jnp.asarray(p, dtype=dtype), nominal_n=jnp.asarray(config.batch_size, dtype=dtype))
        sampler = None
    else:
        sampler = pair_sampler(world)
    gens = [np.random.default_rng([s, SGD_PAIRS]) for s in seeds] if sampler is not None else []
    directions = objective_record(config.objective).directions
    resample = config.directions == "resample"

    def host_data(steps: np.ndarray) -> dict[str, np.ndarray]:
        data: dict[str, np.ndarray] = {"t": steps}
        if sampler is not None:
            data["z"], data["z2"] = draw_pairs(sampler, config.batch_size, len(steps), gens)
            if rendered is not None:  # the observations of the drawn states, (S, L, B, d)
                data["x"], data["x2"] = rendered(data.pop("z")), rendered(data.pop("z2"))
        if directions:  # (S, L, k, M): step t's directions of each seed (step 0's when fixed)
            data["dirs"] = np.array([[draw_directions(k, config.num_directions, seed=s, step=int(t) if resample else 0)
                                      for t in steps] for s in seeds])
        return data

    def device_data(data: dict[str, np.ndarray]) -> dict[str, Any]:
        return {key: jnp.asarray(value, dtype=dtype if key in ("dirs", "x", "x2") else None)
                for key, value in data.items()}

    params = _initial_params(encoder, seeds, init_params, dtype)
    state = run.init_state(params)
    reference_F = None if reference is None else reference.features(eval_states)
    residual_rule = objective_record(config.objective).eigen_residual and law is not None
    watch = _Watch(config, k, p, LawOperator(law, world.n) if residual_rule else None,
                   _next_eigenvalue(spectrum, reference, k), len(seeds))
    logged, losses, distances = [], [], []
    chunks = [np.arange(first, min(config.steps, first + config.log_every))
              for first in range(0, config.steps, config.log_every)]
    final_step = np.array([config.steps])
    drawn = host_data(chunks[0])
    stop_step, features = config.steps, None
    for i, chunk in enumerate(chunks):
        if reference_F is not None or residual_rule:
            features = np.asarray(run.embed(params, eval_inputs), dtype=np.float64)
        if residual_rule:
            watch.residual_at(int(chunk[0]), features)
        if not watch.active.any():  # every seed stopped at this step: it is the last one logged
            stop_step = int(chunk[0])
            break
        if features is not None and reference_F is not None:
            distances.append(_distances(features, p, reference_F, reference.centred))
        watch.keep_measures()
        features = None  # the parameters move on: what was embedded here is not the end's
        frozen = not watch.active.all()
        before = (params, state)
        params, state, values = run.run(params, state, device_data(drawn), shared)
        if frozen:  # a stopped seed keeps its parameters: its result does not depend on the other seeds
            params, state = _keep(watch.active, (params, state), before)
        # the next chunk's data (after the last chunk, the final step's) is drawn while this chunk runs
        drawn = host_data(chunks[i + 1] if i + 1 < len(chunks) else final_step)
        values = np.asarray(values)
        _check_finite(values[watch.active], chunk, tuple(np.asarray(seeds)[watch.active]), config.lr)
        logged.append(int(chunk[0]))
        losses.append(values[:, 0])
        if not residual_rule:
            watch.plateau_after(int(chunk[-1]) + 1, values)
    # the data of step stop_step: the first step of the chunk not run, or the final step's draw
    last = device_data({key: value[0] if key == "t" else value[:, 0] for key, value in drawn.items()})
    final = np.asarray(run.loss(params, last, shared))
    _check_finite(final[:, None], np.array([stop_step]), seeds, config.lr)
    if features is None:  # (an early stop has embedded the final parameters already)
        features = np.asarray(run.embed(params, eval_inputs), dtype=np.float64)
    if not np.all(np.isfinite(features)):
        s, z = np.argwhere(~np.isfinite(features))[0][:2]
        raise ValueError(f"training diverged: features of state {z} are not finite after step {stop_step} "
                         f"for seed {seeds[s]} (lr={config.lr:g})")
    if reference_F is not None:
        distances.append(_distances(features, p, reference_F, reference.centred))
    if residual_rule and stop_step == config.steps:
        watch.residual_at(config.steps, features)
    watch.keep_measures()
    logged.append(stop_step)
    losses.append(final)
    trace = np.array([trace_covariance(F, p) for F in features])
    return TrainResult(
        config=config, k=k, seeds=seeds, params=jax.tree.map(np.asarray, params), features=features,
        logged=np.array(logged), loss=np.stack(losses, axis=1),
        distance=np.stack(distances, axis=1) if distances else None,
        trace_cov=trace, collapsed=trace < config.collapse_tol * k, seconds=time.perf_counter() - start,
        stop=watch.report(), states=eval_states)


def _rendered(world: World, config: TrainConfig, inputs: np.ndarray | None) -> RenderedInputs | None:
    """The rendered inputs of an MLP trained batch by batch (``config.observations``), or None."""
    if not config.renders(world):
        return None
    if inputs is not None:
        raise ValueError("inputs are a table of every state; observations='rendered' renders them batch by batch")
    if not isinstance(world, ModalWorld):
        raise ValueError(f"observations='rendered' renders a modal world (from view_world), got {type(world).__name__}")
    return rendered_inputs(world)


class _Watch:
    """Each seed's stopping rule along one training call (see :class:`TrainConfig`'s ``tol``)."""

    def __init__(self, config: TrainConfig, k: int, p: np.ndarray, operator: LawOperator | None,
                 next_eigenvalue: float | None, n_seeds: int) -> None:
        self.config, self.k, self.p, self.operator, self.next_mu = config, k, p, operator, next_eigenvalue
        self.active = np.ones(n_seeds, dtype=bool)
        self.at = np.full(n_seeds, config.steps, dtype=np.int64)
        self.reason = ["budget"] * n_seeds
        self.calm = np.zeros(n_seeds, dtype=np.int64)
        self.previous: np.ndarray | None = None
        self.window: list[np.ndarray] = []
        self.pending: tuple[np.ndarray, np.ndarray] | None = None
        self.residuals: list[np.ndarray] = []
        self.bounds: list[np.ndarray] = []

    def residual_at(self, step: int, features: np.ndarray) -> None:
        """Measure every seed's residual at ``step``; an active seed whose measure meets ``tol`` stops here."""
        r = np.full(len(features), np.inf)
        bound = np.full(len(features), np.inf)
        for s, F in enumerate(features):
            try:
                res = residual_of(F, self.p, self.operator, centred=self.config.centred)
            except ValueError:  # collapsed: no residual
                continue
            r[s] = res.norm
            if self.next_mu is not None:
                bound[s] = res.bound(self.next_mu)
        self.pending = (r, bound)
        measure = bound if self.next_mu is not None else r / np.sqrt(self.k)
        if self.config.tol is not None:
            done = self.active & (measure <= self.config.tol)
            self._stop(done, step, "residual")

    def keep_measures(self) -> None:
        """Log the measures of the last :meth:`residual_at` (a step the run goes on from, or the last one)."""
        if self.pending is not None:
            self.residuals.append(self.pending[0])
            self.bounds.append(self.pending[1])
            self.pending = None

    def plateau_after(self, step: int, values: np.ndarray) -> None:
        """Add a chunk's losses (S, W) to the window; a full window (:data:`PLATEAU_STEPS` steps or more) is
        compared with the previous one, and seeds calm for long enough stop at ``step``."""
        self.window.append(values)
        if sum(v.shape[1] for v in self.window) < PLATEAU_STEPS:
            return
        current, self.window = np.concatenate(self.window, axis=1), []
        config = self.config
        noisy = config.data == "minibatch" or (objective_record(config.objective).directions
                                               and config.directions == "resample")
        settled = not noisy or config.rate(step) <= PLATEAU_LR_FRACTION * config.lr
        if self.previous is not None and config.tol is not None and settled:
            calm = np.array([plateaued(a, b, self.config.plateau) for a, b in zip(self.previous, current)])
            self.calm = np.where(calm, self.calm + 1, 0)
            self._stop(self.active & (self.calm >= PLATEAU_PATIENCE), step, "plateau")
        self.previous = current

    def _stop(self, done: np.ndarray, step: int, reason: str) -> None:
        for s in np.flatnonzero(done):
            self.active[s], self.at[s], self.reason[s] = False, step, reason

    def report(self) -> StopReport:
        residual_rule = self.operator is not None
        return StopReport(
            rule="residual" if residual_rule else "plateau", tol=self.config.tol,
            converged=np.array([r != "budget" for r in self.reason]), at=self.at.copy(), reason=tuple(self.reason),
            residual=np.stack(self.residuals, axis=1) if residual_rule else None,
            bound=np.stack(self.bounds, axis=1) if residual_rule and self.next_mu is not None else None)


def _next_eigenvalue(spectrum: Sequence[float] | None, reference: Optimum | None, k: int) -> float | None:
    """``μ_{k+1}`` from the spectrum given, else from the reference's eigenvalues (None when neither has it)."""
    values = spectrum if spectrum is not None else (None if reference is None else reference.eigenvalues)
    if values is None:
        return None
    values = np.asarray(values, dtype=np.float64)
    if values.size < k + 1:
        raise ValueError(f"spectrum must hold mu_1 .. mu_(k+1) ({k + 1} values), got {values.size}")
    return float(values[k])


def _keep(active: np.ndarray, new: Any, old: Any) -> Any:
    """``new`` for the active seeds and ``old`` for the stopped ones (pytrees with a leading seed axis)."""
    return _select_seeds()(np.asarray(active), new, old)


@functools.cache
def _select_seeds() -> Any:
    """The jitted seed selection of :func:`_keep` (one compilation per parameter shapes)."""
    import jax
    import jax.numpy as jnp

    def select(mask: Any, new: Any, old: Any) -> Any:
        return jax.tree.map(lambda a, b: jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)

    return jax.jit(select)


@dataclass(frozen=True)
class SGDLearner:
    """A trained encoder as a learner (``learner(world, k, centred=…, rng=…) -> Representation``).

    ``rng`` picks the seed (an int, or a draw from ``check_rng(rng)``: a Generator, or seed 0's
    generator for None); the representation's
    features are the trained features of every state, and ``info`` holds the steps, the
    seconds, the final loss, ``tr Cov`` and the collapse flag.

    Attributes:
        name: the learner's name (default: the objective's).
        config: the hyperparameters (``centred`` is taken from the call).
    """

    config: TrainConfig = TrainConfig()
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.config.objective)

    def __call__(self, world: World, k: int, *, centred: bool = True, rng: RngLike = None) -> Representation:
        return representation(self.name, self.fit(world, k, centred=centred, seeds=(learner_seed(rng),)))

    def fit(self, world: World, k: int, *, centred: bool = True, seeds: Sequence[int] = (0,),
            reference: Optimum | None = None) -> TrainResult:
        """Every seed trained at once (vmapped): the seam's multi-seed form, with the ``s_Θ`` to
        ``reference`` (the closed form of ``world``) logged along training when given."""
        return train(world, k, replace(self.config, centred=bool(centred)), seeds=seeds, reference=reference)


def learner_seed(rng: RngLike) -> int:
    """The seed a learner trains with: ``rng`` itself when it is an int, else a draw from ``check_rng(rng)``."""
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return int(rng)
    return int(check_rng(rng).integers(2**31))


def representation(name: str, result: TrainResult, **info: Any) -> Representation:
    """The first seed of a training result as a :class:`Representation` (its info: steps, seconds, loss, collapse)."""
    return Representation(name, result.features[0], info={
        "steps": result.config.steps, "seconds": result.seconds, "seed": result.seeds[0],
        "loss": float(result.loss[0, -1]), "trace_cov": float(result.trace_cov[0]),
        "collapsed": bool(result.collapsed[0]), **info})


def draw_pairs(sampler: PairSampler, B: int, steps: int, gens: Sequence[np.random.Generator]
               ) -> tuple[np.ndarray, np.ndarray]:
    """The next ``steps`` minibatches of B pairs of every generator: anchors and views, each (S, steps, B) int64.

    Row ``[s, j]`` is what the j-th of ``steps`` consecutive ``sampler.pairs(B, rng=gens[s])`` calls
    returns (:meth:`prhsim.worlds.PairSampler.batches_for`: one ``random`` call per generator, one
    table lookup for all of them).
    """
    return sampler.batches_for(B, steps, gens)


def check_request(world: World, k: Any, config: TrainConfig | None, seeds: Sequence[int],
                  reference: Optimum | None, overrides: dict[str, Any]) -> tuple[TrainConfig, tuple[int, ...], int]:
    """The checked arguments of a training call (JAX or torch): the config with its overrides, the seeds, k."""
    config = replace(config or TrainConfig(), **overrides) if overrides else (config or TrainConfig())
    seeds = _check_seeds(seeds)
    if isinstance(k, bool) or int(k) != k or not 1 <= k < world.n:
        raise ValueError(f"k must be an integer in 1..{world.n - 1} for a world of {world.n} states, got {k!r}")
    k = int(k)
    if reference is not None and (reference.n != world.n or reference.k != k):
        raise ValueError(f"the reference has {reference.n} states x {reference.k} features, "
                         f"the training {world.n} x {k}")
    exact_bytes = objective_record(config.objective).exact_bytes
    if exact_bytes is not None and config.data == "exact":  # e.g. SIGReg: autodiff keeps every (rows, n, M) term
        ensure_fits(exact_bytes(world.n, config.num_directions) * len(seeds),
                    f"the gradient of the exact {config.objective} loss over {world.n:,} states x "
                    f"{config.num_directions} directions x {len(seeds)} seed(s)",
                    "use data='minibatch', fewer directions or fewer seeds")
    return config, seeds, k


def _check_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
            raise ValueError(f"seeds must be non-negative integers, got {s!r}")
    return tuple(int(s) for s in seeds)


def _initial_params(encoder: Encoder, seeds: tuple[int, ...], init_params: Any, dtype: Any) -> Any:
    import jax
    import jax.numpy as jnp

    if init_params is None:
        return jax.vmap(encoder.init)(jnp.stack([jax.random.key(s) for s in seeds]))
    expected = jax.eval_shape(jax.vmap(encoder.init), jnp.stack([jax.random.key(s) for s in seeds]))
    given = jax.tree.map(lambda a: jnp.asarray(a, dtype=dtype), init_params)
    if jax.tree.structure(given) != jax.tree.structure(expected) or any(
            g.shape != e.shape for g, e in zip(jax.tree.leaves(given), jax.tree.leaves(expected))):
        shapes = jax.tree.map(lambda e: e.shape, expected)
        raise ValueError(f"init_params must match the encoder's params stacked over {len(seeds)} seed(s): {shapes}")
    return given


def _check_finite(values: np.ndarray, steps: np.ndarray, seeds: tuple[int, ...], lr: float) -> None:
    bad = ~np.isfinite(values)
    if np.any(bad):
        cells = np.argwhere(bad)
        s, j = cells[np.argmin(cells[:, 1])]  # the earliest step, then the first seed
        raise ValueError(f"training diverged: the loss is {values[s, j]} at step {int(steps[j])} "
                         f"for seed {seeds[s]} (lr={lr:g})")


def _distances(features: Any, p: np.ndarray, reference: np.ndarray, centred: bool) -> np.ndarray:
    F = np.asarray(features, dtype=np.float64)
    return np.array([subspace_distance(f, reference, p, centred=centred) for f in F])
