"""``prhsim check``: every claim through hypothesis, on drawn worlds or a user's world file; bad worlds in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.testing import CLAIMS, Claim, ClaimFailed, check_theorem, load_world
from prhsim.testing._check import _run
from prhsim.worlds import ring, sinkhorn_world


def _dense(m):
    return np.asarray(m.toarray() if hasattr(m, "toarray") else m, dtype=float)


def test_check_runs_every_claim_and_reports_json():
    res = CliRunner().invoke(main, ["check", "--examples", "3", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [c["predicate"] for c in doc["claims"]] == [c.predicate for c in CLAIMS]
    assert all(c["status"] == "passed" and c["examples"] == 3 for c in doc["claims"])
    assert doc["examples"] == 3 and doc["seed"] == 1 and doc["world_file"] is None


def test_a_user_world_file_is_checked_with_its_modal_worlds(tmp_path):
    w = ring(7, laziness=0.3)
    np.savez(tmp_path / "w.npz", p=np.asarray(w.p), Pi=_dense(w.Pi))
    res = CliRunner().invoke(main, ["check", "--examples", "4", "--world-file", str(tmp_path / "w.npz")])
    assert res.exit_code == 0, res.output
    assert "on " + str(tmp_path / "w.npz") in res.output and res.output.count("passed") == len(CLAIMS)


def test_a_world_from_a_python_entry_point(tmp_path, monkeypatch):
    (tmp_path / "my_worlds.py").write_text("from prhsim.worlds import path\n\ndef walk():\n    return path(6, move=0.4)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    world = load_world("my_worlds:walk")
    assert world.n == 6
    outcomes = check_theorem(examples=2, world=world)
    assert {o.status for o in outcomes} <= {"passed", "not applicable"}


@pytest.mark.parametrize("case,message", [
    ("asymmetric", "not a valid world: Pi must be symmetric (max |Pi - Pi^T| = 0.01)"),
    ("negative", "not a valid world: Pi must be non-negative"),
    ("marginal", "not a valid world: Pi's row marginal must equal p"),
    ("keys", "a world file holds arrays 'p' and 'Pi', got P, q"),
    ("missing", "no such file"),
])
def test_an_invalid_world_file_is_one_line(tmp_path, case, message):
    a = np.random.default_rng(0).uniform(0.5, 1.0, size=(5, 5))
    w = sinkhorn_world((a + a.T) / 2, np.full(5, 0.2))
    p, Pi = np.asarray(w.p), _dense(w.Pi).copy()
    target = tmp_path / f"{case}.npz"
    if case == "asymmetric":  # a flow around 0 -> 1 -> 2 -> 0: both marginals stay p, the symmetry breaks
        for (i, j), sign in {(0, 1): 1, (1, 2): 1, (2, 0): 1, (0, 2): -1, (1, 0): -1, (2, 1): -1}.items():
            Pi[i, j] += sign * 0.005
    elif case == "negative":
        Pi[0, 1] = Pi[1, 0] = -0.01
    if case == "marginal":
        np.savez(target, p=p, Pi=Pi * 0.9)
    elif case == "keys":
        np.savez(target, P=p, q=Pi)
    elif case != "missing":
        np.savez(target, p=p, Pi=Pi)
    res = CliRunner().invoke(main, ["check", "--world-file", str(target)])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.output


def test_a_bad_entry_point_and_a_huge_world_are_one_line(tmp_path, monkeypatch):
    (tmp_path / "bad_worlds.py").write_text("from prhsim.worlds import ring\n\ndef big():\n    return ring(1000)\n\n"
                                            "def nothing():\n    return 3\n")
    (tmp_path / "broken_worlds.py").write_text("from prhsim.worlds import ring\n\ndef office(:\n    return ring(8)\n")
    (tmp_path / "raising_worlds.py").write_text("raise RuntimeError('no data here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec, message in (("bad_worlds:big", "the world has 1,000 states"),
                          ("bad_worlds:nothing", "returned int, not a prhsim World"),
                          ("bad_worlds:absent", "cannot import 'absent' from 'bad_worlds'"),
                          ("broken_worlds:office", f"a syntax error in {tmp_path / 'broken_worlds.py'}, line 3"),
                          ("raising_worlds:office", "importing 'raising_worlds' failed (RuntimeError: no data here)")):
        res = CliRunner().invoke(main, ["check", "--world-file", spec])
        assert res.exit_code == 2 and message in res.output and len(res.output.strip().splitlines()) == 1, spec


def test_a_failing_claim_reports_its_shrunk_counterexample_and_message():
    """A claim whose predicate fails once the drawn integer reaches 5: hypothesis shrinks it to exactly 5."""
    from hypothesis import strategies as st

    def body(data, world):
        x = data.draw(st.integers(0, 100), label="x")
        if x >= 5:
            raise ClaimFailed(f"a planted claim (docs/theory.md §0): predicted below 5, observed {x}, tolerance 0")

    out = _run(Claim("planted", "§0", "assert_planted", body), examples=200, seed=0, world=None)
    assert out.status == "failed" and out.message.endswith("observed 5, tolerance 0")
    assert "Draw 1 (x): 5" in out.counterexample and "Explanation" not in out.counterexample


def test_examples_and_seed_are_checked():
    with pytest.raises(ValueError, match="examples must be a positive integer, got 0"):
        check_theorem(examples=0)
    with pytest.raises(ValueError, match="seed must be an integer"):
        check_theorem(seed="a")


def test_a_long_check_says_so_before_it_starts_and_every_check_counts_its_claims(monkeypatch):
    """--examples 100000 is hours at the measured rate: the note comes before any work (the check itself stubbed
    here); a short check reports each claim as it starts, counted."""
    import prhsim.testing as testing
    from prhsim.cli._check import EXAMPLE_SECONDS

    monkeypatch.setattr(testing, "check_theorem", lambda **kwargs: [])
    long = CliRunner().invoke(main, ["check", "--examples", "100000"])
    assert long.exit_code == 0
    hours = EXAMPLE_SECONDS * 100_000 * len(testing.CLAIMS)
    assert f"this check may take hours: {len(testing.CLAIMS)} claims x 100,000 examples (about {hours:,.0f} s" in \
        long.output.replace("\n", " ")
    monkeypatch.undo()
    short = CliRunner().invoke(main, ["check", "--examples", "2"])
    assert short.exit_code == 0 and "may take" not in short.output
    assert f"{len(testing.CLAIMS)} claims checked" in short.output and "checking §1.1" in short.output


def test_a_world_file_that_is_not_an_npz_says_what_it_is(tmp_path):
    """A .npy array (numpy.load gives an array, not an archive), an empty or other file, a folder, a device and a
    symlink loop: one line each, exit 2, naming the file and what it is."""
    import os

    np.save(tmp_path / "x.npy", np.eye(4))
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "text.npz").write_text("p and Pi\n")
    (tmp_path / "dir.npz").mkdir()
    os.symlink(tmp_path / "loop2.npz", tmp_path / "loop1.npz")
    os.symlink(tmp_path / "loop1.npz", tmp_path / "loop2.npz")
    saving = "an .npz archive holding arrays 'p' and 'Pi' (numpy.savez(file, p=p, Pi=Pi) writes one)"
    cases = [("x.npy", f"a .npy array, not {saving}"), ("empty.npz", f"an empty file, not {saving}"),
             ("text.npz", f"not {saving}"), ("dir.npz", "is a directory"),
             ("loop1.npz", "cannot be resolved (symlink loop)")]
    for name, message in cases:
        res = CliRunner().invoke(main, ["check", "--world-file", str(tmp_path / name)])
        assert res.exit_code == 2 and res.output.strip().splitlines() == [f"Error: {tmp_path / name}: {message}"], \
            res.output
    if os.path.exists(os.devnull) and not os.path.isfile(os.devnull):
        res = CliRunner().invoke(main, ["check", "--world-file", os.devnull])
        assert res.exit_code == 2
        assert res.output.strip() == f"Error: {os.devnull}: is not a regular file (a character device)"


def test_a_world_function_or_module_that_calls_sys_exit_is_one_line_naming_it(tmp_path, monkeypatch):
    """sys.exit() inside the user's code would end the check silently, with its own status (0 for none)."""
    (tmp_path / "exiting_worlds.py").write_text("import sys\n\ndef quit():\n    sys.exit()\n\n"
                                                "def fail():\n    sys.exit(3)\n")
    (tmp_path / "exit_on_import.py").write_text("import sys\n\nsys.exit('not here')\n\ndef office():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec, message in (("exiting_worlds:quit", "exiting_worlds:quit: quit() called sys.exit()"),
                          ("exiting_worlds:fail", "exiting_worlds:fail: fail() called sys.exit(3)"),
                          ("exit_on_import:office", "exit_on_import:office: importing 'exit_on_import' called "
                                                    "sys.exit('not here')")):
        res = CliRunner().invoke(main, ["check", "--world-file", spec])
        assert res.exit_code == 2 and res.output.strip().splitlines() == [f"Error: {message}"], (spec, res.output)
