"""Bad input to ``prhsim real align``, ``train`` and ``eval`` is one line (exit 2) naming the option or file and what is
wrong, before any work: pair and label files that are not plain numeric .npy arrays, features whose products overflow,
image features evaluation could not use, and a tampered run folder."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main


def _one_line(result, *names: str) -> str:
    """The one ``Error: …`` line of a refusal (exit 2, no traceback), which names every string of ``names``."""
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    """A and B: 80 rows of 6 features; pair and label files good and bad."""
    folder = tmp_path_factory.mktemp("inputs")
    gen = np.random.default_rng(0)
    np.save(folder / "a.npy", gen.standard_normal((80, 6)))
    np.save(folder / "b.npy", gen.standard_normal((80, 6)))
    np.save(folder / "huge.npy", gen.standard_normal((80, 6)) * 1e300)
    np.save(folder / "pairs.npy", gen.standard_normal((40, 2, 6)))
    np.save(folder / "labels.npy", np.arange(80) % 8)
    np.savez(folder / "pairs.npz", pairs=gen.standard_normal((40, 2, 6)))
    shutil.copy(folder / "pairs.npz", folder / "pairs.pt")  # torch.save writes a zip archive too
    (folder / "empty.npy").write_bytes(b"")
    (folder / "text.npy").write_text("1 2 3\n")
    np.save(folder / "objects.npy", np.array([{"x": 1}] * 80, dtype=object), allow_pickle=True)
    np.save(folder / "nan_pairs.npy", np.full((40, 2, 6), np.nan))
    np.save(folder / "huge_pairs.npy", gen.standard_normal((40, 2, 6)) * 1e300)
    np.save(folder / "words.npy", np.array(["x"] * 40 * 2 * 6).reshape(40, 2, 6))
    return folder


def _align(folder, *args):
    return CliRunner().invoke(main, ["real", "align", "--unpaired", str(folder / "a.npy"), str(folder / "b.npy"),
                                     "--dim", "3", "--starts", "2", *args])


@pytest.mark.parametrize("option", ["--pairs-a", "--pairs-b"])
@pytest.mark.parametrize("name, why", [
    ("pairs.npz", "cannot be read as a .npy array (it is a zip archive, such as .npz or .pt; save one array with "
                  "numpy.save)"),
    ("pairs.pt", "cannot be read as a .npy array (it is a zip archive"),
    ("empty.npy", "cannot be read as a .npy array (the file is empty)"),
    ("text.npy", "cannot be read as a .npy array (not in the .npy format)"),
    ("objects.npy", "cannot be read as a .npy array (an array of Python objects, not numbers)"),
    ("none.npy", "cannot be read as a .npy array (No such file or directory)"),
    ("words.npy", ": features must be numbers, got dtype <U1"),
    ("nan_pairs.npy", ": features contain NaN or inf"),
    ("huge_pairs.npy", ": values up to "),
])
def test_a_pair_file_that_is_not_a_plain_numeric_npy_array_is_one_line_naming_the_option(features, option, name, why):
    """A .npz or .pt was an AttributeError traceback ('NpzFile' object has no attribute 'ndim'), an empty file a
    bare "Aborted!", NaN pairs "pairs_a contains NaN or inf" naming neither the option nor the file."""
    other = "--pairs-b" if option == "--pairs-a" else "--pairs-a"
    res = _align(features, "--method", "spectral", option, str(features / name), other, str(features / "pairs.npy"))
    _one_line(res, f"{option} {features / name}", why)


@pytest.mark.parametrize("option", ["--labels-a", "--labels-b"])
@pytest.mark.parametrize("name, why", [
    ("pairs.npz", "cannot be read as a .npy array (it is a zip archive"),
    ("pairs.pt", "cannot be read as a .npy array (it is a zip archive"),
    ("empty.npy", "cannot be read as a .npy array (the file is empty)"),
    ("objects.npy", "cannot be read as a .npy array (an array of Python objects, not numbers)"),
    ("pairs.npy", ": expected one label per row, shape (80,), got (40, 2, 6)"),
])
def test_a_label_file_that_is_not_a_plain_npy_array_is_one_line_naming_the_option(features, option, name, why):
    other = "--labels-b" if option == "--labels-a" else "--labels-a"
    res = _align(features, option, str(features / name), other, str(features / "labels.npy"))
    _one_line(res, f"{option} {features / name}", why)


def test_a_bad_label_file_is_refused_before_the_search(features, monkeypatch):
    """Labels only score the map, but a bad file is refused before minutes of search, not after."""
    import prhsim.real._align as align

    def search(*args, **kwargs):
        raise AssertionError("the search ran")

    monkeypatch.setattr(align, "_iterative_match", search)
    res = _align(features, "--labels-a", str(features / "empty.npy"), "--labels-b", str(features / "labels.npy"))
    _one_line(res, "--labels-a", "the file is empty")


def test_a_negative_seed_is_refused_naming_the_option(features):
    """It was "Error: expected non-negative integer", numpy's words without the option."""
    res = _align(features, "--seed", "-5")
    assert res.exit_code == 2 and "Invalid value for '--seed': -5 is not in the range x>=0" in res.output, res.output


