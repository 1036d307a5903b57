"""The theorem's property checks as a library: hypothesis strategies and one predicate per claim.

``prhsim.testing.strategies`` draws valid worlds (finite, sparse, named, product), worlds at a gap,
modalities with nuisance laws and renderers, views, perturbations of Π on the same p, and feature
tables (feasible, or at known principal angles). The predicates ``assert_...`` check one universal
claim of docs/theory.md each and raise :class:`ClaimFailed` (an AssertionError) whose message names the
claim, its section, the predicted and observed values and the tolerance; the tolerances are named here
once (``ATOL``, ``SOLVER_ATOL``, ``SLACK``, ``CLEAR_GAP``, ``gap_atol``). :func:`check_theorem` runs every
claim of :data:`CLAIMS` through hypothesis (``prhsim check``), on drawn worlds or on one's own
(:func:`load_world`). docs/testing.md shows a test file of a user's own world. Needs hypothesis:
``pip install 'prhsim[testing]'``.
"""

try:
    import hypothesis as _hypothesis  # noqa: F401
except ImportError:  # pragma: no cover - exercised in a subprocess without hypothesis
    raise ImportError("prhsim.testing needs hypothesis: pip install 'prhsim[testing]'") from None

from prhsim.testing._check import (
    CLAIMS as CLAIMS,
    Claim as Claim,
    ClaimOutcome as ClaimOutcome,
    check_theorem as check_theorem,
    load_world as load_world,
)
from prhsim.testing._predicates import (
    ClaimFailed as ClaimFailed,
    assert_factor_space_equals_table as assert_factor_space_equals_table,
    assert_ky_fan as assert_ky_fan,
    assert_kronecker_top as assert_kronecker_top,
    assert_merge_rule as assert_merge_rule,
    assert_mismatch_bounds as assert_mismatch_bounds,
    assert_rotation_unique as assert_rotation_unique,
    assert_sin_theta_sandwich as assert_sin_theta_sandwich,
)
from prhsim.testing._tolerances import (
    ATOL as ATOL,
    CLEAR_GAP as CLEAR_GAP,
    RTOL as RTOL,
    SLACK as SLACK,
    SOLVER_ATOL as SOLVER_ATOL,
    gap_atol as gap_atol,
)

__all__ = [
    "ATOL",
    "CLAIMS",
    "CLEAR_GAP",
    "Claim",
    "ClaimFailed",
    "ClaimOutcome",
    "RTOL",
    "SLACK",
    "SOLVER_ATOL",
    "assert_factor_space_equals_table",
    "assert_ky_fan",
    "assert_kronecker_top",
    "assert_merge_rule",
    "assert_mismatch_bounds",
    "assert_rotation_unique",
    "assert_sin_theta_sandwich",
    "check_theorem",
    "gap_atol",
    "load_world",
]
