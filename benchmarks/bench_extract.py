"""``prhsim prh extract`` (prhsim/real/_extract.py) against transformers' own forward loop on the same batches.

A tiny random BERT (hidden 128, 4 blocks, 4 heads; a character-level WordPiece tokenizer), saved to a
temporary checkpoint directory, and N = 1024 captions of 3 to 24 words, batch 64, on the CPU in float32.
It prints the time of one whole ``extract_features`` call (load the checkpoint and tokenizer, tokenize
per batch, forward with every hidden state, pool over the mask, write the .pt atomically) and of the
reference loop on the same batches (the model and tokenizer already loaded: tokenize, forward with
``output_hidden_states=True``, nothing pooled or written), best of 5 interleaved runs, and their ratio (target: under
1.10).

    python benchmarks/bench_extract.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_of, row  # noqa: E402

REPEATS = 5
N, BATCH, WORDS = 1024, 64, ("red", "blue", "square", "circle", "left", "of", "the", "above", "small", "big")


def checkpoint(root: Path) -> Path:
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


def main() -> None:
    import json

    import torch
    from transformers import AutoModel, AutoTokenizer

    from prhsim.real import extract_features

    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(3, 25))) for _ in range(N)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = checkpoint(root)
        data = root / "captions.jsonl"
        data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))

        def extract() -> None:
            extract_features(model_dir, data, root / "bert.pt", batch_size=BATCH, device="cpu", overwrite=True)

        model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
        tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)

        def reference() -> None:
            with torch.inference_mode():
                for start in range(0, N, BATCH):
                    batch = tok(texts[start:start + BATCH], padding=True, truncation=True, max_length=256,
                                return_tensors="pt")
                    model(**batch, output_hidden_states=True)

        extract()  # warm up both
        reference()
        t_extract = t_reference = float("inf")
        for _ in range(REPEATS):  # interleaved, so a slow spell of the shared CPU falls on both
            t_extract, t_reference = min(t_extract, best_of(extract, 1)), min(t_reference, best_of(reference, 1))
    print(f"tiny BERT (hidden 128, 4 blocks), N = {N:,} captions, batch {BATCH}, CPU float32, "
          f"{torch.get_num_threads()} threads")
    print(row("prhsim prh extract (whole call)", t_extract))
    print(row("transformers forward loop", t_reference))
    print(f"ratio {t_extract / t_reference:.3f} ({N / t_extract:,.0f} vs {N / t_reference:,.0f} captions/s)")


if __name__ == "__main__":
    main()
