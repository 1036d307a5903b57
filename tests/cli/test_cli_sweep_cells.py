"""``prhsim sweep`` on cells: the same folder from this process and from worker processes, a sweep killed with
SIGKILL resumed (only its missing cells computed), settings that changed reusing nothing, and the tidy table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from prhsim.cli import main
from support import untimed
from prhsim.experiments.sweeps import SWEEPS

#: A kernel-mismatch sweep of 6 cells of about half a second each: long enough to be killed in the middle.
SLOW = ["kernel-mismatch", "--set", "n=900", "--set", "perturbations=[0.01, 0.1]", "--set", "worlds=6",
        "--no-figures"]


def _results(folder):
    return untimed(json.loads((folder / "results.json").read_text()))


def _sweep(*args):
    result = CliRunner().invoke(main, ["sweep", *args])
    assert result.exit_code == 0, result.output
    return result


def test_two_worker_processes_write_the_in_process_folder(tmp_path):
    """bad-view in this process and on two workers (every sweep that declares its cells is run on two workers and
    compared with the library in this process: tests/cli/test_cli_sweeps.py); the cell folders are removed."""
    smoke = [*SWEEPS["bad-view"].smoke, "--no-figures"]
    _sweep("bad-view", *smoke, "--out", str(tmp_path / "here"))
    _sweep("bad-view", *smoke, "--workers", "2", "--out", str(tmp_path / "there"))
    assert _results(tmp_path / "here") == _results(tmp_path / "there")
    assert not (tmp_path / "here.cells").exists() and not (tmp_path / "there.cells").exists()


def test_the_tidy_table_reads_back_with_one_row_per_cell(tmp_path):
    pyarrow = pytest.importorskip("pyarrow.parquet", reason="cells.parquet is written where pyarrow is installed")
    import csv

    _sweep("kernel-mismatch", *SWEEPS["kernel-mismatch"].smoke, "--no-figures", "--out", str(tmp_path / "o"))
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    table = pyarrow.read_table(tmp_path / "o" / "cells.parquet").to_pylist()
    with (tmp_path / "o" / "cells.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["world"] for r in table] == list(range(doc["worlds"])) == [int(r["world"]) for r in rows]
    assert [json.loads(r["row"])[0]["sin_theta"] for r in table] == [row[0]["sin_theta"] for row in doc["cells"]]


def _cell_files(folder):
    return [p for p in folder.glob("*.json") if not p.name.startswith(".") and p.name != "settings.json"]


@pytest.mark.slow
def test_a_killed_sweep_resumes_computing_only_its_missing_cells(tmp_path):
    out, cells = tmp_path / "killed", tmp_path / "killed.cells"
    command = [sys.executable, "-m", "prhsim", "sweep", *SLOW, "--workers", "2", "-q", "--out", str(out)]
    with subprocess.Popen(command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        deadline = time.monotonic() + 120
        while len(_cell_files(cells)) < 2 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGKILL)  # the command and its two workers
        output = process.communicate()[0].decode()
    assert process.returncode == -signal.SIGKILL, output
    finished = len(_cell_files(cells))
    assert 2 <= finished < 6 and not out.exists()
    # a truncated cell is recomputed, not read
    cut = _cell_files(cells)[0]
    cut.write_text(cut.read_text()[:30])
    resumed = _sweep(SLOW[0], "--resume", str(out), "--workers", "2")
    assert f"reused {finished - 1} of 6 cells" in resumed.output.replace("\n", " ")
    _sweep(*SLOW, "--workers", "2", "--out", str(tmp_path / "whole"))
    assert _results(out) == _results(tmp_path / "whole") and not cells.exists()


def test_the_same_out_reuses_the_stopped_cells_and_other_settings_reuse_none(tmp_path):
    """Cells left under o.cells (as a killed sweep leaves them) are read by the same command; with another seed their
    keys differ and none is read."""
    from prhsim.cli._options import git_revision
    from prhsim.experiments.sweeps import CellStore, run_sweep, settings_document

    sweep, smoke = SWEEPS["bad-view"], [*SWEEPS["bad-view"].smoke, "--no-figures"]
    settings = sweep.settings_model().model_validate({"eps_grid": [0.1, 0.5, 1.0]})

    def leave_cells(out):
        store = CellStore.beside(out, "bad-view", settings_document(settings), git_revision())  # as the command keys
        store.start()
        run_sweep(sweep, settings, store)

    leave_cells(tmp_path / "o")
    same = _sweep("bad-view", *smoke, "--out", str(tmp_path / "o"))
    assert "reused 3 of 3 cells" in same.output.replace("\n", " ") and not (tmp_path / "o.cells").exists()
    leave_cells(tmp_path / "p")
    other = _sweep("bad-view", *smoke, "--set", "seed=1", "--out", str(tmp_path / "p"))
    assert "reused" not in other.output and _results(tmp_path / "p")["seed"] == 1


@pytest.mark.parametrize("args, message", [
    (["--address", "127.0.0.1:1"], "--address names a Ray cluster: add --executor ray"),
    (["--workers", "0"], "Invalid value for '--workers'"),
    (["--executor", "slurm"], "Invalid value for '--executor'"),
])
def test_bad_executor_options_are_one_line(args, message, tmp_path):
    result = CliRunner().invoke(main, ["sweep", "bad-view", *args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.cells").exists()


def test_resume_of_a_folder_without_a_stopped_sweep_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["sweep", "bad-view", "--resume", str(tmp_path / "nothing")])
    assert result.exit_code == 2
    assert f"--resume {tmp_path / 'nothing'}: no stopped sweep there" in result.output.replace("\n", "")
    kept = tmp_path / "k.cells"
    kept.mkdir()
    (kept / "settings.json").write_text(json.dumps({"sweep": "kernel-mismatch", "settings": {}}))
    result = CliRunner().invoke(main, ["sweep", "bad-view", "--resume", str(tmp_path / "k")])
    assert result.exit_code == 2 and "its cells are of sweep 'kernel-mismatch', not 'bad-view'" in result.output


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill_one(title):
    """SIGKILL the first process whose command line holds ``title`` (read from /proc); its pid, or None."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if title in cmdline:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                continue
            return int(entry.name)
    return None