@pytest.mark.parametrize("side", [0, 1])
def test_features_whose_products_overflow_are_refused_naming_the_file_without_a_warning(features, side):
    """200 x 32 values near 1e300 printed numpy's "RuntimeWarning: overflow encountered in dot", then "xb contains
    NaN or inf" (the test suite turns warnings into errors: a warning fails it)."""
    files = [str(features / "a.npy"), str(features / "b.npy")]
    files[side] = str(features / "huge.npy")
    res = CliRunner().invoke(main, ["real", "align", "--unpaired", *files, "--dim", "3"])
    line = _one_line(res, str(features / "huge.npy"), "values up to ", "are too large for float64 arithmetic")
    assert "Warning" not in res.output and "xb" not in line


# ---------------------------------------------------------------------------------------------- train and eval
TRAIN = ["real", "train", "--model", "tiny", "--steps", "2", "--batch-size", "8", "--set", "vocab_size=64",
         "--set", "proj_dim=16", "--set", "num_directions=16", "--set", 'device="cpu"', "-q"]


@pytest.fixture(scope="module")
def export(small_export):
    """The 60-image export, where the text-encoder stack (transformers, tokenizers, torch) is installed."""
    for name in ("transformers", "tokenizers", "torch"):
        pytest.importorskip(name)
    return small_export


