"""The learner seam: anything that maps (world, k, rng) to a representation (docs/theory.md §1, §2).

A *learner* is called as ``learner(world, k, centred=..., rng=...)`` and returns a
:class:`Representation`: the features of every state of the world, what the learner
knows about itself (``info``: steps, seconds, collapse, …), and, for the closed
form, the :class:`Optimum` behind them. Experiments (rotation uniqueness, the run,
its checks) take a learner and compare what it returns; the closed form is one
learner among several (the SGD learners train the objectives of this package).

Learned features need not be whitened: experiments whiten them under p before any
comparison (docs/theory.md §2, "learned embeddings"). The closed form's are whitened.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

import numpy as np

from prhsim._rng import RngLike
from prhsim.optima import Optimum, TieWarning, closed_form
from prhsim.worlds import World


@dataclass(frozen=True)
class Representation:
    """What a learner produced for one world.

    Attributes:
        learner: the learner's name ("closed", "whiten", "sigreg", …).
        features: ``f(z)`` for every state, shape (n, k) (write-protected).
        optimum: the closed-form optimum behind the features, when the learner is the closed form.
        info: what the learner knows about itself (plain values: steps, seconds, collapsed, …).
    """

    learner: str
    features: np.ndarray
    optimum: Optimum | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        F = np.array(self.features, dtype=np.float64)
        if F.ndim != 2:
            raise ValueError(f"a representation's features must be a table (states x k), got shape {F.shape}")
        if not np.all(np.isfinite(F)):
            raise ValueError(f"learner {self.learner!r} produced features with NaN or inf")
        F.setflags(write=False)
        object.__setattr__(self, "features", F)

    @property
    def k(self) -> int:
        return int(self.features.shape[1])


class Learner(Protocol):
    """``learner(world, k, *, centred, rng) -> Representation``, with a ``name``."""

    name: str

    def __call__(self, world: World, k: int, *, centred: bool = True, rng: RngLike = None) -> Representation:
        ...  # pragma: no cover - protocol


@dataclass(frozen=True)
class ClosedFormLearner:
    """The whitened closed form (docs/theory.md §1.1) as a learner: what SGD should converge to.

    Example:
        >>> from prhsim.worlds import ring
        >>> rep = ClosedFormLearner()(ring(8), 2)
        >>> rep.learner, rep.features.shape, rep.optimum.unique
        ('closed', (8, 2), True)
    """

    name: str = "closed"

    def __call__(self, world: World, k: int, *, centred: bool = True, rng: RngLike = None) -> Representation:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TieWarning)  # a tie is recorded in the optimum, not warned per modality
            opt = closed_form(world, k, centred=centred, rng=rng)
        return Representation(self.name, opt.F, opt)
