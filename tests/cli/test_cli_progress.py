"""The progress of long commands: plain stderr lines with an ETA from the rate of the current count; every sweep
counting its work to the end; each sweep's time class, from its settings, in a note before any work."""

from __future__ import annotations

import random
import re
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np

import pytest
from click.testing import CliRunner
from test_cli_sweeps import SMALL

from prhsim._types import as_progress
from prhsim.cli import _console, _driver, main
from prhsim.config import resolve_settings
from prhsim._budget import LONG_CLASSES, TIME_CLASSES, time_class
from prhsim.experiments.sweeps import SWEEPS


def test_plain_lines_carry_an_eta_from_the_rate_of_their_own_count(capsys, monkeypatch):
    clock = iter([0.0, 0.0, 10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 40.0, 40.0, 50.0, 50.0])
    monkeypatch.setattr(_console.time, "perf_counter", lambda: next(clock))
    with _console.bar_reporter("cmd", quiet=False) as say:
        say("images 10/100", 10, 100)  # the count starts: no rate yet
        say("images 30/100", 30, 100)  # 20 in 10 s: 70 left, 35 s
        say("step 0/8", 0, 8)  # a new count (another total)
        say("step 4/8", 4, 8)  # 4 in 10 s: 4 left, 10 s
        say("evaluating")
    lines = capsys.readouterr().err.splitlines()
    assert [re.sub(r"\[ *[\d.]+ s\] ", "", line) for line in lines] == [
        "cmd images 10/100", "cmd images 30/100, ETA 35 s", "cmd step 0/8", "cmd step 4/8, ETA 10 s", "cmd evaluating"]


def test_quiet_prints_nothing(capsys):
    with _console.bar_reporter("cmd", quiet=True) as say:
        say("step 1/2", 1, 2)
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------------------
# the ETA against its definition
# --------------------------------------------------------------------------------------
def _twin_etas(calls: list[tuple[float, int | None, int | None]]) -> list[str]:
    """The ETA of each call from its definition: the work left times the seconds per unit done since the count
    began (a count begins at its first call, at a new total, or where done goes back); "" before any is done."""
    out, count = [], None  # count: (total, done, time) where it began
    for now, done, total in calls:
        if done is None or total is None:
            out.append("")
            continue
        if count is None or count[0] != total or done < count[1]:
            count = (total, done, now)
        _, base, began = count
        out.append("" if done <= base else f", ETA {(total - done) * (now - began) / (done - base):.0f} s")
    return out


def _random_calls(gen: random.Random) -> list[tuple[float, int | None, int | None]]:
    """Calls at increasing times: counts of random totals, done rising (now and then going back), some uncounted."""
    calls, now, total, done = [], 0.0, gen.randint(1, 500), 0
    for _ in range(40):
        now += gen.uniform(0.0, 30.0)
        roll = gen.random()
        if roll < 0.15:
            calls.append((now, None, None))
            continue
        if roll < 0.25:
            total, done = gen.randint(1, 500), 0
        elif roll < 0.3:
            done = gen.randint(0, done)
        else:
            done = min(total, done + gen.randint(0, 40))
        calls.append((now, done, total))
    return calls


@pytest.mark.parametrize("seed", range(5))
def test_the_eta_of_every_line_is_its_definition_on_a_fake_clock(capsys, monkeypatch, seed):
    calls = _random_calls(random.Random(seed))
    clock = [0.0]
    monkeypatch.setattr(_console.time, "perf_counter", lambda: clock[0])
    with _console.bar_reporter("cmd", quiet=False) as say:
        for i, (now, done, total) in enumerate(calls):
            clock[0] = now
            say(f"call {i}", done=done, total=total)
    lines = capsys.readouterr().err.splitlines()
    assert [re.sub(r"^cmd \[ *[\d.]+ s\] call \d+", "", line) for line in lines] == _twin_etas(calls)


def test_the_reporter_prints_a_stage_without_a_count_as_a_plain_line(capsys):
    with _console.bar_reporter("cmd", quiet=False) as say:
        say("a stage")
        say("step", 1, 2)
    assert [re.sub(r"\[ *[\d.]+ s\] ", "", line) for line in capsys.readouterr().err.splitlines()] == [
        "cmd a stage", "cmd step"]  # the count's first call: no rate yet


