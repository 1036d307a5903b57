"""SGD learners in JAX + optax for finite worlds: train an encoder on the objectives of this package (docs/theory.md §1.1, §7).

:func:`train` fits a table or an MLP (:mod:`prhsim.learners._encoders`) with the
hard-whitening objective (the one the theorem covers, docs/theory.md §1.1) or
LeJEPA's SIGReg objective (§7), on the exact pair law (full batch, no sampling
noise) or on minibatches of B pairs from :func:`prhsim.worlds.pair_sampler`, for
several seeds at once (``jax.vmap`` over the seed axis). What each objective
computes is stated in its record, :mod:`prhsim.learners._objectives`.

Randomness, per seed s (independent of how seeds are grouped and of ``log_every``):

* init: ``jax.random.key(s)``;
* minibatch pairs at step t: the (t+1)-th of consecutive ``pair_sampler(world).pairs(B, rng=gen)``
  calls on seed s's one generator ``gen = default_rng([s, SGD_PAIRS])`` (:mod:`prhsim._rng`; the final
  loss, at step ``steps``, takes the next call's). They are drawn on the host in numpy, one chunk of
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
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from prhsim._rng import SGD_EVAL, SGD_PAIRS, RngLike
from prhsim.learners._convergence import (
    PLATEAU_LR_FRACTION,
    PLATEAU_PATIENCE,
    PLATEAU_STEPS,
    LawOperator,
    StopReport,
    plateaued,
    residual_of,
)
from prhsim.learners._driver import check_losses, drive, initial_params, step_chunks
from prhsim.learners._encoders import Encoder, RenderedInputs, rendered_encoder, rendered_inputs
from prhsim.learners._evaluate import trace_covariance
from prhsim.learners._exact_law import FactorLaw, exact_law, exact_tables
from prhsim.learners._jax_runner import runner
from prhsim.learners._learner import Representation
from prhsim.learners._objectives import objective_record
from prhsim.learners._train_config import EVAL_SAMPLE, TrainConfig
from prhsim.learners._train_parts import (
    TrainResult,
    build_encoder,
    check_request,
    draw_pairs,
    learner_seed,
    reference_distances,
    representation,
)
from prhsim.objectives import draw_directions
from prhsim.optima import Optimum
from prhsim.worlds import ModalWorld, World, pair_sampler


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
    reference_F = None if reference is None else reference.features(eval_states)
    residual_rule = objective_record(config.objective).eigen_residual and law is not None
    watch = _Watch(config, k, p, LawOperator(law, world.n) if residual_rule else None,
                   _next_eigenvalue(spectrum, reference, k), len(seeds))
    distances: list[np.ndarray] = []
    features = None

    def before(step: int, params: Any) -> bool:
        """The stopping rule's measures at ``step``; False when every seed has stopped there (the last step logged)."""
        nonlocal features
        if reference_F is not None or residual_rule:
            features = np.asarray(run.embed(params, eval_inputs), dtype=np.float64)
        if residual_rule:
            watch.residual_at(step, features)
        if not watch.active.any():
            return False
        if features is not None and reference_F is not None:
            distances.append(reference_distances(features, p, reference_F, reference.centred))
        watch.keep_measures()
        features = None  # the parameters move on: what was embedded here is not the end's
        return True

    def hold(new: Any, old: Any) -> Any:
        """A stopped seed keeps its parameters: its result does not depend on the other seeds."""
        return new if watch.active.all() else _keep(watch.active, new, old)

    def after(end: int, values: np.ndarray) -> None:
        if not residual_rule:
            watch.plateau_after(end, values)

    driven = drive(lambda params, state, data: run.run(params, state, device_data(data), shared),
                   params, run.init_state(params), step_chunks(config.steps, config.log_every), host_data,
                   seeds=seeds, lr=config.lr, before=before, after=after, live=lambda: watch.active, hold=hold)
    params, stop_step = driven.params, driven.ended_at
    logged, losses = list(driven.logged), [values[:, 0] for values in driven.losses]
    # the data of step stop_step: the first step of the chunk not run, or the final step's draw
    last = device_data({key: value[0] if key == "t" else value[:, 0] for key, value in driven.upcoming.items()})
    final = np.asarray(run.loss(params, last, shared))
    check_losses(final[:, None], np.array([stop_step]), seeds, config.lr)
    if features is None:  # (an early stop has embedded the final parameters already)
        features = np.asarray(run.embed(params, eval_inputs), dtype=np.float64)
    if not np.all(np.isfinite(features)):
        s, z = np.argwhere(~np.isfinite(features))[0][:2]
        raise ValueError(f"training diverged: features of state {z} are not finite after step {stop_step} "
                         f"for seed {seeds[s]} (lr={config.lr:g})")
    if reference_F is not None:
        distances.append(reference_distances(features, p, reference_F, reference.centred))
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
    """A trained encoder as a learner (``learner(world, k, centred=…, rng=…, seeds=…) -> Representation``).

    ``seeds`` trains one encoder per seed, all at once (vmapped); without them ``rng`` picks one seed
    (an int, or a draw from ``check_rng(rng)``: a Generator, or seed 0's generator for None). The
    representation's features are each seed's trained features of every state (of a sample of
    states drawn from p, ``states``, for an MLP on rendered observations); ``info`` holds the steps
    and the seconds, ``seed_info`` each seed's final loss, ``tr Cov`` and collapse, and ``result``
    the whole :class:`TrainResult` (the logged losses, the distances to ``reference``, how each seed stopped).

    Attributes:
        config: the hyperparameters (``centred`` is taken from the call).
        name: the learner's name (default: the objective's).
        reference: the closed form of the world the learner is called on (same k), or None: the ``s_Θ``
            to it is logged along training, and its eigenvalues bound the eigen-residual's ``s_Θ``.
    """

    config: TrainConfig = TrainConfig()
    name: str = ""
    reference: Optimum | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.config.objective)

    def __call__(self, world: World, k: int, *, centred: bool = True, rng: RngLike = None,
                 seeds: Sequence[int] | None = None) -> Representation:
        seeds = (learner_seed(rng),) if seeds is None else seeds
        return representation(self.name, self.fit(world, k, centred=centred, seeds=seeds, reference=self.reference))

    def fit(self, world: World, k: int, *, centred: bool = True, seeds: Sequence[int] = (0,),
            reference: Optimum | None = None) -> TrainResult:
        """Every seed trained at once (vmapped), as a :class:`TrainResult`, with the ``s_Θ`` to
        ``reference`` (the closed form of ``world``) logged along training when given."""
        return train(world, k, replace(self.config, centred=bool(centred)), seeds=seeds, reference=reference)


def _initial_params(encoder: Encoder, seeds: tuple[int, ...], init_params: Any, dtype: Any) -> Any:
    import jax
    import jax.numpy as jnp

    if init_params is None:
        return initial_params(encoder.init, seeds)
    expected = jax.eval_shape(jax.vmap(encoder.init), jnp.stack([jax.random.key(s) for s in seeds]))
    given = jax.tree.map(lambda a: jnp.asarray(a, dtype=dtype), init_params)
    if jax.tree.structure(given) != jax.tree.structure(expected) or any(
            g.shape != e.shape for g, e in zip(jax.tree.leaves(given), jax.tree.leaves(expected))):
        shapes = jax.tree.map(lambda e: e.shape, expected)
        raise ValueError(f"init_params must match the encoder's params stacked over {len(seeds)} seed(s): {shapes}")
    return given
