"""``prhsim real train``: a BERT text encoder on a caption dataset with the objectives the simulator checks.

One step: a batch of B images (:mod:`._batches`: epochs of a caption dataset in memory, or parquet
shards streamed; a function of (seed, step), so a resumed run sees the batches an uninterrupted one
would), their views (:mod:`._views`), each between the tokenizer's special tokens (BERT's ``[CLS] … [SEP]``,
as a checkpoint reads a text; the checkpoint records them, and a resumed run must have the same), packed into
rows as long as the longest (:mod:`._packing`:
each view attends to itself and is pooled alone, so the encoder runs on real tokens, not padding), and

* JEPA views: ``λ·SIGReg + (1 − λ)·invariance`` on the projector's outputs,
  :func:`prhsim.objectives.lejepa_loss` with SIGReg by ``sigreg_torch`` (the same value and gradient in
  O(N·M) memory with a closed-form backward; invariance to the mean of the two global views,
  averaged over the dimensions as LeJEPA's code does; SIGReg over M directions from
  :func:`prhsim.objectives.draw_directions`, redrawn every step from (seed, step));
* next-token prediction: :func:`prhsim.objectives.next_token_cross_entropy` over every real next token.

AdamW (fused on CUDA) with linear warmup then cosine decay to 0, gradient clipping; bf16 autocast
on CUDA for the encoder, the objective in float32; ``compile`` runs the encoder through
``torch.compile``. On CUDA a resumed run matches an uninterrupted one only with
deterministic kernels (``torch.use_deterministic_algorithms``); on CPU it matches exactly. The run
folder holds config.json, tokenizer.json, metrics.jsonl (one JSON line every ``log_every`` steps:
loss, learning rate, samples/s, tokens/s (real tokens), the real tokens' share of the packed
positions, the model's label; the same scalars in ``tensorboard/`` when the tensorboard
package is installed), model_config.json (the BERT configuration, so evaluation rebuilds the
model), weights.json (a run started from a checkpoint: its path, label and pooling, :mod:`._weights`), ``checkpoint/`` (every ``checkpoint_every`` steps and at the end; a killed run resumes from
it exactly), and summary.json with loss.png (loss and learning rate against the step) when the run
is complete. A loss or gradient that is not finite stops the run with an error naming the step
(the check runs on the device and is read at the next logged or saved step, so it never makes a
step wait for the host); the last good checkpoint stays.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from prhsim._rng import REAL_DROPOUT
from prhsim.io import json_text, save_png, write_text_atomic
from prhsim.real._devices import torch_device
from prhsim.real._tokenizer import content_length, encode, load_tokenizer, special_tokens, train_wordpiece
from prhsim.real._views import ViewLaw
from prhsim.real._weights import RECORD_NAME, read_checkpoint, run_record
from prhsim.real.data import CaptionDataset, DataError, dataset_json, parquet_shards, read_captions, stream_records

CONFIG_NAME = "config.json"
TOKENIZER_NAME = "tokenizer.json"
METRICS_NAME = "metrics.jsonl"
SUMMARY_NAME = "summary.json"
MODEL_CONFIG_NAME = "model_config.json"
FIGURE_NAME = "loss.png"
TENSORBOARD_NAME = "tensorboard"
#: How a checkpoint's run laid out its views (``extra["layout"]``); runs of other layouts drew other dropout masks.
LAYOUT = "packed"
#: "No step yet" for the first non-finite step.
NEVER = 2**62
#: ``progress(message, done, total)``: a line for the user, with the steps done and to do.
Progress = Callable[..., None]


class TrainingDiverged(ValueError):
    """The loss stopped being finite; the message names the step and the checkpoint kept."""


@dataclass(frozen=True)
class TrainSummary:
    """What a training call did: steps taken in total, the last loss, wall seconds of this call."""

    steps: int
    loss: float
    seconds: float
    resumed_from: int


def _schedule(steps: int, warmup: float) -> Callable[[int], float]:
    warm = int(round(warmup * steps))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        progress = (step - warm) / max(1, steps - warm)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def training_data(settings) -> CaptionDataset | list[Path]:
    """The training data of ``settings.data``: a caption dataset in memory, or the parquet shards to stream."""
    shards = parquet_shards(settings.data)
    if shards:
        return shards
    dataset = read_captions(dataset_json(settings.data))
    if not dataset.split("train"):
        raise DataError(f"{dataset.path}: no image in the train split")
    return dataset


def check_features(settings, data: CaptionDataset | list[Path]) -> None:
    """Refuse ``settings.features`` before any training, read as evaluation reads it
    (:func:`._feature_checks.image_features`): a file that cannot be read, not one row per image of an in-memory
    dataset, not finite, every row equal, or values whose products overflow (:func:`._feature_checks.check_spread`);
    one line naming the file."""
    from prhsim.real._feature_checks import check_spread, image_features

    feats = image_features(settings.features, len(data.records) if isinstance(data, CaptionDataset) else None)
    check_spread(feats, f"image features {settings.features}")


def _training_texts(settings, data: CaptionDataset | list[Path]):
    """The texts a new tokenizer is built from: every training caption, or the first ``tokenizer_records`` streamed records'."""
    import itertools

    if isinstance(data, CaptionDataset):
        return (t for r in data.split("train") for t in r.texts)
    records = stream_records(data, settings.text_columns, id_column=settings.id_column)
    return (t for r in itertools.islice(records, settings.tokenizer_records) for t in r.texts)


