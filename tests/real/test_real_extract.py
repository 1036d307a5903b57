"""``prhsim prh extract`` and ``prhsim.real.extract_features`` on tiny random checkpoints built here (BERT, GPT-2,
ViT, DINOv2, CLIP vision, SigLIP vision): the features equal the model run sample by sample through transformers
with the pooling written from its definition (mean over the attention mask, the class token, the last token), to
1e-5 in float32; a decoder's saved loss and bits per byte equal the next-token cross-entropy written from its
definition (the PRH code's) on the model's logits, under either padding side and across resumed shards; the file
reads back with ``prhsim.io.load_features`` and scores with ``prhsim prh score``; every bad input, and an extraction
that would not fit in memory, is a one-line error."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from click.testing import CliRunner  # noqa: E402

from prhsim.cli import main  # noqa: E402
from prhsim.io import load_features  # noqa: E402
from prhsim.real import DataError, extract_features  # noqa: E402

CAPTIONS = ["a red square", "two blue circles left of a big green triangle", "one dot",
            "the small yellow cross is above the red square and the circle", "blue", "a b c d e f g"]
SIZE = 32
TOL = 1e-5


# ---------------------------------------------------------------- fixtures: data and checkpoints


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from PIL import Image

    root = tmp_path_factory.mktemp("extract-data")
    (root / "images").mkdir()
    rng = np.random.default_rng(0)
    images = []
    for i, caption in enumerate(CAPTIONS):
        name = f"img{i:02d}.png"
        Image.fromarray(rng.integers(0, 256, (SIZE + 4 * i, SIZE, 3), dtype=np.uint8)).save(root / "images" / name)
        images.append({"filename": name, "imgid": i, "split": "train",
                       "sentences": [{"raw": caption}, {"raw": "second caption is never read"}]})
    (root / "dataset_tiny.json").write_text(json.dumps({"dataset": "tiny", "images": images}))
    (root / "captions.jsonl").write_text("".join(json.dumps({"text": c}) + "\n" for c in CAPTIONS))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"caption": CAPTIONS}), root / "captions.parquet")
    return root


def _tokenizer(*, cls_sep: bool, padding_side: str = "right"):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *letters, *(f"##{c}" for c in letters)])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    if cls_sep:
        tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2),
                                                                                                    ("[SEP]", 3)])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                       sep_token="[SEP]", model_max_length=64), len(vocab)
    # GPT-2 style: no padding token (the extractor pads with the end-of-sequence token)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="[SEP]", unk_token="[UNK]",
                                   model_max_length=64, padding_side=padding_side), len(vocab)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from transformers import (BertConfig, BertModel, CLIPVisionConfig, CLIPVisionModel, Dinov2Config, Dinov2Model,
                              GPT2Config, GPT2LMHeadModel, SiglipVisionConfig, SiglipVisionModel, ViTConfig,
                              ViTImageProcessor, ViTModel)

    root = tmp_path_factory.mktemp("extract-models")
    torch.manual_seed(0)
    out = {}
    tok, vocab = _tokenizer(cls_sep=True)
    BertModel(BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=64),
              add_pooling_layer=False).save_pretrained(root / "bert")  # AutoModel's pooler is missing: a load report
    tok.save_pretrained(root / "bert")
    tok, vocab = _tokenizer(cls_sep=False)
    # saved with its LM head: AutoModel loads the GPT2Model inside (the load report of the unused head stays quiet)
    GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_embd=16, n_layer=2, n_head=2, n_positions=64,
                               bos_token_id=3, eos_token_id=3)).save_pretrained(root / "gpt2")
    tok.save_pretrained(root / "gpt2")
    vision = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, image_size=SIZE,
                  patch_size=8)
    processor = ViTImageProcessor(size={"height": SIZE, "width": SIZE})
    for name, cls, config in (("vit", ViTModel, ViTConfig(**vision)), ("dinov2", Dinov2Model, Dinov2Config(**vision)),
                              ("clip", CLIPVisionModel, CLIPVisionConfig(**vision)),
                              ("siglip", SiglipVisionModel, SiglipVisionConfig(**vision))):
        cls(config).save_pretrained(root / name)
        processor.save_pretrained(root / name)
    for name in ("bert", "gpt2", "vit", "dinov2", "clip", "siglip"):
        out[name] = root / name
    return out


# ---------------------------------------------------------------- references, from the definitions


def _reference_text(path, pool):
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    rows = []
    with torch.no_grad():
        for text in CAPTIONS:  # one at a time: no padding at all
            ids = tok(text, return_tensors="pt")
            hidden = model(**ids, output_hidden_states=True).hidden_states
            if pool == "mean":
                rows.append(torch.stack([h[0].mean(0) for h in hidden]))
            else:  # last-token
                rows.append(torch.stack([h[0, -1] for h in hidden]))
    return torch.stack(rows).numpy()


def _reference_vision(path, folder, pool="cls"):
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModel

    model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
    processor = AutoImageProcessor.from_pretrained(str(path), local_files_only=True)
    rows = []
    with torch.no_grad():
        for file in sorted(folder.iterdir()):
            with Image.open(file) as image:
                pixels = processor(images=[image.convert("RGB")], return_tensors="pt")["pixel_values"]
            hidden = model(pixel_values=pixels, output_hidden_states=True).hidden_states
            rows.append(torch.stack([h[0, 0] if pool == "cls" else h[0].mean(0) for h in hidden]))
    return torch.stack(rows).numpy()


def _cli(*args):
    return CliRunner().invoke(main, ["prh", "extract", *map(str, args)])


# ---------------------------------------------------------------- features against the definitions


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_language_models_mean_over_the_mask(models, data, tmp_path, name, capfd):
    out = tmp_path / f"{name}.pt"
    result = _cli("--model", models[name], "--data", data / "dataset_tiny.json", "--out", out, "--batch-size", 4)
    assert result.exit_code == 0, result.output
    printed = capfd.readouterr()
    assert "LOAD REPORT" not in result.output + printed.out + printed.err and f"wrote {out}" in result.output
    saved = torch.load(out, weights_only=True)
    expected = _reference_text(models[name], "mean")
    assert saved["feats"].dtype == torch.float32 and saved["feats"].shape == (6, 3, 16)  # embeddings + 2 blocks
    np.testing.assert_allclose(saved["feats"].numpy(), expected, atol=TOL, rtol=0)
    assert saved["num_params"] > 0 and saved["mask"].shape[0] == 6 and saved["pool"] == "mean"
    lengths = [len(tok) for tok in _tokens(models[name])]
    assert saved["mask"].sum(1).tolist() == lengths and saved["mask"].shape[1] == max(lengths)
    np.testing.assert_array_equal(load_features(out), saved["feats"].numpy())
    # a next-token loss only for the decoder (BERT has none, and none is made up)
    assert {"loss", "bpb", "loss_per_sample", "bpb_per_sample"} <= set(saved) if name == "gpt2" else \
        not {"loss", "bpb", "loss_per_sample", "bpb_per_sample"} & set(saved)


def _tokens(path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    return [tok(t)["input_ids"] for t in CAPTIONS]


def test_decoder_last_token_and_layer_selection(models, data, tmp_path):
    out = tmp_path / "gpt2-last.npy"
    summary = extract_features(models["gpt2"], data / "captions.jsonl", out, pool="last-token", layers="0,-1",
                               batch_size=4)
    expected = _reference_text(models["gpt2"], "last-token")[:, [0, 2]]
    assert summary.layers == (0, 2) and summary.pool == "last-token" and summary.kind == "text"
    np.testing.assert_allclose(np.load(out), expected, atol=TOL, rtol=0)


def test_parquet_and_jsonl_read_the_same_texts(models, data, tmp_path):
    a = extract_features(models["bert"], data / "captions.parquet", tmp_path / "a.safetensors", layers="last")
    b = extract_features(models["bert"], data / "captions.jsonl", tmp_path / "b.npy", layers="last", batch_size=1)
    assert a.shape == b.shape == (6, 1, 16)
    np.testing.assert_allclose(load_features(tmp_path / "a.safetensors"), load_features(tmp_path / "b.npy"),
                               atol=TOL, rtol=0)


@pytest.mark.parametrize("name", ["vit", "dinov2", "clip"])
def test_vision_models_class_token(models, data, tmp_path, name):
    out = tmp_path / f"{name}.pt"
    result = _cli("--model", models[name], "--data", data / "images", "--out", out, "--batch-size", 4)
    assert result.exit_code == 0, result.output
    saved = torch.load(out, weights_only=True)
    assert saved["pool"] == "cls" and "mask" not in saved and saved["feats"].shape == (6, 3, 16)
    np.testing.assert_allclose(saved["feats"].numpy(), _reference_vision(models[name], data / "images"),
                               atol=TOL, rtol=0)


def test_siglip_has_no_class_token_so_auto_is_the_mean(models, data, tmp_path):
    summary = extract_features(models["siglip"], data / "images", tmp_path / "s.npy", batch_size=4)
    assert summary.pool == "mean"
    np.testing.assert_allclose(np.load(tmp_path / "s.npy"), _reference_vision(models["siglip"], data / "images", "mean"),
                               atol=TOL, rtol=0)
    with pytest.raises(DataError, match="no class token"):
        extract_features(models["siglip"], data / "images", tmp_path / "t.npy", pool="cls")


def test_a_vision_model_reads_the_caption_datasets_images_in_its_order(models, data, tmp_path):
    a = extract_features(models["vit"], data / "dataset_tiny.json", tmp_path / "a.npy")
    b = extract_features(models["vit"], data / "images", tmp_path / "b.npy")
    assert a.shape == b.shape
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))


def test_files_score_and_table(models, data, tmp_path):
    feats = tmp_path / "features"
    for name in ("bert", "vit"):
        src = data / ("dataset_tiny.json" if name == "bert" else "images")
        assert _cli("--model", models[name], "--data", src, "--out", feats / f"{name}.pt", "-q").exit_code == 0
    result = CliRunner().invoke(main, ["prh", "score", str(feats / "bert.pt"), str(feats / "vit.pt"), "--knn-k", "2",
                                       "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["n"] == 6 and doc["layers_a"] == 3 and doc["layers_b"] == 3
    result = CliRunner().invoke(main, ["prh", "table", str(feats), "--knn-k", "2", "--calibrate", "9", "--out",
                                       str(tmp_path / "table"), "--no-figures", "-q"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "table" / "results.json").is_file()


# ---------------------------------------------------------------- bad inputs: one line each


def _one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_bad_inputs_are_one_line_errors(models, data, tmp_path):
    from transformers import T5Config, T5Model

    images, captions = data / "images", data / "dataset_tiny.json"
    _one_line_error(_cli("--model", tmp_path, "--data", captions, "--out", tmp_path / "x.pt"),
                    "not a Hugging Face checkpoint directory")
    T5Model(T5Config(vocab_size=32, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2)).save_pretrained(
        tmp_path / "t5")
    _one_line_error(_cli("--model", tmp_path / "t5", "--data", captions, "--out", tmp_path / "x.pt"),
                    "encoder-decoder")
    (tmp_path / "broken.json").write_text("{not json")
    _one_line_error(_cli("--model", models["bert"], "--data", tmp_path / "broken.json", "--out", tmp_path / "x.pt"),
                    "malformed JSON")
    (tmp_path / "odd.csv").write_text("a,b\n")
    _one_line_error(_cli("--model", models["bert"], "--data", tmp_path / "odd.csv", "--out", tmp_path / "x.pt"),
                    "unknown dataset format")
    (tmp_path / "notparquet.parquet").write_text("nope")
    _one_line_error(_cli("--model", models["bert"], "--data", tmp_path / "notparquet.parquet", "--out",
                         tmp_path / "x.pt"), "not a parquet file")
    _one_line_error(_cli("--model", models["bert"], "--data", images, "--out", tmp_path / "x.pt"),
                    "a folder of images", "language model")
    _one_line_error(_cli("--model", models["vit"], "--data", data / "captions.parquet", "--out", tmp_path / "x.pt"),
                    "vision model")
    _one_line_error(_cli("--model", models["vit"], "--data", data / "captions.jsonl", "--out", tmp_path / "x.pt"),
                    "does not name an image")
    _one_line_error(_cli("--model", models["bert"], "--data", captions, "--out", tmp_path / "x.pt", "--pool",
                         "last-token"), "for decoders")
    _one_line_error(_cli("--model", models["bert"], "--data", captions, "--out", tmp_path / "x.pt", "--layers", "7"),
                    "out of range")
    _one_line_error(_cli("--model", models["bert"], "--data", captions, "--out", tmp_path / "x.csv"), "must end in")
    (tmp_path / "exists.pt").write_text("")
    _one_line_error(_cli("--model", models["bert"], "--data", captions, "--out", tmp_path / "exists.pt"),
                    "exists", "--overwrite")
    assert _cli("--model", models["bert"], "--data", captions, "--out", tmp_path / "exists.pt", "--overwrite",
                "-q").exit_code == 0
    assert load_features(tmp_path / "exists.pt").shape == (6, 3, 16)
    assert not list(tmp_path.glob(".*partial*"))  # nothing half-written left behind


# ---------------------------------------------------------------- prhsim prh table over model folders: the cache


def _table(folder, out, *args):
    return CliRunner().invoke(main, ["prh", "table", str(folder), "--knn-k", "2", "--no-figures", "--out", str(out),
                                     *map(str, args)])


def _save_bert(path, seed):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    tok, vocab = _tokenizer(cls_sep=True)
    BertModel(BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=64), add_pooling_layer=False).save_pretrained(path)
    tok.save_pretrained(path)


def _counting(monkeypatch):
    import prhsim.real._extract as module

    calls = []
    original = module.extract_features

    def counted(model, *args, **kwargs):
        calls.append(model.name)
        return original(model, *args, **kwargs)

    monkeypatch.setattr(module, "extract_features", counted)
    return calls


def test_table_over_model_folders_and_a_feature_file_uses_the_cache(models, data, tmp_path, monkeypatch):
    import shutil

    folder = tmp_path / "zoo"
    folder.mkdir()
    _save_bert(folder / "bert", 0)
    shutil.copytree(models["vit"], folder / "vit")
    extract_features(models["gpt2"], data / "dataset_tiny.json", folder / "gpt2.pt")
    calls = _counting(monkeypatch)
    result = _table(folder, tmp_path / "t1", "--data", data / "dataset_tiny.json")
    assert result.exit_code == 0, result.output
    assert sorted(calls) == ["bert", "vit"]
    doc = json.loads((tmp_path / "t1" / "results.json").read_text())
    assert doc["rows"] == doc["cols"] == ["bert", "gpt2.pt", "vit"]
    cache = folder / ".prhsim-features"
    cached = sorted(p.name.split("-")[0] for p in cache.glob("*.pt"))
    assert cached == ["bert", "vit"]
    # the cached features are those prhsim prh extract writes (a caption dataset's images for the vision model)
    extract_features(folder / "vit", data / "dataset_tiny.json", tmp_path / "vit.npy")
    np.testing.assert_array_equal(load_features(next(cache.glob("vit-*.pt"))), np.load(tmp_path / "vit.npy"))

    # a rerun reads the cache: nothing extracted, the same table, and the progress says so
    calls.clear()
    result = _table(folder, tmp_path / "t2", "--data", data / "dataset_tiny.json")
    assert result.exit_code == 0, result.output
    assert calls == [] and "bert: features cached" in result.output
    again = json.loads((tmp_path / "t2" / "results.json").read_text())
    assert again["scores"] == doc["scores"]

    # --rows/--cols globs pick model folders too
    result = _table(folder, tmp_path / "t3", "--data", data / "dataset_tiny.json", "--rows", "b*", "--cols", "v*")
    assert result.exit_code == 0, result.output
    picked = json.loads((tmp_path / "t3" / "results.json").read_text())
    assert picked["rows"] == ["bert"] and picked["cols"] == ["vit"] and calls == []

    # new weights: a new key, extracted again (the other model stays cached)
    _save_bert(folder / "bert", 1)
    result = _table(folder, tmp_path / "t4", "--data", data / "dataset_tiny.json")
    assert result.exit_code == 0, result.output
    assert calls == ["bert"]
    assert json.loads((tmp_path / "t4" / "results.json").read_text())["scores"] != doc["scores"]

    # another --cache folder starts empty
    calls.clear()
    result = _table(folder, tmp_path / "t5", "--data", data / "dataset_tiny.json", "--cache", tmp_path / "c",
                    "--shard-size", 4, "-q")
    assert result.exit_code == 0, result.output
    assert sorted(calls) == ["bert", "vit"] and len(list((tmp_path / "c").glob("*.pt"))) == 2
    assert not list((tmp_path / "c").glob("*.shards"))  # the shards are gone once each file is written
    sources = json.loads((tmp_path / "t5" / "results.json").read_text())["features"]
    assert sources["gpt2.pt"] == str(folder / "gpt2.pt") and sources["bert"].startswith(str(tmp_path / "c"))


def test_table_cache_key_follows_the_data(models, data, tmp_path):
    from prhsim.real import features_key

    (tmp_path / "a.jsonl").write_text((data / "captions.jsonl").read_text())
    key = features_key(models["bert"], tmp_path / "a.jsonl")
    assert features_key(models["bert"], tmp_path / "a.jsonl") == key
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "changed"}) + "\n")
    assert features_key(models["bert"], tmp_path / "a.jsonl") != key
    assert features_key(models["bert"], tmp_path / "a.jsonl", layers="last") != features_key(
        models["bert"], tmp_path / "a.jsonl")


def test_table_model_folder_without_data_is_a_one_line_error(models, tmp_path):
    import shutil

    folder = tmp_path / "zoo"
    shutil.copytree(models["bert"], folder / "bert")
    _one_line_error(_table(folder, tmp_path / "t"), "model folder", "--data")
    _one_line_error(_table(folder, tmp_path / "t", "--data", tmp_path / "missing.json"), "no such dataset")
    assert not (tmp_path / "t" / "results.json").exists()


def test_table_refuses_a_bad_model_folder_or_cache_before_extracting_any(models, data, tmp_path, monkeypatch):
    import shutil

    folder = tmp_path / "zoo"
    shutil.copytree(models["bert"], folder / "a-bert")
    (folder / "b-broken").mkdir()
    (folder / "b-broken" / "config.json").write_text("{ not json")
    calls = _counting(monkeypatch)
    broken = _table(folder, tmp_path / "t", "--data", data / "dataset_tiny.json")
    _one_line_error(broken, "b-broken/config.json", "not a config transformers can read")
    assert calls == []  # a-bert, first in order, was not extracted
    shutil.rmtree(folder / "b-broken")
    (tmp_path / "plain").write_text("a file")
    cache = _table(folder, tmp_path / "t", "--data", data / "dataset_tiny.json", "--cache", tmp_path / "plain" / "c")
    _one_line_error(cache, "--cache", "plain")
    assert calls == [] and not (tmp_path / "t" / "results.json").exists()


# ---------------------------------------------------------------- resuming by shard


def test_extraction_resumes_from_its_shards(models, data, tmp_path, monkeypatch):
    import prhsim.real._extract as module
    from prhsim.real._extract_cache import save_shard, shard_folder

    captions = data / "dataset_tiny.json"
    whole = extract_features(models["bert"], captions, tmp_path / "whole.pt", batch_size=2)
    out = tmp_path / "sharded.pt"
    saved, pooled = [], []
    save, pool = save_shard, module.pool_hidden

    def save_then_stop(path, *args):
        save(path, *args)
        saved.append(path.name)
        raise KeyboardInterrupt  # interrupted right after the first shard is on disk

    def counted_pool(hidden, mask, *args):
        pooled.append(int(hidden[0].shape[0]))
        return pool(hidden, mask, *args)

    monkeypatch.setattr(module, "save_shard", save_then_stop)
    monkeypatch.setattr(module, "pool_hidden", counted_pool)
    with pytest.raises(KeyboardInterrupt):
        extract_features(models["bert"], captions, out, batch_size=2, shard_size=2)
    assert not out.exists() and saved == ["rows-000000000-000000002.pt"]
    assert [p.name for p in shard_folder(out).iterdir()] == saved
    # a stale shard (written for another key: another model or data) under the next shard's name is not reused
    monkeypatch.setattr(module, "save_shard", save)
    save_shard(shard_folder(out) / "rows-000000002-000000004.pt", "another-key", 2, 4,
               torch.zeros(2, 3, 16), [1, 1], (0, 1, 2))
    pooled.clear()
    result = _cli("--model", models["bert"], "--data", captions, "--out", out, "--batch-size", 2, "--shard-size", 2)
    assert result.exit_code == 0, result.output
    assert pooled == [2, 2]  # rows 2..5 computed, rows 0..1 read back from the first shard
    assert "read back" in result.output and not shard_folder(out).exists()
    expected, got = torch.load(tmp_path / "whole.pt", weights_only=True), torch.load(out, weights_only=True)
    assert whole.shape == tuple(got["feats"].shape)
    np.testing.assert_array_equal(got["feats"].numpy(), expected["feats"].numpy())
    np.testing.assert_array_equal(got["mask"].numpy(), expected["mask"].numpy())
    assert got["layers"] == expected["layers"] and got["num_params"] == expected["num_params"]


def test_an_interrupted_extraction_exits_130_naming_its_shards_and_a_whole_rerun_removes_them(models, data, tmp_path,
                                                                                                monkeypatch):
    import prhsim.real._extract as module
    from prhsim.real._extract_cache import save_shard, shard_folder

    captions, out = data / "dataset_tiny.json", tmp_path / "stopped.pt"

    def save_then_stop(path, *args):
        save_shard(path, *args)
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "save_shard", save_then_stop)
    stopped = _cli("--model", models["bert"], "--data", captions, "--out", out, "--batch-size", 2, "--shard-size", 2)
    assert stopped.exit_code == 130 and "Aborted" not in stopped.output
    assert f"interrupted; {out} was not written; the finished shards stay in {shard_folder(out)}" in \
        stopped.output.replace("\n", "")
    monkeypatch.setattr(module, "save_shard", save_shard)
    whole = _cli("--model", models["bert"], "--data", captions, "--out", out, "--batch-size", 2)  # no --shard-size
    assert whole.exit_code == 0, whole.output
    assert out.is_file() and not shard_folder(out).exists()  # the stale shards do not outlive the whole output


# ---------------------------------------------------------------- a decoder's next-token loss and bits per byte


def _reference_loss(path, texts=CAPTIONS):
    """Per-text (loss, bpb) from the definition: each text alone (no padding) through the causal LM, the next-token
    cross-entropy by hand (log-softmax of the logits at t, the token at t + 1), nats summed; loss = nats / (T - 1),
    bpb = nats / ln 2 / UTF-8 bytes."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    losses, bpbs = [], []
    with torch.no_grad():
        for text in texts:
            ids = tok(text, return_tensors="pt")["input_ids"]
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
            nats = -logp[torch.arange(ids.shape[1] - 1), ids[0, 1:]].double().sum().item()
            losses.append(nats / (ids.shape[1] - 1))
            bpbs.append(nats / math.log(2) / len(text.encode("utf-8")))
    return np.array(losses), np.array(bpbs)


