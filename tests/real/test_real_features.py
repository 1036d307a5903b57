"""``encode_images`` through a DataLoader (tiny DINOv2, CPU): worker processes give the same rows, in dataset order,
as decoding in this process and as encoding each image alone; a missing image is a one-line DataError naming it and
writes nothing; a bad ``num_workers`` is a ValueError."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from prhsim.real import DataError, encode_images, export_synthetic, read_captions  # noqa: E402
from prhsim.real._image_features import IMAGENET_MEAN, IMAGENET_STD, load_pixels, normalise, preprocess  # noqa: E402,E501
from prhsim.worlds import gridscene  # noqa: E402

SIZE = 28


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("features") / "syn"
    export_synthetic(gridscene(3, objects=1), out, images=24, captions=2, val=0.2, test=0.2, pixel_scale=1, rng=0)
    return out


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    from transformers import Dinov2Config, Dinov2Model

    path = tmp_path_factory.mktemp("features") / "dino"
    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                             patch_size=14, image_size=SIZE)).save_pretrained(path)
    return path


def _filenames(data):
    return [r.filename for r in read_captions(data / "dataset_synthetic.json").records]


def test_workers_give_the_rows_of_a_naive_loop_in_order(data, weights, tmp_path):
    from transformers import Dinov2Model

    messages = []
    alone = encode_images(data, weights, tmp_path / "f0.npy", image_size=SIZE, batch_size=5, device="cpu")
    workers = encode_images(data, weights, tmp_path / "f2.npy", image_size=SIZE, batch_size=5, num_workers=2,
                            device="cpu", progress=lambda *call: messages.append(call))
    assert workers.shape == (24, 32) and workers.dtype == np.float32
    assert np.array_equal(workers, alone) and np.array_equal(np.load(tmp_path / "f2.npy"), workers)
    assert messages[-1][0].startswith("24/24 images, ") and messages[-1][0].endswith(" images/s") and len(messages) == 5
    assert [m[1:] for m in messages] == [(min(24, 5 * (i + 1)), 24) for i in range(5)]
    model = Dinov2Model.from_pretrained(str(weights), local_files_only=True).eval()
    with torch.no_grad():
        naive = np.stack([model(pixel_values=torch.from_numpy(preprocess(data / "images" / name, SIZE)[None]))
                          .pooler_output[0].numpy() for name in _filenames(data)])
    assert np.allclose(workers, naive, atol=1e-5)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_missing_image_is_one_line_naming_it_and_writes_nothing(data, weights, tmp_path, num_workers):
    copy = tmp_path / "syn"
    shutil.copytree(data, copy)
    gone = copy / "images" / _filenames(data)[13]
    gone.unlink()
    out = tmp_path / "feats.safetensors"
    with pytest.raises(DataError) as caught:
        encode_images(copy, weights, out, image_size=SIZE, batch_size=4, num_workers=num_workers, device="cpu")
    message = str(caught.value)
    assert message == f"{gone}: no such image (named in the dataset JSON)" and "\n" not in message
    assert not out.exists() and list(tmp_path.iterdir()) == [copy]


@pytest.mark.parametrize("num_workers", [-1, 1.5, "2", True, None])
def test_bad_num_workers_is_a_value_error(data, weights, tmp_path, num_workers):
    with pytest.raises(ValueError, match="num_workers must be an int >= 0"):
        encode_images(data, weights, tmp_path / "f.npy", num_workers=num_workers, device="cpu")
    assert not (tmp_path / "f.npy").exists()


def test_workers_send_uint8_pixels_normalised_on_the_device_as_the_definition_says(tmp_path):
    """Twin from the definition: an image of the model's size is read as its RGB bytes, then ``(x / 255 − mean) / std``."""
    from PIL import Image

    rgb = np.random.default_rng(0).integers(0, 256, size=(SIZE, SIZE, 3), dtype=np.uint8)
    path = tmp_path / "image.png"
    Image.fromarray(rgb).save(path)
    pixels = load_pixels(path, SIZE)
    assert pixels.dtype == np.uint8 and pixels.shape == (3, SIZE, SIZE)
    assert np.array_equal(pixels, rgb.transpose(2, 0, 1))
    want = (rgb.astype(np.float64) / 255 - IMAGENET_MEAN.astype(np.float64)) / IMAGENET_STD.astype(np.float64)
    got = normalise(torch.from_numpy(pixels)[None])[0].numpy()
    assert got.dtype == np.float32 and np.allclose(got, want.transpose(2, 0, 1), atol=1e-6, rtol=0)
    assert np.array_equal(got, preprocess(path, SIZE))  # the host path computes the same float32 numbers



def test_a_long_encoding_says_so_before_the_model_loads(data, weights, tmp_path, monkeypatch):
    """The note's estimate: 24 images of (28 / 14)² + 1 = 5 tokens, 2 blocks of width 32 with DINOv2's MLP of
    mlp_ratio 4 x 32 = 128 (its config's intermediate_size is not what the model uses): 2·2·(4·32² + 2·32·128)
    float operations a token."""
    import transformers

    import prhsim.real._forward_cost as cost

    notes = []
    encode_images(data, weights, tmp_path / "a.npy", image_size=SIZE, device="cpu", notes=notes.append)
    assert notes == []  # about a millisecond
    flops = 24 * 5 * 2 * 2 * (4 * 32 * 32 + 2 * 32 * 128)
    monkeypatch.setattr(cost, "CPU_FORWARD_FLOPS", flops / 120.0)  # the same count at two minutes

    def never(*args, **kwargs):
        raise RuntimeError("the model was loaded")

    monkeypatch.setattr(transformers.Dinov2Model, "from_pretrained", never)
    with pytest.raises(RuntimeError, match="the model was loaded"):
        encode_images(data, weights, tmp_path / "b.npy", image_size=SIZE, device="cpu", notes=notes.append)
    assert notes == ["this encoding may take minutes: 24 images of 120 tokens through dinov2 (2 blocks of width 32) "
                     "(about 120 s estimated; a rough class)"]
    from click.testing import CliRunner

    from prhsim.cli import main

    result = CliRunner().invoke(main, ["real", "features", "--data", str(data), "--weights", str(weights), "--out",
                                       str(tmp_path / "c.npy"), "--image-size", str(SIZE), "--device", "cpu"])
    assert isinstance(result.exception, RuntimeError), result.output  # the model never loads: the command ends there
    assert f"note: {notes[0]}" in result.output
