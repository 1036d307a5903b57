"""The hyperparameters of an SGD learner on a finite world (:class:`TrainConfig`, read by the JAX and the torch loop),
checked on construction against the objective's record (docs/theory.md §1.1, §1.5, §7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

from prhsim.learners._convergence import heavy_ball
from prhsim.learners._jax_runner import Spec
from prhsim.learners._losses import Data, SGDObjective
from prhsim.learners._objectives import OBJECTIVES, objective_record
from prhsim.learners._optimiser import Optimiser, positive_int
from prhsim.objectives import LAMBDA, Convention
from prhsim.optima import FEATURE_LIMIT
from prhsim.worlds import ModalWorld, World

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
