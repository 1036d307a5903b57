"""The offline walkthrough of docs/prh.md ("**Walkthrough, offline.**") runs as written: its two fenced blocks are
read from the page itself (so this test breaks when the docs change), and every line runs, in order, through
``prhsim.cli.main`` in a temporary working directory holding tiny random ``ckpt/bert`` (a BERT with its
tokenizer.json) and ``ckpt/dinov2`` (a DINOv2 with its preprocessor_config.json). Each command exits 0 and writes
what the page says: the synthetic export, two feature files of one row per image, a finite score, two printed
tables (the second over the checkpoint folders, extracted into ``ckpt/.prhsim-features/`` and equal to the first),
and a rerun that reads that cache instead of extracting again.

One change to the commands: ``--images 200`` is appended to ``prhsim real export-synthetic`` (an option docs/real.md
lists as optional, default 2000), since at 2000 images each ``--calibrate 1000`` table takes minutes on a CPU.
PRHSIM_DOCS_AS_WRITTEN=1 runs the walkthrough at its own size (about 12 minutes on two cores)."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")
pytest.importorskip("PIL")

from click.testing import CliRunner  # noqa: E402

from prhsim.cli import main  # noqa: E402
from prhsim.io import load_features  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "prh.md"
HEADING = "**Walkthrough, offline.**"
IMAGES = None if os.environ.get("PRHSIM_DOCS_AS_WRITTEN") else 200
SIZE = 32  # the DINOv2's input side (its image processor resizes every image to it)


def walkthrough_blocks(text: str) -> list[list[str]]:
    """The command lines of each fenced block of the walkthrough: from its heading to the next bold paragraph
    heading (a line opening with ``**``), a ``#`` heading, or the end of the page."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(HEADING)]
    assert len(starts) == 1, f"{DOC}: expected one paragraph opening with {HEADING!r}, found {len(starts)}"
    blocks, block = [], None
    for line in lines[starts[0] + 1:]:
        if block is None and (line.startswith("**") or line.startswith("#")):
            break
        if line.startswith("```"):
            if block is None:
                block = []
            else:
                blocks.append(block)
                block = None
        elif block is not None and line.strip():
            block.append(line.strip())
    assert block is None, f"{DOC}: an unclosed code block in the walkthrough"
    return blocks


def _tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *letters, *(f"##{c}" for c in letters)])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", model_max_length=128), len(vocab)


def save_checkpoints(root: Path) -> None:
    """Tiny random ``root/ckpt/bert`` (BertModel, tokenizer.json) and ``root/ckpt/dinov2`` (Dinov2Model,
    preprocessor_config.json), each saved with save_pretrained."""
    from transformers import BertConfig, BertModel, Dinov2Config, Dinov2Model, ViTImageProcessor

    torch.manual_seed(0)
    tok, vocab = _tokenizer()
    BertModel(BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=128),
              add_pooling_layer=False).save_pretrained(root / "ckpt" / "bert")
    tok.save_pretrained(root / "ckpt" / "bert")
    Dinov2Model(Dinov2Config(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                             image_size=SIZE, patch_size=8)).save_pretrained(root / "ckpt" / "dinov2")
    ViTImageProcessor(size={"height": SIZE, "width": SIZE}).save_pretrained(root / "ckpt" / "dinov2")
    assert (root / "ckpt" / "bert" / "tokenizer.json").is_file()
    assert (root / "ckpt" / "dinov2" / "preprocessor_config.json").is_file()


def _run(args: list[str]):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, f"prhsim {shlex.join(args)} exited {result.exit_code}:\n{result.output}" + (
        "" if result.exception is None or isinstance(result.exception, SystemExit) else f"\n{result.exception!r}")
    return result


def _new_run_folder(before: set[Path]) -> Path:
    made = set(Path("runs").glob("*-prh-table*")) - before
    assert len(made) == 1, f"expected one new runs/*-prh-table folder, found {sorted(made)}"
    return made.pop()


