"""Every predicate of prhsim.testing at its boundary: a claim just inside its tolerance passes, one just outside
fails, and the failure reports the tolerance the comparison applied.

Each case shifts one number a predicate computes (through the function the predicate calls) by a fraction of the
predicate's tolerance: half of it must pass, twice it must fail with a message naming that tolerance. A tolerance
widened (or narrowed) by any factor beyond 2 inside a predicate fails one of the two.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import prhsim.testing._predicates as predicates
from prhsim.testing import (
    ATOL,
    SLACK,
    SOLVER_ATOL,
    ClaimFailed,
    assert_factor_space_equals_table,
    assert_ky_fan,
    assert_kronecker_top,
    assert_merge_rule,
    assert_mismatch_bounds,
    assert_rotation_unique,
    assert_sin_theta_sandwich,
    gap_atol,
)
from prhsim.testing.strategies import uncentred_spectrum
from prhsim.worlds import Modality, bad, good, grid, ring

RING = ring(8, laziness=0.2)
TWO = [Modality("a", [0.5, 0.5]), Modality("b", [1.0])]
GRID = grid([4, 4], move=[0.5, 0.25])


def _shift_pairs(out, field, delta):
    """A rotation-uniqueness outcome whose every pair's ``comparison.<field>`` is moved by ``delta``."""
    pairs = tuple(dataclasses.replace(p, comparison=dataclasses.replace(
        p.comparison, **{field: getattr(p.comparison, field) + delta})) for p in out.pairs)
    return dataclasses.replace(out, pairs=pairs)


def _ring_gap_atol(k=2):
    mu = uncentred_spectrum(RING)[1:]
    return gap_atol(float(mu[k - 1] - mu[k]))


def _sandwich_tables():
    p = np.full(8, 1 / 8)
    F = np.linalg.qr(np.random.default_rng(0).normal(size=(8, 2)))[0] * np.sqrt(8)  # whitened under uniform p
    return F, F @ np.array([[0.0, 1.0], [1.0, 0.0]]), p


#: (case, the function of _predicates to shift, how it is shifted by δ, the predicate's call, its tolerance, claim)
CASES = [
    ("ky-fan", "alignment_loss", lambda real, d: lambda *a, **k: real(*a, **k) + d,
     lambda: assert_ky_fan(RING, 2), ATOL, "through the kernel operator"),
    ("whitened", "whitening_error", lambda real, d: lambda *a, **k: real(*a, **k) + d,
     lambda: assert_ky_fan(RING, 2), ATOL, "the closed form is whitened"),
    ("rotation-unique", "rotation_uniqueness", lambda real, d: lambda *a, **k: _shift_pairs(real(*a, **k), "rho_p", d),
     lambda: assert_rotation_unique(RING, TWO, [good(), good()], 2), _ring_gap_atol(), "ρ_P = 0"),
    ("merge-rule", "rotation_uniqueness", lambda real, d: lambda *a, **k: _shift_pairs(real(*a, **k), "s_theta", d),
     lambda: assert_merge_rule(GRID, TWO, [bad(0.1), good()], 3), SOLVER_ATOL, "s_Θ = √((k − min k_Z)/k)"),
    ("mismatch", "kernel_mismatch",
     lambda real, d: lambda *a, **k: (lambda r: dataclasses.replace(r, sin_theta=r.residual + d))(real(*a, **k)),
     lambda: assert_mismatch_bounds(RING, ring(8, laziness=0.3), 2), SLACK, "sinΘ sandwich: ‖sinΘ‖_F ≤"),
    ("sandwich", "procrustes",
     lambda real, d: lambda F1, F2, p: (lambda r: dataclasses.replace(
         r, residual=predicates.principal_angles(F1, F2, p).sin_theta - d))(real(F1, F2, p)),
     lambda: assert_sin_theta_sandwich(*_sandwich_tables()), SLACK, "sinΘ sandwich: ‖sinΘ‖_F ≤"),
    ("factor-space", "rotation_uniqueness",
     lambda real, d: lambda *a, **k: (lambda out: out if not k.get("tables") else dataclasses.replace(
         out, modalities=tuple(dataclasses.replace(m, loss=m.loss + d) for m in out.modalities)))(real(*a, **k)),
     lambda: assert_factor_space_equals_table(GRID, TWO, [bad(0.1), good()], 3), ATOL, "the modality's loss"),
    ("kronecker", "kronecker_top",
     lambda real, d: lambda *a, **k: (lambda b: dataclasses.replace(b, values=b.values + d))(real(*a, **k)),
     lambda: assert_kronecker_top(GRID, 3), ATOL, "Kronecker top-m eigenvalues"),
]


@pytest.mark.parametrize("case, target, shift, call, tolerance, claim", CASES, ids=[c[0] for c in CASES])
def test_a_claim_just_inside_its_tolerance_passes_and_just_outside_fails(monkeypatch, case, target, shift, call,
                                                                       tolerance, claim):
    call()  # the claim as it is: holds
    real = getattr(predicates, target)
    monkeypatch.setattr(predicates, target, shift(real, 0.5 * tolerance))
    call()
    monkeypatch.setattr(predicates, target, shift(real, 2.0 * tolerance))
    with pytest.raises(ClaimFailed) as failed:
        call()
    message = str(failed.value)
    assert claim in message, message
    assert f"tolerance {tolerance:.1e}" in message, message
    off = float(re.search(r"off by ([0-9.e+-]+)", message).group(1))
    assert tolerance < off <= 2.5 * tolerance, message  # how far outside, as applied


def test_the_comparisons_name_how_far_outside_a_claim_falls():
    with pytest.raises(ClaimFailed, match=r"predicted 1, observed 1\.000000003, off by 3\.0e-09, tolerance 1\.0e-09"):
        predicates._close("c", "§0", 1.0, 1.0 + 3e-9, 1e-9)
    with pytest.raises(ClaimFailed, match=r"predicted at most 0, observed 2e-09, off by 2\.0e-09, tolerance 1\.0e-09"):
        predicates._at_most("c", "§0", 0.0, 2e-9, 1e-9)
    predicates._close("c", "§0", [1.0, 2.0], [1.0 + 0.5e-9, 2.0 - 0.5e-9], 1e-9)  # within the tolerance
    predicates._at_most("c", "§0", 0.0, 1e-9, 1e-9)
