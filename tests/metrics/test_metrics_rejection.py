"""One rule for a calibration that cannot reject: K permutations whose smallest p-value 1/(K + 1) is above the
level (alpha, or Holm's first threshold alpha/m) are named, with the K that would do, by every report."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.metrics import calibrate, permutations_needed, rejection_note


@pytest.mark.parametrize("alpha, tests", [(0.05, 1), (0.01, 1), (0.3, 1), (0.05, 3), (0.1, 7), (0.25, 1)])
def test_the_needed_permutations_are_the_smallest_k_whose_smallest_p_value_reaches_the_level(alpha, tests):
    needed = permutations_needed(alpha, tests)
    assert 1 / (needed + 1) <= alpha / tests * (1 + 1e-12) and (needed == 1 or 1 / needed > alpha / tests)
    assert rejection_note(needed, alpha, tests) is None
    note = rejection_note(needed - 1, alpha, tests) if needed > 1 else None
    assert needed == 1 or (note is not None and f"use K >= {needed:,}" in note)


def test_a_calibration_below_the_needed_k_never_rejects_and_at_it_can():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(40, 3))
    b = a + 0.01 * rng.normal(size=(40, 3))  # a perfect signal: the smallest p-value K allows
    for k in (permutations_needed(0.05) - 1, permutations_needed(0.05)):
        cal = calibrate("linear_cka", a, b, permutations=k, alpha=0.05)
        assert cal.p_value == 1 / (k + 1) and (cal.p_value <= 0.05) == (rejection_note(k, 0.05) is None)


def test_prh_score_notes_a_calibration_that_cannot_reject(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(30, 2, 4)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a + 0.01)
    args = ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--metric", "linear_cka"]
    few = CliRunner().invoke(main, [*args, "--calibrate", "1"])
    assert few.exit_code == 0 and "K = 1 permutations cannot reject at alpha 0.05" in few.output.replace("\n", " ")
    enough = CliRunner().invoke(main, [*args, "--calibrate", "19"])
    assert enough.exit_code == 0 and "cannot reject" not in enough.output
    doc = json.loads(CliRunner().invoke(main, [*args, "--calibrate", "10", "--alpha", "0.01", "--json"]).stdout)
    assert doc["calibration"]["note"].startswith("K = 10 permutations cannot reject at alpha 0.01")