@pytest.fixture(scope="module")
def image_files(tmp_path_factory):
    """Image-feature files for the 60-image export: too few rows, NaN, every row equal, values near 1e300."""
    folder = tmp_path_factory.mktemp("image_features")
    gen = np.random.default_rng(1)
    np.save(folder / "rows59.npy", gen.standard_normal((59, 10)))
    with_nan = gen.standard_normal((60, 10))
    with_nan[3, 2] = np.nan
    np.save(folder / "nan.npy", with_nan)
    np.save(folder / "constant.npy", np.ones((60, 10), dtype=np.float32))
    np.save(folder / "huge.npy", gen.standard_normal((60, 10)) * 1e300)
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory, export):
    """A 2-step tiny run on the 60-image export, made once; tests that tamper with it copy it first."""
    out = tmp_path_factory.mktemp("runs") / "run"
    res = CliRunner().invoke(main, [*TRAIN, "--data", str(export), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("name, why", [
    ("nothere.npy", ": no such file"),
    ("rows59.npy", ": 59 rows of image features, but the dataset has 60 images"),
    ("nan.npy", ": features contain NaN or inf"),
    ("constant.npy", ": zero variance (every row equal): the alignment metrics are undefined"),
    ("huge.npy", ": values up to "),
])
def test_train_checks_its_features_file_before_training(export, image_files, tmp_path, name, why):
    """--features was stored unchecked in config.json (exit 0); only a later real eval failed."""
    out = tmp_path / "run"
    res = CliRunner().invoke(main, [*TRAIN, "--data", str(export), "--features", str(image_files / name),
                                    "--out", str(out)])
    _one_line(res, str(image_files / name), why)
    assert not out.exists()


def test_a_resumed_run_checks_a_new_features_file(run, image_files, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    res = CliRunner().invoke(main, ["real", "train", "--out", str(copy), "--resume", "--steps", "3", "--features",
                                    str(image_files / "rows59.npy"), "-q"])
    _one_line(res, str(image_files / "rows59.npy"), "59 rows of image features")
    assert json.loads((copy / "config.json").read_text())["steps"] == 2


@pytest.mark.parametrize("name, why", [
    ("constant.npy", "zero variance (every row equal): the alignment metrics are undefined"),
    ("huge.npy", "are too large for float64 arithmetic (their products overflow); rescale the features"),
])
def test_eval_names_image_features_the_metrics_are_undefined_on(run, image_files, name, why):
    """Constant features were "b has zero variance: CKA is undefined", naming neither the file nor the side; values
    near 1e300 printed a linear CKA of nan."""
    res = CliRunner().invoke(main, ["real", "eval", str(run), "--n-fit", "5", "--calibrate", "0", "--features",
                                    str(image_files / name)])
    _one_line(res, f"image features {image_files / name}: ", why)


def test_eval_names_image_features_whose_test_rows_are_all_equal(run, export, tmp_path):
    records = json.loads(next(export.glob("dataset_*.json")).read_text())["images"]
    feats = np.random.default_rng(2).standard_normal((60, 10))
    feats[[i for i, r in enumerate(records) if r["split"] == "test"]] = 1.0
    np.save(tmp_path / "flat_test.npy", feats)
    res = CliRunner().invoke(main, ["real", "eval", str(run), "--n-fit", "5", "--calibrate", "0", "--features",
                                    str(tmp_path / "flat_test.npy")])
    _one_line(res, f"image features {tmp_path / 'flat_test.npy'} (its 12 test rows): zero variance")


@pytest.mark.parametrize("change, message", [
    ({"batch_size": "x"}, "its config.json cannot be read (batch_size: Input should be a valid integer"),
    ({"batch_size": "x", "lr": 0}, "its config.json cannot be read (batch_size: Input should be a valid integer; "
                                      "lr: Input should be greater than 0)"),
    ({"learner": "ntp", "views": "bad"}, "its config.json cannot be read (views='bad' applies to the jepa learner"),
])
def test_a_tampered_config_is_one_line_naming_the_file_the_key_and_the_problem(run, tmp_path, change, message):
    """It was "its config.json or model_config.json cannot be read (1 validation error for RealTrainSettings)"."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, **change}))
    res = CliRunner().invoke(main, ["real", "eval", str(copy), "--n-fit", "5", "--calibrate", "0"])
    _one_line(res, f"{copy}: {message}")
    resumed = CliRunner().invoke(main, ["real", "train", "--out", str(copy), "--resume", "--steps", "3", "-q"])
    _one_line(resumed, f"--resume: {copy / 'config.json'} cannot be read (", "the run folder is damaged")


@pytest.mark.parametrize("text, message", [
    ('{"hidden_size": 8}', "its model_config.json does not build the run's model (The hidden size (8) is not a "
                           "multiple of the number of attention heads (12))"),
    ('{"hidden_size": "x"}', "its model_config.json does not build the run's model (Validation error for field "
                             "'hidden_size':"),
    ("[1]", "its model_config.json cannot be read (a JSON object was expected, got list)"),
    ("{", "its model_config.json cannot be read (Expecting property name"),
])
def test_a_tampered_model_config_is_one_line_naming_the_file(run, tmp_path, text, message):
    """{"hidden_size": 8} was transformers' message alone, with no file; {"hidden_size": "x"} and [1] tracebacks."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "model_config.json").write_text(text)
    res = CliRunner().invoke(main, ["real", "eval", str(copy), "--n-fit", "5", "--calibrate", "0"])
    _one_line(res, f"{copy}: {message}")
    resumed = CliRunner().invoke(main, ["real", "train", "--out", str(copy), "--resume", "--steps", "3", "-q"])
    _one_line(resumed, f"{copy}: {message}")