def test_as_progress_keeps_a_counting_callable_and_drops_the_count_for_a_one_argument_one():
    seen = []
    one = as_progress(seen.append)
    one("m", done=1, total=2)
    assert seen == ["m"]

    def counting(message, done=None, total=None):
        seen.append((message, done, total))

    assert as_progress(counting) is counting
    as_progress(None)("nothing", done=1, total=1)  # says nothing


# --------------------------------------------------------------------------------------
# every sweep counts its work: 0 <= done <= total, total fixed within a count, done rising, the end reached
# --------------------------------------------------------------------------------------
def _counts(calls: list[tuple[str, int | None, int | None]]) -> list[list[tuple[int, int]]]:
    """The counted calls split into counts (a new count at another total, or where done goes back)."""
    counts: list[list[tuple[int, int]]] = []
    for _, done, total in calls:
        if done is None or total is None:
            continue
        if not counts or counts[-1][-1][1] != total or done < counts[-1][-1][0]:
            counts.append([])
        counts[-1].append((done, total))
    return counts


def test_counts_split_at_a_new_total_or_where_done_goes_back():
    assert _counts([("a", 0, 4), ("b", None, None), ("c", 4, 4), ("d", 0, 2), ("e", 1, 2), ("f", 0, 2)]) == [
        [(0, 4), (4, 4)], [(0, 2), (1, 2)], [(0, 2)]]


#: tests/cli/test_cli_sweeps.py's small settings as --set assignments (its shorthand flags spelled out).
TINY = {name: [value for flag, value in zip(args, args[1:]) if flag == "--set"] for name, args in SMALL.items()}
TINY["sigreg-weight"] = ["lams=[0.01, 0.1]", "training.steps=50", "training.n_seeds=1", "world.n=12"]
TINY["sample-efficiency"] = ["budgets=[100, 300]", "n_seeds=1", "steps=40", "batch_size=64", "hidden=[16]",
                             "world.size=2", "world.objects=1"]


def _stand_ins(monkeypatch, name: str) -> None:
    """The JAX trainers of three sweeps replaced by stand-ins that return at once (compiling them takes 10-20 s at
    any size); what is counted is the sweep's own loop over its grid, which they leave as it is."""
    from prhsim.experiments.sweeps import _captioning, _sample_efficiency, _sigreg_weight

    if name == "sigreg-weight":
        monkeypatch.setattr(_sigreg_weight, "learn", lambda config, outcome, objectives, progress=None: [])
    if name == "captioning":
        from prhsim.learners import DecoderConfig

        def decoder(law, features, config=None, *, seed=0):
            return SimpleNamespace(config=config or DecoderConfig(), loss=np.ones(1), seconds=0.0, law=law)

        monkeypatch.setattr(_captioning, "train_caption_decoder", decoder)
        monkeypatch.setattr(_captioning, "decode_captions",  # every image read as state 0's first caption
                            lambda d, rows: np.repeat(d.law.captions(np.zeros(1, int), np.zeros(1, int)), len(rows), 0))
    if name == "sample-efficiency":
        def trained(law, records=None, k=2, config=None, *, seeds=(0,)):
            return SimpleNamespace(seeds=tuple(seeds), k=k, tokens=1800, loss=np.zeros((len(seeds), 1)))

        monkeypatch.setattr(_sample_efficiency, "train_text", trained)
        monkeypatch.setattr(_sample_efficiency, "initial_text",
                            lambda law, k, config, *, seeds=(0,), records=None: trained(law, k=k, seeds=seeds))
        monkeypatch.setattr(_sample_efficiency, "embed_captions", lambda result, law, tokens: np.random.default_rng(
            0).standard_normal((len(result.seeds), len(tokens), result.k)))


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_every_sweep_counts_its_work_to_the_end(monkeypatch, name):
    for module in SWEEPS[name].requires:  # without one, the sweep refuses first (tests/cli/test_cli_extras.py)
        pytest.importorskip(module)
    calls: list[tuple[str, int | None, int | None]] = []
    _stand_ins(monkeypatch, name)
    SWEEPS[name].run(_settings(name, TINY[name]),
                     lambda message, done=None, total=None: calls.append((message, done, total)))
    counts = _counts(calls)
    assert counts, f"{name} gives no done/total"
    for count in counts:
        assert all(0 <= done <= total for done, total in count)
        assert len({total for _, total in count}) == 1
        assert [d for d, _ in count] == sorted(d for d, _ in count)
        assert count[-1][0] == count[-1][1], f"{name}: a count stops at {count[-1]}"