def test_the_blocks_are_the_walkthrough():
    blocks = walkthrough_blocks(DOC.read_text())
    assert len(blocks) == 2 and all(line.startswith("prhsim ") for block in blocks for line in block), blocks
    assert [shlex.split(line)[1:3] for line in blocks[0]] == [
        ["real", "export-synthetic"], ["prh", "extract"], ["prh", "extract"], ["prh", "score"], ["prh", "table"]]
    assert [shlex.split(line)[1:3] for line in blocks[1]] == [["prh", "table"]]


@pytest.mark.slow
def test_the_offline_walkthrough_runs_as_written(tmp_path, monkeypatch):
    first, second = walkthrough_blocks(DOC.read_text())
    monkeypatch.chdir(tmp_path)
    save_checkpoints(tmp_path)
    runs: dict[str, Path] = {}

    for line in first:
        args = shlex.split(line)[1:]
        command = " ".join(args[:2])
        if command == "real export-synthetic" and IMAGES is not None:
            args += ["--images", str(IMAGES)]
        before = set(Path("runs").glob("*-prh-table*"))
        result = _run(args)
        if command == "real export-synthetic":
            out = Path(args[args.index("--out") + 1])
            dataset = json.loads(next(out.glob("dataset_*.json")).read_text())
            images = len(dataset["images"])
            assert images == (IMAGES or 2000)
            assert len(list((out / "images").iterdir())) == images
        elif command == "prh extract":
            out = Path(args[args.index("--out") + 1])
            assert out.is_file() and f"wrote {out}" in result.output
            features = load_features(out)  # one row per image of the dataset, every hidden state (3), width 16
            assert features.shape == (images, 3, 16) and np.isfinite(features).all()
        elif command == "prh score":
            metric = args[args.index("--metric") + 1]
            found = re.search(rf"^{metric} = (\S+)", result.output, flags=re.MULTILINE)
            assert found and math.isfinite(float(found.group(1))), result.output
        elif command == "prh table":
            runs["features"] = folder = _new_run_folder(before)
            doc = json.loads((folder / "results.json").read_text())
            rows, cols = args[args.index("--rows") + 1], args[args.index("--cols") + 1]
            assert doc["rows"] == [rows] and doc["cols"] == [cols]
            assert rows in result.output and cols in result.output and "calibrated against" in result.output
            assert doc["calibration"]["permutations"] == int(args[args.index("--calibrate") + 1])
            assert all((folder / name).is_file() for name in ("results.json", "table.csv", "table.png"))

    (line,) = second
    args = shlex.split(line)[1:]
    folder = Path(args[2])
    cache = folder / ".prhsim-features"
    assert not cache.exists()
    before = set(Path("runs").glob("*-prh-table*"))
    result = _run(args)
    runs["ckpt"] = _new_run_folder(before)
    assert "bert: features extracted" in result.output and "dinov2: features extracted" in result.output
    cached = {p.name.split("-")[0]: p for p in cache.glob("*.pt")}
    assert sorted(cached) == ["bert", "dinov2"]
    # the same features as prhsim prh extract wrote (the default layers and pooling), so the same table
    for name in ("bert", "dinov2"):
        np.testing.assert_array_equal(load_features(cached[name]), load_features(Path("features") / f"{name}.pt"))
    doc = json.loads((runs["ckpt"] / "results.json").read_text())
    assert doc["rows"] == ["bert"] and doc["cols"] == ["dinov2"]
    assert doc["scores"] == json.loads((runs["features"] / "results.json").read_text())["scores"]

    # a later table over ckpt/ reuses the cache: nothing extracted, no cache file rewritten
    stamps = {p: p.stat().st_mtime_ns for p in cache.iterdir()}
    result = _run([*args, "--out", str(tmp_path / "again")])
    assert "bert: features cached" in result.output and "dinov2: features cached" in result.output
    assert "extracted" not in result.output
    assert {p: p.stat().st_mtime_ns for p in cache.iterdir()} == stamps
    assert json.loads((tmp_path / "again" / "results.json").read_text())["scores"] == doc["scores"]
