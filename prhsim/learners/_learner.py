"""The learner seam: anything that maps (world, k, seeds) to a representation (docs/theory.md §1, §2).

A *learner* is called as ``learner(world, k, centred=..., rng=..., seeds=...)`` and returns a
:class:`Representation`: the features of every state of the world for each seed (a seed axis
first), what the learner knows about itself (``info``: steps, seconds; ``seed_info``: each
seed's loss and collapse), and, for the closed form, the :class:`Optimum` behind them.
Experiments (rotation uniqueness, the run, its checks) take a learner and compare what it
returns, one seed at a time; the closed form is one learner among several (the SGD learners
train the objectives of this package).

Learned features need not be whitened: experiments whiten them under p before any
comparison (docs/theory.md §2, "learned embeddings"). The closed form's are whitened.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from prhsim._rng import RngLike
from prhsim.optima import (
    FEATURE_LIMIT,
    FactorFeatures,
    FactorSpectra,
    KroneckerBasis,
    Optimum,
    TieWarning,
    closed_form,
)
from prhsim.worlds import World


@dataclass(frozen=True, eq=False, init=False)
class Representation:
    """What a learner produced for one world, for each of its seeds: features as tables, or in factor space.

    The leading axis of ``features`` is the seed: a learner called with S seeds returns S tables; a
    learner that does not depend on a seed (the closed form) returns one (``seeds`` None).

    Attributes:
        learner: the learner's name ("closed", "whiten", "sigreg", …).
        features: ``f(z)`` of every state for every seed, shape (S, n, k) (write-protected; a
            single table (n, k) given is one seed); for a representation in factor space this
            materialises the table on first use (refused above :data:`prhsim.optima.FEATURE_LIMIT`
            states: use ``factor.rows(states)``).
        optimum: the closed-form optimum behind the features, when the learner is the closed form.
        info: what the learner knows about itself, shared by its seeds (plain values: steps, seconds, …).
        factor: the features in factor space (docs/theory.md §6, "Factor space"), or None for tables.
        seeds: the seeds along the leading axis, or None for a learner that does not depend on one.
        seed_info: what the learner knows about each seed (loss, collapsed, …), one mapping per seed.
        states: None when the rows are every state; else the states the rows are (a sample drawn
            from p, each weighing 1/M, when the world is too large for a table).
        result: the learner's own record of its training (e.g. :class:`prhsim.learners.TrainResult`), or None.
    """

    learner: str
    optimum: Optimum | None
    info: Mapping[str, Any]
    factor: FactorFeatures | None
    seeds: tuple[int, ...] | None
    seed_info: tuple[Mapping[str, Any], ...]
    states: np.ndarray | None = field(repr=False)
    result: Any = field(repr=False)

    def __init__(self, learner: str, features: np.ndarray | None = None, optimum: Optimum | None = None,
                 info: Mapping[str, Any] | None = None, *, factor: FactorFeatures | None = None,
                 seeds: Sequence[int] | None = None, seed_info: Sequence[Mapping[str, Any]] = (),
                 states: np.ndarray | None = None, result: Any = None) -> None:
        if (features is None) == (factor is None):
            raise ValueError("a representation needs its features either as a table or in factor space (one of them)")
        count = 1
        if features is not None:
            # a write-protected float64 array (a training result's) is kept as is; anything else is copied, so the
            # caller's array is never protected behind its back
            frozen = isinstance(features, np.ndarray) and not features.flags.writeable
            table = np.asarray(features, dtype=np.float64) if frozen else np.array(features, dtype=np.float64)
            if table.ndim == 2:
                table = table[None]
            if table.ndim != 3:
                raise ValueError(f"a representation's features must be a table (states x k), or one per seed "
                                 f"(seeds x states x k), got shape {table.shape}")
            if not np.all(np.isfinite(table)):
                raise ValueError(f"learner {learner!r} produced features with NaN or inf")
            table.setflags(write=False)
            self.__dict__["features"] = table  # the cached property's slot
            count = table.shape[0]
        if seeds is not None:
            seeds = tuple(int(s) for s in seeds)
            if len(seeds) != count:
                raise ValueError(f"a representation of {count} table(s) names {len(seeds)} seed(s)")
        elif count != 1:
            raise ValueError(f"a representation of {count} tables must name their seeds")
        seed_info = tuple(dict(i) for i in seed_info) or tuple({} for _ in range(count))
        if len(seed_info) != count:
            raise ValueError(f"a representation of {count} table(s) has seed_info for {len(seed_info)}")
        for name, value in (("learner", learner), ("optimum", optimum), ("info", dict(info or {})),
                            ("factor", factor), ("seeds", seeds), ("seed_info", seed_info), ("states", states),
                            ("result", result)):
            object.__setattr__(self, name, value)

    def __setstate__(self, state: dict[str, Any]) -> None:  # unpickling and deepcopy: the tables stay write-protected
        self.__dict__.update(state)
        if "features" in state:
            state["features"].setflags(write=False)

    def __repr__(self) -> str:
        where = "factor space" if self.factor is not None else "table"
        seeds = "" if self.seeds is None else f", seeds={list(self.seeds)}"
        return f"Representation({self.learner!r}, k={self.k}, {where}{seeds})"

    @cached_property
    def features(self) -> np.ndarray:
        # only a factor-space representation gets here (a table is set on construction): materialise it once
        n = int(np.prod(self.factor.shape, dtype=object))
        if n > FEATURE_LIMIT:
            raise ValueError(f"refusing to materialise the features of {n:,} states (limit {FEATURE_LIMIT:,}); "
                             "use factor.rows(states)")
        table = self.factor.table()[None]
        table.setflags(write=False)
        return table

    @property
    def n_seeds(self) -> int:
        return 1 if self.seeds is None else len(self.seeds)

    @property
    def k(self) -> int:
        return self.factor.k if self.factor is not None else int(self.features.shape[2])

    def table(self, index: int = 0) -> np.ndarray:
        """The features of the ``index``-th seed as one table, (n, k) (write-protected)."""
        return self.features[index]

    def seed(self, index: int) -> "Representation":
        """The ``index``-th seed alone: its table, with the shared ``info`` and that seed's own merged into ``info``."""
        if not -self.n_seeds <= index < self.n_seeds:
            raise IndexError(f"seed index {index} out of range for {self.n_seeds} seed(s)")
        if self.seeds is None:
            return self
        return Representation(self.learner, self.features[index], self.optimum,
                              {**self.info, **self.seed_info[index]}, seeds=(self.seeds[index],),
                              states=self.states, result=self.result)