def test_the_driver_hands_the_sweep_its_counting_reporter(tmp_path, monkeypatch):
    calls: list[tuple[str, int | None, int | None]] = []

    @contextmanager
    def recording(command, *, quiet):
        yield lambda message, done=None, total=None: calls.append((message, done, total))

    monkeypatch.setattr(_driver, "bar_reporter", recording)
    result = CliRunner().invoke(main, ["sweep", "bad-view", *SMALL["bad-view"], "--out", str(tmp_path / "o"),
                                       "--no-figures"])
    assert result.exit_code == 0, result.output
    assert _counts(calls) == [[(0, 3), (1, 3), (2, 3), (3, 3)]]


# --------------------------------------------------------------------------------------
# the time class, from the settings alone
# --------------------------------------------------------------------------------------
#: Settings that make each sweep take minutes or hours (the long ones at their defaults), never run here.
#: Every sweep's long settings, from its registry record.
LONG = {name: list(sweep.long) for name, sweep in SWEEPS.items()}
#: The sweeps the README times in minutes at their defaults; the others take seconds.
LONG_BY_DEFAULT = {"calibration", "pair-free", "sigreg-weight", "sample-efficiency", "sample-ratio"}


def _settings(name: str, sets: list[str]):
    return resolve_settings(SWEEPS[name].settings_model(), None, sets)


def test_every_sweep_that_is_not_long_by_default_names_long_settings():
    assert LONG_BY_DEFAULT <= set(SWEEPS)
    assert all(LONG[name] for name in SWEEPS if name not in LONG_BY_DEFAULT)


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_long_settings_get_the_time_class_note_before_any_work(name):
    notes = SWEEPS[name].notes(_settings(name, LONG[name]))
    long = [note for note in notes if note.startswith("this sweep may take ")]
    assert len(long) == 1, notes
    assert re.match(r"this sweep may take (minutes|hours): .+ \(about [0-9,]+ s estimated; a rough class\)$", long[0])
    assert SWEEPS[name].estimate(_settings(name, LONG[name])).time_class in LONG_CLASSES


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_the_default_time_class_is_the_measured_one(name):
    estimate = SWEEPS[name].estimate(_settings(name, []))
    assert (estimate.time_class == "minutes") == (name in LONG_BY_DEFAULT), (estimate.seconds, estimate.why)
    assert estimate.time_class in [label for _, label in TIME_CLASSES]
    noted = any(n.startswith("this sweep may take") for n in SWEEPS[name].notes(_settings(name, [])))
    assert noted == (name in LONG_BY_DEFAULT)


def test_the_note_comes_before_the_first_progress_line(tmp_path, monkeypatch):
    from prhsim.experiments.sweeps import _kernel_mismatch

    monkeypatch.setattr(_kernel_mismatch, "CELL_SECONDS_PER_N2", 1.0)  # 4 cells of 30 x 30: "hours"
    result = CliRunner().invoke(main, ["sweep", "kernel-mismatch", "--set", "worlds=2", "--set", "perturbations=[1e-3, 1e-2]",
                                       "--out", str(tmp_path / "o"), "--no-figures"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    note = next(i for i, line in enumerate(lines) if "this sweep may take hours: 4 cells" in line)
    first = next(i for i, line in enumerate(lines) if line.startswith("prhsim sweep kernel-mismatch ["))
    assert note < first
    assert any(line.endswith(" s") and ", ETA " in line for line in lines)


def test_pair_free_estimate_is_its_arithmetic():
    from prhsim.experiments.sweeps import _pair_free as pf

    s = _settings("pair-free", ["gaps=[0.0, 0.07]", "sample_sizes=[300, 100000]", "eps_grid=[1.0]", "n_seeds=7",
                                "base_samples=5000"])
    cells = [5000, 5000, 300, 100000, 5000]  # two gaps and one eps at base_samples, then each sample size
    twin = 7 * sum(pf.CELL_SAMPLES + size for size in cells) * pf.SAMPLE_SECONDS
    assert SWEEPS["pair-free"].estimate(s).seconds == pytest.approx(twin, rel=1e-12)
    assert time_class(59.9) == "seconds" and time_class(60.0) == "minutes" and time_class(3600.0) == "hours"
