"""Modalities: a nuisance space N_m with law q, and a renderer g_m(z, n) -> observation.

The theorem needs g_m injective in (z, n) (THEORY §0): an encoder of the
observation can then be any function of (z, n). :func:`injectivity_check`
renders every (z, n) (or a sample of a huge space), hashes the observations and
reports the pairs of states that collide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from prhsim._rng import RngLike, check_rng
from prhsim._types import States

Renderer = Callable[[States, States], np.ndarray]

#: Above this many (z, n) states the injectivity check renders a random sample.
FULL_CHECK_LIMIT = 400_000
#: Rendered in chunks of this many states to bound memory.
CHUNK = 65_536


@dataclass(frozen=True)
class Modality:
    """A modality: nuisance law ``q`` over N_m and a vectorised renderer.

    Args:
        name: short name used in reports ("pixels", "caption", ...).
        nuisance: q(n), shape (|N_m|,), positive and summing to 1; independent of z.
        render: ``render(z, n) -> obs`` for integer arrays z, n of one shape (s,);
            returns an array of shape (s, *obs_shape).
        description: one line saying what the observation and the nuisance are.
    """

    name: str
    nuisance: np.ndarray
    render: Renderer = field(repr=False)
    description: str = ""

    def __post_init__(self) -> None:
        q = np.asarray(self.nuisance, dtype=np.float64)
        if q.ndim != 1 or q.size < 1:
            raise ValueError(f"modality {self.name!r}: nuisance law must be a non-empty vector")
        if np.any(q <= 0) or not np.isclose(q.sum(), 1.0, atol=1e-9):
            raise ValueError(f"modality {self.name!r}: nuisance law must be positive and sum to 1, got {q}")
        q = q / q.sum()
        q.setflags(write=False)
        object.__setattr__(self, "nuisance", q)

    @property
    def n_nuisance(self) -> int:
        return int(self.nuisance.size)

    def render_states(self, modal_states: States) -> np.ndarray:
        """Render modal states ``z·|N| + n`` (the modal world's indexing)."""
        modal_states = np.asarray(modal_states, dtype=np.int64)
        return self.render(modal_states // self.n_nuisance, modal_states % self.n_nuisance)


@dataclass(frozen=True)
class InjectivityReport:
    """What :func:`injectivity_check` found.

    Attributes:
        modality: the modality's name.
        checked: how many (z, n) states were rendered.
        exhaustive: True when every state of Z x N_m was rendered.
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
    (``exhaustive=False``).
    """
    total = n_states * modality.n_nuisance
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
    """A generic modality for any world: ``g(z, n) = W[z] + V[n]`` with Gaussian codes.

    Injective with probability 1; q is a seeded Dirichlet(4) law over N.
    """
    gen = check_rng(rng)
    W = gen.normal(size=(n_states, dim))
    V = gen.normal(size=(n_nuisance, dim))
    q = gen.dirichlet(np.full(n_nuisance, 4.0)) if n_nuisance > 1 else np.ones(1)

    def render(z: States, n: States) -> np.ndarray:
        return W[z] + V[n]

    return Modality(name, q, render, f"random code of z plus a random code of the nuisance (|N|={n_nuisance})")
