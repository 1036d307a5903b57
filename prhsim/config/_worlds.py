"""World settings: one pydantic model per world kind, each able to build its world and size it.

A model knows, from its settings alone, how many states its world has, the
modalities a run gives it and their nuisance sizes, so a run can be costed
(:mod:`prhsim.experiments._plan`) before anything is allocated. Every value
from a file is strictly typed (no ``"0.1"`` for a number, no ``true`` for an
integer) and finite.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal, Union, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from prhsim.worlds import (
    WORDING_FACTORS,
    CaptionStyle,
    GridScene,
    Modality,
    World,
    codebook,
    grid,
    gridscene,
    random_world,
    ring,
    torus,
)

#: The largest world over Z any run can hold: the smallest modality has 2 nuisance states,
#: and a run materialises at most 5,000,000 modal states per feature table.
MAX_STATES = 2_500_000
#: The modalities gridscene renders, in the order ``modalities = N`` takes them, with their |N|.
GRIDSCENE_MODALITIES = {"pixels": 4, "caption": 8, "symbolic": 3}
#: The largest dense random world (its Π alone holds n² floats: 20 GB at this size).
MAX_DENSE_STATES = 50_000
#: Bytes of one observation of a codebook modality (dim 8, float64).
CODEBOOK_OBS_BYTES = 64

Probability = Annotated[float, Field(ge=0, le=1)]


class Settings(BaseModel):
    """Strict, frozen, no unknown keys, finite numbers; a key an earlier release used is refused naming its new name;
    no list setting is empty, and the grids a model names in :attr:`grids` hold each value once."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    #: Keys of an earlier release -> the key each is now (the vocabulary of docs/architecture.md).
    renamed: ClassVar[dict[str, str]] = {}
    #: List settings that are grids swept over: a value given twice would compute the same cells twice.
    grids: ClassVar[tuple[str, ...]] = ()
    #: List settings for which the empty list is a value (a set of choices that may be none).
    may_be_empty: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _lists(self) -> "Settings":
        for key, value in self:
            if isinstance(value, (list, tuple)) and len(value) == 0 and key not in self.may_be_empty:
                raise ValueError(f"{key} is empty: give at least one value")
            if key in self.grids and isinstance(value, (list, tuple)):
                seen = set()
                for item in value:
                    if item in seen:
                        raise ValueError(f"{key} holds {item!r} twice: give each value once")
                    seen.add(item)
        return self

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        for old, new in cls.renamed.items():
            if isinstance(data, dict) and old in data:
                raise ValueError(f"the key {old!r} is now {new!r}")
        return data


class _WorldBase(Settings):
    """What every world model offers to a run."""

    @property
    def factor_sizes(self) -> list[int]:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def n_states(self) -> int:
        return math.prod(self.factor_sizes)

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    #: The settings that make the world larger, named as a user writes them.
    size_keys: ClassVar[tuple[str, ...]] = ()

    def build(self, rng: np.random.Generator) -> World:  # pragma: no cover - interface
        raise NotImplementedError

    def modality_names(self, count: int) -> list[str]:
        return [f"code{i + 1}" for i in range(count)]

    def nuisance_sizes(self, count: int) -> list[int]:
        """|N_m| of each modality a run with ``count`` modalities gives this world."""
        return [i + 2 for i in range(count)]

    def observation_bytes(self, count: int) -> list[int]:
        """Bytes of one rendered observation per modality."""
        return [CODEBOOK_OBS_BYTES] * count

    def modalities(self, base: World, count: int, streams: list[np.random.Generator]) -> tuple[Modality, ...]:
        """Random codebook modalities ``code1 .. codeN`` with |N| = 2, 3, …"""
        return tuple(codebook(base.n, i + 2, name=f"code{i + 1}", rng=streams[i + 1]) for i in range(count))

    def hint(self) -> str:
        keys = " or ".join(f"world.{k}" for k in self.size_keys)
        return f"lower {keys}"

    def never_moves(self) -> str | None:
        """The settings that keep every state in place (Π = diag(p)), as the user wrote them; None if it moves."""
        return None

    @model_validator(mode="after")
    def _moves(self) -> "_WorldBase":
        """A world that never moves has K = I: nothing but the constant is a feature (docs/theory.md §1.2)."""
        still = self.never_moves()
        if still is not None:
            raise ValueError(f"{still}: this {self.kind} never moves (every positive pair is one state twice, "
                             "Pi = diag(p)), so K is the identity and no feature but the constant is defined; "
                             "let the world move")
        return self


