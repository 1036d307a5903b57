"""Views: how a modality's positive pairs treat the nuisance (docs/theory.md §4).

A modality m observes ``(z, n)`` with ``n ~ q_m`` independent of z; its
world lives on ``Z x N_m`` (index ``z·|N_m| + n``) and is the product world
``π_Z ⊗ ρ`` with

* good view, ``ρ = qqᵀ``: the nuisance is resampled for the second view, so
  ``K = K_Z ⊗ √q√qᵀ = B K_Z Bᵀ`` and every eigenfunction is nuisance-free;
* bad(ε) view, ``ρ_ε = (1-ε)·diag(q) + ε·qqᵀ``: the nuisance is copied with
  probability 1-ε, so ``K = K_Z ⊗ K_N`` with ``K_N`` of spectrum
  ``{1, (1-ε)^{×(|N|-1)}}``; nuisance features (``E[h|z] = 0``) enter the
  top-k once ``1-ε`` beats the slow features of ``K_Z``.

Why "the same sample with probability 1-ε, a good pair otherwise" is **not** a
bad view: ``π = (1-ε)·diag(p) + ε·π_good`` gives ``K = (1-ε)·I + ε·K_good``,
which has the same eigenvectors as ``K_good``: the optimum is still
nuisance-free, only every gap shrinks by the factor ε (see :func:`same_sample`).
A bad view must make the nuisance *more persistent across the pair than z*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from prhsim.worlds._finite import FiniteWorld, World
from prhsim.worlds._modality import Modality
from prhsim.worlds._named import resampling
from prhsim.worlds._product import ProductWorld


@dataclass(frozen=True)
class View:
    """A positive-pair law for the nuisance: ``good`` (ε = 1) or ``bad`` (nuisance kept w.p. 1-ε)."""

    kind: Literal["good", "bad"]
    eps: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("good", "bad"):
            raise ValueError(f"view kind must be 'good' or 'bad', got {self.kind!r}")
        if not 0.0 < self.eps <= 1.0:
            raise ValueError(f"a view's eps must lie in (0, 1], got {self.eps}")
        if self.kind == "good" and self.eps != 1.0:
            raise ValueError("a good view resamples the nuisance: its eps is 1")

    @property
    def label(self) -> str:
        return "good" if self.kind == "good" else f"bad({self.eps:g})"


def good() -> View:
    """Two views of one state with independently drawn nuisance (two captions of one image)."""
    return View("good")


def bad(eps: float) -> View:
    """Two views that keep the nuisance with probability 1-eps (two spans of one caption)."""
    return View("bad", float(eps))


class ModalWorld(ProductWorld):
    """The world of one modality under one view: ``π_Z ⊗ ρ`` over ``Z x N_m``.

    Attributes:
        base: the world over Z.
        modality: the modality (nuisance law and renderer).
        view: the view that built the nuisance factor.
    """

    def __init__(self, base: World, modality: Modality, view: View) -> None:
        modality.check_world(base)
        nuisance = resampling(modality.nuisance, view.eps)
        super().__init__([*base.factors, nuisance])
        self.base = base
        self.modality = modality
        self.view = view

    @property
    def n_nuisance(self) -> int:
        return self.modality.n_nuisance

    def __repr__(self) -> str:
        return f"ModalWorld({self.modality.name}, {self.view.label}, n={self.n})"


def view_world(base: World, modality: Modality, view: View) -> ModalWorld:
    """The modality's world over ``Z x N_m`` under ``view`` (a product world).

    Raises:
        ValueError: if the modality renders a world of another size than ``base``.
    """
    return ModalWorld(base, modality, view)


def same_sample(world: FiniteWorld, eps: float) -> FiniteWorld:
    """``π = (1-ε)·diag(p) + ε·Π``: the pair is (x, x) w.p. 1-ε, a pair of ``world`` otherwise.

    ``K = (1-ε)·I + ε·K``: same eigenvectors, gaps times ε. Not a bad view.
    """
    if not 0.0 < eps <= 1.0:
        raise ValueError(f"eps must lie in (0, 1], got {eps}")
    diag = sp.diags_array(world.p, format="csr") if world.is_sparse else np.diag(world.p)
    return FiniteWorld(world.p, (1.0 - eps) * diag + eps * world.Pi)
