"""gridscene: objects on a G x G grid, each with a shape and a colour, seen through three modalities.

The pair law is short-horizon dynamics with independent factors, so the world
is a product world (docs/theory.md §6): per object, its column and row each follow a
lazy reflecting walk (the object steps to a neighbouring cell), its shape is
redrawn uniformly with a small probability, and its colour steps along an
ordered hue scale. Move and change probabilities differ per object and axis,
so the slow eigenvalues (one per degree of freedom, two per shape) are
distinct and sit above every product of two of them: with the defaults the
centred spectrum has its largest (absolute and relative) gap at ``k = 10`` (0.707 → 0.620).

Modalities (each injective in (z, n); see :func:`prhsim.worlds.injectivity_check`), each
bound to its scene's number of states (``Modality.n_states``):

* ``pixels``: an RGB image, one 4x4-pixel block per cell, object o drawn as a
  2x2 glyph of its shape in slot o of the block; nuisance = lighting x background.
* ``caption``: token ids of "alpha red square at row 1 column 2 ; beta ...";
  nuisance = synonym set x clause order x "row/column" order.
* ``symbolic``: the attribute vector (coordinates, one-hot shape and colour)
  through one of three random affine maps; nuisance = which map.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from prhsim._rng import RngLike, check_rng
from prhsim._types import States
from prhsim.worlds._modality import Modality
from prhsim.worlds._named import path, resampling
from prhsim.worlds._product import ProductWorld

MAX_OBJECTS = 4
_GLYPHS = np.array(  # 2x2 shape glyphs, distinct and non-empty
    [[[1, 1], [1, 1]], [[1, 0], [0, 1]], [[1, 1], [0, 0]], [[0, 1], [1, 0]], [[1, 0], [0, 0]], [[1, 0], [1, 0]]],
    dtype=np.float64,
)
_HUES = np.array(  # an ordered hue scale (colour dynamics steps along it)
    [[0.9, 0.1, 0.1], [0.95, 0.55, 0.1], [0.9, 0.9, 0.15], [0.2, 0.8, 0.2], [0.15, 0.8, 0.85], [0.2, 0.3, 0.95], [0.65, 0.2, 0.85]]
)
_BACKGROUNDS = np.array([[0.05, 0.05, 0.05], [0.35, 0.35, 0.35]])
_LIGHTING = np.array([1.0, 0.75])
_NAMES = ["alpha", "beta", "gamma", "delta"]
_SHAPE_WORDS = [("square", "block"), ("diagonal", "slash"), ("bar", "strip"), ("cross", "backslash"), ("dot", "speck"), ("pillar", "post")]
_COLOUR_WORDS = [("red", "crimson"), ("orange", "amber"), ("yellow", "gold"), ("green", "emerald"), ("cyan", "teal"), ("blue", "azure"), ("purple", "violet")]
_NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


@dataclass(frozen=True)
class GridScene:
    """A gridscene world and its structure.

    Attributes:
        size: grid side G.
        n_objects, n_shapes, n_colours: counts.
        move: per object, the (column, row) step probabilities.
        shape_change: per object, the probability the shape is redrawn.
        colour_change: per object, the step probability along the hue scale.
        world: the product world over Z; factors per object: column, row, shape, colour.
    """

    size: int
    n_objects: int
    n_shapes: int
    n_colours: int
    move: tuple[tuple[float, float], ...]
    shape_change: tuple[float, ...]
    colour_change: tuple[float, ...]

    @cached_property
    def world(self) -> ProductWorld:
        factors = []
        uniform_shape = np.full(self.n_shapes, 1.0 / self.n_shapes)
        for o in range(self.n_objects):
            factors += [
                path(self.size, move=self.move[o][0]),
                path(self.size, move=self.move[o][1]),
                resampling(uniform_shape, self.shape_change[o]),
                path(self.n_colours, move=self.colour_change[o]),
            ]
        return ProductWorld(factors)

    @property
    def n(self) -> int:
        return self.world.n

    def decode(self, states: States) -> dict[str, np.ndarray]:
        """Attributes of flat states: arrays of shape (s, n_objects) for col, row, shape, colour."""
        idx = self.world.unravel(states)
        return {key: np.stack(idx[j::4], axis=-1) for j, key in enumerate(("col", "row", "shape", "colour"))}

    def modalities(self, *, rng: RngLike = None) -> tuple[Modality, Modality, Modality]:
        """The three modalities: pixels, caption, symbolic (rng seeds the symbolic maps)."""
        return (pixels(self), caption(self), symbolic(self, rng=rng))


def gridscene(
    size: int = 4,
    objects: int = 2,
    shapes: int = 3,
    colours: int = 3,
    *,
    move: list[tuple[float, float]] | None = None,
    shape_change: list[float] | None = None,
    colour_change: list[float] | None = None,
) -> GridScene:
    """Build a gridscene. Defaults: 4x4 grid, 2 objects, 3 shapes, 3 colours (20,736 states).

    Default dynamics: column/row step probabilities spread over [0.7, 1.0]
    across objects and axes, shape redraw over [0.22, 0.25], colour step over
    [0.48, 0.56]. With two objects the ten slow eigenvalues lie in
    [0.707, 0.795], at least 0.005 apart (shape pairs excepted), above every
    product of two of them (at most 0.620): k = 10 sits at a gap of 0.087.
    """
    if int(size) != size or not 2 <= size <= len(_NUMBER_WORDS):
        raise ValueError(f"gridscene size must be an integer in 2..{len(_NUMBER_WORDS)}, got {size}")
    if int(objects) != objects or not 1 <= objects <= MAX_OBJECTS:
        raise ValueError(f"gridscene objects must be an integer in 1..{MAX_OBJECTS}, got {objects}")
    if int(shapes) != shapes or not 2 <= shapes <= len(_GLYPHS):
        raise ValueError(f"gridscene shapes must be an integer in 2..{len(_GLYPHS)}, got {shapes}")
    if int(colours) != colours or not 2 <= colours <= len(_HUES):
        raise ValueError(f"gridscene colours must be an integer in 2..{len(_HUES)}, got {colours}")
    if move is None:
        spread = np.linspace(0.7, 1.0, 2 * objects)
        move = [(spread[2 * o], spread[2 * o + 1]) for o in range(objects)]
    shape_change = list(np.linspace(0.22, 0.25, objects)) if shape_change is None else list(shape_change)
    colour_change = list(np.linspace(0.48, 0.56, objects)) if colour_change is None else list(colour_change)
    for name, values in (("move", move), ("shape_change", shape_change), ("colour_change", colour_change)):
        if len(values) != objects:
            raise ValueError(f"gridscene {name} needs one entry per object ({objects}), got {len(values)}")
    move = tuple((float(a), float(b)) for a, b in move)
    return GridScene(int(size), int(objects), int(shapes), int(colours), move,
                     tuple(float(c) for c in shape_change), tuple(float(c) for c in colour_change))


def pixels(scene: GridScene) -> Modality:
    """RGB uint8 image (4G x 4G x 3); nuisance = lighting (2) x background (2), q = (0.4, 0.3, 0.2, 0.1)."""
    G, O = scene.size, scene.n_objects
    n_bg = len(_BACKGROUNDS)
    q = np.array([0.4, 0.3, 0.2, 0.1])  # over (lighting, background), background fastest

    # colours after lighting, as uint8: [lighting, background] and [lighting, hue]
    bg_u8 = np.round(255 * _LIGHTING[:, None, None] * _BACKGROUNDS[None]).astype(np.uint8)
    hue_u8 = np.round(255 * _LIGHTING[:, None, None] * _HUES[None]).astype(np.uint8)

    def render(z: States, n: States) -> np.ndarray:
        attrs = scene.decode(z)
        light = n // n_bg
        img = np.empty((len(z), 4 * G, 4 * G, 3), dtype=np.uint8)
        img[:] = bg_u8[light, n % n_bg][:, None, None, :]
        rows = np.arange(len(z))
        for o in range(O):
            glyph = _GLYPHS[attrs["shape"][:, o]]  # (s, 2, 2)
            hue = hue_u8[light, attrs["colour"][:, o]]  # (s, 3)
            top = 4 * attrs["row"][:, o] + 2 * (o // 2)
            left = 4 * attrs["col"][:, o] + 2 * (o % 2)
            for dy in range(2):
                for dx in range(2):
                    on = glyph[:, dy, dx] > 0
                    img[rows[on], top[on] + dy, left[on] + dx] = hue[on]
        return img

    return Modality("pixels", q, render, "RGB image of the scene; nuisance: lighting x background", n_states=scene.n,
                    factor_sizes=scene.world.shape)


def caption_vocabulary(scene: GridScene) -> list[str]:
    """The token strings of :func:`caption` (token id = position in this list)."""
    vocab = ["at", "row", "column", ";"] + _NAMES[: scene.n_objects]
    vocab += [w for pair in _COLOUR_WORDS[: scene.n_colours] for w in pair]
    vocab += [w for pair in _SHAPE_WORDS[: scene.n_shapes] for w in pair]
    return vocab + _NUMBER_WORDS[: scene.size]


def caption(scene: GridScene) -> Modality:
    """Token ids of a templated description, 9 tokens per object.

    Nuisance (8 values, uniform): synonym set (2) x clause order forward/reversed
    (2) x "row r column c" / "column c row r" (2). Object names keep it injective.
    With one object there is one clause; "reversed" then puts its place ("at row r
    column c") before its description, so the caption stays injective.
    """
    O, C, S = scene.n_objects, scene.n_colours, scene.n_shapes
    AT, ROW, COL, SEP, NAME0 = 0, 1, 2, 3, 4
    COLOUR0 = NAME0 + O
    SHAPE0 = COLOUR0 + 2 * C
    NUM0 = SHAPE0 + 2 * S
    q = np.full(8, 1.0 / 8)

    def render(z: States, n: States) -> np.ndarray:
        attrs = scene.decode(z)
        synonym, reverse, col_first = n // 4, (n // 2) % 2, n % 2
        s = len(z)
        clauses = []
        for o in range(O):
            row_tok, col_tok = NUM0 + attrs["row"][:, o], NUM0 + attrs["col"][:, o]
            first = np.where(col_first == 1, COL, ROW)
            first_val = np.where(col_first == 1, col_tok, row_tok)
            second = np.where(col_first == 1, ROW, COL)
            second_val = np.where(col_first == 1, row_tok, col_tok)
            clauses.append(np.stack([
                np.full(s, NAME0 + o), COLOUR0 + 2 * attrs["colour"][:, o] + synonym,
                SHAPE0 + 2 * attrs["shape"][:, o] + synonym, np.full(s, AT),
                first, first_val, second, second_val, np.full(s, SEP),
            ], axis=1))
        forward = np.concatenate(clauses, axis=1)
        if O == 1:
            clause = clauses[0]
            backward = np.concatenate([clause[:, 3:8], clause[:, :3], clause[:, 8:]], axis=1)
        else:
            backward = np.concatenate(clauses[::-1], axis=1)
        return np.where(reverse[:, None] == 1, backward, forward).astype(np.int32)

    return Modality("caption", q, render,
                    "templated caption (token ids); nuisance: synonyms x clause order x word order", n_states=scene.n,
                    factor_sizes=scene.world.shape)


def symbolic(scene: GridScene, *, rng: RngLike = None) -> Modality:
    """Attribute vector through one of 3 random affine maps ``A_n v + b_n``; q = (0.5, 0.3, 0.2)."""
    gen = check_rng(rng)
    O, G, S, C = scene.n_objects, scene.size, scene.n_shapes, scene.n_colours
    dim = O * (2 + S + C)
    maps = gen.normal(size=(3, dim, dim)) / np.sqrt(dim)
    offsets = gen.normal(size=(3, dim))
    q = np.array([0.5, 0.3, 0.2])

    def render(z: States, n: States) -> np.ndarray:
        attrs = scene.decode(z)
        parts = []
        for o in range(O):
            parts += [attrs["col"][:, o:o + 1] / (G - 1), attrs["row"][:, o:o + 1] / (G - 1),
                      np.eye(S)[attrs["shape"][:, o]], np.eye(C)[attrs["colour"][:, o]]]
        v = np.concatenate(parts, axis=1)
        return np.einsum("sij,sj->si", maps[n], v) + offsets[n]

    return Modality("symbolic", q, render, "attribute vector through a random affine map; nuisance: which map",
                    n_states=scene.n,
                    factor_sizes=scene.world.shape)
