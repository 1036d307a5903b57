"""Modalities: a nuisance space N_m with law q, and a renderer g_m(z, n) -> observation (§0, §4).

:class:`Modality` holds q and an optional vectorised renderer. A renderer may be
declared by :class:`Parts` instead of written as a function: the observation is
assembled, by a coordinate permutation ``A_{ℓ(n)}`` chosen by the nuisance, from
parts ``g_o(z_{S_o}, n)`` that each read one group S_o of the product world's
factors and the nuisance,

    g(z, n) = A_{ℓ(n)}(g_1(z_{S_1}, n), …, g_P(z_{S_P}, n)),

and the modality builds its renderer from that declaration (decode z into
factors, render each part, assemble), so renderer and declaration cannot
disagree. :func:`codebook` is a generic modality for any world,
``g(z, n) = W[z] + V[n]`` with Gaussian codes.

The theorem needs g_m injective in (z, n) (§0): an encoder of the observation
can then be any function of (z, n). :func:`~prhsim.worlds.injectivity_check`
(:mod:`prhsim.worlds._injectivity`) decides it; for a renderer declared by parts
it decides from the renders of the parts alone (the proof is in :class:`Parts`,
the decision in :mod:`prhsim.worlds._injectivity_parts`).

A modality built from its nuisance law alone, ``Modality(name, q)``, is
*renderer-free*: its observation is the pair (z, n) itself, injective by
construction. That is all the mathematics needs (views, closed forms, coupled
comparisons, the merge rule); a renderer matters only for learners that see
observations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim._types import States
from prhsim.worlds._checks import check_size

Renderer = Callable[[States, States], np.ndarray]
#: ``render(values, n) -> rows``: a part's renderer (see :class:`Part`).
PartRenderer = Callable[[np.ndarray, States], np.ndarray]


@dataclass(frozen=True)
class Part:
    """One part ``g_o(z_{S_o}, n)`` of a renderer assembled from parts (:class:`Parts`).

    Args:
        factors: S_o, the indices (into the modality's ``factor_sizes``) of the factors
            this part reads; empty for a part that depends on the nuisance alone.
        render: ``render(values, n) -> rows``: ``values`` is an int64 array
            (s, len(factors)) of those factors' values, ``n`` the nuisance values (s,);
            it returns an array (s, ...) of any trailing shape, of one dtype for all the
            parts of a modality.
        name: a label for error messages.
    """

    factors: tuple[int, ...]
    render: PartRenderer = field(repr=False)
    name: str = ""

    def __post_init__(self) -> None:
        factors = tuple(int(f) for f in self.factors)
        if any(f < 0 for f in factors) or len(set(factors)) != len(factors):
            raise ValueError(f"part {self.name!r}: factors must be distinct non-negative indices, got {factors}")
        object.__setattr__(self, "factors", factors)


@dataclass(frozen=True)
class Parts:
    """A renderer assembled from parts: ``g(z, n) = A_{ℓ(n)}(g_1(z_{S_1}, n), …, g_P(z_{S_P}, n))``.

    The factor groups S_o of the parts partition the factors of the product world
    (a part may read no factor: it depends on n alone). The assembly A_ℓ is a
    coordinate permutation: with ``x`` the parts' rows flattened and concatenated
    (part 1 first), the flattened observation is ``x[layouts[ℓ]]``, and the layout
    ``ℓ = layout_of(n)`` depends on the nuisance alone. ``Modality(..., parts=...)``
    builds its renderer from this declaration, so renderer and declaration cannot
    disagree.

    **Why the parts decide injectivity** (docs/theory.md §0). A permutation is a
    bijection and the parts have fixed widths, so two states with the same layout
    render the same observation iff every part renders the same rows (byte for
    byte, or after the coordinate-wise rounding of ``decimals``, which commutes
    with concatenation and permutation). Z is the product of the groups Z_{S_o},
    so z ≠ z' iff they differ in some group, and the groups can be chosen
    independently. Hence, with ``I_o(n, n')`` meaning that the image sets
    ``g_o(Z_{S_o}, n)`` and ``g_o(Z_{S_o}, n')`` intersect:

    1. for each n, ``z ↦ g(z, n)`` is injective iff every ``g_o(·, n)`` is injective
       on Z_{S_o} (if ``g_o(a, n) = g_o(a', n)`` with a ≠ a', give z and z' those
       values on S_o and equal values elsewhere: a collision);
    2. for n ≠ n' of the same layout, some (z, n) and (z', n') collide iff
       ``I_o(n, n')`` for every part o (a collision needs equal rows in every part;
       conversely, pick an equal pair in each part and join them);
    3. for n, n' of different layouts a part is compared with another part's
       place, and only a sufficient test is cheap: if at some coordinate j the
       values that coordinate takes under n (over all z) and under n' lie in
       disjoint ranges, no (z, n) collides with any (z', n'). Coordinate j under n
       is a fixed coordinate of a fixed part, so its range comes from the part renders.

    1 and 2 are exact (iff) and give concrete colliding pairs when they fail;
    when 3 leaves a pair of nuisance values unseparated (and 1-2 found nothing),
    the structure does not decide and :func:`~prhsim.worlds.injectivity_check`
    falls back to the generic check. Everything is read off the
    ``Σ_o |Z_{S_o}|·|N|`` part renders (:mod:`prhsim.worlds._injectivity_parts`).

    Args:
        parts: the parts, in concatenation order.
        shape: the observation's shape (without the batch axis); its size D must be the
            parts' total width.
        layouts: (L, D) integers, each row a permutation of 0..D-1; None: one layout,
            the identity (the observation is the concatenation).
        layout_of: ``layout_of(n) -> ℓ`` in 0..L-1 for an array of nuisance values; needed when L > 1.
    """

    parts: tuple[Part, ...]
    shape: tuple[int, ...]
    layouts: np.ndarray | None = field(default=None, repr=False, compare=False)
    layout_of: Callable[[States], np.ndarray] | None = field(default=None, repr=False, compare=False)
    _runs: tuple[int | None, ...] = field(init=False, repr=False, compare=False)
    _seen: list = field(init=False, repr=False, compare=False)  # [dtype, [row shape per part]] rendered so far

    def __post_init__(self) -> None:
        parts = tuple(self.parts)
        if not parts or not all(isinstance(p, Part) for p in parts):
            raise ValueError("Parts needs a non-empty sequence of Part")
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "_seen", [None, [None] * len(parts)])
        shape = tuple(int(d) for d in self.shape)
        if any(d < 1 for d in shape):
            raise ValueError(f"Parts: the observation shape must be positive, got {shape}")
        object.__setattr__(self, "shape", shape)
        width = self.width
        if self.layouts is None:
            if self.layout_of is not None:
                raise ValueError("Parts: layout_of needs layouts")
            object.__setattr__(self, "_runs", (None,))
            return
        layouts = np.array(self.layouts, dtype=np.int64)  # a private copy
        if layouts.ndim != 2 or layouts.shape[1] != width or layouts.shape[0] < 1:
            raise ValueError(f"Parts: layouts must have shape (L, {width}), got {layouts.shape}")
        for row in layouts:
            if not np.array_equal(np.sort(row), np.arange(width)):
                raise ValueError(f"Parts: every layout must be a permutation of 0..{width - 1}")
        if layouts.shape[0] > 1 and self.layout_of is None:
            raise ValueError("Parts: several layouts need layout_of(n)")
        layouts.setflags(write=False)
        object.__setattr__(self, "layouts", layouts)
        object.__setattr__(self, "_runs", tuple(_run_length(row) for row in layouts))

    @property
    def width(self) -> int:
        """D, the number of coordinates of an observation."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def n_layouts(self) -> int:
        return 1 if self.layouts is None else int(self.layouts.shape[0])

    def layout_classes(self, n: States) -> np.ndarray:
        """The layout ``ℓ(n)`` of each nuisance value (all 0 with one layout)."""
        n = np.asarray(n, dtype=np.int64)
        if self.layout_of is None:
            return np.zeros(n.shape, dtype=np.int64)
        cls = np.asarray(self.layout_of(n))
        if cls.shape != n.shape or not np.issubdtype(cls.dtype, np.integer):
            raise ValueError("Parts: layout_of must return one integer per nuisance value, "
                             f"got {cls.dtype} {cls.shape}")
        if cls.size and (cls.min() < 0 or cls.max() >= self.n_layouts):
            raise ValueError(f"Parts: layout_of returned a layout outside 0..{self.n_layouts - 1}")
        return cls.astype(np.int64)

    def _record(self, name: str, o: int, rows: np.ndarray) -> None:
        """Hold part o to one row shape and every part to one dtype, over all calls (the proof needs both)."""
        label = self.parts[o].name or str(o)
        if self._seen[0] is None:
            self._seen[0] = rows.dtype
        elif rows.dtype != self._seen[0]:
            raise ValueError(f"the parts of modality {name!r} must render one dtype: part {label!r} rendered "
                             f"{rows.dtype}, where {self._seen[0]} was rendered before")
        shapes = self._seen[1]
        if shapes[o] is None:
            shapes[o] = rows.shape[1:]
        elif rows.shape[1:] != shapes[o]:
            raise ValueError(f"part {label!r} of modality {name!r} must render rows of one shape: got "
                             f"{rows.shape[1:]}, {shapes[o]} before")

    def assemble(self, rows: list[np.ndarray], n: States) -> np.ndarray:
        """The observations (s, *shape) from the parts' rows (one array per part) and the nuisance values."""
        s = int(np.asarray(n).shape[0])
        flat = [np.asarray(r).reshape(s, -1) for r in rows]
        x = flat[0] if len(flat) == 1 else np.concatenate(flat, axis=1)
        x = np.ascontiguousarray(x)
        if x.shape[1] != self.width:
            raise ValueError(f"Parts: the parts' rows have {x.shape[1]} values, the observation shape {self.shape} "
                             f"has {self.width}")
        if self.layouts is None:
            return x.reshape((s,) + self.shape)
        if self.n_layouts == 1:
            return _permute(x, self.layouts[0], self._runs[0]).reshape((s,) + self.shape)
        cls = self.layout_classes(n)
        out = np.empty_like(x)
        for layout in np.unique(cls):
            rows_of = cls == layout
            out[rows_of] = _permute(x[rows_of], self.layouts[layout], self._runs[layout])
        return out.reshape((s,) + self.shape)


def _run_length(index: np.ndarray) -> int | None:
    """None for the identity; else the largest r in (8, 4, 2, 1) such that ``index`` moves aligned runs of r."""
    width = index.size
    if np.array_equal(index, np.arange(width)):
        return None
    for r in (8, 4, 2):
        if width % r == 0:
            blocks = index.reshape(-1, r)
            if np.all(blocks[:, 0] % r == 0) and np.all(blocks == blocks[:, :1] + np.arange(r)):
                return r
    return 1


def _permute(x: np.ndarray, index: np.ndarray, run: int | None) -> np.ndarray:
    """``x[:, index]``, moving aligned runs of coordinates as one wider unsigned integer where possible."""
    if run is None:
        return x
    x = np.ascontiguousarray(x)
    size = x.dtype.itemsize
    k = run
    while k > 1 and (k * size > 8 or size not in (1, 2, 4, 8)):
        k //= 2
    if k == 1:
        return np.take(x, index, axis=1)
    wide = x.view(np.dtype(f"u{k * size}"))
    return np.take(wide, index[::k] // k, axis=1).view(x.dtype)


class _PartsRenderer:
    """The renderer of a modality declared by parts: decode z into factors, render each part, assemble."""

    def __init__(self, name: str, spec: Parts, factor_sizes: tuple[int, ...], n_nuisance: int) -> None:
        self.name, self.spec, self.factor_sizes, self.n_nuisance = name, spec, factor_sizes, n_nuisance
        self.n_states = int(np.prod(factor_sizes, dtype=np.int64))

    def __call__(self, z: States, n: States) -> np.ndarray:
        z = np.asarray(z, dtype=np.int64).reshape(-1)
        n = np.asarray(n, dtype=np.int64).reshape(-1)
        if z.shape != n.shape:
            raise ValueError(f"renderer of modality {self.name!r}: z and n must have one shape, "
                             f"got {z.size} and {n.size}")
        for label, values, size in (("z", z, self.n_states), ("n", n, self.n_nuisance)):
            if values.size and (values.min() < 0 or values.max() >= size):
                bad = values[(values < 0) | (values >= size)][0]
                what = "states" if label == "z" else "nuisance values"
                raise ValueError(f"modality {self.name!r} has {size:,} {what}; got {label} = {int(bad)}")
        values = np.stack(np.unravel_index(z, self.factor_sizes), axis=1).astype(np.int64, copy=False)
        rows = [call_part(self.name, self.spec, o, values[:, list(part.factors)], n)
                for o, part in enumerate(self.spec.parts)]
        return self.spec.assemble(rows, n)


def call_part(name: str, spec: Parts, o: int, values: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Render part o of ``spec``, checking its rows: one per state, one shape and dtype on every call."""
    part = spec.parts[o]
    out = np.asarray(part.render(values, n))
    if out.ndim == 0 or out.shape[0] != n.size:
        got = "a scalar" if out.ndim == 0 else f"{out.shape[0]} rows"
        raise ValueError(f"part {part.name!r} of modality {name!r} returned {got} for {n.size} states")
    spec._record(name, o, out)
    return out


@dataclass(frozen=True)
class Modality:
    """A modality: nuisance law ``q`` over N_m and an optional vectorised renderer.

    Args:
        name: short name used in reports ("pixels", "caption", ...).
        nuisance: q(n), shape (|N_m|,), positive and summing to 1; independent of z.
        render: ``render(z, n) -> obs`` for integer arrays z, n of one shape (s,);
            returns an array of shape (s, *obs_shape). None (the default) makes the
            modality renderer-free: the observation is (z, n) itself, unless ``parts``
            is given.
        description: one line saying what the observation and the nuisance are.
        n_states: the number of base states the renderer draws (None: any world);
            a world of another size is refused (:meth:`check_base`).
        factor_sizes: the factor sizes of the product world the renderer decodes
            (None: not a product renderer); a base world with other factors is
            refused (:meth:`check_world`).
        parts: the renderer declared as parts (:class:`Parts`), instead of ``render``:
            the renderer is built from them (``render`` is then set to it), needs
            ``factor_sizes``, and :func:`~prhsim.worlds.injectivity_check` decides
            injectivity from the parts' renders. ``n_states`` defaults to the product of
            the factor sizes.

    Example:
        >>> m = Modality("text", [0.5, 0.5])
        >>> m.renderer_free, m.render_states(np.array([0, 3])).tolist()
        (True, [[0, 0], [1, 1]])
    """

    name: str
    nuisance: np.ndarray
    render: Renderer | None = field(default=None, repr=False)
    description: str = ""
    n_states: int | None = None
    factor_sizes: tuple[int, ...] | None = None
    parts: Parts | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        q = np.array(self.nuisance, dtype=np.float64)
        if q.ndim != 1 or q.size < 1:
            raise ValueError(f"modality {self.name!r}: nuisance law must be a non-empty vector")
        if not np.all(q > 0) or not np.isclose(q.sum(), 1.0, atol=1e-9):
            raise ValueError(f"modality {self.name!r}: nuisance law must be positive and sum to 1, got {q}")
        q = q / q.sum()
        q.setflags(write=False)
        object.__setattr__(self, "nuisance", q)
        if self.factor_sizes is not None:
            sizes = tuple(check_size(f"modality {self.name!r}: factor size", s, 1) for s in self.factor_sizes)
            object.__setattr__(self, "factor_sizes", sizes)
        if self.parts is not None:
            self._build_from_parts()
        if self.n_states is not None:
            object.__setattr__(self, "n_states", check_size(f"modality {self.name!r}: n_states", self.n_states, 1))

    def _build_from_parts(self) -> None:
        spec = self.parts
        if not isinstance(spec, Parts):
            raise TypeError(f"modality {self.name!r}: parts must be a Parts, got {type(spec).__name__}")
        if self.render is not None:
            raise ValueError(f"modality {self.name!r}: give a renderer or parts, not both "
                             "(the renderer is built from the parts)")
        if self.factor_sizes is None:
            raise ValueError(f"modality {self.name!r}: a renderer declared by parts needs factor_sizes")
        sizes = self.factor_sizes
        covered = sorted(f for p in spec.parts for f in p.factors)
        if covered != list(range(len(sizes))):
            raise ValueError(f"modality {self.name!r}: the parts' factors must partition the factors "
                             f"0..{len(sizes) - 1} (each factor in exactly one part), got "
                             f"{[p.factors for p in spec.parts]}")
        total = int(np.prod(sizes, dtype=np.int64))
        if self.n_states is None:
            object.__setattr__(self, "n_states", total)
        elif self.n_states != total:
            raise ValueError(f"modality {self.name!r}: n_states = {self.n_states:,} but the factors "
                             f"{sizes} make {total:,} states")
        object.__setattr__(self, "render", _PartsRenderer(self.name, spec, sizes, int(self.nuisance.size)))

    @property
    def n_nuisance(self) -> int:
        return int(self.nuisance.size)

    @property
    def renderer_free(self) -> bool:
        """True when the observation is (z, n) itself (no renderer)."""
        return self.render is None

    def check_base(self, n_base: int) -> None:
        """Refuse a base world whose size differs from the ``n_states`` this modality renders."""
        if self.n_states is not None and self.n_states != n_base:
            raise ValueError(f"modality {self.name!r} renders a world of {self.n_states:,} states, "
                             f"but the base world has {n_base:,}")

    def check_world(self, base) -> None:
        """Refuse a base world this modality does not render: another size, or other product factors."""
        self.check_base(base.n)
        sizes = tuple(f.n for f in base.factors)
        if self.factor_sizes is not None and sizes != tuple(self.factor_sizes):
            raise ValueError(f"modality {self.name!r} renders a product world of factors {tuple(self.factor_sizes)}, "
                             f"but the base world has factors {sizes}")

    def render_states(self, modal_states: States) -> np.ndarray:
        """Render modal states ``z·|N| + n`` (the modal world's indexing); one row per state.

        Raises:
            ValueError: if the renderer returns another number of rows than states.
        """
        modal_states = np.asarray(modal_states, dtype=np.int64).ravel()
        z, n = modal_states // self.n_nuisance, modal_states % self.n_nuisance
        if self.render is None:
            return np.stack([z, n], axis=1)
        obs = np.asarray(self.render(z, n))
        if obs.ndim == 0 or obs.shape[0] != modal_states.size:
            got = "a scalar" if obs.ndim == 0 else f"{obs.shape[0]} rows"
            raise ValueError(f"renderer of modality {self.name!r} returned {got} for {modal_states.size} states")
        return obs


def codebook(n_states: int, n_nuisance: int, *, dim: int = 8, name: str = "codebook", rng: RngLike = None) -> Modality:
    """A generic modality for a world of ``n_states`` states: ``g(z, n) = W[z] + V[n]`` with Gaussian codes.

    Injective with probability 1; q is a seeded Dirichlet(4) law over N. The
    renderer refuses states outside its codebook.
    """
    n_states = check_size("codebook n_states", n_states, 1)
    n_nuisance = check_size("codebook n_nuisance", n_nuisance, 1)
    dim = check_size("codebook dim", dim, 1)
    ensure_fits(FLOAT * (float(n_states) + n_nuisance) * dim + FLOAT * n_nuisance,
                f"a codebook of {n_states:,} states x {dim} dimensions", "lower n_states or dim")
    gen = check_rng(rng)
    W = gen.normal(size=(n_states, dim))
    V = gen.normal(size=(n_nuisance, dim))
    q = gen.dirichlet(np.full(n_nuisance, 4.0)) if n_nuisance > 1 else np.ones(1)

    def render(z: States, n: States) -> np.ndarray:
        z, n = np.asarray(z), np.asarray(n)
        for label, values, size in (("z", z, n_states), ("n", n, n_nuisance)):
            outside = (values < 0) | (values >= size)
            if np.any(outside):
                raise ValueError(f"codebook {name!r} has {size:,} {'states' if label == 'z' else 'nuisance values'}; "
                                 f"got {label} = {int(values[outside].flat[0])}")
        return W[z] + V[n]

    return Modality(name, q, render, f"random code of z plus a random code of the nuisance (|N|={n_nuisance})",
                    n_states=n_states)
