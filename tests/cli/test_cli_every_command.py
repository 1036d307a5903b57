"""What every command shares: Ctrl-C is one line and exit 130, and --memory-limit is a finite number of GB."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from support import interrupt_once_ready
from prhsim.cli import main


def _interrupted(tmp_path: Path, patch: str, args: list[str]) -> tuple[int, str]:
    """Run ``python -c`` with ``patch`` (code that makes the command write ``ready`` and wait), send SIGINT once it
    is ready, and return the exit code and stderr."""
    ready = tmp_path / "ready"
    script = textwrap.dedent(patch).format(ready=str(ready)) + textwrap.dedent(f"""
        from prhsim.cli import entry
        import sys
        sys.argv = ["prhsim", *{args!r}]
        entry()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    return interrupt_once_ready(proc, ready)


#: Make prh score's computation announce itself and wait.
WAIT_IN_SCORE = """
    import pathlib, time
    import prhsim.cli._prh as prh
    def slow(*args, **kwargs):
        pathlib.Path({ready!r}).write_text("ready")
        time.sleep(120)
    prh.protocol_entry = slow
"""


def test_ctrl_c_in_a_command_without_its_own_handler_is_one_line_and_exit_130(tmp_path):
    """prh score had no handler of its own: it ended with "Aborted!" and exit 1."""
    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.normal(size=(40, 6)))
    np.save(tmp_path / "b.npy", rng.normal(size=(40, 5)))
    code, stderr = _interrupted(tmp_path, WAIT_IN_SCORE, ["prh", "score", "a.npy", "b.npy", "--calibrate", "99"])
    assert code == 130, stderr
    assert stderr.strip().splitlines()[-1] == "prhsim prh score: interrupted; nothing was written"
    assert "Aborted" not in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("args", [
    ["prh", "score", "a.npy", "a.npy"],
    ["prh", "table", "feats", "--out", "o"],
    ["real", "export-synthetic", "--out", "o"],
    ["sweep", "calibration", "--out", "o"],
    ["run", "--out", "o"],
])
@pytest.mark.parametrize("value", ["inf", "nan", "1e400"])
def test_a_memory_limit_must_be_a_finite_number_of_gb(args, value, tmp_path, monkeypatch):
    """inf and nan passed the range check and ended in a traceback (OverflowError, ValueError) in five commands."""
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "a.npy", np.random.default_rng(0).normal(size=(20, 3)))
    (tmp_path / "feats").mkdir()
    result = CliRunner().invoke(main, [*args, "--memory-limit", value])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert "--memory-limit" in line or "memory_limit_gb: Input should be a finite number" in line  # run: its key
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("permutations, noted", [(3, True), (19, False)])
def test_run_notes_a_calibration_that_cannot_reject_as_every_calibrated_report_does(permutations, noted, tmp_path):
    """prhsim run --calibrate K < 19 printed calibrated scores of 0 for identical representations with no note."""
    result = CliRunner().invoke(main, ["run", "--world", "ring", "--n", "16", "--modalities", "2", "--no-figures",
                                       "--calibrate", str(permutations), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    note = (f"note: K = {permutations} permutations cannot reject at alpha 0.05: the smallest p-value is 1/(K + 1) = "
            f"{1 / (permutations + 1):.3g}; use K >= 19")
    assert (note in result.output.replace("\n", " ")) == noted


def test_ctrl_c_ends_prhsim_check_although_hypothesis_swallows_interrupts_in_its_callbacks(tmp_path):
    """hypothesis' collection callback swallowed the KeyboardInterrupt ("Exception ignored in gc_callback") and the
    check ran on; its own SIGINT handler ends it: exit 130, one line."""
    proc = subprocess.Popen([sys.executable, "-m", "prhsim", "check", "--examples", "100000"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    for line in proc.stderr:  # wait for the first claim to start
        if "checking" in line:
            break
    time.sleep(0.5)  # well inside hypothesis' loop
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "prhsim check: interrupted; nothing was written"


def test_two_commands_in_one_second_get_two_default_folders(tmp_path, monkeypatch):
    """prh table and the sweeps named their default folder by the second alone: a second command in the same second
    was refused (its folder existed); now each gets its own, as prhsim run's did."""
    from prhsim.cli._options import new_run_folder

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("time.strftime", lambda fmt: "20261207-120000")
    first = new_run_folder("prh-table")
    first.mkdir(parents=True)
    second = new_run_folder("prh-table")
    second.mkdir()
    assert (str(first), str(second), str(new_run_folder("prh-table"))) == (
        "runs/20261207-120000-prh-table", "runs/20261207-120000-prh-table-2", "runs/20261207-120000-prh-table-3")