def build(settings, data: CaptionDataset | list[Path], *, tokenizer=None, model_config: dict | None = None,
          device=None, record: dict | None = None, run: Path | None = None):
    """The tokenizer (given, read from ``settings.tokenizer``, the checkpoint's own (``weights/tokenizer.json``)
    or built from the training texts), the model (on ``device``, compiled when ``settings.compile`` asks), the
    optimiser (AdamW, fused on CUDA) and the scheduler. ``model_config`` and ``record`` (:mod:`._weights`): a saved
    run's model configuration and checkpoint record, which rebuild its model without the checkpoint directory; a
    configuration that does not build it is a DataError naming ``run``'s model_config.json."""
    import torch

    from prhsim.real._text_models import TextEncoder

    checkpoint = read_checkpoint(settings.weights) if settings.weights and model_config is None else None
    if tokenizer is None:
        if settings.tokenizer is not None:
            tokenizer = load_tokenizer(settings.tokenizer)
        elif checkpoint is not None and checkpoint.tokenizer is not None:
            tokenizer = load_tokenizer(checkpoint.tokenizer)
        else:
            tokenizer = train_wordpiece(_training_texts(settings, data), settings.vocab_size)
    torch.manual_seed(settings.seed)
    try:
        model = TextEncoder(settings.model, tokenizer.get_vocab_size(), settings.max_length,
                            causal=settings.learner == "ntp", proj_dim=settings.proj_dim, weights=checkpoint,
                            config=model_config, dropout=settings.dropout,
                            normalize=bool(record and record.get("normalize")))
    except DataError:
        raise
    except Exception as exc:  # a saved configuration that transformers refuses (any of its errors) is the file's
        if model_config is None:
            raise
        raise DataError(f"{run}: its {MODEL_CONFIG_NAME} does not build the run's model ({one_line(exc)})") from None
    model.checkpoint = checkpoint
    device = torch.device("cpu") if device is None else device
    model.to(device)
    if settings.compile != "none":
        model.compile_training(settings.compile)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay,
                                  fused=device.type == "cuda" or None)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(settings.steps, settings.warmup))
    return tokenizer, model, optimizer, scheduler