class Learner(Protocol):
    """``learner(world, k, *, centred, rng, seeds) -> Representation``, with a ``name``.

    ``seeds`` (distinct non-negative integers) asks for one representation per seed, stacked on the
    features' leading axis; None asks for one, seeded from ``rng``. A learner that does not depend on
    a seed returns one table whatever ``seeds`` says (``Representation.seeds`` None).
    """

    name: str

    def __call__(self, world: World, k: int, *, centred: bool = True, rng: RngLike = None,
                 seeds: Sequence[int] | None = None) -> Representation:
        ...  # pragma: no cover - protocol


@dataclass(frozen=True)
class ClosedFormLearner:
    """The whitened closed form (docs/theory.md §1.1) as a learner: what SGD should converge to.

    On a product world whose optimum has a Kronecker eigenbasis (every modal world) the
    representation is in factor space: no table over the world's states is formed
    (docs/theory.md §6, "Factor space"), so worlds far above the table limit are solved.
    ``tables=True`` returns the full table instead (the slow twin, for small worlds).

    Attributes:
        tables: return a table over every state even where factor space applies.
        spectra: the cache of factor eigendecompositions, shared by every world this learner
            solves (the modal worlds of one base share its factors); it keeps every factor it
            has seen, so use one learner per base world.
        name: the learner's name.

    Example:
        >>> from prhsim.worlds import ring
        >>> rep = ClosedFormLearner()(ring(8), 2)
        >>> rep.learner, rep.features.shape, rep.seeds, rep.optimum.unique
        ('closed', (1, 8, 2), None, True)
    """

    tables: bool = False
    # keeps every factor it has diagonalised: one learner per base world (a new one for another world)
    spectra: FactorSpectra = field(default_factory=FactorSpectra, compare=False, repr=False)
    name: str = "closed"

    def __call__(self, world: World, k: int, *, centred: bool = True, rng: RngLike = None,
                 seeds: Sequence[int] | None = None) -> Representation:
        """The closed form of ``world`` (``seeds`` is ignored: it depends on none; ``rng`` breaks ties only)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TieWarning)  # a tie is recorded in the optimum, not warned per modality
            opt = closed_form(world, k, centred=centred, rng=rng, spectra=self.spectra)
        if not self.tables and isinstance(opt.basis, KroneckerBasis):
            return Representation(self.name, optimum=opt, factor=FactorFeatures.from_optimum(opt))
        return Representation(self.name, opt.F, opt)
