"""Configuration models for every command (pydantic, unknown keys rejected).

Merging is done in one place, :func:`resolve_run_config`: defaults, then a
config file (JSON or TOML), then command-line flags.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GridSceneWorld(_Strict):
    """gridscene: objects on a grid with shapes and colours (see :func:`prhsim.worlds.gridscene`)."""

    kind: Literal["gridscene"] = "gridscene"
    size: int = Field(4, ge=2, le=10)
    objects: int = Field(2, ge=1, le=4)
    shapes: int = Field(3, ge=2, le=6)
    colours: int = Field(3, ge=2, le=7)
    move: list[tuple[float, float]] | None = None
    shape_change: list[float] | None = None
    colour_change: list[float] | None = None


class RingWorld(_Strict):
    """Lazy random walk on a cycle."""

    kind: Literal["ring"] = "ring"
    n: int = Field(64, ge=3)
    laziness: float = Field(0.5, ge=0, le=1)


class TorusWorld(_Strict):
    """Product of rings."""

    kind: Literal["torus"] = "torus"
    shape: list[int] = Field(default_factory=lambda: [8, 12], min_length=1)
    laziness: float = Field(0.5, ge=0, le=1)


class GridWorld(_Strict):
    """Product of reflecting paths, one move probability per axis."""

    kind: Literal["grid"] = "grid"
    shape: list[int] = Field(default_factory=lambda: [6, 9], min_length=1)
    move: list[float] = Field(default_factory=lambda: [0.5, 0.8], min_length=1)


class RandomWorld(_Strict):
    """Sinkhorn-scaled random world (seeded by the run's seed)."""

    kind: Literal["random"] = "random"
    n: int = Field(300, ge=3)
    degree: int | None = Field(None, ge=1)
    concentration: float = Field(2.0, gt=0)


WorldConfig = Annotated[Union[GridSceneWorld, RingWorld, TorusWorld, GridWorld, RandomWorld], Field(discriminator="kind")]
WORLD_KINDS = ("gridscene", "ring", "torus", "grid", "random")


class RunConfig(_Strict):
    """Configuration of ``prhsim run``.

    Attributes:
        world: the world over Z and its parameters.
        modalities: how many modalities (gridscene: up to 3, pixels/caption/symbolic;
            other worlds: random codebook modalities).
        views: the view every modality uses, unless ``modality_views`` names it.
        eps: the bad view's resampling probability (nuisance kept w.p. 1 − eps).
        modality_views: per-modality override of ``views``, by modality name.
        k: number of features, or "auto" (largest gap of K_Z in 1..32).
        centred: centred whitened objective.
        seed: seeds every random choice (random worlds, symbolic maps, codebooks).
        out: output folder (the CLI picks ``runs/<time>-<world>`` when unset).
        figures: write the PNG figures.
    """

    world: WorldConfig = Field(default_factory=GridSceneWorld)
    modalities: int = Field(3, ge=1, le=8)
    views: Literal["good", "bad"] = "good"
    eps: float = Field(0.1, gt=0, le=1)
    modality_views: dict[str, Literal["good", "bad"]] = Field(default_factory=dict)
    k: int | Literal["auto"] = "auto"
    centred: bool = True
    seed: int = Field(0, ge=0)
    out: Path | None = None
    figures: bool = True


class ConfigError(ValueError):
    """A configuration file or flag is invalid; the message names the key."""


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a JSON or TOML configuration file into a dict."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid {'TOML' if path.suffix.lower() == '.toml' else 'JSON'}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a table/object of settings")
    return data


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: ``key.path: message``."""
    lines = []
    for err in exc.errors():
        loc = list(err["loc"])
        if len(loc) > 1 and loc[0] == "world" and loc[1] in WORLD_KINDS:
            del loc[1]  # the union's tag, not a key the user wrote
        where = ".".join(str(x) for x in loc) or "config"
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown key {where!r}")
        else:
            lines.append(f"{where}: {err['msg']}")
    return "; ".join(lines)


def resolve_run_config(file_data: dict[str, Any] | None = None, flags: dict[str, Any] | None = None) -> RunConfig:
    """Defaults <- file <- flags. ``flags`` holds only the flags actually given (None values are ignored).

    A ``world`` flag (a kind name) replaces the file's world unless the file's world has that kind.
    """
    data: dict[str, Any] = dict(file_data or {})
    if isinstance(data.get("world"), str):
        data["world"] = {"kind": data["world"]}
    if isinstance(data.get("world"), dict) and "kind" not in data["world"]:
        data["world"] = {"kind": "gridscene", **data["world"]}
    for key, value in (flags or {}).items():
        if value is None:
            continue
        if key == "world":
            current = data.get("world")
            current_kind = current.get("kind", "gridscene") if isinstance(current, dict) else None
            data["world"] = current if current_kind == value else {"kind": value}
        else:
            data[key] = value
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None
