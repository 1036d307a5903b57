"""`prhsim run` refuses what cannot work before computing, writes a run folder whole or not at all,
reads settings strictly, and says where to find every world's settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from importlib.util import find_spec
from pathlib import Path

import pytest
from click.testing import CliRunner

from support import interrupt_once_ready
from prhsim.cli import main
from prhsim.config import WORLD_KINDS
from prhsim.cli._worlds import world_catalogue
from prhsim.experiments.sweeps import SWEEPS

#: An SGD learner needs jax and optax: without them the command refuses for that first (tests/cli/test_cli_extras.py).
NEEDS_JAX = pytest.mark.skipif(find_spec("jax") is None or find_spec("optax") is None,
                               reason="an SGD learner needs jax and optax (pip install 'prhsim[jax]')")

#: A refusal may allocate no more than this (it must come before any large allocation).
REFUSAL_PEAK_BYTES = 50e6
#: A small, fast run for the tests that need one to finish.
SMALL = ["--world", "ring", "--n", "12", "--k", "2", "--modalities", "2", "--no-figures"]


def invoke(*args: str):
    return CliRunner().invoke(main, ["run", *args])


def refused(args: list[str], out: Path):
    """Run the CLI in-process under tracemalloc; return the result and the peak bytes allocated."""
    tracemalloc.start()
    try:
        result = invoke(*args, "--out", str(out))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.parametrize("args, names", [
    (["--k", "20734"], ["k = 20734", "Gram matrices of 20735 features", "110 GB", "limit", "lower --k"]),
    (["--objects", "3", "--tables"], ["11,943,936 modal states", "world.objects"]),  # factor space admits it
    pytest.param(["--size", "10", "--modalities", "2", "--learner", "whiten", "--encoder", "tabular"],
                 ["6,480,000 modal states for caption", "SGD learners", "world.size", "--modalities"],
                 marks=NEEDS_JAX),  # tabular: with --encoder auto an MLP streams
    (["--world", "ring", "--n", "1000000000"], ["world.n", "2500000"]),
    (["--world", "random", "--n", "10000000"], ["world.n", "2500000"]),
    (["--world", "random", "--n", "30000", "--modalities", "1"], ["dense random world", "world.n", "world.degree"]),
    (["--world", "random", "--n", "100000"], ["dense random world holds n² pairs", "50,000", "world.degree"]),
    (["--world", "torus", "--shape", "1000,1000,1000"], ["1,000,000,000 states", "world.shape"]),
    (["--k", "500", "--memory-limit", "0.5", "--tables"], ["500", "limit 500 MB", "lower --k"]),
])
def test_what_cannot_fit_is_refused_up_front_in_one_line(args, names, tmp_path):
    out = tmp_path / "run"
    if "--memory-limit" not in args:
        args = [*args, "--memory-limit", "8"]  # the same refusals on any machine
    result, peak = refused(args, out)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for name in names:
        assert name in lines[0], lines[0]
    assert peak < REFUSAL_PEAK_BYTES, f"refusal allocated {peak / 1e6:.0f} MB first"
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("out_arg, message", [
    ("", "must not be empty"),
    ("{tmp}/file/sub", "is a file, not a folder"),
    ("{tmp}/file", "exists and is not a folder"),
    ("{tmp}/full", "exists and is not empty; pass --overwrite"),
    ("/proc/prhsim-run", "cannot be written"),
])
def test_unusable_out_is_refused_before_computing(out_arg, message, tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.png").write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    result = invoke("--out", out_arg.format(tmp=tmp_path))
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert "closed form" not in result.output  # nothing was computed
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_overwrite_replaces_the_old_folder_whole(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text("{}")
    (out / "stale.png").write_text("old figure")
    refused_result = invoke(*SMALL, "--out", str(out))
    assert refused_result.exit_code == 2 and (out / "stale.png").exists()
    result = invoke(*SMALL, "--out", str(out), "--overwrite")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "results.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no staging or old folder left


def test_overwrite_never_replaces_a_folder_that_is_not_a_run(tmp_path, monkeypatch):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "thesis.tex").write_text("precious")
    result = invoke(*SMALL, "--out", str(tmp_path / "notes"), "--overwrite")
    assert result.exit_code == 2 and "is not a prhsim run folder" in result.output
    monkeypatch.chdir(tmp_path / "notes")
    for out in (".", ".."):
        result = invoke(*SMALL, "--out", out, "--overwrite")
        assert result.exit_code == 2 and "the current folder or one of its ancestors" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]
    assert [p.name for p in (tmp_path / "notes").iterdir()] == ["thesis.tex"]


def test_markup_in_a_path_is_printed_as_it_is(tmp_path):
    out = tmp_path / "a[/]b[red]c"
    result = invoke(*SMALL, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert f"wrote {out}/ (config.json, results.json)" in result.output


def test_files_get_normal_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        result = invoke(*SMALL, "--out", str(tmp_path / "run"))
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o755
    for f in (tmp_path / "run").iterdir():
        assert f.stat().st_mode & 0o777 == 0o644, f


def test_rerun_from_a_run_folder_config_writes_a_new_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = invoke(*SMALL, "--out", "first")
    assert first.exit_code == 0, first.output
    saved = json.loads((tmp_path / "first" / "config.json").read_text())
    assert saved["out"] == "first"
    again = invoke("--config", "first/config.json")
    assert again.exit_code == 0, again.output
    assert "writes a new folder" in again.output
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and (runs[0] / "results.json").exists()
    assert json.loads((runs[0] / "config.json").read_text())["world"] == saved["world"]
    assert sorted(p.name for p in (tmp_path / "first").iterdir()) == ["config.json", "results.json"]


@pytest.mark.parametrize("content, name, message", [
    ("seed = true", "c.toml", "seed: Input should be a valid integer"),
    ("k = true", "c.toml", "k must be a positive integer or 'auto', got True"),
    ("modalities = true", "c.toml", "modalities: Input should be a valid integer"),
    ('centred = "no"', "c.toml", "centred: Input should be a valid boolean"),
    ('figures = "off"', "c.toml", "figures: Input should be a valid boolean"),
    ('views = "bad"\neps = "0.1"', "c.toml", "eps: Input should be a valid number"),
    ("[world]\ncolour_change = [nan, 0.5]", "c.toml", "world.colour_change[0]: Input should be a finite number"),
    ("[world]\nshape_change = [2.0, 0.2]", "c.toml", "world.shape_change[0]: Input should be less than or equal to 1"),
    ('[world]\nkind = "random"\nconcentration = inf', "c.toml", "world.concentration: Input should be a finite number"),
    ("[world]\nn = 128", "c.toml", "unknown key 'world.n' (world.kind is not set"),
    ("eps = 0.2", "c.toml", "eps only applies to bad views"),
    ("seed: 1", "c.yaml", "unsupported format '.yaml'; config files are .json or .toml"),
    ('{"seed": 1,}', "c.json", "not valid JSON"),
    ("views = [", "c.toml", "not valid TOML"),
    ('{"wrld": "ring"}', "c.json", "unknown key 'wrld'"),
    ('{"world": {"kind": "ring", "size": 3}}', "c.json", "unknown key 'world.size'"),
    ('{"modality_views": {"sound": "bad"}}', "c.json", "unknown modalities"),
])
def test_config_values_are_strict_and_errors_name_the_key(content, name, message, tmp_path):
    cfg = tmp_path / name
    cfg.write_text(content)
    result = invoke("--config", str(cfg), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"Error: {result.output.strip().removeprefix('Error: ')}"]
    assert message in result.output, result.output
    assert not (tmp_path / "o").exists()


def test_non_utf8_config_is_a_one_line_error(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_bytes(b'{"seed": "\xff"}')
    result = invoke("--config", str(cfg))
    assert result.exit_code == 2 and result.output.strip() == f"Error: config file {cfg} is not UTF-8 text: byte 0xff at offset 10"


def test_a_world_table_without_kind_merges_into_the_world_flag(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[world]\nn = 20\n")
    result = invoke("--config", str(cfg), "--world", "ring", "--k", "2", "--modalities", "1", "--no-figures",
                    "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "o" / "results.json").read_text())["world"]["n_states"] == 20


def test_a_world_flag_of_another_kind_says_what_it_replaces(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[world]\nkind = "ring"\nn = 20\n')
    result = invoke("--config", str(cfg), "--world", "grid", "--k", "2", "--modalities", "1", "--no-figures",
                    "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert "replaces the configured 'ring' world (its settings n=20 are not used)" in result.output


@pytest.mark.parametrize("args, key, value", [
    (["--size", "3"], "n_states", 9 ** 2 * 9 ** 2),
    (["--world", "ring", "--n", "30"], "n_states", 30),
    (["--world", "torus", "--shape", "5x7"], "factor_sizes", [5, 7]),
    (["--world", "grid", "--set", "world.shape=[4, 5]", "--set", "world.move=[0.3, 0.6]"], "factor_sizes", [4, 5]),
])
def test_world_settings_as_flags_and_set(args, key, value, tmp_path):
    result = invoke(*args, "--modalities", "1", "--k", "1", "--no-figures", "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "o" / "results.json").read_text())["world"][key] == value


def test_flags_win_over_set_and_set_accepts_a_world_kind(tmp_path):
    result = invoke("--set", "world.kind=ring", "--world", "grid", "--shape", "4,5", "--modalities", "1",
                    "--k", "1", "--no-figures", "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert "--world grid replaces the configured 'ring' world" in result.output
    assert json.loads((tmp_path / "o" / "results.json").read_text())["world"]["name"] == "grid"
    result = invoke("--set", "world=ring", "--n", "16", "--modalities", "1", "--k", "2", "--no-figures",
                    "--out", str(tmp_path / "p"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "p" / "results.json").read_text())["world"]["n_states"] == 16


@pytest.mark.parametrize("args", [
    ["--objects", "1", "--size", "3"],  # one clause: the caption stays injective
    ["--world", "grid", "--shape", "40"],  # one axis: the default move has one entry per axis
    ["--world", "grid", "--shape", "3,4,5"],
])
def test_small_worlds_that_used_to_fail(args, tmp_path):
    result = invoke(*args, "--no-figures", "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert "checks agree with the theory" in result.output


def test_a_library_refusal_during_the_run_is_a_usage_error(monkeypatch, tmp_path):
    import prhsim.experiments._run as run_module
    from prhsim import ResourceError

    def refuse(*args, **kwargs):
        raise ResourceError("a table of 10 states would need 1 TB (limit 1 GB); lower n")

    monkeypatch.setattr(run_module, "solve", refuse)
    result = invoke(*SMALL, "--out", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == "Error: a table of 10 states would need 1 TB (limit 1 GB); lower n"
    assert "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_world_flag_for_another_world_is_a_usage_error():
    result = invoke("--world", "ring", "--size", "5")
    assert result.exit_code == 2
    assert "--size does not apply to this world" in result.output and "prhsim worlds" in result.output


def test_worlds_lists_every_kind_the_config_accepts_with_every_setting():
    catalogue = world_catalogue()
    assert [c["kind"] for c in catalogue] == list(WORLD_KINDS)
    result = CliRunner().invoke(main, ["worlds"])
    assert result.exit_code == 0
    for entry in catalogue:
        assert entry["kind"] in result.output
        for setting in entry["settings"]:
            assert setting["key"] in result.output
    ring = next(c for c in catalogue if c["kind"] == "ring")
    n = next(s for s in ring["settings"] if s["key"] == "world.n")
    assert n["default"] == 64 and n["range"] == ">= 3, <= 2500000" and n["type"] == "int"
    as_json = json.loads(CliRunner().invoke(main, ["worlds", "--json"]).output)
    assert as_json == json.loads(json.dumps(catalogue))
    assert "prhsim worlds" in CliRunner().invoke(main, ["run", "--help"]).output


def test_json_prints_the_results_document(tmp_path):
    result = CliRunner().invoke(main, ["run", *SMALL, "--json", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document == json.loads((tmp_path / "o" / "results.json").read_text())
    assert document["world"]["k"] == 2


def test_quiet_prints_nothing(tmp_path):
    result = invoke(*SMALL, "--quiet", "--out", str(tmp_path / "o"))
    assert result.exit_code == 0 and result.output == ""
    assert (tmp_path / "o" / "results.json").exists()


def test_a_bug_is_not_a_usage_error(monkeypatch, tmp_path):
    import prhsim.experiments._run as run_module

    def broken(*args, **kwargs):
        raise ValueError("an internal invariant failed")

    monkeypatch.setattr(run_module, "solve", broken)
    result = invoke(*SMALL, "--out", str(tmp_path / "o"))
    assert result.exit_code == 1
    assert isinstance(result.exception, ValueError) and "internal invariant" in str(result.exception)
    assert not (tmp_path / "o").exists()


def _python(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


def test_python_m_prhsim_piped_output(tmp_path):
    out = tmp_path / ("a-long-folder-name-so-the-path-passes-eighty-columns-" * 2) / "run"
    proc = _python("-m", "prhsim", "run", *SMALL, "--out", str(out))
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert f"wrote {out}/ (config.json, results.json)" in stdout.splitlines()
    assert "prhsim run [" in stderr and "closed form: code1" in stderr  # plain stage lines on stderr
    assert "\x1b[" not in stdout  # no terminal escapes in a pipe


def test_ctrl_c_while_writing_leaves_no_run_folder(tmp_path):
    ready, out = tmp_path / "ready", tmp_path / "run"
    script = textwrap.dedent(f"""
        import pathlib, time
        import prhsim.experiments as experiments
        write = experiments.write_outputs
        def slow(*args, **kwargs):
            written = write(*args, **kwargs)
            pathlib.Path({str(ready)!r}).write_text("ready")
            time.sleep(120)
            return written
        experiments.write_outputs = slow
        from prhsim.cli import main
        main(["run", *{SMALL!r}, "--out", {str(out)!r}], prog_name="prhsim")
    """)
    code, stderr = interrupt_once_ready(_python("-c", script), ready, "the run")
    assert code == 130
    assert stderr.strip().splitlines()[-1] == "prhsim run: interrupted; nothing was written"
    assert "Traceback" not in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready"]


@pytest.mark.parametrize("name, content, message", [
    ("dup.json", '{"seed": 1, "world": {"kind": "ring"}, "seed": 2}', "sets 'seed' twice"),
    ("dupnested.json", '{"world": {"kind": "ring", "n": 8, "n": 9}}', "sets 'n' twice"),
    ("deep.json", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests 100001 levels deep; settings are at most 32"),
    ("deep.toml", "a = " + "[" * 50_000 + "]" * 50_000 + "\n", "nests 50000 levels deep"),
])
def test_duplicate_keys_and_deep_nesting_are_one_line_errors(name, content, message, tmp_path):
    """JSON would keep the last of two keys silently (TOML refuses them itself); a recursive parser would end a
    100,000-deep file in a RecursionError."""
    path = tmp_path / name
    path.write_text(content)
    tracemalloc.start()
    res = CliRunner().invoke(main, ["run", "--config", str(path), "--out", str(tmp_path / "out")])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert res.exit_code == 2 and message in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    assert peak < 50e6
    # a string holding brackets is not nesting
    ok = tmp_path / "ok.json"
    ok.write_text('{"seed": 1, "world": {"kind": "ring", "n": 8}, "_note": "' + "[" * 100 + '"}')
    from prhsim.config._files import _bracket_depth

    assert _bracket_depth(ok.read_text()) == 2


@pytest.mark.parametrize("sweep, key", [("bad-view", "eps_grid"), ("gap-sensitivity", "gaps"),
                                        ("captioning", "n_fits"), ("pair-free", "eps_grid"),
                                        ("sample-efficiency", "budgets"), ("calibration", "widths")])
def test_an_empty_sweep_grid_is_refused_naming_its_key(sweep, key, tmp_path):
    """An empty grid is one line naming the key, before any folder (bad-view and gap-sensitivity used to exit 0
    and write a folder with nothing in it)."""
    for module in SWEEPS[sweep].requires:  # without one, the sweep refuses first (tests/cli/test_cli_extras.py)
        pytest.importorskip(module)
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["sweep", sweep, "--set", f"{key}=[]", "--out", str(out), "--no-figures"])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {key}") and ("empty" in lines[0] or "at least 1" in lines[0])
    assert not out.exists()


def test_a_world_that_never_moves_is_refused_and_one_that_partly_moves_is_scored_where_defined(tmp_path):
    """Π = diag(p) (a ring with laziness 1): K = I, nothing but the constant is a feature: refused in one line, no
    folder. A gridscene whose objects never move still has shapes and colours: it runs, and the PRH sample metrics
    (which need nonzero rows) are left out where the features vanish; both used to end in a traceback."""
    static = tmp_path / "static"
    res = CliRunner().invoke(main, ["run", "--world", "ring", "--set", "world.laziness=1", "--no-figures", "-q",
                                    "--out", str(static)])
    assert res.exit_code == 2 and not static.exists(), res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "never moves" in lines[0] and "Pi = diag(p)" in lines[0]
    still = tmp_path / "still"
    res = CliRunner().invoke(main, ["run", "--world", "gridscene", "--set", "world.move=[[0,0],[0,0]]", "--no-figures",
                                    "-q", "--out", str(still)])
    assert res.exit_code == 0, res.output
    pairs = json.loads((still / "results.json").read_text())["pairs"]
    assert pairs and all(p["metrics"] == {} and p["samples"] is None for p in pairs)


@NEEDS_JAX
def test_a_text_learner_batch_that_cannot_fit_is_refused_in_one_line(tmp_path):
    """sample-efficiency with batch_size 1e9 used to end in numpy's 1.8 TiB allocation traceback."""
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["sweep", "sample-efficiency", "--set", "batch_size=1000000000", "--set",
                                    "budgets=[300]", "--set", "n_seeds=1", "--out", str(out), "--no-figures", "-q"])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "the text learner's batches" in lines[0] and "lower batch_size" in lines[0]
    assert not out.exists()
