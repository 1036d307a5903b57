"""``prhsim real train``: a BERT text encoder on a caption dataset with the objectives the simulator checks.

One step: B images drawn from the training split (with replacement, from the run's generator),
their views (:mod:`._views`), and

* JEPA views: ``λ·SIGReg + (1 − λ)·invariance`` on the projector's outputs,
  :func:`prhsim.jepa.lejepa_loss` on torch tensors (invariance to the mean of the two global views,
  averaged over the dimensions as LeJEPA's code does; SIGReg over M directions from
  :func:`prhsim.jepa.draw_directions`, redrawn every step from (seed, step));
* next-token prediction: :func:`prhsim.jepa.next_token_cross_entropy` over every real next token.

AdamW with linear warmup then cosine decay to 0, gradient clipping; bf16 autocast on CUDA for the
encoder, the objective in float32. On CUDA a resumed run matches an uninterrupted one only with
deterministic kernels (``torch.use_deterministic_algorithms``); on CPU it matches exactly. The run folder holds config.json, tokenizer.json, metrics.jsonl
(one JSON line every ``log_every`` steps: loss, learning rate, samples/s, tokens/s),
model_config.json (the BERT configuration, so evaluation rebuilds the model),
``checkpoint/`` (every ``checkpoint_every`` steps and at the end; a killed run resumes from it
exactly), and summary.json with loss.png (loss and learning rate against the step) when the run
is complete. A loss or gradient that is not finite stops the run with an error naming the step;
the last good checkpoint stays.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from prhsim._io import json_text, write_text_atomic
from prhsim.experiments.real._karpathy import CaptionDataset, DataError, read_captions
from prhsim.experiments.real._tokenizer import encode, load_tokenizer, train_wordpiece
from prhsim.experiments.real._views import ViewLaw, batch_views

CONFIG_NAME = "config.json"
TOKENIZER_NAME = "tokenizer.json"
METRICS_NAME = "metrics.jsonl"
SUMMARY_NAME = "summary.json"
MODEL_CONFIG_NAME = "model_config.json"
FIGURE_NAME = "loss.png"
#: Stream tag of the batches: ``default_rng([seed, DATA_STREAM])``.
DATA_STREAM = 7


class TrainingDiverged(ValueError):
    """The loss stopped being finite; the message names the step and the checkpoint kept."""


@dataclass(frozen=True)
class TrainSummary:
    """What a training call did: steps taken in total, the last loss, wall seconds of this call."""

    steps: int
    loss: float
    seconds: float
    resumed_from: int


def dataset_json(data: Path | str) -> Path:
    """The dataset file of a folder (its one ``dataset_*.json`` or ``*.jsonl``), or ``data`` itself when it is a file."""
    data = Path(data)
    if data.is_file():
        return data
    if not data.is_dir():
        raise DataError(f"{data}: no such dataset folder (expected a folder holding dataset_*.json, or the file)")
    found = sorted([*data.glob("dataset_*.json"), *data.glob("*.jsonl")])
    if len(found) != 1:
        what = "no dataset_*.json or *.jsonl" if not found else f"{len(found)} dataset files"
        raise DataError(f"{data}: {what} in this folder (expected exactly one Karpathy-split JSON or JSON lines)")
    return found[0]


def _device(name: str):
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for, but torch sees no CUDA device")
    return torch.device(name)


def _schedule(steps: int, warmup: float) -> Callable[[int], float]:
    warm = int(round(warmup * steps))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        progress = (step - warm) / max(1, steps - warm)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def build(settings, dataset: CaptionDataset, *, tokenizer=None, model_config: dict | None = None):
    """The tokenizer (given, read from ``settings.tokenizer``, or built from the training captions), the
    encoded training captions per image, the model, the optimiser and the scheduler."""
    import torch

    from prhsim.experiments.real._text_models import TextEncoder

    train_records = dataset.split("train")
    if not train_records:
        raise DataError(f"{dataset.path}: no image in the train split")
    if tokenizer is None:
        if settings.tokenizer is not None:
            tokenizer = load_tokenizer(settings.tokenizer)
        else:
            tokenizer = train_wordpiece((t for r in train_records for t in r.texts), settings.vocab_size)
    captions = [encode(tokenizer, list(r.texts), settings.max_length) for r in train_records]
    torch.manual_seed(settings.seed)
    model = TextEncoder(settings.model, tokenizer.get_vocab_size(), settings.max_length,
                        causal=settings.views == "ntp", proj_dim=settings.proj_dim,
                        weights=Path(settings.weights) if settings.weights and model_config is None else None,
                        config=model_config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(settings.steps, settings.warmup))
    return tokenizer, captions, model, optimizer, scheduler


def train_real(settings, out: Path | str, *, resume: bool = False, stop_after: int | None = None,
               progress: Callable[[str], None] | None = None) -> TrainSummary:
    """Train (or resume) the run in ``out`` (module docstring).

    A new run's folder is created only once the data, tokenizer and model are built, and removed
    again if the call fails before its first checkpoint: what is left is always a run that can be
    resumed, or nothing.

    Args:
        settings: :class:`prhsim.config.RealTrainSettings`.
        out: the run folder; a new run needs it new or empty, a resumed one needs its checkpoint.
        resume: continue from ``out/checkpoint`` (with the tokenizer and model configuration saved in ``out``).
        stop_after: stop after this step (a checkpoint is written there), as a killed run would.
        progress: receives one line per logged step.

    Raises:
        DataError: a dataset, tokenizer or weights problem (one line, naming the path).
        TrainingDiverged: the loss or the gradient stopped being finite.
    """
    from prhsim.experiments.real._checkpoint import has_checkpoint

    out = Path(out)
    if resume and not has_checkpoint(out):
        raise DataError(f"{out}: no checkpoint to resume from (expected {out / 'checkpoint'})")
    created = not resume and not out.exists()
    try:
        return _train(settings, out, resume=resume, stop_after=stop_after, progress=progress)
    except BaseException:
        if not resume and not has_checkpoint(out) and out.is_dir():
            _remove_new_run(out, created)
        raise


def _remove_new_run(out: Path, created: bool) -> None:
    """Remove what a new run wrote before its first checkpoint (the folder too, when this call made it)."""
    import shutil

    for name in (CONFIG_NAME, TOKENIZER_NAME, METRICS_NAME, MODEL_CONFIG_NAME):
        (out / name).unlink(missing_ok=True)
    if created:
        shutil.rmtree(out, ignore_errors=True)


def _train(settings, out: Path, *, resume: bool, stop_after: int | None,
           progress: Callable[[str], None] | None) -> TrainSummary:
    import torch

    from prhsim.experiments.real._checkpoint import has_checkpoint, load_checkpoint, save_checkpoint
    from prhsim.jepa import draw_directions, lejepa_loss

    start_time = time.perf_counter()
    say = progress or (lambda message: None)
    dataset = read_captions(dataset_json(settings.data))
    tokenizer = load_tokenizer(out / TOKENIZER_NAME) if resume else None
    model_config = json.loads((out / MODEL_CONFIG_NAME).read_text()) if resume else None
    tokenizer, captions, model, optimizer, scheduler = build(settings, dataset, tokenizer=tokenizer,
                                                             model_config=model_config)
    device = _device(settings.device)
    model.to(device)
    if resume:
        state = load_checkpoint(out, model=model, optimizer=optimizer, scheduler=scheduler)
        step, gen = state.step, state.generator
        _truncate_metrics(out / METRICS_NAME, step)  # lines logged after the checkpoint are logged again
        if step >= settings.steps:
            return TrainSummary(step, float(state.extra.get("loss", float("nan"))), time.perf_counter() - start_time,
                                step)
    else:
        out.mkdir(parents=True, exist_ok=True)
        tokenizer.save(str(out / TOKENIZER_NAME))
        (out / MODEL_CONFIG_NAME).write_text(json_text(model.model.config.to_dict()))
        (out / CONFIG_NAME).write_text(json_text(settings.model_dump(mode="json")))
        step, gen = 0, np.random.default_rng([settings.seed, DATA_STREAM])
    first = step
    pad, mask_id = tokenizer.token_to_id("[PAD]"), tokenizer.token_to_id("[MASK]")
    law = ViewLaw()
    last = stop_after if stop_after is not None else settings.steps
    cuda = device.type == "cuda"
    loss_value, seen, tokens, tick = float("nan"), 0, 0, time.perf_counter()
    model.train()
    with (out / METRICS_NAME).open("a") as metrics:
        while step < min(last, settings.steps):
            batch = [captions[i] for i in gen.integers(len(captions), size=settings.batch_size)]
            ids, mask = batch_views(batch, settings.views, law, pad=pad, mask_id=mask_id,
                                    max_length=settings.max_length, gen=gen)
            ids, mask = torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
                if settings.views == "ntp":
                    loss = model.next_token_loss(ids[0], mask[0])
                else:
                    V, B, L = ids.shape
                    e = model.embed(ids.reshape(V * B, L), mask.reshape(V * B, L)).reshape(V, B, -1)
            if settings.views != "ntp":
                directions = torch.as_tensor(draw_directions(e.shape[-1], settings.num_directions,
                                                             seed=settings.seed, step=step),
                                             dtype=torch.float32, device=device)
                with torch.autocast("cuda", enabled=False):  # the statistic in float32
                    loss = lejepa_loss(e.float(), directions, lam=settings.lam, n_global=law.n_global, dims="mean")
            if not torch.isfinite(loss):
                raise TrainingDiverged(f"the loss is not finite at step {step} (lr {settings.lr:g}); "
                                       f"{_kept(out, has_checkpoint)}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip)
            if not torch.isfinite(norm):
                raise TrainingDiverged(f"the gradient is not finite at step {step} (lr {settings.lr:g}); "
                                       f"{_kept(out, has_checkpoint)}")
            optimizer.step()
            scheduler.step()
            step += 1
            loss_value = float(loss.detach())
            seen += settings.batch_size
            tokens += int(mask.sum())
            if step % settings.log_every == 0 or step == settings.steps:
                elapsed = max(time.perf_counter() - tick, 1e-9)
                line = {"step": step, "loss": loss_value, "lr": scheduler.get_last_lr()[0],
                        "samples_per_s": seen / elapsed, "tokens_per_s": tokens / elapsed}
                metrics.write(json.dumps(line) + "\n")
                metrics.flush()
                eta = (settings.steps - step) * elapsed / max(1, seen // settings.batch_size)
                say(f"step {step}/{settings.steps} loss {loss_value:.4f}, {line['samples_per_s']:.0f} samples/s, "
                    f"{line['tokens_per_s']:.0f} tokens/s, ETA {eta:.0f} s")
                seen, tokens, tick = 0, 0, time.perf_counter()
            if step % settings.checkpoint_every == 0 or step in (settings.steps, last):
                save_checkpoint(out, model=model, optimizer=optimizer, scheduler=scheduler, generator=gen, step=step,
                                extra={"loss": loss_value})
    summary = TrainSummary(step, loss_value, time.perf_counter() - start_time, first)
    if step >= settings.steps:
        from prhsim.experiments.real._figure import run_figure
        from prhsim.experiments.report import save_png

        save_png(run_figure(out / METRICS_NAME, f"{settings.views} views, {settings.model}, {step} steps"),
                 out / FIGURE_NAME)
        write_text_atomic(out / SUMMARY_NAME, json_text({"steps": step, "loss": loss_value, "views": settings.views,
                                                     "model": settings.model}))
    return summary


def _kept(out: Path, has_checkpoint) -> str:
    step = _checkpoint_step(out) if has_checkpoint(out) else None
    return f"the checkpoint of step {step} is kept in {out}" if step is not None else "no checkpoint was written"


def _truncate_metrics(path: Path, step: int) -> None:
    """Keep the metric lines up to ``step`` (a resumed run logs the later ones again)."""
    if not path.is_file():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    write_text_atomic(path, "".join(line + "\n" for line in kept))


def _checkpoint_step(out: Path) -> int | None:
    try:
        return int(json.loads((out / "checkpoint" / "state.json").read_text())["step"])
    except (OSError, ValueError, KeyError):
        return None


