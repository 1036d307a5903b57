"""``prhsim sweep NAME`` for every sweep of the registry: the CLI writes what the library computes, errors are one line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from prhsim.cli import main
from support import untimed
from prhsim.experiments.sweeps import SWEEPS

#: Every sweep's tiny setting, from its registry record.
SMALL = {name: list(sweep.smoke) for name, sweep in SWEEPS.items()}


def test_every_sweep_of_the_registry_is_a_command_and_is_tested():
    result = CliRunner().invoke(main, ["sweep", "--help"])
    assert result.exit_code == 0
    assert all(name in result.output for name in SWEEPS)
    assert all(SMALL.values())
    assert all(hasattr(sweep.module_object(), f) for sweep in SWEEPS.values() for f in ("cells", "cell", "reduce"))


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_each_sweep_writes_its_folder_and_matches_the_library(tmp_path, name):
    """The command's folder holds what the library computes in this process; the command runs the sweep's cells on
    two worker processes, so the check is also that its cells give the same numbers anywhere."""
    for module in SWEEPS[name].requires:  # without one, the sweep refuses first (tests/cli/test_cli_extras.py)
        pytest.importorskip(module)
    out = tmp_path / name
    result = CliRunner().invoke(main, ["sweep", name, *SMALL[name], "--workers", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    sweep = SWEEPS[name]
    config = json.loads((out / "config.json").read_text())
    settings = sweep.settings_model().model_validate({k: v for k, v in config.items() if k != "out"})
    again = sweep.run(settings, lambda message: None).model_dump(mode="json")
    for key in again:
        if key != "seconds":  # deterministic but for timings: the folder holds what the library computes
            assert untimed(doc[key]) == untimed(again[key]), key
    assert (out / sweep.png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in result.output.replace("\n", "")


def test_a_config_file_and_json_output(tmp_path):
    config = tmp_path / "sweep.toml"
    config.write_text("eps_grid = [0.2, 1.0]\nk = 2\n[world]\nkind = \"gridscene\"\nsize = 2\nobjects = 1\n")
    result = CliRunner().invoke(main, ["sweep", "bad-view", "--config", str(config), "--json", "--no-figures",
                                       "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # progress goes to stderr
    assert doc["eps_grid"] == [0.2, 1.0] and doc["k"] == 2 and doc["n_states"] == 36
    assert not (tmp_path / "o" / "bad-view.png").exists()


@pytest.mark.parametrize("name, args, message", [
    ("bad-view", ["--set", "epz=1"], "unknown key 'epz'"),
    ("bad-view", ["--set", "eps_grid=[0.0, 1.0]"], "every eps must lie in (0, 1], got 0.0"),
    ("bad-view", ["--set", "eps=[0.5, 1.0]"], "the key 'eps' is now 'eps_grid'"),
    ("kernel-mismatch", ["--set", "n=2"], "n: Input should be greater than or equal to 4"),
    ("gap-sensitivity", ["--set", "perturbation=2"], "perturbation: Input should be less than or equal to 1"),
    ("gap-sensitivity", ["--set", "size=0.01"], "the key 'size' is now 'perturbation'"),
    ("kernel-mismatch", ["--set", "sizes=[0.1]"], "the key 'sizes' is now 'perturbations'"),
    ("pair-free", ["--set", "seeds=2"], "the key 'seeds' is now 'n_seeds'"),
    ("pair-free", ["--set", "samples=[1000]"], "the key 'samples' is now 'sample_sizes'"),
    ("pair-free", ["--set", "n_states=50"], "the key 'n_states' is now 'n'"),
    ("ntp-ca", ["--set", "d=2"], "the key 'd' is now 'k'"),
    ("sigreg-weight", ["--set", "training.seeds=2"], "the key 'seeds' is now 'n_seeds'"),
    ("sigreg-weight", ["--shape", "3y4"],
     "Invalid value for '--shape': expected sizes like 8,12 or 8x12, got '3y4'"),  # as prhsim run says it
    ("sigreg-weight", ["--lam", "x"], "--lam: expected numbers like 1e-3,0.01,0.1"),
    ("restricted-encoder", ["--set", "inputs=\"pixels\""], "inputs: Input should be 'raw', 'onehot' or 'state'"),
])
def test_bad_settings_are_one_line_errors(tmp_path, name, args, message):
    for module in SWEEPS[name].requires:  # without one, the sweep refuses first (tests/cli/test_cli_extras.py)
        pytest.importorskip(module)
    result = CliRunner().invoke(main, ["sweep", name, *args, "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "x").exists()
