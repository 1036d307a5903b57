"""The tolerance policy of the theorem's property checks, in one place (docs/testing.md, "Tolerances").

* ``ATOL`` (and ``RTOL``): an identity that holds exactly, up to rounding of dense linear algebra on
  worlds of at most a few hundred states (Ky Fan's value, whitening, a bound's own formula);
* ``SOLVER_ATOL``: a quantity that goes through an eigenvector or an iterative solver (ρ_P, s_Θ,
  canonical correlations) at a clear gap;
* ``SLACK``: the margin of an inequality between two computed numbers (a bound against what it bounds);
* ``CLEAR_GAP``: the smallest spectral gap at which a top-k subspace counts as determined: eigenvector
  rounding is about ``1e-15·n/gap``, below 1e-10 at this gap;
* :func:`gap_atol`: ``SOLVER_ATOL`` scaled by the gap, for a subspace at a gap narrower than ``CLEAR_GAP``
  (the Davis–Kahan sensitivity of an eigenvector grows as 1/gap).
"""

from __future__ import annotations

import math

#: Exact identities, up to rounding.
ATOL = 1e-10
RTOL = 1e-10
#: Quantities through eigenvectors or iterative solvers, at a clear gap.
SOLVER_ATOL = 1e-8
#: The margin of an inequality between two computed numbers.
SLACK = 1e-9
#: A gap this clear keeps eigenvector rounding (about 1e-15·n / gap) below 1e-10, far under SOLVER_ATOL.
CLEAR_GAP = 1e-4


def gap_atol(gap: float) -> float:
    """``SOLVER_ATOL · max(1, CLEAR_GAP/gap)``: the tolerance of a subspace at spectral gap ``gap`` (> 0)."""
    if not (isinstance(gap, (int, float)) and math.isfinite(gap) and gap > 0):
        raise ValueError(f"gap must be a positive number, got {gap!r}")
    return SOLVER_ATOL * max(1.0, CLEAR_GAP / float(gap))