class GridSceneWorld(_WorldBase):
    """gridscene: objects on a size x size grid, each with a shape and a colour, seen as pixels, captions and symbols."""

    kind: Literal["gridscene"] = "gridscene"
    size: int = Field(4, ge=2, le=10, description="grid side G")
    objects: int = Field(2, ge=1, le=4, description="number of objects")
    shapes: int = Field(3, ge=2, le=6, description="number of shapes")
    colours: int = Field(3, ge=2, le=7, description="number of colours")
    move: list[Annotated[list[Probability], Field(min_length=2, max_length=2)]] | None = Field(
        None, description="per object, [column, row] step probabilities (default spread over 0.7..1.0)")
    shape_change: list[Probability] | None = Field(
        None, description="per object, probability the shape is redrawn (default 0.22..0.25)")
    colour_change: list[Probability] | None = Field(
        None, description="per object, step probability along the hue scale (default 0.48..0.56)")
    dependence: float = Field(0.0, ge=0, lt=1, description="how often an object's colour follows its shape "
                                                           "(0: independent attributes)")
    size_keys: ClassVar[tuple[str, ...]] = ("size", "objects")

    @model_validator(mode="after")
    def _one_per_object(self) -> "GridSceneWorld":
        for name in ("move", "shape_change", "colour_change"):
            values = getattr(self, name)
            if values is not None and len(values) != self.objects:
                raise ValueError(f"{name} needs one entry per object ({self.objects}), got {len(values)}")
        return self

    @property
    def factor_sizes(self) -> list[int]:
        appearance = [self.shapes, self.colours] if self.dependence == 0 else [self.shapes * self.colours]
        return ([self.size, self.size] + appearance) * self.objects

    def describe(self) -> str:
        dependent = f", colour following shape w.p. {self.dependence:g}" if self.dependence else ""
        return f"gridscene size {self.size} with {self.objects} object{'s' * (self.objects > 1)}{dependent}"

    def never_moves(self) -> str | None:
        changes = (self.move, self.shape_change, self.colour_change)
        if any(c is None for c in changes) or any(any(np.ravel(c)) for c in changes):
            return None  # a default is nonzero
        return "every move, shape_change and colour_change = 0"

    def build_scene(self) -> GridScene:
        """The gridscene itself (its world, modalities and caption law)."""
        return self._scene()

    def _scene(self):
        return gridscene(self.size, self.objects, self.shapes, self.colours, move=self.move,
                         shape_change=self.shape_change, colour_change=self.colour_change, dependence=self.dependence)

    def build(self, rng: np.random.Generator) -> World:
        return self._scene().world

    def modality_names(self, count: int) -> list[str]:
        return list(GRIDSCENE_MODALITIES)[:count]

    def nuisance_sizes(self, count: int) -> list[int]:
        return list(GRIDSCENE_MODALITIES.values())[:count]

    def observation_bytes(self, count: int) -> list[int]:
        dim = self.objects * (2 + self.shapes + self.colours)
        return [16 * self.size ** 2 * 3, 9 * self.objects * 4, 8 * dim][:count]

    def modalities(self, base: World, count: int, streams: list[np.random.Generator]) -> tuple[Modality, ...]:
        return self._scene().modalities(rng=streams[0])[:count]


class CaptionConfig(Settings):
    """How a gridscene's captions are worded, and what they leave out or say twice (:class:`prhsim.worlds.CaptionStyle`).

    Each setting at its default gives the template grammar as it always was.
    """

    wording: list[Literal["synonyms", "word_synonyms", "clause_order", "word_order"]] = Field(
        default_factory=lambda: list(WORDING_FACTORS), description="the wording factors that vary (the nuisance)")
    omission: float = Field(0.0, ge=0, lt=1, description="chance that a caption leaves an object unmentioned")
    redundancy: Probability = Field(0.0, description="chance that a caption ends with a summary clause")
    grids: ClassVar[tuple[str, ...]] = ("wording",)
    may_be_empty: ClassVar[tuple[str, ...]] = ("wording",)

    @model_validator(mode="after")
    def _one_synonym_choice(self) -> "CaptionConfig":
        if "synonyms" in self.wording and "word_synonyms" in self.wording:
            raise ValueError("wording holds synonyms (one set per caption) and word_synonyms (one per word): "
                             "give one")
        return self

    def build(self) -> CaptionStyle:
        return CaptionStyle(tuple(self.wording), self.omission, self.redundancy)

    def describe(self) -> str:
        """The settings that differ from the default, in words ("" for the default captions)."""
        parts = []
        if tuple(self.wording) != WORDING_FACTORS:
            parts.append("wording: " + (", ".join(w.replace("_", " ") for w in self.wording) or "none"))
        if self.omission:
            parts.append(f"omission {self.omission:g}")
        if self.redundancy:
            parts.append(f"redundancy {self.redundancy:g}")
        return "; ".join(parts)


