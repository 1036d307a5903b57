"""Modalities: a nuisance space N_m with law q, and a renderer g_m(z, n) -> observation (§0, §4).

The theorem needs g_m injective in (z, n) (§0): an encoder of the observation
can then be any function of (z, n). :func:`injectivity_check` renders every
(z, n) (or a sample of a huge space), hashes the observations and reports the
pairs of states that collide.

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

#: Above this many (z, n) states the injectivity check renders a random sample.
FULL_CHECK_LIMIT = 400_000
#: Rendered in chunks of this many states to bound memory.
CHUNK = 65_536


@dataclass(frozen=True)
class Modality:
    """A modality: nuisance law ``q`` over N_m and an optional vectorised renderer.

    Args:
        name: short name used in reports ("pixels", "caption", ...).
        nuisance: q(n), shape (|N_m|,), positive and summing to 1; independent of z.
        render: ``render(z, n) -> obs`` for integer arrays z, n of one shape (s,);
            returns an array of shape (s, *obs_shape). None (the default) makes the
            modality renderer-free: the observation is (z, n) itself.
        description: one line saying what the observation and the nuisance are.
        n_states: the number of base states the renderer draws (None: any world);
            a world of another size is refused (:meth:`check_base`).
        factor_sizes: the factor sizes of the product world the renderer decodes
            (None: not a product renderer); a base world with other factors is
            refused (:meth:`check_world`).

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

    def __post_init__(self) -> None:
        q = np.array(self.nuisance, dtype=np.float64)
        if q.ndim != 1 or q.size < 1:
            raise ValueError(f"modality {self.name!r}: nuisance law must be a non-empty vector")
        if not np.all(q > 0) or not np.isclose(q.sum(), 1.0, atol=1e-9):
            raise ValueError(f"modality {self.name!r}: nuisance law must be positive and sum to 1, got {q}")
        q = q / q.sum()
        q.setflags(write=False)
        object.__setattr__(self, "nuisance", q)
        if self.n_states is not None:
            object.__setattr__(self, "n_states", check_size(f"modality {self.name!r}: n_states", self.n_states, 1))

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


@dataclass(frozen=True)
class InjectivityReport:
    """What :func:`injectivity_check` found.

    Attributes:
        modality: the modality's name.
        checked: how many (z, n) states were rendered (all of them, unrendered, for a renderer-free modality).
        exhaustive: True when every state of Z x N_m was covered.
        collisions: up to ``max_report`` pairs ``((z, n), (z', n'))`` with equal observations.
    """

    modality: str
    checked: int
    exhaustive: bool
    collisions: tuple[tuple[tuple[int, int], tuple[int, int]], ...]

    @property
    def injective(self) -> bool:
        return not self.collisions

    def raise_if_not_injective(self) -> None:
        if self.collisions:
            (z, n), (z2, n2) = self.collisions[0]
            raise ValueError(
                f"renderer of modality {self.modality!r} is not injective: (z={z}, n={n}) and "
                f"(z={z2}, n={n2}) render the same observation ({len(self.collisions)} colliding pair(s) reported)"
            )


def _row_keys(obs: np.ndarray, decimals: int | None) -> np.ndarray:
    obs = np.asarray(obs)
    rows = obs.reshape(obs.shape[0], -1)
    if decimals is not None:
        rows = np.round(rows.astype(np.float64), decimals) + 0.0  # + 0.0 folds -0.0 into 0.0
    rows = np.ascontiguousarray(rows)
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


def _ensure_check_fits(modality: Modality, total: int, checked: int, decimals: int | None) -> None:
    """Guard the keys of ``checked`` observations (twice: per chunk, then joined), the state and order arrays."""
    first = modality.render_states(np.zeros(1, dtype=np.int64))
    row_bytes = first.size * (FLOAT if decimals is not None else first.itemsize)
    sampling = FLOAT * min(total, 50 * checked) if checked < total else 0  # numpy's choice may shuffle an arange
    what = f"the injectivity check of modality {modality.name!r} ({checked:,} observations of {row_bytes:,} bytes)"
    ensure_fits(checked * (2.0 * row_bytes + 3 * FLOAT) + sampling + min(CHUNK, checked) * 2.0 * row_bytes,
                what, "lower limit (the number of states checked)")


def injectivity_check(
    modality: Modality,
    n_states: int,
    *,
    decimals: int | None = None,
    limit: int = FULL_CHECK_LIMIT,
    max_report: int = 10,
    rng: RngLike = None,
) -> InjectivityReport:
    """Render (z, n) for all z < n_states and n in N_m, and report colliding pairs.

    Observations are compared exactly (byte for byte), or after rounding to
    ``decimals`` when given (a conservative check for float renderers). Above
    ``limit`` states a uniform sample of ``limit`` states is checked instead
    (``exhaustive=False``). A renderer-free modality is injective by
    construction: nothing is rendered and the report is exhaustive.

    Raises:
        ValueError: if the modality renders another number of base states, or its
            renderer returns another number of rows than states.
    """
    modality.check_base(n_states)
    total = n_states * modality.n_nuisance
    if modality.renderer_free:
        return InjectivityReport(modality.name, int(total), True, ())
    checked = min(total, limit)
    _ensure_check_fits(modality, total, checked, decimals)
    if total <= limit:
        states = np.arange(total, dtype=np.int64)
        exhaustive = True
    else:
        states = np.sort(check_rng(rng).choice(total, size=limit, replace=False))
        exhaustive = False
    keys = np.concatenate(
        [_row_keys(modality.render_states(states[i : i + CHUNK]), decimals) for i in range(0, states.size, CHUNK)]
    )
    order = np.argsort(keys, kind="stable")
    same = keys[order[1:]] == keys[order[:-1]]
    collisions = []
    for j in np.flatnonzero(same)[:max_report]:
        a, b = states[order[j]], states[order[j + 1]]
        nn = modality.n_nuisance
        collisions.append(((int(a // nn), int(a % nn)), (int(b // nn), int(b % nn))))
    return InjectivityReport(modality.name, int(states.size), exhaustive, tuple(collisions))


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