def _padded_left(models, tmp_path):
    """A copy of the GPT-2 checkpoint whose tokenizer pads on the left (as the PRH code's load_tokenizer sets)."""
    import shutil

    from transformers import AutoTokenizer

    left = tmp_path / "gpt2-left"
    shutil.copytree(models["gpt2"], left)
    _tokenizer(cls_sep=False, padding_side="left")[0].save_pretrained(left)
    assert AutoTokenizer.from_pretrained(str(left), local_files_only=True).padding_side == "left"
    return left


def test_decoder_loss_and_bpb_equal_the_definition(models, data, tmp_path):
    out = tmp_path / "gpt2.pt"
    result = _cli("--model", models["gpt2"], "--data", data / "dataset_tiny.json", "--out", out, "--batch-size", 4)
    assert result.exit_code == 0, result.output
    saved = torch.load(out, weights_only=True)
    loss, bpb = _reference_loss(models["gpt2"])
    assert saved["mask"].sum(1).min() < saved["mask"].shape[1]  # some texts were padded in their batch
    np.testing.assert_allclose(saved["loss_per_sample"].numpy(), loss, atol=TOL, rtol=0)
    np.testing.assert_allclose(saved["bpb_per_sample"].numpy(), bpb, atol=TOL, rtol=0)
    assert isinstance(saved["loss"], float) and isinstance(saved["bpb"], float)
    assert saved["loss"] == pytest.approx(loss.mean(), abs=TOL) and saved["bpb"] == pytest.approx(bpb.mean(), abs=TOL)
    assert saved["loss"] > 0 and saved["bpb"] > 0
    np.testing.assert_allclose(saved["feats"].numpy(), _reference_text(models["gpt2"], "mean"), atol=TOL, rtol=0)

    # the library's summary, and safetensors (per-text tensors, the means in the metadata); npy holds feats only
    summary = extract_features(models["gpt2"], data / "captions.jsonl", tmp_path / "g.safetensors", batch_size=3)
    assert summary.loss == pytest.approx(saved["loss"], abs=TOL) and summary.bpb == pytest.approx(saved["bpb"], abs=TOL)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "g.safetensors"), "pt") as handle:
        np.testing.assert_allclose(handle.get_tensor("loss_per_sample").numpy(), loss, atol=TOL, rtol=0)
        np.testing.assert_allclose(handle.get_tensor("bpb_per_sample").numpy(), bpb, atol=TOL, rtol=0)
        assert float(handle.metadata()["bpb"]) == pytest.approx(bpb.mean(), abs=TOL)
    assert extract_features(models["gpt2"], data / "captions.jsonl", tmp_path / "g.npy").loss is not None
    assert np.load(tmp_path / "g.npy").shape == (6, 3, 16)
    # an encoder has no next-token loss
    assert extract_features(models["bert"], data / "captions.jsonl", tmp_path / "b.pt").loss is None


