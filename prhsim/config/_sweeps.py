"""Settings of the theorem sweeps (``prhsim sweep NAME``): one strict pydantic model per sweep.

Each model mirrors its library function's arguments (``prhsim.experiments``); a config
file (``--config``) or ``--set key=value`` sets any of them, and unknown keys are errors.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from prhsim.config._worlds import GridSceneWorld, Settings, WorldConfig


class BadViewSweepSettings(Settings):
    """``prhsim sweep bad-view``: every modality under bad(eps) for each eps of a grid (1 is the good view).

    Attributes:
        world: the world over Z (default gridscene, 3x3 grid, one object).
        modalities: how many modalities (gridscene: pixels, caption, symbolic).
        eps: the grid (default 25 points from 0.02 to 1).
        k: number of features, or "auto".
        seed: seeds the world, the modalities and one stream per eps.
    """

    world: WorldConfig = Field(default_factory=lambda: GridSceneWorld(size=3, objects=1))
    modalities: int = Field(3, ge=2, le=8)
    eps: list[float] | None = None
    k: int | Literal["auto"] = "auto"
    seed: int = Field(0, ge=0)


class KernelMismatchSweepSettings(Settings):
    """``prhsim sweep kernel-mismatch``: random worlds and a perturbation of each size against both bounds."""

    n: int = Field(30, ge=4, le=5000)
    sizes: list[float] | None = None
    k: int = Field(2, ge=1)
    worlds: int = Field(8, ge=1, le=1000)
    seed: int = Field(0, ge=0)


class GapSensitivitySettings(Settings):
    """``prhsim sweep gap-sensitivity``: path(n) x path(n) with the gap at k = 1 set to each value."""

    gaps: list[float] | None = None
    size: float = Field(1e-3, gt=0, le=1)
    n: int = Field(6, ge=3, le=200)
    move: float = Field(0.9, gt=0, le=1)
    seed: int = Field(0, ge=0)


class RestrictedEncoderSettings(Settings):
    """``prhsim sweep restricted-encoder``: encoders linear in each gridscene modality's rendering."""

    size: int = Field(3, ge=2, le=10)
    objects: int = Field(1, ge=1, le=3)
    k: int | Literal["auto"] = "auto"
    views: Literal["good", "bad"] = "good"
    eps: float = Field(0.1, gt=0, le=1)
    inputs: Literal["raw", "onehot", "state"] = "raw"
    seed: int = Field(0, ge=0)


class MetricBridgeSettings(Settings):
    """``prhsim sweep metric-bridge``: pairs at controlled misalignment scored by ρ_P and by the PRH metrics."""

    size: int = Field(4, ge=2, le=10)
    objects: int = Field(1, ge=1, le=2)
    levels: int = Field(16, ge=3, le=100)
    samples: int = Field(1000, ge=4, le=100_000)
    knn_k: int = Field(10, ge=1)
    k: int | Literal["auto"] = "auto"
    seed: int = Field(0, ge=0)
