"""Every sweep as hard as `prhsim run`: what cannot fit is refused up front in one line (exit 2, no folder, a small
tracemalloc peak), unusable outputs are refused before computing, and a full disk is one line naming the path.
The `prhsim real` commands' table is tests/real/test_real_refusals.py."""

from __future__ import annotations

import errno
import pathlib

import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.experiments.sweeps import SWEEPS
from support import assert_one_line_refusal, refusal

try:  # the JAX sweeps' import, before any tracemalloc window opens (without jax they refuse before importing it)
    import jax  # noqa: F401
except ImportError:
    jax = None


@pytest.fixture(scope="module", autouse=True)
def _warm_imports():
    """What the sweeps import (JAX, where installed, at the top), imported before any tracemalloc window opens."""
    import prhsim.experiments.sweeps._captioning  # noqa: F401
    import prhsim.experiments.sweeps._sample_efficiency  # noqa: F401
    import prhsim.experiments.sweeps._sigreg_weight  # noqa: F401


@pytest.mark.parametrize("args, names", [
    (["sample-efficiency", "--set", "hidden=[100000000]"], ["text learner's MLP", "100,000,000", "lower hidden"]),
    (["sample-efficiency", "--set", "budgets=[1000000000000]"], ["training records", "lower budgets"]),
    (["sample-efficiency", "--set", "batch_size=1000000000"], ["text learner's batches", "lower batch_size"]),
    (["sample-efficiency", "--memory-limit", "0.001"], ["limit 1 MB"]),
    (["captioning", "--set", "decoder_batch=1000000000"], ["caption decoder", "lower decoder_batch"]),
    (["captioning", "--set", "n_fits=[100000000]"], ["100,000,000 (image, caption) pairs", "lower n_fits"]),
    (["captioning", "--set", "pair_free_samples=1000000000000"], ["pair-free sample", "lower pair_free_samples"]),
    (["captioning", "--memory-limit", "0.001"], ["caption decoder", "limit 1 MB"]),
    (["sigreg-weight", "--k", "2", "--world", "ring", "--n", "2000000", "--memory-limit", "0.05"],
     ["limit 50 MB", "world.n"]),
])
def test_what_cannot_fit_is_refused_up_front_in_one_line(args, names, tmp_path):
    """These used to end in a numpy or JAX allocation traceback, or the OOM killer, after minutes."""
    for module in SWEEPS[args[0]].requires:  # without one, the sweep refuses first (tests/cli/test_cli_extras.py)
        pytest.importorskip(module)
    out = tmp_path / "out"
    if "--memory-limit" not in args:
        args = [*args, "--memory-limit", "8"]  # the same refusals on any machine
    result, peak = refusal(["sweep", *args, "--out", str(out), "--no-figures"])
    assert_one_line_refusal(result, peak, names)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, still", [
    (["run", "--world", "ring", "--set", "world.laziness=1"], "laziness = 1"),
    (["run", "--world", "torus", "--set", "world.laziness=1"], "laziness = 1"),
    (["run", "--world", "grid", "--set", "world.move=[0, 0]"], "every move = 0"),
    (["run", "--set", "world.move=[[0, 0], [0, 0]]", "--set", "world.shape_change=[0, 0]",
      "--set", "world.colour_change=[0, 0]"], "every move, shape_change and colour_change = 0"),
    (["sweep", "sample-efficiency", "--set", "world.move=[[0, 0], [0, 0]]", "--set", "world.shape_change=[0, 0]",
      "--set", "world.colour_change=[0, 0]"], "never moves"),
    (["real", "export-synthetic", "--set", "world.move=[[0, 0], [0, 0]]", "--set", "world.shape_change=[0, 0]",
      "--set", "world.colour_change=[0, 0]"], "never moves"),
])
def test_a_world_that_never_moves_is_refused_by_its_settings_before_any_work(argv, still, tmp_path):
    """Π = diag(p) is known from the settings: one line naming them, before any progress line or folder."""
    for module in SWEEPS[argv[1]].requires if argv[0] == "sweep" else ():  # without one, the sweep refuses first
        pytest.importorskip(module)
    out = tmp_path / "out"
    result, peak = refusal([*argv, "--out", str(out)])
    assert_one_line_refusal(result, peak, [still, "never moves", "Pi = diag(p)"])
    assert not out.exists()