def test_left_and_right_padding_give_the_same_loss_and_features(models, data, tmp_path):
    left = _padded_left(models, tmp_path)
    a = extract_features(models["gpt2"], data / "captions.jsonl", tmp_path / "right.pt", batch_size=4)
    b = extract_features(left, data / "captions.jsonl", tmp_path / "left.pt", batch_size=4)
    right, lefted = torch.load(tmp_path / "right.pt", weights_only=True), torch.load(tmp_path / "left.pt", weights_only=True)
    assert not torch.equal(right["mask"], lefted["mask"])  # the padding really is on the other side
    np.testing.assert_array_equal(right["mask"].sum(1).numpy(), lefted["mask"].sum(1).numpy())
    np.testing.assert_allclose(lefted["loss_per_sample"].numpy(), right["loss_per_sample"].numpy(), atol=TOL, rtol=0)
    np.testing.assert_allclose(lefted["bpb_per_sample"].numpy(), _reference_loss(left)[1], atol=TOL, rtol=0)
    assert b.loss == pytest.approx(a.loss, abs=TOL) and b.bpb == pytest.approx(a.bpb, abs=TOL)
    np.testing.assert_allclose(lefted["feats"].numpy(), right["feats"].numpy(), atol=TOL, rtol=0)
    extract_features(left, data / "captions.jsonl", tmp_path / "last.npy", pool="last-token", batch_size=4)
    np.testing.assert_allclose(np.load(tmp_path / "last.npy"), _reference_text(models["gpt2"], "last-token"),
                               atol=TOL, rtol=0)


