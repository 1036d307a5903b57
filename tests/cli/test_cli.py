"""The prhsim command line: the main run, its files, and usage errors without tracebacks."""

import json

import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.config import ConfigError, RunConfig, resolve_run_config
from prhsim.experiments import run_experiment


@pytest.fixture(scope="module")
def main_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    result = CliRunner().invoke(main, ["run", "--world", "gridscene", "--modalities", "3", "--out", str(out)])
    return result, out


def test_main_run_exits_zero_and_writes_results(main_run):
    result, out = main_run
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert data["world"]["name"] == "gridscene" and data["world"]["n_states"] == 20736
    assert data["world"]["k"] == 10 and data["world"]["gap"] > 0.08
    assert len(data["world"]["spectrum_head"]) >= 11
    assert [m["name"] for m in data["modalities"]] == ["pixels", "caption", "symbolic"]
    for m in data["modalities"]:
        assert set(m) >= {"eigenvalues", "value", "gap", "unique", "nuisance_free_observed", "injectivity"}
        assert len(m["eigenvalues"]) == 11 and m["unique"] and m["injectivity"]["injective"]
    assert len(data["pairs"]) == 3 and all(p["rho_p"] < 1e-8 for p in data["pairs"])
    assert all(c["verdict"] == "PASS" for c in data["checks"])
    assert "git_revision" in data and data["prhsim_version"]
    config = json.loads((out / "config.json").read_text())
    assert config["world"]["kind"] == "gridscene" and config["modalities"] == 3
    for fig in ("spectrum.png", "residuals.png"):
        assert (out / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "all 19 checks agree with the theory" in result.output
    assert not list(out.glob(".*")), "no temporary files left behind"


def test_bad_views_show_predicted_misalignment(tmp_path):
    result = CliRunner().invoke(main, ["run", "--views", "bad", "--eps", "0.1", "--no-figures", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "results.json").read_text())
    rho = {(p["a"], p["b"]): (p["rho_p"], p["predicted_rho_p"]) for p in data["pairs"]}
    obs, pred = rho[("pixels", "caption")]
    assert pred == pytest.approx((2 * 7 / 10) ** 0.5) and obs == pytest.approx(pred, abs=1e-8)
    platonic = data["checks"][0]
    assert platonic["predicted"].startswith("no") and platonic["observed"].startswith("no")
    assert platonic["verdict"] == "PASS"
    assert not (tmp_path / "spectrum.png").exists()


def test_tie_is_reported_not_hidden(tmp_path):
    result = CliRunner().invoke(main, ["run", "--k", "2", "--no-figures", "--strict", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output  # N/A is not a disagreement: --strict passes
    assert "splits a tie" in result.output
    data = json.loads((tmp_path / "results.json").read_text())
    assert not any(m["unique"] for m in data["modalities"])
    assert all(p["predicted_rho_p"] is None for p in data["pairs"])
    assert "s_Theta = 0.707" in data["modalities"][0]["tie"]


def test_other_worlds_and_config_file(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('modalities = 2\nseed = 3\n[world]\nkind = "random"\nn = 60\n')
    result = CliRunner().invoke(main, ["run", "--config", str(cfg), "--k", "3", "--no-figures", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "o" / "results.json").read_text())
    assert data["world"]["n_states"] == 60 and data["world"]["k"] == 3
    assert json.loads((tmp_path / "o" / "config.json").read_text())["seed"] == 3


@pytest.mark.parametrize("args, message", [
    (["--bogus"], "No such option"),
    (["--views", "awful"], "Invalid value for '--views'"),
    (["--k", "zero"], "positive integer or 'auto'"),
    (["--eps", "2"], "eps"),
    (["--modalities", "4"], "gridscene has 3 modalities"),
    (["--k", "99999"], "k must be at most 20,734"),
    (["--world", "moon"], "Invalid value for '--world'"),
])
def test_bad_flags_are_usage_errors_without_traceback(args, message, tmp_path):
    result = CliRunner().invoke(main, ["run", "--out", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "results.json").exists()


def test_missing_config_file(tmp_path):
    result = CliRunner().invoke(main, ["run", "--config", str(tmp_path / "none.json")])
    assert result.exit_code == 2 and "cannot read config file" in result.output


def test_merge_order_defaults_file_flags():
    cfg = resolve_run_config({"eps": 0.3, "views": "bad", "world": {"kind": "ring", "n": 30}, "seed": 5},
                             {"eps": 0.2, "seed": None}, ["seed=6", "eps=0.25"])
    assert cfg.eps == 0.2 and cfg.seed == 6 and cfg.world.kind == "ring" and cfg.world.n == 30
    swapped = resolve_run_config({"world": {"kind": "ring", "n": 30}}, {"world": "torus"})
    assert swapped.world.kind == "torus"
    kept = resolve_run_config({"world": {"kind": "ring", "n": 30}}, {"world": "ring"})
    assert kept.world.n == 30
    with pytest.raises(ConfigError, match="unknown key"):
        resolve_run_config({"epsilon": 0.1})


def test_library_run_with_modality_view_override():
    config = RunConfig.model_validate({"modality_views": {"caption": "bad"}, "eps": 0.1})
    result = run_experiment(config)
    views = {m.name: m.view for m in result.modalities}
    assert views == {"pixels": "good", "caption": "bad(0.1)", "symbolic": "good"}
    rho = {(p.a, p.b): p.rho_p for p in result.pairs}
    assert rho[("pixels", "symbolic")] < 1e-8
    assert rho[("pixels", "caption")] == pytest.approx((2 * 7 / 10) ** 0.5, abs=1e-8)
    assert not result.failures


def test_command_line_lets_idle_blas_threads_sleep_unless_the_environment_chooses():
    """The command line sets OPENBLAS_THREAD_TIMEOUT before numpy loads (so OpenBLAS reads it), keeps a value the
    environment chose, and changes nothing once numpy is loaded."""
    import os
    import subprocess
    import sys

    from prhsim.cli import OPENBLAS_THREAD_TIMEOUT, quiet_idle_blas_threads

    probe = ("import os, sys, prhsim.cli as c; c.main(['--version'], standalone_mode=False); "
             "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), 'numpy' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    for preset, expected in [(None, OPENBLAS_THREAD_TIMEOUT), ("25", "25")]:
        child_env = env if preset is None else {**env, "OPENBLAS_THREAD_TIMEOUT": preset}
        out = subprocess.run([sys.executable, "-c", probe], env=child_env, capture_output=True, text=True, check=True)
        assert out.stdout.split()[-2:] == [expected, "False"], out.stdout
    environ: dict[str, str] = {}
    quiet_idle_blas_threads(environ)  # numpy is loaded in this process: too late to matter, so nothing is set
    assert environ == {}
