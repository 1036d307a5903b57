"""The LeJEPA objective: invariance plus SIGReg, in either weighting convention (docs/theory.md §7).

* ``"lejepa"``:   ``λ·SIGReg + (1 − λ)·invariance`` (LeJEPA, λ = 0.02);
* ``"additive"``: ``invariance + λ·SIGReg`` (other libraries; §7's measurements
  use this form with β in place of λ).

Invariance is :func:`prhsim.objectives.invariance` (squared norm summed over D, mean
over views and anchors; ``dims="mean"`` also averages over D as LeJEPA's code does),
SIGReg is :func:`prhsim.objectives.sigreg` averaged over all V views and M directions
(``sigreg_views="per_view"``, the default), or of the V views' rows pooled into one sample of V·N
rows (``"pooled"``, as stable-pretraining's LeJEPA computes it; docs/theory.md §7).

    >>> import numpy as np
    >>> e = np.stack([np.zeros((8, 3)), np.ones((8, 3))])  # invariance 0.75; each view collapsed
    >>> round(float(lejepa_loss(e, np.eye(3))), 4), round(float(lejepa_loss(e, np.eye(3), convention="additive")), 4)
    (0.862, 0.877)
"""

from __future__ import annotations

from typing import Any, Callable, Literal

from prhsim.objectives._invariance import Dims, invariance
from prhsim.objectives._sigreg import KNOTS, T_MAX, Reduce, ViewPooling, check_view_pooling, pool_views, sigreg

Convention = Literal["lejepa", "additive"]
#: LeJEPA's SIGReg weight.
LAMBDA = 0.02


def lejepa_loss(embeddings: Any, directions: Any, *, lam: float = LAMBDA, convention: Convention = "lejepa",
                n_global: int | None = None, n_total: int | None = None, reduce: Reduce | None = None,
                knots: int = KNOTS, t_max: float = T_MAX, dims: Dims = "sum",
                regulariser: Callable[..., Any] = sigreg, sigreg_views: ViewPooling = "per_view") -> Any:
    """``λ·SIGReg + (1 − λ)·invariance`` (``"lejepa"``) or ``invariance + λ·SIGReg`` (``"additive"``).

    Args:
        embeddings: (V, N, D): V views of N anchors; the first ``n_global`` are
            the global views (default: all).
        directions: unit directions (D, M), e.g. :func:`prhsim.objectives.draw_directions`.
        lam: the SIGReg weight λ.
        convention: which weighting; see the module docstring.
        n_global: see :func:`prhsim.objectives.invariance`.
        n_total, reduce, knots, t_max: see :func:`prhsim.objectives.epps_pulley`.
        dims: the invariance's squared norm summed ("sum") or averaged ("mean", LeJEPA's code) over D.
        regulariser: the SIGReg implementation, called as :func:`prhsim.objectives.sigreg` is (e.g.
            ``prhsim.objectives._sigreg_torch.sigreg_torch``: the same value and gradient for torch tensors
            in O(N·M) memory).
        sigreg_views: "per_view" (SIGReg of each view, averaged) or "pooled" (SIGReg of all V·N rows at once).
    """
    inv = invariance(embeddings, n_global=n_global, dims=dims)
    pooled, n_reg = (pool_views(embeddings, n_total) if check_view_pooling(sigreg_views) == "pooled"
                     else (embeddings, n_total))
    reg = regulariser(pooled, directions, n_total=n_reg, reduce=reduce, knots=knots, t_max=t_max)
    if convention == "lejepa":
        return lam * reg + (1.0 - lam) * inv
    if convention == "additive":
        return inv + lam * reg
    raise ValueError(f"convention must be 'lejepa' or 'additive', got {convention!r}")