def batch_source(settings, data: CaptionDataset | list[Path], tokenizer, *, start: int, rank: int = 0,
                 world_size: int = 1):
    """The step-indexed batches of process ``rank`` of ``world_size`` (:mod:`._batches`; each reads
    ``batch_size / world_size`` images), for a loader that starts at step ``start``."""
    from prhsim.real._batches import EpochBatches, StreamBatches

    pad, mask_id = tokenizer.token_to_id("[PAD]"), tokenizer.token_to_id("[MASK]")
    room = content_length(tokenizer, settings.max_length)  # the text tokens beside the special tokens of every view
    if isinstance(data, CaptionDataset):
        captions = [encode(tokenizer, list(r.texts), room, specials=False) for r in data.split("train")]
        return EpochBatches(captions, settings.task, batch_size=settings.batch_size // world_size, pad=pad, mask_id=mask_id,
                            max_length=settings.max_length, seed=settings.seed, rank=rank, world_size=world_size,
                            row_multiple=settings.row_multiple, specials=special_tokens(tokenizer))
    return StreamBatches(data, settings.text_columns, settings.task, tokenizer=tokenizer,
                         batch_size=settings.batch_size // world_size, max_length=settings.max_length, seed=settings.seed,
                         start=start, num_workers=settings.num_workers, shuffle_buffer=settings.shuffle_buffer,
                         id_column=settings.id_column, rank=rank, world_size=world_size,
                         row_multiple=settings.row_multiple)


def train_real(settings, out: Path | str, *, resume: bool = False, stop_after: int | None = None,
               progress: Progress | None = None) -> TrainSummary:
    """Train (or resume) the run in ``out`` (module docstring), in this process or in each process ``torchrun`` started.

    A new run's folder is created only once the data, tokenizer and model are built, and removed
    again if the call fails before its first checkpoint: what is left is always a run that can be
    resumed, or nothing. Under torchrun (:mod:`._distributed`) the processes split each global
    batch, the first one writes the run folder, and every one resumes from its checkpoint.

    Args:
        settings: :class:`prhsim.config.RealTrainSettings`.
        out: the run folder; a new run needs it new or empty, a resumed one needs its checkpoint.
        resume: continue from ``out/checkpoint`` (with the tokenizer and model configuration saved in ``out``).
        stop_after: stop after this step (a checkpoint is written there), as a killed run would.
        progress: called as ``progress(message, step, steps)`` at the start and at every logged step.

    Raises:
        DataError: a dataset, features, tokenizer or weights problem (one line, naming the path).
        TrainingDiverged: the loss or the gradient stopped being finite.
    """
    import torch

    from prhsim.real._checkpoint import has_checkpoint
    from prhsim.real._distributed import join, launched, leave

    out = Path(out)
    if resume and not has_checkpoint(out):
        raise DataError(f"{out}: no checkpoint to resume from (expected {out / 'checkpoint'})")
    place = launched()
    if settings.batch_size % place.world_size:
        raise DataError(f"the batch size {settings.batch_size} does not split over {place.world_size} processes "
                        "(it is the global batch: give a multiple of the number of processes)")
    created = not resume and not out.exists()
    device = torch_device(settings.device)
    joined = False
    previous = _exit_on_sigterm()
    try:
        joined = join(device)
        if device.type == "cuda" and place.distributed:
            device = torch.device("cuda", place.local_rank)
        return _train(settings, out, device, place, resume=resume, stop_after=stop_after, progress=progress)
    except BaseException:
        if place.main and not resume and not has_checkpoint(out) and out.is_dir():
            _remove_new_run(out, created)
        raise
    finally:
        if joined:
            leave()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm():
    """Turn SIGTERM (what torchrun sends the other processes when one fails, and ``kill``) into SystemExit, so a new
    run's clean-up runs; the previous handler, or None when this is not the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, terminate)


def _remove_new_run(out: Path, created: bool) -> None:
    """Remove what a new run wrote before its first checkpoint (the folder too, when this call made it)."""
    for name in (CONFIG_NAME, TOKENIZER_NAME, METRICS_NAME, MODEL_CONFIG_NAME, RECORD_NAME):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / TENSORBOARD_NAME, ignore_errors=True)
    if created:
        shutil.rmtree(out, ignore_errors=True)


def _dropout_seed(seed: int, rank: int, step: int) -> int:
    """The seed of torch's generator (dropout) for one process at one step: resuming needs no saved state."""
    import numpy as np

    return int(np.random.SeedSequence([seed, REAL_DROPOUT, rank, step]).generate_state(1)[0])


