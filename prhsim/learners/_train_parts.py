"""What the JAX and the torch SGD loops share: the result record (:class:`TrainResult`), the checked request, the
encoder a configuration asks for, the minibatch draws and the distance to a reference, and the
a result as a :class:`prhsim.learners.Representation` (docs/theory.md §1.1, §7)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from prhsim._budget import ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim.learners._convergence import StopReport
from prhsim.learners._driver import check_seeds
from prhsim.learners._encoders import Encoder, mlp_encoder, observation_inputs, tabular_encoder
from prhsim.learners._evaluate import subspace_distance
from prhsim.learners._learner import Representation
from prhsim.learners._objectives import objective_record
from prhsim.learners._train_config import TrainConfig
from prhsim.optima import Optimum
from prhsim.worlds import PairSampler, World


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


def learner_seed(rng: RngLike) -> int:
    """The seed a learner trains with: ``rng`` itself when it is an int, else a draw from ``check_rng(rng)``."""
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return int(rng)
    return int(check_rng(rng).integers(2**31))


def representation(name: str, result: TrainResult, **info: Any) -> Representation:
    """Every seed of a training result as a :class:`Representation`: the features (S, n, k) (or of the sampled
    states), the steps and seconds, and each seed's final loss, ``tr Cov`` and collapse; ``result`` kept whole."""
    seed_info = [{"seed": seed, "loss": float(result.loss[s, -1]), "trace_cov": float(result.trace_cov[s]),
                  "collapsed": bool(result.collapsed[s])} for s, seed in enumerate(result.seeds)]
    return Representation(name, result.features, info={"steps": result.config.steps, "seconds": result.seconds, **info},
                          seeds=result.seeds, seed_info=seed_info, states=result.states, result=result)


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
    seeds = check_seeds(seeds)
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


def reference_distances(features: Any, p: np.ndarray, reference: np.ndarray, centred: bool) -> np.ndarray:
    F = np.asarray(features, dtype=np.float64)
    return np.array([subspace_distance(f, reference, p, centred=centred) for f in F])