def test_an_untied_head_missing_from_the_checkpoint_gives_no_loss(data, tmp_path):
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    tok, vocab = _tokenizer(cls_sep=False)
    GPT2Model(GPT2Config(vocab_size=vocab, n_embd=16, n_layer=2, n_head=2, n_positions=64, bos_token_id=3,
                         eos_token_id=3, tie_word_embeddings=False)).save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    summary = extract_features(tmp_path / "base", data / "captions.jsonl", tmp_path / "x.pt")
    saved = torch.load(tmp_path / "x.pt", weights_only=True)
    assert summary.loss is None and "loss" not in saved and "bpb_per_sample" not in saved
    np.testing.assert_allclose(saved["feats"].numpy(), _reference_text(tmp_path / "base", "mean"), atol=TOL, rtol=0)


def test_decoder_resume_keeps_the_losses_and_recomputes_a_shard_without_them(models, data, tmp_path, monkeypatch):
    import prhsim.real._extract as module
    from prhsim.real import features_key
    from prhsim.real._extract_cache import save_shard, shard_folder

    captions = data / "dataset_tiny.json"
    extract_features(models["gpt2"], captions, tmp_path / "whole.pt", batch_size=2)
    out = tmp_path / "sharded.pt"
    save, pool = save_shard, module.pool_hidden
    pooled = []

    def save_then_stop(path, *args):
        save(path, *args)
        raise KeyboardInterrupt

    def counted_pool(hidden, mask, *args):
        pooled.append(int(hidden[0].shape[0]))
        return pool(hidden, mask, *args)

    monkeypatch.setattr(module, "save_shard", save_then_stop)
    monkeypatch.setattr(module, "pool_hidden", counted_pool)
    with pytest.raises(KeyboardInterrupt):
        extract_features(models["gpt2"], captions, out, batch_size=2, shard_size=2)
    monkeypatch.setattr(module, "save_shard", save)
    # a shard of this very key written without the per-text losses (an older version's) is not read back
    key = features_key(models["gpt2"], captions, pool="mean")
    save_shard(shard_folder(out) / "rows-000000002-000000004.pt", key, 2, 4, torch.zeros(2, 3, 16), [1, 1], (0, 1, 2))
    pooled.clear()
    result = _cli("--model", models["gpt2"], "--data", captions, "--out", out, "--batch-size", 2, "--shard-size", 2)
    assert result.exit_code == 0, result.output
    assert pooled == [2, 2] and "read back" in result.output  # rows 0..1 read back, rows 2..5 computed
    expected, got = torch.load(tmp_path / "whole.pt", weights_only=True), torch.load(out, weights_only=True)
    np.testing.assert_array_equal(got["feats"].numpy(), expected["feats"].numpy())
    for name in ("loss_per_sample", "bpb_per_sample"):
        np.testing.assert_array_equal(got[name].numpy(), expected[name].numpy())
    assert got["loss"] == expected["loss"] and got["bpb"] == expected["bpb"]
    np.testing.assert_allclose(got["loss_per_sample"].numpy(), _reference_loss(models["gpt2"])[0], atol=TOL, rtol=0)


