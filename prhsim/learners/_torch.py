"""The torch training loop: the JAX learner's loop in torch, over the same losses (docs/theory.md §1.1, §7).

:func:`train_torch` trains a table or an MLP on the objectives of
:func:`prhsim.learners._losses.make_loss`, hard whitening (docs/theory.md §1.1) or
LeJEPA's SIGReg (§7), exact or on minibatches, called on torch tensors: the
objectives are written once against the array API and nothing here restates them.
It mirrors :func:`prhsim.learners._jax.train` step for step:

* the same :class:`TrainConfig` and :class:`TrainResult`, logging, collapse flag and errors;
* the same data per seed s: the minibatch pairs of one generator ``default_rng([s, SGD_PAIRS])``
  drawn a chunk of ``log_every`` steps at a time (:func:`draw_pairs`), the SIGReg directions
  ``draw_directions(k, M, seed=s, step=t)`` (step 0's when fixed); the final loss, at step
  ``steps``, takes the next batch and step ``steps``' directions;
* the same optimiser: the gradient clipped by its global norm as optax does it
  (``g·clip/norm`` unless ``norm < clip``), then AdamW (β = 0.9, 0.999, ε = 1e-8, decoupled
  weight decay) at the learning rate of optax's ``warmup_cosine_decay_schedule`` at the
  update's step index (:func:`learning_rate`).

From the same initial parameters both loops follow the same trajectory up to rounding.
Seeds are trained one after another, one Python step at a time. Without ``init_params``
seed s starts from ``torch.Generator().manual_seed(s)`` (a table of N(0, init_scale²)
entries, or LeCun-normal weights and zero biases), not from JAX's init.
torch is imported when :func:`train_torch` runs, never at module import; jax is never imported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from prhsim._rng import SGD_PAIRS, RngLike
from prhsim.learners import _exact_law, _losses
from prhsim.optima import Optimum
from prhsim.learners._driver import check_losses
from prhsim.learners._encoders import Encoder, mlp_apply, tabular_apply
from prhsim.learners._train_config import TrainConfig
from prhsim.learners._train_parts import (
    TrainResult,
    build_encoder,
    check_request,
    draw_pairs,
    learner_seed,
    reference_distances,
    representation,
)
from prhsim.learners._evaluate import trace_covariance
from prhsim.learners._objectives import objective_record
from prhsim.learners._learner import Representation
from prhsim.objectives import draw_directions
from prhsim.worlds import World, pair_sampler

#: Adam's decay rates and ε: optax's ``adamw`` defaults.
BETAS = (0.9, 0.999)
EPS = 1e-8


def learning_rate(config: TrainConfig, t: int) -> float:
    """The learning rate of the torch loop at step t: :meth:`prhsim.learners.Optimiser.rate`, optax's
    schedule with its rounding (so the two loops stay on one trajectory)."""
    return config.rate(t)


def train_torch(world: World, k: int, config: TrainConfig | None = None, *, seeds: Sequence[int] = (0,),
                reference: Optimum | None = None, init_params: Any = None, device: Any = "cpu",
                dtype: Any = None, **overrides: Any) -> TrainResult:
    """Train an encoder of k features on ``world`` for each seed in turn (see the module docstring).

    Args:
        world, k, config, seeds, reference, overrides: as :func:`prhsim.learners._jax.train`.
        init_params: start here instead of the seeded init: the encoder's params in the JAX
            layout stacked on a leading seed axis (``{"table": (S, n, k)}`` or
            ``{"layers": ((W_1, b_1), …)}`` with W (S, fan_in, fan_out); e.g. ``TrainResult.params``).
        device: the torch device the training runs on.
        dtype: the floating dtype of the parameters and the data (default ``torch.float32``).

    Returns:
        A :class:`TrainResult`; its ``params`` are numpy arrays in the JAX layout.

    Raises:
        ValueError: on a bad argument, or when the loss or the parameters stop being finite:
            the message names the step and the seed.
    """
    import torch

    start = time.perf_counter()
    config, seeds, k = check_request(world, k, config, seeds, reference, overrides)
    if config.method != "adamw" or config.tol is not None:
        raise ValueError("the torch loop takes every step of the budget with AdamW (tol=None, method='adamw'); "
                         "stopping on convergence and method='precond' run in prhsim.learners.train")
    dtype = torch.float32 if dtype is None else dtype
    device = torch.device(device)
    encoder = build_encoder(world, k, config)
    expected = _param_shapes(encoder, len(seeds))
    if init_params is not None and _shapes(init_params) != expected:
        raise ValueError(f"init_params must match the encoder's params stacked over {len(seeds)} seed(s): "
                         f"{expected}, got {_shapes(init_params)}")

    def tensor(a: Any) -> Any:  # a writable copy: integer tables stay int64
        a = np.array(a)
        return torch.tensor(a, dtype=torch.int64 if a.dtype.kind in "iu" else dtype, device=device)

    law = _exact_law.exact_law(world, k) if config.data == "exact" else None
    p = np.asarray(world.p, dtype=np.float64)
    shared: dict[str, Any] = {"inputs": tensor(encoder.inputs), "lam": tensor(float(config.lam))}
    if law is not None:
        shared.update({key: _tree_map(tensor, value) for key, value in _exact_law.exact_tables(law).items()})
        shared.update(p=tensor(p), nominal_n=tensor(float(config.batch_size)))
    apply = _torch_apply(encoder.kind)
    loss = _losses.make_loss(config.objective, config.data, centred=config.centred, convention=config.convention,
                             apply=apply,
                             factor_shape=law.shape if isinstance(law, _exact_law.FactorLaw) else None,
                             dims=config.invariance_dims)
    runs = []
    for i, seed in enumerate(seeds):
        params = _initial_params(encoder, seed, config.init_scale) if init_params is None else \
            _tree_map(lambda a: np.array(a[i], dtype=np.float64), init_params)
        params = _tree_map(lambda a: tensor(a).requires_grad_(True), params)
        runs.append(_train_seed(world, k, config, seed, params, loss, apply, shared, reference, p))
    features = np.stack([r[1] for r in runs])
    if not np.all(np.isfinite(features)):
        s, z = np.argwhere(~np.isfinite(features))[0][:2]
        raise ValueError(f"training diverged: features of state {z} are not finite after step {config.steps} "
                         f"for seed {seeds[s]} (lr={config.lr:g})")
    trace = np.array([trace_covariance(F, p) for F in features])
    return TrainResult(
        config=config, k=k, seeds=seeds, params=_stack([r[0] for r in runs]), features=features,
        logged=np.array([*range(0, config.steps, config.log_every), config.steps]),
        loss=np.stack([r[2] for r in runs]),
        distance=np.stack([r[3] for r in runs]) if reference is not None else None,
        trace_cov=trace, collapsed=trace < config.collapse_tol * k, seconds=time.perf_counter() - start)


def _train_seed(world: World, k: int, config: TrainConfig, seed: int, params: Any, loss: Callable[..., Any],
                apply: Callable[..., Any], shared: dict[str, Any], reference: Optimum | None, p: np.ndarray
                ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray | None]:
    """One seed's run: (numpy params, features (n, k), logged losses (L,), logged distances (L,) or None)."""
    import torch

    device, dtype = shared["lam"].device, shared["lam"].dtype
    leaves: list[Any] = []
    _tree_map(leaves.append, params)
    opt = torch.optim.AdamW(leaves, lr=0.0, betas=BETAS, eps=EPS, weight_decay=config.weight_decay)
    sampler = pair_sampler(world) if config.data == "minibatch" else None
    gens = [np.random.default_rng([seed, SGD_PAIRS])]
    directions, resample = objective_record(config.objective).directions, config.directions == "resample"

    def step_data(steps: np.ndarray) -> list[dict[str, Any]]:
        data: dict[str, Any] = {}
        if sampler is not None:
            z, z2 = draw_pairs(sampler, config.batch_size, len(steps), gens)
            data["z"], data["z2"] = torch.tensor(z[0], device=device), torch.tensor(z2[0], device=device)
        if directions:  # (L, k, M): step t's directions (step 0's when fixed)
            data["dirs"] = torch.tensor(np.array([draw_directions(k, config.num_directions, seed=seed,
                                                                  step=int(t) if resample else 0)
                                                  for t in steps]), dtype=dtype, device=device)
        return [{key: value[j] for key, value in data.items()} for j in range(len(steps))]

    def features() -> np.ndarray:
        with torch.no_grad():
            return apply(params, shared["inputs"]).to(torch.float64).cpu().numpy()

    def evaluate(step: dict[str, Any], t: int, values: list[Any], steps: np.ndarray) -> Any:
        try:
            return loss(params, step, shared)
        except torch.linalg.LinAlgError as err:  # a singular covariance: JAX's solve returns non-finite values
            if values:  # an earlier non-finite loss of the chunk is named first
                check_losses(torch.stack(values).cpu().numpy()[None], steps, (seed,), config.lr)
            raise ValueError(f"training diverged: the loss is undefined at step {t} for seed {seed} "
                             f"(lr={config.lr:g}): {err}") from err

    reference_F = reference.features() if reference is not None else None
    losses, distances = [], []
    for first in range(0, config.steps, config.log_every):
        chunk = np.arange(first, min(config.steps, first + config.log_every))
        if reference_F is not None:
            distances.append(reference_distances(features()[None], p, reference_F, reference.centred)[0])
        values = []
        for t, step in zip(chunk, step_data(chunk)):
            opt.param_groups[0]["lr"] = learning_rate(config, int(t))
            opt.zero_grad(set_to_none=True)
            value = evaluate(step, int(t), values, chunk)
            value.backward()
            _clip_by_global_norm(leaves, config.clip)
            opt.step()
            values.append(value.detach())
        values = torch.stack(values).cpu().numpy().astype(np.float64)
        check_losses(values[None], chunk, (seed,), config.lr)
        losses.append(values[0])
    final_step = np.array([config.steps])
    with torch.no_grad():
        final = np.array([float(evaluate(step_data(final_step)[0], config.steps, [], final_step))])
    check_losses(final[None], final_step, (seed,), config.lr)
    losses.append(final[0])
    F = features()
    if reference_F is not None:
        distances.append(reference_distances(F[None], p, reference_F, reference.centred)[0])
    numpy_params = _tree_map(lambda a: a.detach().cpu().numpy(), params)
    return numpy_params, F, np.array(losses), np.array(distances) if reference_F is not None else None


