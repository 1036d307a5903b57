"""The progress reporter of long commands: plain stderr lines with an ETA from the rate of the current count."""

from __future__ import annotations

import re

from prhsim.cli import _console


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
