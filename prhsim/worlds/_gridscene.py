"""gridscene: objects on a G x G grid, each with a shape and a colour, seen through three modalities.

The pair law is short-horizon dynamics with independent factors, so the world
is a product world (docs/theory.md §6): per object, its column and row each follow a
lazy reflecting walk (the object steps to a neighbouring cell), its shape is
redrawn uniformly with a small probability, and its colour steps along an
ordered hue scale. With ``dependence`` ρ > 0 an object's colour follows its shape:
``p(s, c) = (ρ·1[c = s mod C] + (1 − ρ)/C)/S``, and the object's (shape, colour) is one
factor of the product, moved by the Metropolis chain whose proposal is the independent
shape and colour moves (:func:`prhsim.worlds._named.metropolis`, docs/theory.md §5.3).
The states keep their index either way (the joint factor indexes ``shape·C + colour``), and a
modality's part for an object reads the object's factors and renders from its four attributes
(:func:`prhsim.worlds._scene_captions.object_part`). Move and change probabilities differ per object and axis,
so the slow eigenvalues (one per degree of freedom, two per shape) are
distinct and sit above every product of two of them: with the defaults the
centred spectrum has its largest (absolute and relative) gap at ``k = 10`` (0.707 → 0.620).

Modalities (each injective in (z, n); see :func:`prhsim.worlds.injectivity_check`), each
bound to its scene's number of states (``Modality.n_states``):

* ``pixels``: an RGB image, one 4x4-pixel block per cell, object o drawn as a
  2x2 glyph of its shape in slot o of the block; nuisance = lighting x background.
* ``caption``: token ids of "alpha red square at row 1 column 2 ; beta ...";
  nuisance = synonym set x clause order x "row/column" order (the grammar, and its
  partial, redundant and smaller-wording variants, are in :mod:`prhsim.worlds._scene_captions`).
* ``symbolic``: the attribute vector (coordinates, one-hot shape and colour)
  through one of three random affine maps; nuisance = which map.

``pixels`` and ``caption`` are declared by parts (:class:`prhsim.worlds._modality.Parts`):
each object's slot image or clause reads only that object's factors and the nuisance,
and the observation is the parts under a fixed coordinate permutation (caption: one of
two, by clause order). Their renderers are built from these parts, and the injectivity
check decides them from the parts' renders (a few thousand small renders, whatever the
number of states). ``symbolic`` mixes all objects through its map in floating point, so
it has no such parts and is checked by rendering.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from prhsim._rng import RngLike, check_rng
from prhsim._types import States
from prhsim.worlds._finite import FiniteWorld
from prhsim.worlds._modality import Modality, Part, Parts
from prhsim.worlds._named import metropolis, path, resampling
from prhsim.worlds._product import ProductWorld
from prhsim.worlds._scene_captions import NUMBER_WORDS, caption, object_part

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


@dataclass(frozen=True)
class GridScene:
    """A gridscene world and its structure.

    Attributes:
        size: grid side G.
        n_objects, n_shapes, n_colours: counts.
        move: per object, the (column, row) step probabilities.
        shape_change: per object, the probability the shape is redrawn.
        colour_change: per object, the step probability along the hue scale.
        dependence: ρ, how often an object's colour follows its shape (0: independent).
        world: the product world over Z; factors per object: column, row, shape, colour
            (column, row, (shape, colour) when ``dependence`` > 0).
    """

    size: int
    n_objects: int
    n_shapes: int
    n_colours: int
    move: tuple[tuple[float, float], ...]
    shape_change: tuple[float, ...]
    colour_change: tuple[float, ...]
    dependence: float = 0.0

    @cached_property
    def world(self) -> ProductWorld:
        factors = []
        uniform_shape = np.full(self.n_shapes, 1.0 / self.n_shapes)
        for o in range(self.n_objects):
            shape = resampling(uniform_shape, self.shape_change[o])
            colour = path(self.n_colours, move=self.colour_change[o])
            factors += [path(self.size, move=self.move[o][0]), path(self.size, move=self.move[o][1])]
            factors += [shape, colour] if self.dependence == 0 else [self._appearance(shape, colour)]
        return ProductWorld(factors)

    def appearance_law(self) -> np.ndarray:
        """``p(s, c) = (ρ·1[c = s mod C] + (1 − ρ)/C)/S`` of one object, (S, C): its colour follows its shape w.p. ρ."""
        S, C, rho = self.n_shapes, self.n_colours, self.dependence
        typical = np.arange(S)[:, None] % C == np.arange(C)[None, :]
        return (rho * typical + (1.0 - rho) / C) / S

    def _appearance(self, shape, colour):
        """One object's (shape, colour) as one factor: the Metropolis chain of the independent moves towards
        :meth:`appearance_law` (index ``shape·C + colour``, as the two axes index row-major)."""
        dense = [f.Pi.toarray() if f.is_sparse else f.Pi for f in (shape, colour)]
        proposal = FiniteWorld(np.kron(shape.p, colour.p), np.kron(*dense), symmetrize=True)
        return metropolis(self.appearance_law().ravel(), proposal)

    @property
    def axes(self) -> tuple[int, ...]:
        """The sizes of the scene's attributes, per object (column, row, shape, colour): what modalities decode."""
        return (self.size, self.size, self.n_shapes, self.n_colours) * self.n_objects

    @property
    def n(self) -> int:
        return self.world.n

    def decode(self, states: States) -> dict[str, np.ndarray]:
        """Attributes of flat states: arrays of shape (s, n_objects) for col, row, shape, colour."""
        states = np.asarray(states, dtype=np.int64)
        if states.size and (states.min() < 0 or states.max() >= self.n):
            raise ValueError(f"states must lie in 0..{self.n - 1}")
        idx = np.unravel_index(states, self.axes)
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
    dependence: float = 0.0,
) -> GridScene:
    """Build a gridscene. Defaults: 4x4 grid, 2 objects, 3 shapes, 3 colours (20,736 states).

    ``dependence`` ρ in [0, 1): each object's colour follows its shape with probability ρ (module docstring);
    0 keeps the attributes independent.

    Default dynamics: column/row step probabilities spread over [0.7, 1.0]
    across objects and axes, shape redraw over [0.22, 0.25], colour step over
    [0.48, 0.56]. With two objects the ten slow eigenvalues lie in
    [0.707, 0.795], at least 0.005 apart (shape pairs excepted), above every
    product of two of them (at most 0.620): k = 10 sits at a gap of 0.087.
    """
    if int(size) != size or not 2 <= size <= len(NUMBER_WORDS):
        raise ValueError(f"gridscene size must be an integer in 2..{len(NUMBER_WORDS)}, got {size}")
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
    if not 0.0 <= float(dependence) < 1.0:
        raise ValueError(f"gridscene dependence must lie in [0, 1), got {dependence}")
    move = tuple((float(a), float(b)) for a, b in move)
    return GridScene(int(size), int(objects), int(shapes), int(colours), move,
                     tuple(float(c) for c in shape_change), tuple(float(c) for c in colour_change),
                     float(dependence))


