"""The synthetic Flickr-format export and the Karpathy reader: what is written is what the world says, and bad
files are one-line errors naming the path."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.real import DataError, export_synthetic, read_karpathy
from prhsim.optima import closed_form
from prhsim.worlds import caption_law, good, gridscene, pixels, view_world

Image = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    scene = gridscene(2, objects=1, shapes=2, colours=2)  # 16 states
    out = tmp_path_factory.mktemp("export") / "data"
    summary = export_synthetic(scene, out, images=12, captions=3, pixel_scale=2, rng=0)
    return scene, out, summary


def test_the_export_holds_what_the_world_renders(exported):
    scene, out, summary = exported
    law, modality = caption_law(scene), pixels(scene)
    document = json.loads((out / "dataset_synthetic.json").read_text())
    dataset = read_karpathy(out / "dataset_synthetic.json")
    assert len(dataset.records) == summary.images == 12 and sum(summary.splits.values()) == 12
    assert min(summary.splits.values()) >= 1 and len(dataset.split("test")) == summary.splits["test"]
    states = [image["state"] for image in document["images"]]
    assert len(set(states)) == 12  # distinct states: one right answer per query
    optimum = closed_form(view_world(scene.world, modality, good()), "auto")
    features = np.load(out / "image_features.npy")
    assert features.shape == (12, optimum.k) and features.dtype == np.float32
    for image, record, row in zip(document["images"], dataset.records, features):
        z, n = image["state"], image["lighting"]
        png = np.asarray(Image.open(out / "images" / record.filename))
        expected = np.repeat(np.repeat(modality.render([z], [n])[0], 2, axis=0), 2, axis=1)
        assert np.array_equal(png, expected)
        assert len(record.texts) == 3
        for sentence, text in zip(image["sentences"], record.texts):
            assert text == law.decode(law.captions([z], [sentence["wording"]]))[0]
        assert np.allclose(row, optimum.features([z * modality.n_nuisance + n])[0], atol=1e-6)
    world = json.loads((out / "world.json").read_text())
    assert world["k"] == optimum.k and world["vocabulary"] == list(law.vocabulary)


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("{not json", "malformed JSON at line 1"),
    ('{"images": []}', 'non-empty "images" list'),
    ('{"images": [{"filename": "a.png", "split": "train", "sentences": []}]}', "has no captions"),
    ('{"images": [{"filename": "a.png", "split": "dev", "sentences": [{"raw": "x"}]}]}', "split must be one of"),
    ('{"images": [{"filename": "a.png", "imgid": 1, "split": "train", "sentences": [{"raw": "x"}]},'
     ' {"filename": "b.png", "imgid": 1, "split": "val", "sentences": [{"raw": "y"}]}]}', "appears twice"),
])
def test_bad_dataset_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "dataset.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataError) as info:
        read_karpathy(path)
    assert message in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_the_command_writes_the_folder_whole(tmp_path):
    out = tmp_path / "syn"
    runner = CliRunner()
    result = runner.invoke(main, ["real", "export-synthetic", "--world", "gridscene", "--out", str(out),
                                  "--images", "10", "--set", "world.size=2", "--set", "world.objects=1", "-q"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["dataset_synthetic.json", "image_features.npy", "images",
                                                     "world.json"]
    assert len(list((out / "images").iterdir())) == 10
    again = runner.invoke(main, ["real", "export-synthetic", "--out", str(out)])
    assert again.exit_code == 2 and "not empty" in again.output
    ring = runner.invoke(main, ["real", "export-synthetic", "--world", "ring", "--out", str(tmp_path / "r")])
    assert ring.exit_code == 2 and "caption renderers" in ring.output and not (tmp_path / "r").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staged folder left behind
    shown = runner.invoke(main, ["real", "export-synthetic", "--out", str(tmp_path / "j"), "--images", "10",
                                 "--set", "world.size=2", "--set", "world.objects=1", "--json"])
    assert shown.exit_code == 0, shown.output
    summary = json.loads(shown.stdout)
    assert summary["images"] == 10 and summary["out"] == str(tmp_path / "j") and sum(summary["splits"].values()) == 10
    table = runner.invoke(main, ["real", "export-synthetic", "--out", str(tmp_path / "t"), "--images", "10",
                                 "--set", "world.size=2", "--set", "world.objects=1"])
    assert table.exit_code == 0 and "10 images of" in table.output and f"wrote {tmp_path / 't'}/" in table.output


def test_json_lines_are_read_into_the_same_records(tmp_path):
    from prhsim.real import read_captions

    path = tmp_path / "captions.jsonl"
    path.write_text('{"id": 3, "texts": ["a red square", "a crimson block"], "image": "3.png"}\n\n'
                    '{"id": 4, "texts": ["a blue dot"], "split": "test"}\n')
    dataset = read_captions(path)
    assert [(r.id, r.split, len(r.texts)) for r in dataset.records] == [(3, "train", 2), (4, "test", 1)]
    path.write_text('{"id": 3, "texts": []}\n')
    with pytest.raises(DataError, match="line 1: id 3 has no captions"):
        read_captions(path)
    path.write_text('{"id": 3, "texts": ["x"]}\n{"id": 3, "texts": ["y"]}\n')
    with pytest.raises(DataError, match="line 2: id 3 appears twice"):
        read_captions(path)
