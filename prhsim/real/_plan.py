"""The cost of ``prhsim real train``, from its settings alone: refuse what cannot fit before loading anything.

:func:`plan_training` estimates, for one process, the peak memory of each stage (the constants are
rough upper bounds, not measurements of one machine):

* **model**: a BERT of hidden size h, L layers, intermediate size I, vocabulary V and P positions has
  about ``V·h + P·h + L·(4h² + 2·h·I + 9h)`` parameters, plus the projector ``h² + h·proj_dim`` (JEPA)
  or the LM head ``V·h`` (next-token prediction); training holds each in float32 four times (the
  parameter, its gradient, AdamW's two moments);
* **activations**: every view of the batch (``views_per_image · batch_size`` sequences, counted at
  ``max_length`` tokens although packing keeps only their real tokens) keeps, per layer and token,
  about ``3h + I`` floats and its attention scores (``heads·max_length``) for the backward pass (on
  this project's CPU, BERT-S at batch 32 peaked at 1.9 GB resident against an estimate of 2.8 GB with
  the parameters and 0.45 GB of interpreter); next-token prediction adds the logits and their
  gradient (``2V`` per token);
* **SIGReg**: the projections of the embeddings on ``num_directions`` directions at every knot of the
  characteristic function (17), three copies (value, cosine and sine terms), and the directions
  themselves (``proj_dim x num_directions``);
* **workers**: each data-loader worker process, :data:`WORKER_BYTES` of host memory.

The **time** (:attr:`TrainingPlan.seconds`, a rough class for the note before a long run): a step trains the
transformer blocks and the head on every view at ``max_length`` tokens, ``6 · (params − (V + P)·h) · tokens``
float operations (forward and backward; the embeddings are gathers), at :data:`CPU_FLOPS` or :data:`CUDA_FLOPS`
per second: rates of that formula measured with it (so packing's shorter rows are inside them). On this project's
2-core CPU all-MiniLM-L6-v2 at batch 16 took 1.1 s a step and the tiny model 0.025 s (4.8e11 and 2.2e11 by this
count); on an H200 BERT-S at batch 256 x 64 tokens took 41 ms a step (4e14).

On CUDA the model, activation and SIGReg stages are held against the GPU's memory (its total); on the
CPU, and for the workers always, against the memory limit of :func:`prhsim.memory_limit` (half the
machine by default; ``prhsim real train --memory-limit GB`` sets it). Above it,
:class:`prhsim.ResourceError` names the stage, the estimate, the limit and the setting to lower.
"""

from __future__ import annotations

from dataclasses import dataclass

from prhsim._budget import ResourceError, current_memory_limit, format_bytes, time_class, time_notes
from prhsim.real._settings import RealTrainSettings

#: Host memory of one data-loader worker process (an interpreter with torch, the tokenizer and its batches).
WORKER_BYTES = 250e6
#: Knots of SIGReg's characteristic-function quadrature.
KNOTS = 17
#: Bytes of one float32.
F32 = 4
#: Float operations per second of a training step, by the count of the module docstring (measured, rounded down).
CPU_FLOPS, CUDA_FLOPS = 2e11, 3e14


@dataclass(frozen=True)
class TrainingStage:
    """One stage of a training run, its estimated peak bytes, where it lives and the setting that lowers it."""

    what: str
    nbytes: float
    on_gpu: bool
    hint: str


@dataclass(frozen=True)
class TrainingPlan:
    """The stages of a run and the limits they are held against (bytes)."""

    stages: tuple[TrainingStage, ...]
    host_limit: int
    gpu_limit: int | None
    seconds: float = 0.0
    steps: int = 0
    params: float = 0.0

    @property
    def time_class(self) -> str:
        """The rough class of :attr:`seconds` (``prhsim run``'s labels)."""

        return time_class(self.seconds)

    def notes(self) -> list[str]:
        """``this run may take <class>: …`` where the class is minutes or hours (:func:`prhsim._budget.time_notes`)."""

        return time_notes("run", self.seconds, f"{self.steps:,} steps of a {self.params / 1e6:,.1f}M-parameter model")

    def summary(self) -> str:
        """One line: the largest stage and its limit."""
        worst = max(self.stages, key=lambda s: s.nbytes)
        limit = self.gpu_limit if worst.on_gpu and self.gpu_limit else self.host_limit
        return (f"peak memory about {format_bytes(sum(s.nbytes for s in self.stages if s.on_gpu == worst.on_gpu))} "
                f"({worst.what}; limit {format_bytes(limit)})")