def _objective(model, batch, settings, step: int, device):
    """This process's share of the loss: its mean over the processes is the loss of the global batch.

    ``batch``: the packed views (ids, positions, segments) on the device, sequence ``v·B + b`` view v
    of image b (:mod:`._batches`). JEPA views: λ·SIGReg (over the global batch, through the reduce
    hook) + (1 − λ)·invariance (of the local batch; equal local batches, so the mean over processes
    is the global one). Next-token prediction: the local mean cross-entropy weighted by the local
    share of the global next tokens.
    """
    import torch

    from prhsim.real._distributed import all_sum, global_mean
    from prhsim.real._packing import next_token_targets
    from prhsim.objectives import draw_directions, lejepa_loss
    from prhsim.objectives import sigreg_torch

    cuda = device.type == "cuda"
    world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    ids, positions, segments = batch
    B = settings.batch_size // world
    V = ViewLaw().views_per_image(settings.task)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
        out = model(ids, positions, segments, V * B)
    if settings.learner == "ntp":
        if world == 1:
            return out
        targets = next_token_targets(segments).sum().to(torch.float32)
        return out * (targets * world / all_sum(targets))
    e = out.reshape(V, B, -1)
    directions = torch.as_tensor(draw_directions(e.shape[-1], settings.num_directions, seed=settings.seed, step=step),
                                 dtype=torch.float32)
    if cuda:  # a copy from pageable memory could wait for the stream; from pinned memory it is queued
        directions = directions.pin_memory()
    directions = directions.to(device, non_blocking=True)
    with torch.autocast("cuda", enabled=False):  # the statistic in float32
        return lejepa_loss(e.float(), directions, lam=settings.lam, n_global=ViewLaw().n_global, dims="mean",
                           n_total=B * world, reduce=global_mean, regulariser=sigreg_torch,
                           sigreg_views=settings.sigreg_views)