class RingWorld(_WorldBase):
    """ring: a lazy random walk on a cycle of n states (eigenvalues in tied pairs)."""

    kind: Literal["ring"] = "ring"
    n: int = Field(64, ge=3, le=MAX_STATES, description="number of states")
    laziness: Probability = Field(0.5, description="probability of staying put")
    size_keys: ClassVar[tuple[str, ...]] = ("n",)

    @property
    def factor_sizes(self) -> list[int]:
        return [self.n]

    def describe(self) -> str:
        return f"ring of {self.n:,} states"

    def never_moves(self) -> str | None:
        return "laziness = 1" if self.laziness == 1 else None

    def build(self, rng: np.random.Generator) -> World:
        return ring(self.n, laziness=self.laziness)


class _AxesWorld(_WorldBase):
    """A product of one walk per axis: its factors are its ``shape`` (a field of each subclass)."""

    size_keys: ClassVar[tuple[str, ...]] = ("shape",)

    @property
    def factor_sizes(self) -> list[int]:
        return list(self.shape)

    def describe(self) -> str:
        return f"{self.kind} {'x'.join(map(str, self.shape))} ({self.n_states:,} states)"


class TorusWorld(_AxesWorld):
    """torus: a product of rings, one per axis (full of ties)."""

    kind: Literal["torus"] = "torus"
    shape: list[Annotated[int, Field(ge=3, le=MAX_STATES)]] = Field(
        default_factory=lambda: [8, 12], min_length=1, description="ring size per axis")
    laziness: Probability = Field(0.5, description="probability of staying put, per axis")

    def never_moves(self) -> str | None:
        return "laziness = 1" if self.laziness == 1 else None

    def build(self, rng: np.random.Generator) -> World:
        return torus(self.shape, laziness=self.laziness)


class GridWorld(_AxesWorld):
    """grid: a product of reflecting paths, one move probability per axis."""

    kind: Literal["grid"] = "grid"
    shape: list[Annotated[int, Field(ge=2, le=MAX_STATES)]] = Field(
        default_factory=lambda: [6, 9], min_length=1, description="path length per axis")
    move: list[Probability] | None = Field(
        None, min_length=1, description="step probability per axis (default spread over 0.5..0.8)")

    @model_validator(mode="after")
    def _one_per_axis(self) -> "GridWorld":
        if self.move is not None and len(self.move) != len(self.shape):
            raise ValueError(f"move needs one entry per axis ({len(self.shape)}), got {len(self.move)}")
        return self

    @property
    def moves(self) -> list[float]:
        """The move probability of each axis: ``move``, or spread evenly over 0.5..0.8 (distinct: no ties)."""
        if self.move is not None:
            return list(self.move)
        return [0.5] if len(self.shape) == 1 else np.linspace(0.5, 0.8, len(self.shape)).tolist()

    def never_moves(self) -> str | None:
        return "every move = 0" if not any(self.moves) else None

    def build(self, rng: np.random.Generator) -> World:
        return grid(self.shape, move=self.moves)


class RandomWorld(_WorldBase):
    """random: a Sinkhorn-scaled random world, dense or a sparse random graph (seeded by the run's seed)."""

    kind: Literal["random"] = "random"
    n: int = Field(300, ge=3, le=MAX_STATES, description="number of states")
    degree: int | None = Field(None, ge=1, description="neighbours per state (sparse graph); unset: dense "
                                                        f"(then n <= {MAX_DENSE_STATES:,})")
    concentration: float = Field(2.0, gt=0, description="Dirichlet concentration of the target p")
    size_keys: ClassVar[tuple[str, ...]] = ("n",)

    @model_validator(mode="after")
    def _degree_below_n(self) -> "RandomWorld":
        if self.degree is not None and self.degree >= self.n:
            raise ValueError(f"degree must be below n ({self.n}), got {self.degree}")
        if self.degree is None and self.n > MAX_DENSE_STATES:
            raise ValueError(f"a dense random world holds n² pairs: n must be at most {MAX_DENSE_STATES:,}, "
                             f"got {self.n:,} (set world.degree for a sparse world)")
        return self

    @property
    def factor_sizes(self) -> list[int]:
        return [self.n]

    def describe(self) -> str:
        graph = "dense" if self.degree is None else f"degree {self.degree}"
        return f"random world of {self.n:,} states ({graph})"

    def build(self, rng: np.random.Generator) -> World:
        return random_world(self.n, degree=self.degree, concentration=self.concentration, rng=rng)

    def hint(self) -> str:
        return "lower world.n" + (" or set world.degree (a sparse world)" if self.degree is None else "")


WorldConfig = Annotated[Union[GridSceneWorld, RingWorld, TorusWorld, GridWorld, RandomWorld], Field(discriminator="kind")]
#: The world models, in the order ``prhsim worlds`` lists them.
WORLD_MODELS: tuple[type[_WorldBase], ...] = get_args(get_args(WorldConfig)[0])
#: The world kinds the config accepts, derived from the models.
WORLD_KINDS: tuple[str, ...] = tuple(get_args(m.model_fields["kind"].annotation)[0] for m in WORLD_MODELS)