def model_shape(settings: RealTrainSettings) -> tuple[int, int, int, int, int, int]:
    """(hidden, layers, heads, intermediate, vocabulary, positions) of the model the run trains: the checkpoint's
    config.json with ``weights``, else :data:`prhsim.real._text_models.SIZES` and ``vocab_size``."""
    if settings.weights:
        from prhsim.real._weights import read_checkpoint

        c = read_checkpoint(settings.weights).config
        return (int(c.get("hidden_size", 768)), int(c.get("num_hidden_layers", 12)),
                int(c.get("num_attention_heads", 12)), int(c.get("intermediate_size", 3072)),
                int(c.get("vocab_size", settings.vocab_size)), int(c.get("max_position_embeddings", 512)))
    from prhsim.real._text_models import SIZES

    h, layers, heads, inter = SIZES[settings.model]
    return h, layers, heads, inter, settings.vocab_size, max(64, settings.max_length)


def plan_training(settings: RealTrainSettings, *, cuda: bool | None = None) -> TrainingPlan:
    """Cost ``settings`` (module docstring) and refuse what cannot fit.

    ``cuda``: whether the run uses a GPU (default: as ``settings.device`` resolves on this machine).

    Raises:
        ResourceError: a stage needs more than its limit (the message names the setting to lower).
        DataError: ``weights`` is not a checkpoint directory.
    """
    import torch

    from prhsim.real._views import ViewLaw

    if cuda is None:
        cuda = settings.device == "cuda" or (settings.device == "auto" and torch.cuda.is_available())
    gpu_limit = int(torch.cuda.get_device_properties(0).total_memory) if cuda and torch.cuda.is_available() else None
    h, layers, heads, inter, vocab, positions = model_shape(settings)
    ntp = settings.learner == "ntp"
    head = vocab * h if ntp else h * h + h * settings.proj_dim
    params = vocab * h + positions * h + layers * (4 * h * h + 2 * h * inter + 9 * h) + head
    sequences = ViewLaw().views_per_image(settings.task) * settings.batch_size
    tokens = float(sequences) * settings.max_length
    per_token = layers * (3 * h + inter + heads * settings.max_length) + (2 * vocab if ntp else 0)
    stages = [
        TrainingStage(f"the model's {params:,.0f} parameters with their gradients and AdamW's moments",
                      4.0 * F32 * params, cuda, "lower proj_dim" if settings.proj_dim > h else
                      "choose a smaller --model (or checkpoint)"),
        TrainingStage(f"the activations of {sequences:,} sequences x {settings.max_length} tokens",
                      F32 * tokens * per_token, cuda, "lower --batch-size (or max_length)"),
    ]
    if not ntp:
        stages.append(TrainingStage(
            f"SIGReg's projections ({sequences:,} embeddings x {settings.num_directions:,} directions x {KNOTS} knots) "
            f"and its directions ({settings.proj_dim:,} x {settings.num_directions:,} directions)",
            3.0 * F32 * sequences * settings.num_directions * KNOTS + F32 * settings.proj_dim * settings.num_directions,
            cuda, "lower num_directions (or proj_dim)"))
    if settings.num_workers:
        stages.append(TrainingStage(f"{settings.num_workers} data-loader worker processes",
                                    WORKER_BYTES * settings.num_workers, False, "lower --workers"))
    step_flops = 6.0 * (params - (vocab + positions) * h) * tokens
    seconds = settings.steps * step_flops / (CUDA_FLOPS if cuda else CPU_FLOPS)
    plan = TrainingPlan(tuple(stages), current_memory_limit(), gpu_limit, seconds, settings.steps, float(params))
    for on_gpu in (False, True):
        mine = [s for s in stages if s.on_gpu == on_gpu]
        if not mine:
            continue
        limit = gpu_limit if on_gpu and gpu_limit else plan.host_limit
        total, worst = sum(s.nbytes for s in mine), max(mine, key=lambda s: s.nbytes)
        if total > limit:
            where = "GPU memory" if on_gpu and gpu_limit else "limit"
            raise ResourceError(f"{worst.what} would need {format_bytes(worst.nbytes)} (the run about "
                                f"{format_bytes(total)}; {where} {format_bytes(limit)}); {worst.hint}")
    return plan
