"""Settings of ``prhsim real`` (one strict pydantic model per subcommand)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from prhsim.config._worlds import GridSceneWorld, Settings, WorldConfig


class ExportSettings(Settings):
    """``prhsim real export-synthetic``: a Flickr-format dataset from a prhsim world.

    Attributes:
        world: a world with pixel and caption renderers (gridscene; default 4x4 grid, 2 objects).
        images: records; captions: sentences per image (each of its own wording).
        val, test: fractions of the images in the val and test splits.
        pixel_scale: each pixel becomes a square of this side (default: 224 px images).
        k: the pixel closed form's features ("auto": at its gap).
        seed: seeds the states, the lightings, the wordings and the splits.
    """

    world: WorldConfig = Field(default_factory=GridSceneWorld)
    images: int = Field(2000, ge=3, le=1_000_000)
    captions: int = Field(5, ge=1, le=100)
    val: float = Field(0.1, gt=0, lt=1)
    test: float = Field(0.1, gt=0, lt=1)
    pixel_scale: int | None = Field(None, ge=1, le=64)
    k: int | Literal["auto"] = "auto"
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _renderable(self) -> "ExportSettings":
        if self.world.kind != "gridscene":
            raise ValueError(f"export-synthetic needs a world with pixel and caption renderers (gridscene), "
                             f"got {self.world.kind}")
        if self.val + self.test >= 1:
            raise ValueError(f"val + test must leave images for training, got {self.val} + {self.test}")
        return self
