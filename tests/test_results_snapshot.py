"""tools/results_snapshot.py: the field-by-field comparison a refactoring is checked with."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location("results_snapshot",
                                               Path(__file__).parents[1] / "tools" / "results_snapshot.py")
snapshot = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(snapshot)


def test_equal_documents_have_no_differences():
    doc = {"a": [1, 2.5, {"b": "max 5.66e-16"}], "c": None, "d": True}
    assert snapshot.differences(doc, doc) == []


def test_floats_and_numbers_in_strings_compare_within_the_tolerance():
    before = {"x": 1.0, "s": "yes (max 5.66e-16)", "n": 3}
    assert snapshot.differences({"x": 1.0 + 1e-12, "s": "yes (max 5.71e-16)", "n": 3}, before) == []
    found = snapshot.differences({"x": 1.001, "s": "no (max 5.66e-16)", "n": 4}, before)
    assert found == ["/x: 1.001 != 1.0", "/s: 'no (max 5.66e-16)' != 'yes (max 5.66e-16)'", "/n: 4 != 3"]
    assert snapshot.differences({"s": "gap 0.25"}, {"s": "gap 0.26"}) == ["/s: 'gap 0.25' != 'gap 0.26'"]


def test_structure_changes_are_named():
    found = snapshot.differences({"a": [1, 2], "new": 0}, {"a": [1], "gone": 0})
    assert found == ["/gone: missing now", "/new: new", "/a: 2 items != 1"]
    assert snapshot.differences({"x": float("nan")}, {"x": float("nan")}) == []
    assert snapshot.differences({"x": True}, {"x": 1.0}) == ["/x: True != 1.0"]


def test_unstable_fields_are_left_out():
    doc = {"seconds": 3.0, "git_revision": "abc", "inner": [{"seconds": 1.0, "value": 2.0}]}
    assert snapshot.stable(doc) == {"inner": [{"value": 2.0}]}


def test_every_command_has_a_snapshot():
    folder = Path(__file__).parents[1] / "tools" / "snapshots" / "before-registries"
    assert {p.stem for p in folder.glob("*.json")} == set(snapshot.commands())