# ---------------------------------------------------------------- the memory guard


def _never_loaded(monkeypatch):
    import prhsim.real._extract as module

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(module, "_network", refuse)


@pytest.mark.parametrize("name", ["gpt2", "bert", "vit"])
def test_an_extraction_that_cannot_fit_is_refused_in_one_line_before_loading(models, data, tmp_path, name,
                                                                              monkeypatch):
    _never_loaded(monkeypatch)
    src = data / ("images" if name == "vit" else "dataset_tiny.json")
    out = tmp_path / "x.pt"
    result = _cli("--model", models[name], "--data", src, "--out", out, "--batch-size", 1000000000)
    _one_line_error(result, "would need", "limit", "--batch-size", "--layers", "hidden states 1,000,000,000 x")
    assert ("logits" in result.output) == (name == "gpt2")
    assert not out.exists() and not list(tmp_path.iterdir())


def test_the_memory_guard_refuses_exactly_above_its_estimate(models, data, tmp_path, monkeypatch):
    from transformers import AutoConfig

    from prhsim import ResourceError, memory_limit
    from prhsim.real._extract_cost import peak_bytes

    config = AutoConfig.from_pretrained(str(models["gpt2"]), local_files_only=True)
    tokens = max(len(ids) for ids in _tokens(models["gpt2"]))
    weights = sum(p.stat().st_size for p in models["gpt2"].iterdir() if p.suffix == ".safetensors")
    need, what = peak_bytes(config, "text", inputs=6, batch_size=4, tokens=tokens, kept_layers=1, logits=True,
                            weights=weights)
    hidden, vocab = config.hidden_size, config.vocab_size
    assert need == weights + 4 * tokens * hidden * 3 * 4 + 6 * tokens * vocab * 4 + 2 * 6 * 1 * hidden * 4 + 6 * tokens * 8
    with memory_limit(int(need)):
        assert extract_features(models["gpt2"], data / "captions.jsonl", tmp_path / "a.pt", batch_size=4,
                                layers="last").shape == (6, 1, 16)
    _never_loaded(monkeypatch)
    with memory_limit(int(need) - 1), pytest.raises(ResourceError, match="kept features 6 x 1 layers") as caught:
        extract_features(models["gpt2"], data / "captions.jsonl", tmp_path / "b.pt", batch_size=4, layers="last")
    assert "\n" not in str(caught.value) and "--max-length" in str(caught.value)


