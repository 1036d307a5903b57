"""``prhsim.io.load_features`` on bad feature files: each refusal is one line naming the file and saying what the
file holds (its own shape, its dict's keys, a top-level list, a folder or device), not an internal reshaped fact."""

from __future__ import annotations

import os

import numpy as np
import pytest

from prhsim.io import FeatureFileError, load_features
from prhsim.io._feature_files import file_problem


def _refusal(path) -> str:
    with pytest.raises(FeatureFileError) as info:
        load_features(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message[len(f"{path}: "):]


@pytest.mark.parametrize("shape, message", [
    ((0, 32), "has 0 rows (shape (0, 32)); needs at least 2 samples"),
    ((0, 3, 32), "has 0 rows (shape (0, 3, 32)); needs at least 2 samples"),
    ((200, 0), "has 0 features per row (shape (200, 0))"),
    ((200, 3, 0), "has 0 features per row (shape (200, 3, 0))"),
    ((200, 0, 32), "has 0 layers (shape (200, 0, 32))"),
    ((1, 32), "needs at least 2 samples, got 1"),
    ((200,), "features must have shape (N, D) or (N, L, D), got (200,)"),
])
def test_an_empty_axis_is_said_with_the_files_own_shape(tmp_path, shape, message):
    path = tmp_path / "f.npy"
    np.save(path, np.zeros(shape, np.float32))
    assert _refusal(path) == message


def test_complex_features_are_refused_as_not_real_numbers(tmp_path):
    np.save(tmp_path / "c.npy", np.zeros((20, 4), np.complex64))
    assert _refusal(tmp_path / "c.npy") == "features must be real numbers, got dtype complex64"


def test_a_pt_dict_without_feats_names_its_keys_and_a_top_level_list_is_called_one(tmp_path):
    torch = pytest.importorskip("torch")
    cases = {
        "one.pt": ({"foo": "bar"}, "the dict has no 'feats' key (keys: foo)"),
        "two.pt": ({"foo": "bar", "baz": 1}, "the dict has no 'feats' key (keys: baz, foo)"),
        "none.pt": ({}, "the dict has no 'feats' key (keys: none)"),
        "many.pt": ({f"k{i}": i for i in range(8)},
                    "the dict has no 'feats' key (keys: k0, k1, k2, k3, k4 and 3 more)"),
        "str.pt": ({"feats": "bar"}, "'feats' holds str, expected a tensor or a list of one (N, D) tensor per layer"),
        "ints.pt": ([1, 2, 3], "the top-level list must hold one tensor per layer, got int at index 0"),
        "empty.pt": ([], "the top-level list must hold one tensor per layer, got an empty list"),
        "mixed.pt": ({"feats": [torch.zeros(4, 3), 2]}, "'feats' as a list must hold one tensor per layer, "
                                                         "got int at index 1"),
    }
    for name, (content, message) in cases.items():
        torch.save(content, tmp_path / name)
        assert _refusal(tmp_path / name) == message, name
    with pytest.raises(FeatureFileError) as info:  # read layer by layer: the same words, with (N, D)
        load_features(tmp_path / "ints.pt", layers=True)
    assert str(info.value) == (f"{tmp_path / 'ints.pt'}: the top-level list must hold one (N, D) tensor per layer, "
                               "got int at index 0")
    torch.save({"x": torch.ones(4, 3)}, tmp_path / "only.pt")  # a dict's only tensor is still read
    assert load_features(tmp_path / "only.pt").shape == (4, 1, 3)


def test_a_folder_a_device_and_a_symlink_loop_are_said_for_what_they_are(tmp_path):
    folder = tmp_path / "dir.npy"
    folder.mkdir()
    loop = tmp_path / "loop1.npy"
    os.symlink(tmp_path / "loop2.npy", loop)
    os.symlink(loop, tmp_path / "loop2.npy")
    broken = tmp_path / "broken.npy"
    os.symlink(tmp_path / "nowhere.npy", broken)
    assert _refusal(folder) == "is a directory"
    assert _refusal(loop) == "cannot be resolved (symlink loop)"
    assert _refusal(broken) == "no such file (a broken symlink)"
    assert _refusal(tmp_path / "absent.npy") == "no such file"
    if os.path.exists(os.devnull) and not os.path.isfile(os.devnull):
        assert _refusal(os.devnull) == "is not a regular file (a character device)"
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.npy")
        assert _refusal(tmp_path / "pipe.npy") == "is not a regular file (a named pipe)"  # refused, not read (a hang)
    good = tmp_path / "good.npy"
    np.save(good, np.ones((3, 2), np.float32))
    os.symlink(good, tmp_path / "link.npy")
    assert file_problem(tmp_path / "link.npy") is None and load_features(tmp_path / "link.npy").shape == (3, 1, 2)
    assert file_problem(good / "x.npy") == "no such file (a part of the path is a file, not a folder)"
