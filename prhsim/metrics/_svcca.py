"""SVCCA on N paired samples (Raghu et al. 2017; docs/theory.md §10).

Per side: centre the columns (``ã = a − 1μᵀ``, sample mean), take the thin SVD
``ã = U S Vᵀ`` and keep the top r directions ``ã V_r = U_r S_r``, where r is

* ``keep`` a float in (0, 1]: the smallest r whose explained variance
  ``Σ_{i≤r} s_i² / Σ_i s_i²`` reaches ``keep`` (default 0.99, Raghu et al.'s 99 %);
* ``keep`` an int: exactly that many directions (it must not exceed the numerical rank).

Then CCA between the two reduced sides: their column spaces are ``span U_r``, so the
canonical correlations are the singular values ``ρ_1 ≥ … ≥ ρ_m`` of ``U_{r_a}ᵀ U_{r_b}``,
``m = min(r_a, r_b)`` (no regularisation). SVCCA is their mean ``(1/m) Σ ρ_i`` ∈ [0, 1].
It is invariant to an orthogonal map and an isotropic scaling of either side and to a
common row permutation. With ``r_a + r_b`` near N the correlations approach 1 for any
data (CCA overfits): keep N well above the kept dimensions.

``convention="prh"`` is the PRH code's SVCCA (:mod:`prhsim.metrics._convention`): each
column first standardised, ``x ← (x − mean)/(std + 10⁻⁸)`` (std with N − 1), and
``keep`` = 10 directions by default. The PRH code takes the top 10 left singular
vectors with a randomised SVD and the canonical correlations with an iterative CCA,
so its own number moves between seeds and iterations; here the SVD is exact. With
as many canonical components as directions, the mean of its per-component
correlations is the mean of all canonical correlations, which this computes.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from prhsim.metrics._arguments import require_variance
from prhsim.metrics._cka import sample_pair, to_host
from prhsim.metrics._cka_parts import centre
from prhsim.metrics._convention import PRH_CCA_DIM, PRH_STD_EPS, Convention, check_convention


def _kept(s: np.ndarray, keep: float | int, name: str, eps: float) -> int:
    """How many leading singular values (descending, host numpy) to keep."""
    rank = int(np.sum(s > s[0] * max(s.size, 1) * eps * 8))
    if isinstance(keep, numbers.Integral):
        if keep > rank:
            raise ValueError(f"keep={keep} exceeds the numerical rank {rank} of {name}")
        return int(keep)
    var = s[:rank] ** 2
    frac = np.cumsum(var) / np.sum(var)
    return int(min(rank, 1 + np.sum(frac < keep * (1.0 - 64 * eps))))


def _standardised(xp: Any, x: Any) -> Any:
    """The PRH code's column standardisation ``(x − mean)/(std + 10⁻⁸)``, std with N − 1."""
    xc = centre(xp, x)
    std = xp.sqrt(xp.sum(xc * xc, axis=0, keepdims=True) / (x.shape[0] - 1))
    return xc / (std + PRH_STD_EPS)


def svcca(a: Any, b: Any, *, keep: float | int | None = None, convention: Convention = "prhsim") -> float:
    """Mean canonical correlation between the top singular directions of two samples.

    Args:
        a: (N, d_a) representation, numpy, torch or JAX.
        b: (N, d_b) representation of the same N inputs, same library.
        keep: a float in (0, 1], the fraction of variance kept per side, or an int,
            the number of directions kept per side; None: 0.99 (``convention="prh"``: 10).
        convention: "prhsim", or "prh": columns standardised first (module docstring).

    Returns:
        The mean of the ``min(r_a, r_b)`` canonical correlations, in [0, 1].

    Raises:
        ValueError: N mismatch, not 2-D, N < 2, NaN/inf, a constant side, a bad ``keep``.
    """
    convention = check_convention(convention)
    if keep is None:
        keep = PRH_CCA_DIM if convention == "prh" else 0.99
    if isinstance(keep, bool) or not isinstance(keep, numbers.Real):
        raise ValueError(f"keep must be a fraction in (0, 1] or a positive int, got {keep!r}")
    if isinstance(keep, numbers.Integral):
        if keep < 1:
            raise ValueError(f"keep must be a fraction in (0, 1] or a positive int, got {keep!r}")
    elif not 0.0 < float(keep) <= 1.0:
        raise ValueError(f"keep must be a fraction in (0, 1] or a positive int, got {keep!r}")
    xp, a, b = sample_pair(a, b, what="SVCCA")
    require_variance(xp, "a", a, "SVCCA")
    require_variance(xp, "b", b, "SVCCA")
    if convention == "prh":
        a, b = _standardised(xp, a), _standardised(xp, b)
    eps = float(xp.finfo(a.dtype).eps)
    bases = []
    for name, x in (("a", a), ("b", b)):
        U, s, _ = xp.linalg.svd(centre(xp, x), full_matrices=False)
        r = _kept(to_host(s), keep, name, eps)
        bases.append(U[:, :r])
    rho = xp.linalg.svdvals(xp.matrix_transpose(bases[0]) @ bases[1])
    return float(np.clip(np.mean(to_host(rho)), 0.0, 1.0))