class _Table:
    """A part renderer by table lookup: ``direct`` evaluated once, on first use, at every (values, n).

    ``direct(values, n)`` renders factor values (s, len(sizes)) and nuisance values (s,);
    the table holds its rows for every combination, so a lookup returns exactly what
    ``direct`` returns (bit for bit) without recomputing it per state.
    """

    def __init__(self, direct, sizes: tuple[int, ...], n_nuisance: int) -> None:
        self.direct, self.sizes, self.n_nuisance = direct, tuple(sizes), n_nuisance
        self.count = int(np.prod(self.sizes, dtype=np.int64))
        self._table: np.ndarray | None = None

    def table(self) -> np.ndarray:
        if self._table is None:
            k = np.arange(self.count * self.n_nuisance)
            a, n = np.divmod(k, self.n_nuisance)
            if self.sizes:
                values = np.stack(np.unravel_index(a, self.sizes), axis=1)
            else:
                values = np.zeros((k.size, 0), dtype=np.int64)
            table = np.ascontiguousarray(self.direct(values.astype(np.int64), n))
            table.setflags(write=False)
            self._table = table
        return self._table

    def __call__(self, values: np.ndarray, n: States) -> np.ndarray:
        n = np.asarray(n, dtype=np.int64)
        a = np.ravel_multi_index(tuple(np.asarray(values, dtype=np.int64).T), self.sizes) if self.sizes else 0
        return self.table()[a * self.n_nuisance + n]