def _kill_a_ray_worker_mid_sweep(address, out):
    """Run the slow sweep on the cluster and, once a first cell has finished (the workers hold the task's code),
    SIGKILL a Ray worker computing another cell."""
    command = [sys.executable, "-m", "prhsim", "sweep", *SLOW, "--executor", "ray", "--address", address, "-q",
               "--out", str(out)]
    killed = None
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        deadline = time.monotonic() + 120
        while killed is None and process.poll() is None and time.monotonic() < deadline:
            if not _cell_files(Path(f"{out}.cells")):
                time.sleep(0.02)
                continue
            killed = _kill_one("ray::cell_task")  # a Ray worker, killed while it computes a cell
            time.sleep(0.05)
        output = process.communicate()[0].decode()
    assert killed is not None and process.returncode == 0, output


@pytest.mark.slow
def test_ray_runs_every_sweep_s_cells_to_the_in_process_numbers(tmp_path):
    """A real local Ray cluster (2 CPUs, started with the ``ray`` command line on a free loopback port): a sweep sent
    to it with --address gives the in-process folder (every sweep's cells give the same numbers on any executor:
    the two-worker test); a Ray worker killed mid-sweep is retried and the numbers stay; after ``ray stop``, a Ray
    started by the sweep itself (``--executor ray --workers 2``) gives them too.
    (``ray stop --force`` stops every Ray process of the machine: one test owns Ray, so xdist workers never share it.)"""
    pytest.importorskip("ray", reason="the Ray executor needs the ray extra (pip install 'prhsim[ray]')")
    if not Path("/proc").is_dir():
        pytest.skip("finding the Ray worker to kill reads /proc (Linux)")
    ray_command = str(Path(sys.executable).with_name("ray"))
    port = _free_port()
    started = subprocess.run([ray_command, "start", "--head", f"--port={port}",
                              "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "RAY_AUTH_MODE": "disabled"})  # a loopback cluster: no token
    assert started.returncode == 0, started.stdout + started.stderr
    address = f"127.0.0.1:{port}"
    try:
        smoke = [*SWEEPS["bad-view"].smoke, "--no-figures"]
        _sweep("bad-view", *smoke, "--executor", "ray", "--address", address, "--out", str(tmp_path / "ray"))
        _sweep("bad-view", *smoke, "--out", str(tmp_path / "here"))
        assert _results(tmp_path / "ray") == _results(tmp_path / "here")
        _kill_a_ray_worker_mid_sweep(address, tmp_path / "killed")
    finally:
        subprocess.run([ray_command, "stop", "--force"], capture_output=True, timeout=120)
    _sweep(*SLOW, "--workers", "2", "--out", str(tmp_path / "slow-here"))
    assert _results(tmp_path / "killed") == _results(tmp_path / "slow-here")
    _sweep("bad-view", *smoke, "--executor", "ray", "--workers", "2", "--out", str(tmp_path / "local-ray"))
    assert _results(tmp_path / "local-ray") == _results(tmp_path / "here")
