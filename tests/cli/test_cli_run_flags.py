"""One table of the options of prhsim run's settings: every key is a setting, and each command's help shows its own
default, read from its settings model."""

from __future__ import annotations

import re

from click.testing import CliRunner

from prhsim.cli import main
from prhsim.cli._run_flags import RUN_FLAGS
from prhsim.config import RunConfig, resolve_run_config
from prhsim.experiments.sweeps import SWEEPS


def _help(args):
    return re.sub(r"\s+", " ", CliRunner().invoke(main, [*args, "--help"]).output)


def test_every_option_sets_a_setting_of_the_run():
    values = {"world": "ring", "modalities": 2, "views": "bad", "eps": 0.2, "k": 3, "seed": 4, "n": 12,
              "steps": 50, "seeds": 1, "encoder": "tabular", "memory-limit": 2.0}
    config = resolve_run_config(None, {RUN_FLAGS[name].key: value for name, value in values.items()})
    assert (config.world.kind, config.world.n, config.modalities, config.views, config.eps, config.k, config.seed) == \
        ("ring", 12, 2, "bad", 0.2, 3, 4)
    assert (config.training.steps, config.training.n_seeds, config.training.encoder, config.memory_limit_gb) == \
        (50, 1, "tabular", 2.0)
    for name in ("size", "objects", "shape"):  # world keys of other kinds: present on some world's settings
        assert RUN_FLAGS[name].key.startswith("world.")


def test_each_command_shows_its_own_defaults_from_one_table():
    run, sweep = _help(["run"]), _help(["sweep", "sigreg-weight"])
    assert "(modalities, default 3)" in run and "(modalities, default 2)" in sweep
    assert "(world, default gridscene)" in run and "(world, default random)" in sweep
    assert "(eps, default 0.1)" in run and "(eps, default 0.1)" in sweep
    assert set(SWEEPS["sigreg-weight"].run_flags) <= set(RUN_FLAGS)
    assert RunConfig().modalities == 3


def test_a_run_beyond_the_horizon_is_refused_in_one_line_unless_insisted(tmp_path, monkeypatch):
    """The week-long horizon of prhsim run (the sweeps' too): lowered to 0 s here, a default run is refused before any
    work, and runs with --insist."""
    import prhsim._budget as budget

    monkeypatch.setattr(budget, "HORIZON_SECONDS", 0.0)
    refused = CliRunner().invoke(main, ["run", "--out", str(tmp_path / "a"), "--no-figures"])
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1
    assert "this run would take about 0 days (" in refused.output and "pass --insist" in refused.output
    assert not (tmp_path / "a").exists()
    insisted = CliRunner().invoke(main, ["run", "--out", str(tmp_path / "b"), "--no-figures", "-q", "--insist"])
    assert insisted.exit_code == 0, insisted.output
    assert (tmp_path / "b" / "results.json").is_file()