def _train(settings, out: Path, device, place, *, resume: bool, stop_after: int | None,
           progress: Progress | None) -> TrainSummary:
    import torch

    from prhsim.real._batches import batch_loader
    from prhsim.real._checkpoint import has_checkpoint, load_checkpoint, save_checkpoint
    from prhsim.real._distributed import all_min, all_sum, barrier

    start_time = time.perf_counter()
    say = progress if progress is not None and place.main else (lambda message, done=None, total=None: None)
    data = training_data(settings)
    if settings.features:
        check_features(settings, data)
    tokenizer = load_tokenizer(out / TOKENIZER_NAME) if resume else None
    model_config = read_run_json(out, MODEL_CONFIG_NAME) if resume else None
    record = run_record(out) if resume else None
    tokenizer, model, optimizer, scheduler = build(settings, data, tokenizer=tokenizer, model_config=model_config,
                                                   device=device, record=record, run=out)
    if model.checkpoint is not None:
        record = model.checkpoint.record()
    label = model_label(settings, record)
    step = 0
    if resume:
        state = load_checkpoint(out, model=model, optimizer=optimizer, scheduler=scheduler)
        step = state.step
        if state.generator is not None:
            raise DataError(f"{out}: the checkpoint was written by an earlier prhsim that drew its batches from a "
                            "saved generator; this version cannot continue it exactly (start a new run)")
        if state.extra.get("layout") != LAYOUT:
            raise DataError(f"{out}: the checkpoint was written by an earlier prhsim that padded every view instead "
                            "of packing them (other dropout draws); this version cannot continue it exactly (start a "
                            "new run)")
        if state.extra.get("specials", [[], []]) != _specials(tokenizer):
            raise DataError(f"{out}: the checkpoint was written by an earlier prhsim that fed the views without the "
                            "tokenizer's special tokens; this version cannot continue it exactly (start a new run)")
        if not isinstance(data, CaptionDataset):
            saved = (state.extra.get("world_size", 1), state.extra.get("num_workers", 0))
            if saved != (place.world_size, settings.num_workers):
                raise DataError(f"{out}: the run streamed its shards with {saved[0]} processes x {saved[1]} workers "
                                f"(each reader its own shards); resume it with the same, not {place.world_size} x "
                                f"{settings.num_workers}")
        if stop_after is not None and stop_after <= step < settings.steps:
            raise DataError(f"{out}: --stop-after {stop_after} is not after the checkpoint's step {step}")
        if place.main:
            _truncate_metrics(out / METRICS_NAME, step)  # lines logged after the checkpoint are logged again
        if step > settings.steps:
            raise DataError(f"{out}: the run is at step {step:,}; --steps {settings.steps:,} would end before it "
                            "(give at least that many)")
        if step == settings.steps:  # finished: nothing to do, and the folder stays as it is
            return TrainSummary(step, float(state.extra.get("loss", float("nan"))), time.perf_counter() - start_time,
                                step)
        if place.main:  # the run really proceeds: its settings now hold the new number of steps
            write_text_atomic(out / CONFIG_NAME, json_text(settings.model_dump(mode="json")))
    source = batch_source(settings, data, tokenizer, start=step, rank=place.rank, world_size=place.world_size)
    if not resume and place.main:
        out.mkdir(parents=True, exist_ok=True)
        tokenizer.save(str(out / TOKENIZER_NAME))
        (out / MODEL_CONFIG_NAME).write_text(json_text(model.model.config.to_dict()))
        if record is not None:
            (out / RECORD_NAME).write_text(json_text(record))
        (out / CONFIG_NAME).write_text(json_text(settings.model_dump(mode="json")))
    trained = model
    if place.distributed:
        trained = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    first = step
    last = min(stop_after if stop_after is not None else settings.steps, settings.steps)
    batches = batch_loader(source, start=step, stop=last, num_workers=settings.num_workers,
                           pin_memory=device.type == "cuda")
    board = _tensorboard(out, step) if settings.tensorboard and place.main else None
    metrics = (out / METRICS_NAME).open("a") if place.main else None
    loss_value, seen, tokens, cells, tick = float("nan"), 0, 0, 0, time.perf_counter()
    first_bad = torch.full((), NEVER, dtype=torch.int64, device=device)  # the first step whose loss or gradient is not finite
    say(f"step {step}/{settings.steps}", step, settings.steps)
    model.train()
    try:
        for batch in batches:
            batch = tuple(t.to(device, non_blocking=True) for t in batch)
            torch.manual_seed(_dropout_seed(settings.seed, place.rank, step))
            loss = _objective(trained, batch, settings, step, device)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip)
            # no host synchronisation for the check (JEPA steps have none at all; the next-token loss selects its
            # targets on the host): the first non-finite step is kept on the device and read before anything is
            # logged or saved
            finite = torch.isfinite(loss.detach()) & torch.isfinite(norm)
            first_bad = torch.where(finite | (first_bad < NEVER), first_bad, step)
            optimizer.step()
            scheduler.step()
            step += 1
            seen += settings.batch_size
            tokens += (batch[2] >= 0).sum()  # real tokens, counted on the device
            cells += batch[2].numel()  # token positions the encoder ran, padding included
            log = step % settings.log_every == 0 or step == settings.steps
            save = step % settings.checkpoint_every == 0 or step in (settings.steps, last)
            if not (log or save):
                continue
            bad = int(all_min(first_bad))  # every process checks at the same steps
            if bad < NEVER:  # steps counted from 1, as the metric lines and checkpoints count them
                raise TrainingDiverged(f"the loss or its gradient is not finite at step {bad + 1} "
                                       f"(lr {settings.lr:g}); {_kept(out, has_checkpoint)}")
            loss_value = float(all_sum(loss.detach())) / place.world_size  # the global batch's loss
            if log:
                tokens, cells = int(all_sum(tokens)), int(all_sum(torch.tensor(cells, device=device)))
                elapsed = max(time.perf_counter() - tick, 1e-9)
                line = {"step": step, "loss": loss_value, "lr": scheduler.get_last_lr()[0],
                        "samples_per_s": seen / elapsed, "tokens_per_s": tokens / elapsed,
                        "real_token_share": tokens / cells, "model": label}
                if metrics is not None:
                    metrics.write(json.dumps(line) + "\n")
                    metrics.flush()
                if board is not None:
                    for key, value in line.items():
                        if key not in ("step", "model"):
                            board.add_scalar(f"train/{key}", value, step)
                say(f"step {step}/{settings.steps} loss {loss_value:.4f}, {line['samples_per_s']:.0f} samples/s, "
                    f"{line['tokens_per_s']:.0f} tokens/s", step, settings.steps)
                seen, tokens, cells, tick = 0, 0, 0, time.perf_counter()
            if save and place.main:
                save_checkpoint(out, model=model, optimizer=optimizer, scheduler=scheduler, generator=None, step=step,
                                extra={"loss": loss_value, "world_size": place.world_size,
                                       "num_workers": settings.num_workers, "layout": LAYOUT,
                                       "specials": _specials(tokenizer)})
    finally:
        if metrics is not None:
            metrics.close()
        if board is not None:
            board.close()
    barrier()  # every process has finished its steps, and the last checkpoint is written
    summary = TrainSummary(step, loss_value, time.perf_counter() - start_time, first)
    if step >= settings.steps and place.main:
        from prhsim.real._figure import run_figure

        save_png(run_figure(out / METRICS_NAME, f"{settings.label}, {label}, {step} steps"),
                 out / FIGURE_NAME)
        write_text_atomic(out / SUMMARY_NAME, json_text({"steps": step, "loss": loss_value, "learner": settings.learner, "views": settings.views_used,
                                                     "model": label}))
    return summary