def pixels(scene: GridScene) -> Modality:
    """RGB uint8 image (4G x 4G x 3); nuisance = lighting (2) x background (2), q = (0.4, 0.3, 0.2, 0.1).

    Declared by parts (:class:`prhsim.worlds._modality.Parts`): each cell is a 4x4 block of
    four 2x2 slots, and slot o of every cell belongs to object o: a background image of
    one slot per cell with the object's glyph, in its hue, in the slot of its cell. Slots
    without an object (fewer than four objects) form one more part, the background alone.
    The image is these slot images interleaved by a fixed coordinate permutation.
    """
    G, O = scene.size, scene.n_objects
    n_bg = len(_BACKGROUNDS)
    q = np.array([0.4, 0.3, 0.2, 0.1])  # over (lighting, background), background fastest

    # colours after lighting, as uint8: [lighting, background] and [lighting, hue]
    bg_u8 = np.round(255 * _LIGHTING[:, None, None] * _BACKGROUNDS[None]).astype(np.uint8)
    hue_u8 = np.round(255 * _LIGHTING[:, None, None] * _HUES[None]).astype(np.uint8)
    slot = (G, 2, G, 2, 3)  # one slot of every cell: (cell row, dy, cell column, dx, channel)

    def background(n: States, slots: int) -> np.ndarray:
        out = np.empty((len(n), slots) + slot, dtype=np.uint8)
        out[:] = bg_u8[n // n_bg, n % n_bg][:, None, None, None, None, None, :]
        return out

    def object_slot(values: np.ndarray, n: States) -> np.ndarray:
        """An object's slot image: (col, row, shape, colour) and the nuisance -> (s, G, 2, G, 2, 3)."""
        col, row, shape, colour = values.T
        out = background(n, 1)[:, 0]
        glyph = _GLYPHS[shape]  # (s, 2, 2)
        hue = hue_u8[n // n_bg, colour]  # (s, 3)
        rows = np.arange(len(n))
        for dy in range(2):
            for dx in range(2):
                on = glyph[:, dy, dx] > 0
                out[rows[on], row[on], dy, col[on], dx] = hue[on]
        return out

    sizes = (G, G, scene.n_shapes, scene.n_colours)
    slot_table = _Table(object_slot, sizes, len(q))
    parts = [object_part(scene, o, slot_table, f"object {o}") for o in range(O)]
    if O < 4:
        parts.append(Part((), _Table(lambda values, n: background(n, 4 - O), (), len(q)), "background"))
    # parts concatenated: (slot = 2 sy + sx, cell row, dy, cell column, dx, channel);
    # the image: (cell row, sy, dy, cell column, sx, dx, channel), i.e. y = 4 row + 2 sy + dy, x = 4 col + 2 sx + dx
    index = np.arange(16 * G * G * 3).reshape(2, 2, G, 2, G, 2, 3).transpose(2, 0, 3, 4, 1, 5, 6).ravel()
    spec = Parts(tuple(parts), (4 * G, 4 * G, 3), index[None])
    return Modality("pixels", q, description="RGB image of the scene; nuisance: lighting x background",
                    n_states=scene.n, factor_sizes=scene.world.shape, parts=spec)


def symbolic(scene: GridScene, *, rng: RngLike = None) -> Modality:
    """Attribute vector through one of 3 random affine maps ``A_n v + b_n``; q = (0.5, 0.3, 0.2).

    Not declared by parts: the map mixes every object's attributes, and whether two
    rounded float results coincide cannot be read off per-object renders; the injectivity
    check renders it (hashed keys, exact comparison).
    """
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
        n = np.broadcast_to(np.asarray(n), (v.shape[0],))
        out = np.empty_like(v)
        for j in range(len(q)):  # one map at a time: no (states x dim x dim) stack of maps
            rows = n == j  # the same sums, in the same order, as einsum("sij,sj->si", maps[n], v)
            out[rows] = np.einsum("ij,sj->si", maps[j], v[rows]) + offsets[j]
        return out

    return Modality("symbolic", q, render, "attribute vector through a random affine map; nuisance: which map",
                    n_states=scene.n,
                    factor_sizes=scene.world.shape)
