"""``prhsim prh score`` on bad feature files: exit 2 and one line naming the file and what it holds (the reader's
messages: tests/io/test_feature_files.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main


def _bad(tmp_path, case):
    bad = tmp_path / f"{case}.npy"
    if case == "zero-rows":
        np.save(bad, np.zeros((0, 32), np.float32))
    elif case == "zero-columns":
        np.save(bad, np.zeros((200, 0), np.float32))
    elif case == "complex":
        np.save(bad, np.zeros((200, 32), np.complex64))
    elif case in ("dict", "list"):
        torch = pytest.importorskip("torch")
        bad = tmp_path / f"{case}.pt"
        torch.save({"foo": "bar"} if case == "dict" else [1, 2, 3], bad)
    elif case == "device":
        if not os.path.exists(os.devnull) or os.path.isfile(os.devnull):
            pytest.skip("no character device at os.devnull")
        bad = os.devnull
    elif case == "folder":
        bad.mkdir()
    elif case == "loop":
        os.symlink(tmp_path / "other.npy", bad)
        os.symlink(bad, tmp_path / "other.npy")
    return bad


@pytest.mark.parametrize("case, message", [
    ("zero-rows", "has 0 rows (shape (0, 32)); needs at least 2 samples"),
    ("zero-columns", "has 0 features per row (shape (200, 0))"),
    ("complex", "features must be real numbers, got dtype complex64"),
    ("dict", "the dict has no 'feats' key (keys: foo)"),
    ("list", "the top-level list must hold one (N, D) tensor per layer, got int at index 0"),
    ("folder", "is a directory"),
    ("device", "is not a regular file (a character device)"),
    ("loop", "cannot be resolved (symlink loop)"),
])
def test_score_says_what_a_bad_feature_file_holds(tmp_path, case, message):
    good = tmp_path / "a.npy"
    np.save(good, np.random.default_rng(0).standard_normal((200, 32)).astype(np.float32))
    bad = _bad(tmp_path, case)
    result = CliRunner().invoke(main, ["prh", "score", str(good), str(bad)])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"Error: {bad}: {message}"]
