"""Settings of the SGD learners that ``prhsim run --learner`` trains beside the closed form (docs/learning.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from prhsim.config._worlds import Settings
from prhsim.learners import LEARNERS

#: ``--learner`` choices: the closed form alone, one SGD learner beside it, or all of them (from the registry,
#: :data:`prhsim.learners.LEARNERS`).
LEARNER_CHOICES: tuple[str, ...] = (*LEARNERS, "all")
Learners = Literal[LEARNER_CHOICES]  # type: ignore[valid-type]


class TrainingSettings(Settings):
    """How each SGD learner is trained (``training.*`` keys; flags --steps, --seeds, --encoder).

    Attributes:
        steps: the budget: at most this many optimiser steps per learner and modality (a seed
            stops earlier once it has converged, see ``tol``).
        n_seeds: seeds trained together (``vmap``) per learner and modality; seed s is ``seed + s``.
        encoder: "tabular" (one vector per state, the encoder the theorem assumes), "mlp" (on the
            rendered observation ``g_m(z, n)``; above 5,000,000 modal states rendered batch by batch
            and evaluated on a sample of states drawn from p), or "auto": tabular, unless a modal
            world has more states than a feature table holds (5,000,000), then mlp.
        data: "exact" (every pair of π, full batch), "minibatch" (``batch_size`` sampled pairs
            per step), or "auto": exact for hard whitening when π can be applied, and for
            SIGReg when its exact regulariser is cheap enough (it costs n² per
            direction: up to ``exact_sigreg_work`` = n²·num_directions per step), minibatches
            otherwise.
        batch_size: pairs per minibatch; also the N that scales SIGReg's exact regulariser.
        method: "precond" (heavy-ball steps on the covariance-preconditioned gradient, for a table
            on the exact whitened loss), "adamw", or "auto": precond where it applies, AdamW elsewhere.
        lr: peak learning rate (unset: precond's step from the spectrum, docs/theory.md §1.5;
            0.1 for AdamW on an exact table, 0.01 otherwise).
        momentum: precond's heavy-ball momentum (unset: from the spectrum).
        stop: stop each seed once it has converged (false: take every step of the budget).
        tol: hard whitening on exact data has converged when the Davis–Kahan bound on its s_Θ to
            the optimum is at most ``tol`` (docs/theory.md §1.5); any other learner when its loss
            has plateaued (``plateau``).
        plateau: the relative change of the mean loss between two windows below which a loss has plateaued.
        lam: SIGReg's weight λ.
        convention: "lejepa" ``λ·SIGReg + (1 − λ)·invariance`` or "additive" ``invariance + λ·SIGReg``.
        invariance_dims: SIGReg's invariance summed over the k coordinates ("sum", unbiased for the
            alignment loss) or averaged ("mean", LeJEPA's code: k times weaker against SIGReg).
        num_directions: SIGReg's random directions per step.
        exact_sigreg_work: under "auto", SIGReg runs on exact data when n²·num_directions is at most this.
    """

    renamed = {"seeds": "n_seeds"}

    steps: int = Field(1000, ge=1, le=1_000_000)
    n_seeds: int = Field(2, ge=1, le=64)
    encoder: Literal["auto", "tabular", "mlp"] = "auto"
    data: Literal["auto", "exact", "minibatch"] = "auto"
    batch_size: int = Field(256, ge=2, le=1_000_000)
    method: Literal["auto", "adamw", "precond"] = "auto"
    lr: float | None = Field(None, gt=0, le=10)
    momentum: float | None = Field(None, ge=0, lt=1)
    stop: bool = True
    tol: float = Field(1e-4, gt=0, lt=1)
    plateau: float = Field(1e-5, gt=0, lt=1)
    lam: float = Field(0.02, ge=0)
    convention: Literal["lejepa", "additive"] = "lejepa"
    invariance_dims: Literal["sum", "mean"] = "sum"
    num_directions: int = Field(64, ge=1, le=65_536)
    exact_sigreg_work: int = Field(2**18, ge=1)

    @model_validator(mode="after")
    def _lam_fits_the_convention(self) -> "TrainingSettings":
        if self.convention == "lejepa" and self.lam >= 1:
            raise ValueError(f"training.lam must be below 1 in the lejepa convention (lam·SIGReg + (1 − lam)·invariance), "
                             f"got {self.lam}; use training.convention=\"additive\" for larger weights")
        if self.method == "precond" and (self.encoder == "mlp" or self.data == "minibatch"):
            raise ValueError("training.method=\"precond\" preconditions a table on exact data: it needs "
                             "training.encoder=\"tabular\" and training.data \"exact\" or \"auto\"")
        if self.momentum is not None and self.method == "adamw":
            raise ValueError("training.momentum is precond's heavy-ball momentum; AdamW keeps its own moments")
        return self