def test_a_world_that_moves_in_one_factor_only_is_not_refused():
    from prhsim.config import GridSceneWorld, GridWorld

    assert GridWorld(shape=[3, 4], move=[0.0, 0.5]).never_moves() is None
    assert GridSceneWorld(objects=1, move=[[0, 0]], shape_change=[0], colour_change=[0.1]).never_moves() is None
    assert GridSceneWorld(objects=1, move=[[0, 0]]).never_moves() is None  # the default changes are nonzero


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_every_sweep_refuses_an_unusable_out_before_computing(name, tmp_path):
    for module in SWEEPS[name].requires:  # without one, the sweep refuses first (tests/cli/test_cli_extras.py)
        pytest.importorskip(module)
    (tmp_path / "file").write_text("x")
    result, peak = refusal(["sweep", name, "--out", str(tmp_path / "file" / "sub"), "--no-figures"])
    assert_one_line_refusal(result, peak, ["is a file, not a folder"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_world_flag_keeps_the_world_settings_given_with_set(tmp_path):
    """`--world ring --set world.laziness=1` used to replace the world table by a default ring (laziness 0.5) and run:
    now the flag sets the kind, the key applies to it, and the static ring is refused by its settings, before any
    progress line."""
    for module in SWEEPS["sigreg-weight"].requires:  # without one, the sweep refuses first (test_cli_extras.py)
        pytest.importorskip(module)
    out = tmp_path / "out"
    result, peak = refusal(["sweep", "sigreg-weight", "--set", "world.laziness=1", "--world", "ring", "--out", str(out),
                            "--no-figures"])
    assert_one_line_refusal(result, peak, ["laziness = 1", "never moves", "Pi = diag(p)"])
    wrong = CliRunner().invoke(main, ["sweep", "sigreg-weight", "--set", "world.size=3", "--world", "ring",
                                      "--out", str(out), "--no-figures"])
    assert wrong.exit_code == 2 and "size" in wrong.output and len(wrong.output.strip().splitlines()) == 1
    assert not out.exists()


def _full_disk_on(name: str, monkeypatch):
    """Writing a file called ``name`` fails as on a full disk."""
    write_text = pathlib.Path.write_text

    def full(self, *args, **kwargs):
        if self.name == name:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", full)


def test_a_full_disk_while_a_sweep_writes_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    _full_disk_on("config.json", monkeypatch)
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["sweep", "gap-sensitivity", "--set", "gaps=[0.05]", "--out", str(out), "--no-figures",
                                    "-q"])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: no space left on the device of {out}"), res.output
    assert "were written before it filled" in lines[0] and "nothing was written" in lines[0]
    assert f"its 1 computed cell(s) stay in {out}.cells: the same command (or --resume {out})" in lines[0]
    assert list(tmp_path.iterdir()) == [tmp_path / "out.cells"]  # neither the folder nor its staging sibling
    monkeypatch.undo()  # the disk has room again
    resumed = CliRunner().invoke(main, ["sweep", "gap-sensitivity", "--resume", str(out), "--no-figures"])
    assert "reused 1 of 1 cells" in resumed.output and (out / "results.json").exists()


def test_a_full_disk_that_a_library_hides_is_still_one_line(tmp_path, monkeypatch):
    """matplotlib reports a full disk while saving a PNG as ``'_idat' object has no attribute 'fileno'``: with
    almost nothing free on the device, a failed write is taken for a full disk."""
    from matplotlib.figure import Figure

    import prhsim.io._files as files

    def savefig(self, *args, **kwargs):
        raise AttributeError("'_idat' object has no attribute 'fileno'")

    monkeypatch.setattr(Figure, "savefig", savefig)
    monkeypatch.setattr(files, "free_bytes", lambda path: 4096)
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--world", "ring", "--n", "12", "--k", "2", "--modalities", "2",
                                    "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines()[-1].startswith(f"Error: no space left on the device of {out}"), res.output
    assert "Traceback" not in res.output and list(tmp_path.iterdir()) == []


def test_a_bug_while_writing_is_not_taken_for_a_full_disk(tmp_path, monkeypatch):
    """With space free, a failure while writing stays what it is (a traceback, exit 1): not every error is the disk."""
    from matplotlib.figure import Figure

    def savefig(self, *args, **kwargs):
        raise AttributeError("a bug")

    monkeypatch.setattr(Figure, "savefig", savefig)
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--world", "ring", "--n", "12", "--k", "2", "--modalities", "2",
                                    "--out", str(out)])
    assert res.exit_code == 1 and isinstance(res.exception, AttributeError)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sweep, key, value", [
    ("sample-efficiency", "budgets", "[300,300]"), ("calibration", "widths", "[8,8]"), ("captioning", "n_fits", "[4,4]"),
    ("pair-free", "sample_sizes", "[100,100]"), ("bad-view", "eps_grid", "[0.2,0.1,0.1]"), ("ntp-ca", "strengths", "[0.5,0.5]"),
    ("gap-sensitivity", "gaps", "[0.05,0.05]"), ("kernel-mismatch", "perturbations", "[0.1,0.1]"),
    ("sigreg-weight", "lams", "[0.1,0.1]"),
])
def test_a_grid_value_given_twice_is_refused_naming_the_key(sweep, key, value, tmp_path):
    """Sample-efficiency and captioning used to drop the copy silently, calibration to compute it twice."""
    for module in SWEEPS[sweep].requires:  # without one, the sweep refuses first (tests/cli/test_cli_extras.py)
        pytest.importorskip(module)
    out = tmp_path / "out"
    result, peak = refusal(["sweep", sweep, "--set", f"{key}={value}", "--out", str(out), "--no-figures"])
    assert_one_line_refusal(result, peak, [f"{key} holds", "twice"])
    assert not out.exists()