# ---------------------------------------------------------------- the time estimate


def _forward_twin(name, tokens, vocab=0):
    """2 x blocks x (4D² + 2·D·I) x tokens (+ 2·D·V x tokens for the decoder), written out for the test models: two
    blocks of width 16; MLP widths 32 (BERT's and ViT's intermediate_size), 64 (GPT-2: n_inner None, so 4D; DINOv2:
    mlp_ratio 4, which its config's unused intermediate_size does not override)."""
    mlp = {"bert": 32, "vit": 32, "gpt2": 64, "dinov2": 64}[name]
    per_token = 2 * 2 * (4 * 16 * 16 + 2 * 16 * mlp) + (2 * 16 * vocab if name == "gpt2" else 0)
    return per_token * tokens


@pytest.mark.parametrize("name", ["bert", "gpt2", "vit", "dinov2"])
def test_the_time_estimate_is_the_forward_count_at_the_device_rate(models, data, tmp_path, name):
    from transformers import AutoConfig

    import prhsim.real._forward_cost as module
    from prhsim.real import extraction_seconds, forward_flops

    config = AutoConfig.from_pretrained(str(models[name]), local_files_only=True)
    if name in ("vit", "dinov2"):
        src, tokens = data / "images", len(CAPTIONS) * ((SIZE // 8) ** 2 + 1)  # 4 x 4 patches and the class token
    else:
        src, tokens = data / "captions.jsonl", sum(map(len, _tokens(models[name])))
    flops = _forward_twin(name, tokens, getattr(config, "vocab_size", 0))
    assert forward_flops(config, tokens, logits=name == "gpt2") == flops
    assert extraction_seconds(flops, cuda=False) == flops / module.CPU_FORWARD_FLOPS
    assert extraction_seconds(flops, cuda=True) == flops / module.CUDA_FORWARD_FLOPS
    summary = extract_features(models[name], src, tmp_path / "x.pt", batch_size=4, device="cpu")
    assert summary.estimated_seconds == pytest.approx(flops / module.CPU_FORWARD_FLOPS, rel=1e-12)


def test_a_long_extraction_says_so_before_it_starts_and_a_short_one_does_not(models, data, tmp_path, monkeypatch):
    import prhsim.real._forward_cost as module

    result = _cli("--model", models["bert"], "--data", data / "captions.jsonl", "--out", tmp_path / "a.pt")
    assert result.exit_code == 0, result.output
    assert "may take" not in result.output
    tokens = sum(map(len, _tokens(models["bert"])))
    seconds = _forward_twin("bert", tokens) / 1000.0
    monkeypatch.setattr(module, "CPU_FORWARD_FLOPS", 1000.0)  # the same count at a rate that makes it minutes
    assert 60 <= seconds < 3600
    result = _cli("--model", models["bert"], "--data", data / "captions.jsonl", "--out", tmp_path / "b.pt",
                  "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert (f"note: this extraction may take minutes: {len(CAPTIONS):,} texts of {tokens:,} tokens through bert "
            f"(2 blocks of width 16) (about {seconds:,.0f} s estimated; a rough class)") in result.output
    assert "may take" not in _cli("--model", models["bert"], "--data", data / "captions.jsonl", "--out",
                                  tmp_path / "c.pt", "--device", "cpu", "-q").output
    table = CliRunner().invoke(main, ["prh", "table", str(models["bert"].parent), "--rows", "bert", "--cols", "bert",
                                      "--data", str(data / "captions.jsonl"), "--cache", str(tmp_path / "cache"),
                                      "--device", "cpu", "--knn-k", "2", "--out", str(tmp_path / "table")])
    assert table.exit_code == 0, table.output
    assert "note: bert: this extraction may take minutes" in table.output


def test_a_text_checkpoint_without_its_tokenizer_or_with_a_foreign_one_is_refused_before_loading(models, data,
                                                                                                  tmp_path,
                                                                                                  monkeypatch):
    """Without tokenizer files transformers would build an empty tokenizer and every row would come out the same;
    a tokenizer that reads most of the data as unknown is refused too. Both before the network loads."""
    import shutil

    import prhsim.real._extract as module
    from tokenizers import Tokenizer, models as tok_models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    def no_network(*args, **kwargs):
        raise AssertionError("the network was loaded")

    monkeypatch.setattr(module, "_network", no_network)
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(models["bert"] / name, bare / name)
    refused = _cli("--model", bare, "--data", data / "dataset_tiny.json", "--out", tmp_path / "f.pt")
    assert refused.exit_code == 2 and "no tokenizer beside the weights" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    foreign = tmp_path / "foreign"
    shutil.copytree(bare, foreign)
    digits = Tokenizer(tok_models.WordLevel({"[UNK]": 0, "[PAD]": 1, "7": 2}, unk_token="[UNK]"))
    digits.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=digits, unk_token="[UNK]", pad_token="[PAD]").save_pretrained(foreign)
    unknown = _cli("--model", foreign, "--data", data / "dataset_tiny.json", "--out", tmp_path / "g.pt")
    assert unknown.exit_code == 2 and "reads 100% of the data's tokens as unknown" in unknown.output.replace("\n", " ")
    assert not (tmp_path / "f.pt").exists() and not (tmp_path / "g.pt").exists()


def test_identical_extracted_rows_are_noted(models, tmp_path):
    """Rows that all come out the same (here: the same caption four times) are said, not silently written."""
    import json as _json

    data = tmp_path / "same.jsonl"
    data.write_text("".join(_json.dumps({"text": "a red square"}) + "\n" for _ in range(4)))
    same = _cli("--model", models["bert"], "--data", data, "--out", tmp_path / "same.pt", "--batch-size", 2)
    assert same.exit_code == 0 and "every one of the 4 extracted rows is identical" in same.output.replace("\n", " ")
    data.write_text("".join(_json.dumps({"text": t}) + "\n" for t in ("a red square", "a blue circle")))
    differ = _cli("--model", models["bert"], "--data", data, "--out", tmp_path / "differ.pt")
    assert differ.exit_code == 0 and "rows is identical" not in differ.output


def test_an_output_that_cannot_be_written_is_refused_before_loading(models, data, tmp_path, monkeypatch):
    import prhsim.real._extract as module

    def no_network(*args, **kwargs):
        raise AssertionError("the network was loaded")

    monkeypatch.setattr(module, "_network", no_network)
    (tmp_path / "plain").write_text("a file")
    under = _cli("--model", models["bert"], "--data", data / "dataset_tiny.json", "--out", tmp_path / "plain" / "f.pt")
    assert under.exit_code == 2 and "plain" in under.output and len(under.output.strip().splitlines()) == 1


def test_long_texts_are_truncated_without_a_transformers_warning_and_a_max_length_above_the_models_is_noted(
        models, tmp_path):
    """A text of 300 tokens through the tiny BERT (64 positions): no transformers warning that it is too long (it is
    truncated), and --max-length 1000 is said once to be above the model's 64 and reads as 64, under -q silently."""
    import json as _json
    import logging

    data = tmp_path / "long.jsonl"
    data.write_text("".join(_json.dumps({"text": t}) + "\n" for t in (" ".join(["a"] * 300), "b c d")))
    warned = []

    class Keep(logging.Handler):
        def emit(self, record):
            warned.append(record.getMessage())

    keep = Keep(level=logging.WARNING)
    logging.getLogger("transformers").addHandler(keep)
    try:
        quiet = _cli("--model", models["bert"], "--data", data, "--out", tmp_path / "quiet.npy", "-q")
        above = _cli("--model", models["bert"], "--data", data, "--out", tmp_path / "above.npy", "--max-length", 1000)
        above_q = _cli("--model", models["bert"], "--data", data, "--out", tmp_path / "above-q.npy", "--max-length",
                       1000, "-q")
        within = _cli("--model", models["bert"], "--data", data, "--out", tmp_path / "within.npy", "--max-length", 64)
    finally:
        logging.getLogger("transformers").removeHandler(keep)
    assert [r.exit_code for r in (quiet, above, above_q, within)] == [0] * 4, above.output
    assert not [w for w in warned if "sequence length" in w], warned
    assert quiet.output == "" and above_q.output == ""
    note = "note: --max-length 1000 is above the model's maximum length (64 tokens): texts are truncated at 64 tokens"
    assert above.output.replace("\n", " ").count(note) == 1 and "--max-length" not in within.output
    np.testing.assert_array_equal(load_features(tmp_path / "above.npy"), load_features(tmp_path / "within.npy"))
    notes = []
    extract_features(models["bert"], data, tmp_path / "lib.npy", max_length=1000, notes=notes.append)
    assert notes == [note.removeprefix("note: ")]
