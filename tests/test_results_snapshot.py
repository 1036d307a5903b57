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


def test_a_reshaped_document_keeps_every_number_and_an_added_field_is_only_listed():
    old = {"pairs": [{"a": "x", "mutual_knn": 0.5, "knn_chance": 0.01, "linear_cka": 0.9, "r1": 0.3,
                      "mutual_knn_calibrated": 0.4, "mutual_knn_p": 0.02, "linear_cka_calibrated": 0.8,
                      "linear_cka_p": 0.01},
                     {"a": "y", "mutual_knn": None, "knn_chance": None, "linear_cka": None, "r1": None}]}
    new = snapshot._pairs_as_mappings(old)
    assert new["pairs"][0] == {"a": "x", "metrics": {"mutual_knn": 0.5, "linear_cka": 0.9, "retrieval_r1": 0.3},
                               "chance": {"mutual_knn": 0.01}, "calibrated": {"mutual_knn": 0.4, "linear_cka": 0.8},
                               "p_values": {"mutual_knn": 0.02, "linear_cka": 0.01}}
    assert new["pairs"][1] == {"a": "y", "metrics": {}, "chance": {}, "calibrated": {}, "p_values": {}}
    found = snapshot.differences({"pairs": [{"chance": {"mutual_knn": 0.01, "retrieval_r1": 0.1}}]},
                                 {"pairs": [{"chance": {"mutual_knn": 0.01}}]})
    assert found == ["/pairs[0]/chance/retrieval_r1: new"]
    assert any(__import__("re").fullmatch(p, found[0].removesuffix(": new")) for p in snapshot.ADDED["run-default"])
