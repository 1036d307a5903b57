"""Commands that need an optional extra refuse in one line, before any work, where it is missing."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.experiments.sweeps import SWEEPS


@pytest.fixture
def without_jax(monkeypatch):
    """jax and optax (and the captioning scorers) look uninstalled to the requirement checks."""
    blocked = {"jax", "optax", "sacrebleu", "pycocoevalcap"}
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **kw: None if name in blocked else find(name, *a, **kw))


@pytest.mark.parametrize("learner", ["whiten", "sigreg", "all"])
def test_run_with_an_sgd_learner_refuses_without_jax(tmp_path, without_jax, learner):
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", "--world", "ring", "--n", "8", "--learner", learner, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"prhsim run --learner {learner} needs jax, optax: pip install 'prhsim[jax]'" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_the_closed_form_run_needs_no_extra(tmp_path, without_jax):
    result = CliRunner().invoke(main, ["run", "--world", "ring", "--n", "8", "--out", str(tmp_path / "run"), "-q"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name", sorted(n for n, s in SWEEPS.items() if s.requires))
def test_a_sweep_that_needs_an_extra_refuses_without_it(tmp_path, without_jax, name):
    sweep = SWEEPS[name]
    out = tmp_path / name
    result = CliRunner().invoke(main, ["sweep", name, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"prhsim sweep {name} needs " in result.output and f"pip install 'prhsim[{sweep.extra}]'" in result.output
    assert "Traceback" not in result.output and not out.exists()
    with pytest.raises(ValueError, match=rf"^prhsim sweep {name} needs .*prhsim\[{sweep.extra}\]"):
        sweep.run(sweep.settings_model()())  # the library's road through the registry says the same


def test_every_sweep_that_trains_with_jax_says_so():
    """The sweeps whose learners are JAX programs name it in the registry (the others run on numpy alone)."""
    assert {n for n, s in SWEEPS.items() if {"jax", "optax"} <= set(s.requires)} == {
        "captioning", "sample-efficiency", "sigreg-weight"}
