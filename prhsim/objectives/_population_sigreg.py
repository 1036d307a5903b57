"""The population Epps–Pulley statistic of a finite world's embedding law (docs/theory.md §7).

For features ``F`` (n × k), a state law ``p`` and a unit direction ``a``, the
projected law puts mass ``p_z`` on ``s_z = aᵀf(z)``; with
``φ_s(t) = Σ_z p_z e^{i t s_z}`` the full-line Epps–Pulley integral is, in closed form,

    EP(a) = ∫_ℝ |φ_s(t) − e^{−t²/2}|² e^{−t²/2} dt
          = √(2π) Σ_{z,z'} p_z p_{z'} e^{−(s_z − s_{z'})²/2} − 2√π Σ_z p_z e^{−s_z²/4} + √(2π/3).

(Expand the square; each term is a Gaussian integral.) A collapsed law
(``F = 0``) gives ``√(2π) − 2√π + √(2π/3) ≈ 0.409``. The population SIGReg is
the mean of EP over directions. It is the batch statistic's target without the
factor N and without the quadrature: the 17-knot trapezoid on [0, 3] of
:func:`prhsim.objectives.sigreg` applied to φ_s agrees with EP within 1% on
near-Gaussian laws (it truncates the tail |t| > 3, where the weight e^{−t²/2}
is below 0.011), but not on coarse lattices, whose φ_s is periodic: the
3-point law (1/6, 2/3, 1/6) on (−√3, 0, √3) loses 20% of its EP that way.

Cost: the double sum is exact and takes ``n²·M`` exponentials; it is computed
in blocks of rows of at most ``block`` elements (memory ``block`` × the item size,
guarded by :func:`prhsim._budget.ensure_fits`). Any array-API library works
(numpy, JAX under jit/grad/vmap, torch with autograd).

    >>> import numpy as np
    >>> round(float(population_epps_pulley(np.zeros((3, 2)), np.full(3, 1 / 3), np.array([1.0, 0.0]))), 6)
    0.408923
"""

from __future__ import annotations

import math
from typing import Any

from prhsim._budget import ensure_fits
from prhsim.objectives._arrays import like, upcast

#: Elements of one block of the pairwise double sum (2^22 float64 = 32 MiB).
BLOCK = 2**22
#: ``EP(δ_0) = √(2π) − 2√π + √(2π/3)``: the population statistic of a collapsed law.
COLLAPSE_EP = math.sqrt(2 * math.pi) - 2 * math.sqrt(math.pi) + math.sqrt(2 * math.pi / 3)


def population_epps_pulley(F: Any, p: Any, directions: Any, *, block: int = BLOCK) -> Any:
    """``EP(a)`` of the law ``Σ_z p_z δ_{aᵀf(z)}`` for each unit direction a (docs/theory.md §7).

    ``EP(a) = √(2π) Σ_{z,z'} p_z p_{z'} e^{−(s_z−s_{z'})²/2} − 2√π Σ_z p_z e^{−s_z²/4} + √(2π/3)``
    with ``s = F a``.

    Args:
        F: features (n, k), row z is f(z).
        p: the state law (n,), positive, summing to one (not checked: a
            traced array cannot be).
        directions: one unit direction (k,) or M of them as columns (k, M);
            not normalised here.
        block: most elements of one block of the (rows, n, M) pairwise array.

    Returns:
        EP per direction: shape () for one direction, (M,) for M.
    """
    xp, F = upcast(F)
    if F.ndim != 2:
        raise ValueError(f"features must have shape (n, k), got {tuple(F.shape)}")
    n, k = F.shape
    p = like(p, F)
    A = like(directions, F)
    if p.shape != (n,):
        raise ValueError(f"p must have shape ({n},), got {tuple(p.shape)}")
    single = A.ndim == 1
    if single:
        A = A[:, None]
    if A.ndim != 2 or A.shape[0] != k:
        raise ValueError(f"directions must have shape ({k},) or ({k}, M), got {tuple(A.shape)}")
    m = A.shape[1]
    s = F @ A  # (n, M)
    rows = max(1, min(n, int(block) // max(1, n * m)))
    itemsize = xp.finfo(F.dtype).bits // 8
    ensure_fits(3.0 * rows * n * m * itemsize, f"the Epps–Pulley double sum over {n} states x {m} directions",
                "lower block, the number of directions or of states")
    pair = 0.0
    for start in range(0, n, rows):
        d = s[start:start + rows, None, :] - s[None, :, :]  # (rows, n, M)
        inner = xp.sum(p[:, None] * xp.exp(-(d * d) / 2), axis=1)  # (rows, M)
        pair = pair + xp.sum(p[start:start + rows, None] * inner, axis=0)
    single_sum = xp.sum(p[:, None] * xp.exp(-(s * s) / 4), axis=0)
    ep = math.sqrt(2 * math.pi) * pair - 2 * math.sqrt(math.pi) * single_sum + math.sqrt(2 * math.pi / 3)
    return ep[0] if single else ep


def population_sigreg(F: Any, p: Any, directions: Any, *, block: int = BLOCK) -> Any:
    """Population SIGReg: ``mean_j EP(a_j)`` over the columns of ``directions`` (k, M) (docs/theory.md §7).

        >>> import numpy as np
        >>> F = np.array([[-1.0], [1.0]])  # Rademacher: EP ≈ 0.109 (§7)
        >>> round(float(population_sigreg(F, np.array([0.5, 0.5]), np.ones((1, 1)))), 3)
        0.109
    """
    xp, _ = upcast(F)
    return xp.mean(population_epps_pulley(F, p, directions, block=block))
