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


class Representation:
    """What a learner produced for one world: its features as a table, or in factor space.

    Attributes:
        learner: the learner's name ("closed", "whiten", "sigreg", …).
        features: ``f(z)`` for every state, shape (n, k) (write-protected); for a representation
            in factor space this materialises the table on first use (refused above
            :data:`prhsim.optima.FEATURE_LIMIT` states: use ``factor.rows(states)``).
        optimum: the closed-form optimum behind the features, when the learner is the closed form.
        info: what the learner knows about itself (plain values: steps, seconds, collapsed, …).
        factor: the features in factor space (docs/theory.md §6, "Factor space"), or None for a table.
    """

    __slots__ = ("learner", "optimum", "info", "factor", "_table")

    def __init__(self, learner: str, features: np.ndarray | None = None, optimum: Optimum | None = None,
                 info: Mapping[str, Any] | None = None, *, factor: FactorFeatures | None = None) -> None:
        if (features is None) == (factor is None):
            raise ValueError("a representation needs its features either as a table or in factor space (one of them)")
        table = None
        if features is not None:
            table = np.array(features, dtype=np.float64)
            if table.ndim != 2:
                raise ValueError(f"a representation's features must be a table (states x k), got shape {table.shape}")
            if not np.all(np.isfinite(table)):
                raise ValueError(f"learner {learner!r} produced features with NaN or inf")
            table.setflags(write=False)
        for name, value in (("learner", learner), ("optimum", optimum), ("info", dict(info or {})),
                            ("factor", factor), ("_table", table)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Representation is immutable (cannot set {name!r})")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:  # pickle and deepcopy through the slots, not __setattr__
        return _rebuilt, (self.learner, self.optimum, self.info, self.factor, self._table)

    def __repr__(self) -> str:
        where = "factor space" if self.factor is not None else "table"
        return f"Representation({self.learner!r}, k={self.k}, {where})"

    @property
    def features(self) -> np.ndarray:
        if self._table is None:
            n = int(np.prod(self.factor.shape, dtype=object))
            if n > FEATURE_LIMIT:
                raise ValueError(f"refusing to materialise the features of {n:,} states (limit {FEATURE_LIMIT:,}); "
                                 "use factor.rows(states)")
            table = self.factor.table()
            table.setflags(write=False)
            object.__setattr__(self, "_table", table)
        return self._table

    @property
    def k(self) -> int:
        return self.factor.k if self.factor is not None else int(self._table.shape[1])


def _rebuilt(learner: str, optimum: Optimum | None, info: Mapping[str, Any], factor: FactorFeatures | None,
             table: np.ndarray | None) -> Representation:
    """A :class:`Representation` from its slots (unpickling: the table may be a materialised factor table)."""
    rep = object.__new__(Representation)
    for name, value in (("learner", learner), ("optimum", optimum), ("info", dict(info)), ("factor", factor),
                        ("_table", table)):
        object.__setattr__(rep, name, value)
    if table is not None:
        table.setflags(write=False)
    return rep


class Learner(Protocol):
    """``learner(world, k, *, centred, rng) -> Representation``, with a ``name``."""

    name: str

    def __call__(self, world: World, k: int, *, centred: bool = True, rng: RngLike = None) -> Representation:
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
        >>> rep.learner, rep.features.shape, rep.optimum.unique
        ('closed', (8, 2), True)
    """

    tables: bool = False
    # keeps every factor it has diagonalised: one learner per base world (a new one for another world)
    spectra: FactorSpectra = field(default_factory=FactorSpectra, compare=False, repr=False)
    name: str = "closed"

    def __call__(self, world: World, k: int, *, centred: bool = True, rng: RngLike = None) -> Representation:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TieWarning)  # a tie is recorded in the optimum, not warned per modality
            opt = closed_form(world, k, centred=centred, rng=rng, spectra=self.spectra)
        if not self.tables and isinstance(opt.basis, KroneckerBasis):
            return Representation(self.name, optimum=opt, factor=FactorFeatures.from_optimum(opt))
        return Representation(self.name, opt.F, opt)
