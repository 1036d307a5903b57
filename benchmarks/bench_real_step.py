"""``prhsim real train``'s step against the padded eager step it replaced, and the data pipeline feeding it.

Both variants train the same model on the same views (8 per image, good views, 256 images by default):

* baseline: every view padded to the batch's longest (one (V·B, L) batch), the encoder eager,
  ``prhsim.objectives.lejepa_loss`` (SIGReg through the generic array-API ``sigreg``), AdamW (foreach);
* prhsim: the views packed into rows as long as the longest (``_packing``), SIGReg through
  ``sigreg_torch``, AdamW fused on CUDA, and the encoder compiled when ``--compile`` names a mode
  (the ratio is of all of these together; the baseline stays eager).

The batches are built before the clock starts; the step times forward, backward and the optimiser
(synchronised on CUDA), best of ``--repeats`` rounds of ``--steps`` steps after a warm-up round over
every batch (where a compiled encoder compiles each packed shape; CUDA graphs are recorded on their
first replays, so give ``--repeats`` 2 or more), the two variants interleaved, in turn first. Printed: images/s, real tokens/s, token positions/s (padding included) and the
ratio; on a GPU in the peak table, model FLOPs utilisation ``6·P·tokens/s / peak`` (P outside the
embeddings, real tokens only: the useful FLOPs, padding not counted) and peak memory. Then the data pipeline alone: batches built per second by one
process (cutting views, masking, packing), and the workers needed to feed the prhsim step.

    python benchmarks/bench_real_step.py                       # tiny BERT, batch 64, CPU
    python benchmarks/bench_real_step.py --model bert-s --batch-size 256 --compile default   # on a GPU
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))

from prhsim.real import RealTrainSettings  # noqa: E402
from prhsim.real._batches import EpochBatches, view_generators  # noqa: E402
from prhsim.real._smoke import model_flops_utilisation, peak_tflops  # noqa: E402
from prhsim.real._text_models import TextEncoder  # noqa: E402
from prhsim.real._train import _objective  # noqa: E402
from prhsim.real._views import ViewLaw, batch_views  # noqa: E402
from prhsim.objectives import draw_directions, lejepa_loss

VOCAB = 8192


def flickr_like_captions(images: int, seed: int = 0) -> list[list[np.ndarray]]:
    """5 captions per image of WordPiece-like lengths (mean 15 tokens, sd 5, 6 to 40)."""
    rng = np.random.default_rng(seed)
    return [[rng.integers(5, VOCAB, size=int(np.clip(rng.normal(15, 5), 6, 40))) for _ in range(5)]
            for _ in range(images)]


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _non_embedding_parameters(model) -> int:
    return sum(p.numel() for name, p in model.named_parameters() if "embeddings" not in name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny", choices=["tiny", "bert-s", "bert-b"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compile", default="none", choices=["none", "default", "reduce-overhead", "max-autotune"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    B, law = args.batch_size, ViewLaw()
    settings = RealTrainSettings(data="unused", model=args.model, batch_size=B, compile=args.compile,
                                 device=device.type)
    captions = flickr_like_captions(B * (args.steps + 2))
    source = EpochBatches(captions, "good", batch_size=B, pad=0, mask_id=4, max_length=settings.max_length, seed=0,
                          row_multiple=settings.row_multiple)
    steps = range(args.steps + 1)
    packed = [tuple(t.to(device) for t in source[s]) for s in steps]
    padded = []
    for s in steps:
        ids, mask = batch_views([captions[i] for i in source.images(s)], "good", law, pad=0, mask_id=4,
                                max_length=settings.max_length, gens=view_generators(0, s, 0, B))
        padded.append((torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)))
    real = [int((b[2] >= 0).sum()) for b in packed]
    assert real == [int(m.sum()) for _, m in padded], "the two variants must see the same tokens"

    def make(fused: bool, compiled: bool):
        torch.manual_seed(0)
        model = TextEncoder(args.model, VOCAB, settings.max_length, causal=False, proj_dim=settings.proj_dim).to(device)
        if compiled:
            model.compile_training(args.compile)
        return model, torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.05, fused=fused or None)

    base_model, base_opt = make(False, False)
    ours_model, ours_opt = make(cuda, args.compile != "none")
    base_model.train(), ours_model.train()

    def baseline_step(s):
        ids, mask = padded[s]
        V, _, L = ids.shape
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            e = base_model.embed(ids.reshape(V * B, L), mask.reshape(V * B, L)).reshape(V, B, -1)
        directions = torch.as_tensor(draw_directions(e.shape[-1], settings.num_directions, seed=0, step=s),
                                     dtype=torch.float32, device=device)
        loss = lejepa_loss(e.float(), directions, lam=settings.lam, n_global=law.n_global, dims="mean")
        base_opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(base_model.parameters(), 1.0)
        base_opt.step()

    def prhsim_step(s):
        loss = _objective(ours_model, packed[s], settings, s, device)
        ours_opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ours_model.parameters(), 1.0)
        ours_opt.step()

    best = {"baseline": float("inf"), "prhsim": float("inf")}
    steps_fn = {"baseline": baseline_step, "prhsim": prhsim_step}
    for name, fn in steps_fn.items():  # warm-up: every batch once (a compiled encoder compiles each packed shape here)
        for s in steps:
            fn(s)
        _sync(device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    for round_ in range(args.repeats):
        for name in sorted(steps_fn, reverse=bool(round_ % 2)):  # each variant first in turn
            fn = steps_fn[name]
            _sync(device)
            start = time.perf_counter()
            for s in range(1, args.steps + 1):
                fn(s)
            _sync(device)
            best[name] = min(best[name], time.perf_counter() - start)
    tokens = sum(real[1:])
    positions = {"baseline": sum(ids.numel() for ids, _ in padded[1:]),
                 "prhsim": sum(b[0].numel() for b in packed[1:])}
    peak = peak_tflops(device)
    P = _non_embedding_parameters(ours_model)
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    print(f"{args.model} ({P / 1e6:.1f}M outside embeddings), batch {B} images x {law.n_views} views, "
          f"{tokens / args.steps / (B * law.n_views):.1f} real tokens per view, {name}, compile={args.compile}")
    for variant, seconds in best.items():
        per_s = tokens / seconds
        mfu = model_flops_utilisation(P, per_s, peak)
        print(f"  {variant:<9s} {args.steps * B / seconds:10.0f} images/s {per_s:12.0f} tokens/s "
              f"{positions[variant] / seconds:12.0f} positions/s  real share {tokens / positions[variant]:.3f}"
              + (f"  MFU {mfu:.3f}" if mfu is not None else ""))
    print(f"  ratio     {best['baseline'] / best['prhsim']:.2f}x the baseline's images/s")
    if cuda:
        print(f"  peak memory (both models) {torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB")

    built = time.perf_counter()
    for s in range(args.steps):
        source[s]
    per_worker = args.steps * B / (time.perf_counter() - built)
    need = args.steps * B / best["prhsim"]
    print(f"  data pipeline: one process builds {per_worker:.0f} images/s (cut, mask, pack); the prhsim step takes "
          f"{need:.0f}/s: at least {int(np.ceil(need / per_worker))} --workers")


if __name__ == "__main__":
    main()
