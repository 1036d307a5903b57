"""Settings of ``prhsim run``: the world, the modalities and their views, k, and where results go."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from prhsim.config._training import Learners, TrainingSettings
from prhsim.learners import LEARNERS, SGD_OBJECTIVES
from prhsim.config._worlds import GRIDSCENE_MODALITIES, GridSceneWorld, Settings, WorldConfig

#: The bad view's resampling probability when a bad view is asked for without ``eps``.
RUN_DEFAULT_EPS = 0.1


class RunConfig(Settings):
    """Configuration of ``prhsim run`` (every key optional; unknown keys are errors).

    Attributes:
        world: the world over Z and its settings (``prhsim worlds`` lists every kind).
        modalities: how many modalities (gridscene: up to 3, pixels/caption/symbolic;
            other worlds: random codebook modalities code1, code2, …).
        views: the view every modality uses, unless ``modality_views`` names it.
        eps: the bad view's resampling probability (nuisance kept w.p. 1 − eps); only
            with a bad view; unset means 0.1.
        modality_views: per-modality override of ``views``, by modality name.
        k: number of features, or "auto" (the largest relative gap of K_Z in 1..32).
        centred: centred whitened objective.
        seed: seeds every random choice (random worlds, symbolic maps, codebooks).
        out: output folder (the command line picks ``runs/<time>-<world>-<views>`` when unset).
        figures: write the PNG figures.
        tables: compute the closed form's checks from full feature tables over every modal
            state (the slow twin of the default factor-space path; small worlds only).
        memory_limit_gb: refuse a run whose estimated peak memory exceeds this many GB
            (unset: half of the machine's memory).
        learner: "closed" (the closed form only), or also train by SGD and compare with it:
            "whiten" (hard whitening), "sigreg" (LeJEPA's SIGReg) or "all" (both).
        training: how the SGD learners are trained (:class:`TrainingSettings`).
        calibrate: calibrate the PRH sample metrics (mutual k-NN, linear CKA) of every pair of
            modalities against this many row permutations (:func:`prhsim.metrics.calibrate`: p-value
            and calibrated score beside the raw one); 0: off.
    """

    world: WorldConfig = Field(default_factory=GridSceneWorld)
    modalities: int = Field(3, ge=1, le=8)
    views: Literal["good", "bad"] = "good"
    eps: float | None = Field(None, gt=0, le=1)
    modality_views: dict[str, Literal["good", "bad"]] = Field(default_factory=dict)
    k: int | Literal["auto"] = "auto"
    centred: bool = True
    seed: int = Field(0, ge=0)
    out: Path | None = Field(None, strict=False)
    figures: bool = True
    tables: bool = False
    memory_limit_gb: float | None = Field(None, gt=0)
    learner: Learners = "closed"
    training: TrainingSettings = Field(default_factory=TrainingSettings)
    calibrate: int = Field(0, ge=0, le=100_000)

    @field_validator("k", mode="before")
    @classmethod
    def _k_is_positive_or_auto(cls, value: Any) -> Any:
        if value == "auto" and isinstance(value, str):
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"k must be a positive integer or 'auto', got {value!r}")
        return value

    @field_validator("out", mode="before")
    @classmethod
    def _out_not_empty(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, (str, Path)):
            raise ValueError(f"out must be a path, got {value!r}")
        if value is not None and str(value).strip() == "":
            raise ValueError("out must not be empty")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "RunConfig":
        if isinstance(self.world, GridSceneWorld) and self.modalities > len(GRIDSCENE_MODALITIES):
            raise ValueError(f"modalities: gridscene has {len(GRIDSCENE_MODALITIES)} modalities "
                             f"({', '.join(GRIDSCENE_MODALITIES)}); asked for {self.modalities}")
        names = self.modality_names
        unknown = sorted(set(self.modality_views) - set(names))
        if unknown:
            raise ValueError(f"modality_views names unknown modalities {unknown}; this run has {names}")
        if self.eps is not None and "bad" not in self.view_names:
            raise ValueError("eps only applies to bad views: add views = \"bad\" (--views bad) or a bad "
                             "entry in modality_views, or drop eps")
        return self

    @property
    def modality_names(self) -> list[str]:
        return self.world.modality_names(self.modalities)

    @property
    def view_names(self) -> list[str]:
        """The view of each modality, in order: "good" or "bad"."""
        return [self.modality_views.get(n, self.views) for n in self.modality_names]

    @property
    def sgd_learners(self) -> list[str]:
        """The SGD objectives this run trains, in order ("whiten", "sigreg"); empty for the closed form alone."""
        return list(SGD_OBJECTIVES) if self.learner == "all" else [self.learner] if LEARNERS[self.learner].sgd else []

    @property
    def bad_eps(self) -> float:
        """The eps a bad view uses."""
        return RUN_DEFAULT_EPS if self.eps is None else self.eps