def _clip_by_global_norm(leaves: list[Any], clip: float) -> None:
    """optax's ``clip_by_global_norm``: ``g`` when ``‖g‖ < clip``, else ``(g / ‖g‖)·clip`` (no ε)."""
    import torch

    grads = [leaf.grad for leaf in leaves]
    norm = torch.sqrt(sum(torch.sum(g * g) for g in grads))
    keep = norm < clip
    for leaf, g in zip(leaves, grads):
        leaf.grad = torch.where(keep, g, (g / norm) * clip)


def _torch_apply(kind: str) -> Callable[[Any, Any], Any]:
    """The encoder's forward pass on torch tensors: the JAX loop's own array-API functions."""
    return tabular_apply if kind == "tabular" else mlp_apply


def _initial_params(encoder: Encoder, seed: int, scale: float) -> Any:
    """Seed s's init (float64 numpy, JAX layout) from ``torch.Generator().manual_seed(s)``."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    if encoder.kind == "tabular":
        return {"table": scale * torch.randn(encoder.n, encoder.k, generator=gen, dtype=torch.float64).numpy()}
    widths = (int(encoder.inputs.shape[1]), *encoder.hidden, encoder.k)
    return {"layers": tuple((torch.randn(fan_in, fan_out, generator=gen, dtype=torch.float64).numpy()
                             / np.sqrt(fan_in), np.zeros(fan_out))
                            for fan_in, fan_out in zip(widths[:-1], widths[1:]))}


def _param_shapes(encoder: Encoder, S: int) -> Any:
    if encoder.kind == "tabular":
        return {"table": (S, encoder.n, encoder.k)}
    widths = (int(encoder.inputs.shape[1]), *encoder.hidden, encoder.k)
    return {"layers": tuple(((S, a, b), (S, b)) for a, b in zip(widths[:-1], widths[1:]))}


def _shapes(tree: Any) -> Any:
    return _tree_map(lambda a: tuple(np.shape(a)), tree)


def _tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``fn`` on every leaf of nested dicts, tuples and lists (lists come back as tuples)."""
    if isinstance(tree, dict):
        return {key: _tree_map(fn, value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return tuple(_tree_map(fn, value) for value in tree)
    return fn(tree)


def _stack(trees: list[Any]) -> Any:
    first = trees[0]
    if isinstance(first, dict):
        return {key: _stack([t[key] for t in trees]) for key in first}
    if isinstance(first, tuple):
        return tuple(_stack([t[i] for t in trees]) for i in range(len(first)))
    return np.stack(trees)


@dataclass(frozen=True)
class TorchLearner:
    """The torch loop as a learner (``learner(world, k, centred=…, rng=…, seeds=…) -> Representation``), as
    :class:`prhsim.learners.SGDLearner`: ``seeds`` (or one seed picked by ``rng``), ``info`` with the steps,
    the seconds and the device, ``seed_info`` with each seed's final loss, ``tr Cov`` and collapse.

    Attributes:
        config: the hyperparameters (``centred`` is taken from the call).
        name: the learner's name (default: the objective's).
        device: the torch device.
        dtype: the torch dtype (default float32).
    """

    config: TrainConfig = TrainConfig()
    name: str = ""
    device: Any = "cpu"
    dtype: Any = None

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.config.objective)

    def __call__(self, world: World, k: int, *, centred: bool = True, rng: RngLike = None,
                 seeds: Sequence[int] | None = None) -> Representation:
        seeds = (learner_seed(rng),) if seeds is None else seeds
        result = train_torch(world, k, replace(self.config, centred=bool(centred)), seeds=seeds,
                             device=self.device, dtype=self.dtype)
        return representation(self.name, result, device=str(self.device))