def read_run_json(run: Path, name: str, model=None):
    """The JSON object in ``run/name`` (as the pydantic ``model`` when given), or a one-line DataError naming the
    file (and each key that is wrong, with pydantic's message)."""
    from pydantic import ValidationError

    from prhsim.config import format_validation_error

    try:
        data = json.loads((run / name).read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"{run}: its {name} cannot be read ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise DataError(f"{run}: its {name} cannot be read (a JSON object was expected, got {type(data).__name__})")
    if model is None:
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise DataError(f"{run}: its {name} cannot be read ({format_validation_error(exc)})") from None


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message, with the next one when the first only introduces it (ends in ':')."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    return " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def _specials(tokenizer) -> list[list[int]]:
    """The ids put before and after every view (:func:`._tokenizer.special_tokens`), as the checkpoint records them."""
    return [a.tolist() for a in special_tokens(tokenizer)]


def model_label(settings, record: dict | None) -> str:
    """What a run's model is called: its checkpoint's label (:mod:`._weights`), else the size it was initialised at."""
    return record["label"] if record and record.get("label") else settings.model


def _tensorboard(out: Path, step: int):
    """A TensorBoard writer into ``out/tensorboard``, or None when tensorboard is not installed.

    A run resumed at ``step`` drops the events logged after it (they are logged again)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(out / TENSORBOARD_NAME), purge_step=step + 1 if step else None)  # as the metric lines


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


