"""Text learners from a finite sample of captions: good-view JEPA, bad-view JEPA, next-token prediction (docs/theory.md §5.1).

Two learners, ``jepa`` (the JEPA objective on two views) and ``ntp`` (next-token prediction), train
the token encoder of :mod:`prhsim.learners._text_encoder` on a fixed set of records
(:class:`prhsim.worlds.Records`: states with their captions), for a fixed number of steps of B
training pairs, drawn afresh each step from the records. A task (:data:`TEXT_TASKS`) is what a
step draws:

* ``good`` (the JEPA learner on good views): a record, two different captions of it (of
  independent wording), one span of each;
* ``bad`` (the JEPA learner on bad views): a record, one caption, two independent spans of it
  (the wording is shared);
* ``ntp``: a record, one caption, a prefix of length t uniform on ``1..T−1`` and its next token.

JEPA learners minimise the objectives of this package on the two spans' embeddings:
``whiten`` is :func:`prhsim.objectives.whitened_invariance` (the theorem's hard whitening),
``sigreg`` is :func:`prhsim.objectives.lejepa_loss` (LeJEPA, docs/theory.md §7). The next-token
learner has a context encoder h (the same token encoder, reading the prefix), output
embeddings ``w_v`` and biases, and minimises :func:`prhsim.objectives.next_token_cross_entropy`.

A caption's embedding: the encoder of the whole caption (JEPA); for next-token prediction, the
mean of h over the caption's prefixes of lengths 1..T−1 (the contexts that have a next token; where a
caption has blanks, those whose next position is not blank), as the platonic-representation protocol
pools a language model's token states. A next-token step's position t is uniform over the caption's
targets (every position 1..T−1 that is not blank).

Randomness per seed s: the init from ``jax.random.key(s)``; the step data from one generator
``default_rng([s, TEXT_PAIRS])`` (:mod:`prhsim._rng`), drawn on the host one chunk of ``log_every`` steps at a time;
SIGReg directions from :func:`prhsim.objectives.draw_directions` (seed s, the step). Seeds run
together under ``vmap``; compiled loops are cached per configuration and shapes, so runs that
differ only in their records (the budgets of a sample-efficiency sweep) compile once.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Sequence

import numpy as np

from prhsim._budget import ensure_fits
from prhsim._rng import TEXT_PAIRS
from prhsim.learners._driver import check_losses, check_seeds, drive, initial_params, step_chunks
from prhsim.learners._losses import SGDObjective
from prhsim.learners._objectives import OBJECTIVES, LossContext, objective_record
from prhsim.learners._optimiser import Optimiser, positive_int, scan_steps
from prhsim.learners._text_encoder import token_apply, token_init
from prhsim.objectives import LAMBDA, draw_directions, next_token_cross_entropy
from prhsim.worlds import CaptionLaw, Records, SpanLaw, spans_of

TextLearnerKind = Literal["jepa", "ntp"]
#: The text learners: the JEPA objective on two views, or next-token prediction.
TEXT_LEARNERS: tuple[TextLearnerKind, ...] = ("jepa", "ntp")
TextTask = Literal["good", "bad", "ntp"]
#: What a text learner trains on: the JEPA learner on good or on bad views, or next-token prediction
#: (the three arms of the sample-efficiency sweep).
TEXT_TASKS: tuple[TextTask, ...] = ("good", "bad", "ntp")
#: Captions are embedded in chunks of this many rows.
EMBED_CHUNK = 8192


@dataclass(frozen=True, kw_only=True)
class TextConfig(Optimiser):
    """Hyperparameters of :func:`train_text` (validated on construction): an :class:`prhsim.learners.Optimiser`
    (steps, lr, warmup, end_lr, weight_decay, clip, checked there) and what the text learners add.

    Attributes:
        learner: "jepa" (the JEPA objective on two views of a record) or "ntp" (next-token
            prediction; no views).
        views: the JEPA learner's views, "good" (spans of two captions of one record) or "bad"
            (two spans of one caption) (module docstring).
        objective: the JEPA objective, a name of :data:`prhsim.learners._objectives.OBJECTIVES` ("whiten" or
            "sigreg"; ignored by "ntp"): the same records, and losses, as the simulator's SGD learners.
        steps: optimiser steps.
        batch_size: B, training pairs per step (span pairs, or (prefix, next token) pairs).
        lr, warmup, end_lr, weight_decay, clip: AdamW with warmup and cosine decay, global-norm clipping.
        hidden: the MLP's hidden widths.
        min_span: the shortest span (spans are uniform in length up to the whole caption); the
            default, 9 tokens, is one gridscene clause.

    The defaults are the sample-efficiency sweep's (docs/experiments/sample-efficiency.md).
        lam: SIGReg weight λ; num_directions: SIGReg's M.
        log_every: the loss is logged every this many steps.
    """

    learner: TextLearnerKind = "jepa"
    views: Literal["good", "bad"] = "good"
    objective: SGDObjective = "whiten"
    steps: int = 3000
    batch_size: int = 512
    hidden: tuple[int, ...] = (128,)
    min_span: int = 9
    lam: float = LAMBDA
    num_directions: int = 256
    log_every: int = 250

    def __post_init__(self) -> None:
        for name, allowed in (("learner", TEXT_LEARNERS), ("views", ("good", "bad")),
                              ("objective", tuple(OBJECTIVES))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        super().__post_init__()  # steps, lr, warmup, end_lr, weight_decay, clip: checked once, for every learner
        if self.method != "adamw":
            raise ValueError("the text learners train with method='adamw'; 'precond' preconditions a table on the exact "
                             "whitened loss")
        for name in ("batch_size", "min_span", "num_directions", "log_every"):
            positive_int(name, getattr(self, name))
        if not 0 <= self.lam < 1:
            raise ValueError(f"lam must lie in [0, 1), got {self.lam}")
        if self.batch_size < 2:
            raise ValueError("a text learner needs batch_size >= 2 (whitening and SIGReg use batch statistics)")
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))

    @classmethod
    def for_task(cls, task: str, **fields: Any) -> "TextConfig":
        """The config of one task of :data:`TEXT_TASKS`: "good"/"bad" (the JEPA learner on those views) or "ntp"."""
        if task not in TEXT_TASKS:
            raise ValueError(f"task must be one of {TEXT_TASKS}, got {task!r}")
        return cls(learner="ntp", **fields) if task == "ntp" else cls(learner="jepa", views=task, **fields)

    @property
    def task(self) -> TextTask:
        """What this learner trains on: "good" or "bad" views (the JEPA learner), or "ntp"."""
        return "ntp" if self.learner == "ntp" else self.views

    @property
    def label(self) -> str:
        """The task in a few words: "good views", "bad views" or "next-token prediction"."""
        return "next-token prediction" if self.learner == "ntp" else f"{self.views} views"

    @property
    def spans(self) -> SpanLaw:
        return SpanLaw(self.min_span)

    @property
    def captions_needed(self) -> int:
        """Captions a record must hold: two for good views, one otherwise."""
        return 2 if self.task == "good" else 1


class TextResult(NamedTuple):
    """What :func:`train_text` returns (leading axis of params and loss: the seed).

    Attributes:
        config: the hyperparameters.
        k: embedding dimension.
        seeds: the seeds.
        params: final parameters (numpy pytree).
        logged: logged steps (L,); loss: (S, L), the training loss at those steps.
        samples: records per seed; tokens: tokens those records hold (every caption's).
        seconds: wall time of the call.
    """

    config: TextConfig
    k: int
    seeds: tuple[int, ...]
    params: Any
    logged: np.ndarray
    loss: np.ndarray
    samples: int
    tokens: int
    seconds: float


class _Key(NamedTuple):
    task: str
    objective: str
    optimiser: Optimiser
    lam: float


def _both_views(params: Any, step: Any) -> tuple[Any, Any]:
    """The encoder of both views of a batch of pairs, in one pass over the 2B rows."""
    import jax.numpy as jnp

    B = step["x"].shape[0]
    h = token_apply(params, jnp.concatenate([step["x"], step["y"]]))
    return h[:B], h[B:]


def _loss(key: _Key):
    if key.task == "ntp":
        def loss(params: Any, step: Any) -> Any:
            h = token_apply(params["encoder"], step["x"])
            return next_token_cross_entropy(h, params["out"], step["y"], params["bias"])
    else:  # a JEPA: the objective's own minibatch loss (its record), centred, LeJEPA's convention
        record = objective_record(key.objective)
        ctx = LossContext(centred=True, convention="lejepa", dims="sum", factor_shape=None)
        shared = {"lam": key.lam}

        def loss(params: Any, step: Any) -> Any:
            a, b = _both_views(params, step)
            return record.minibatch(a, b, step, shared, ctx)
    return loss


@functools.lru_cache(maxsize=32)
def _runner(key: _Key):
    """The jitted chunk loop and loss of one seed for one configuration."""
    import jax

    loss = _loss(key)
    opt = key.optimiser.build()
    run = scan_steps(loss, opt)
    return jax.jit(opt.init), jax.jit(run), jax.jit(loss)


def _init(key: Any, law: CaptionLaw, k: int, config: TextConfig) -> Any:
    import jax

    T, n_ids = law.length, law.vocab_size + 1
    if config.task != "ntp":
        return token_init(key, T, n_ids, k, config.hidden)
    k_enc, k_out = jax.random.split(key)
    V = law.vocab_size
    return {"encoder": token_init(k_enc, T, n_ids, k, config.hidden),
            "out": jax.random.normal(k_out, (V, k)) / np.sqrt(k), "bias": jax.numpy.zeros(V)}


def _initial_params(law: CaptionLaw, k: int, config: TextConfig, seeds: tuple[int, ...]) -> Any:
    """Every seed's initial parameters, stacked on a leading seed axis (seed s from ``jax.random.key(s)``)."""
    return initial_params(lambda key: _init(key, law, k, config), seeds)


def check_text_batches(config: TextConfig, length: int, n_seeds: int, *, n_ids: int | None = None,
                       k: int | None = None) -> None:
    """Refuse (:class:`prhsim._budget.ResourceError`) a text learner that cannot fit, before anything is drawn.

    Two estimates, each checked: the batches of one chunk of drawn steps (``log_every`` of them), per
    seed the record, caption and cut indices and the token arrays of every pair, int64; and, when the
    vocabulary ``n_ids`` is given, the MLP ``T·n_ids → hidden… → k`` (``k`` = 64 when not given): per seed
    its parameters with Adam's two moments, the gradient and the update (5 float32 copies), plus one
    step's activations, the one-hot input and every hidden layer of both sides of ``batch_size`` pairs.
    """
    chunk = min(config.log_every, config.steps)
    ensure_fits(8.0 * n_seeds * chunk * config.batch_size * (2.0 * length + 6),
                f"the text learner's batches ({n_seeds} seed(s) x {chunk:,} steps x {config.batch_size:,} pairs "
                f"of {length} tokens)", "lower batch_size (or log_every)")
    if n_ids is None:
        return
    widths = (float(length) * n_ids, *map(float, config.hidden), float(k or 64))
    params = sum(a * b + b for a, b in zip(widths, widths[1:]))
    activations = 2.0 * config.batch_size * sum(widths)
    ensure_fits(4.0 * n_seeds * (5 * params + 2 * activations),
                f"the text learner's MLP ({n_seeds} seed(s), widths {' x '.join(f'{w:,.0f}' for w in widths)}, "
                f"{params:,.0f} parameters, batches of {config.batch_size:,})", "lower hidden (or batch_size)")


def draw_steps(records: Records, law: CaptionLaw, config: TextConfig, steps: int,
               gen: np.random.Generator) -> dict[str, np.ndarray]:
    """The next ``steps`` steps' training pairs from ``records``: "x", "y" (steps, B, T), or prefixes and next tokens (ntp)."""
    B, T, C = config.batch_size, law.length, records.captions
    shape = (steps, B)
    rec = gen.integers(records.count, size=shape)
    if config.task == "good":
        first = gen.integers(C, size=shape)
        second = (first + 1 + gen.integers(C - 1, size=shape)) % C
        cut = config.spans.cut
        return {"x": cut(records.tokens[rec, first], law.pad, rng=gen),
                "y": cut(records.tokens[rec, second], law.pad, rng=gen)}
    if config.task == "bad" and records.paired:  # spans of the pair's two captions, wording shared
        first = gen.integers(2, size=shape)
        cut = config.spans.cut
        return {"x": cut(records.tokens[rec, first], law.pad, rng=gen),
                "y": cut(records.tokens[rec, 1 - first], law.pad, rng=gen)}
    caption = records.tokens[rec, gen.integers(C, size=shape)]
    if config.task == "bad":
        return {"x": config.spans.cut(caption, law.pad, rng=gen), "y": config.spans.cut(caption, law.pad, rng=gen)}
    if law.blanks:  # t uniform over the caption's targets: the positions 1..T−1 that are not blank
        targets = caption[..., 1:] != law.pad
        count = targets.sum(axis=-1)
        pick = np.floor(gen.random(size=shape) * count).astype(np.int64)
        t = 1 + np.argmax(np.cumsum(targets, axis=-1) > pick[..., None], axis=-1)
    else:
        t = gen.integers(1, T, size=shape)
    return {"x": spans_of(caption, np.zeros_like(t), t, law.pad),
            "y": np.take_along_axis(caption, t[..., None], axis=-1)[..., 0].astype(np.int32)}


def train_text(law: CaptionLaw, records: Sequence[Records], k: int, config: TextConfig | None = None, *,
               seeds: Sequence[int] = (0,)) -> TextResult:
    """Train one text learner per seed on that seed's records (see the module docstring).

    Args:
        law: the caption law the records were drawn from (T, V, pad id).
        records: one set of records per seed, all of one size; ``config.captions_needed``
            captions each at least.
        k: embedding dimension.
        config: hyperparameters.
        seeds: non-negative integer seeds, one per set of records.

    Raises:
        ValueError: on a bad argument, or when the loss stops being finite (naming the step and seed).
    """
    import jax
    import jax.numpy as jnp

    start = time.perf_counter()
    config = config or TextConfig()
    seeds = check_seeds(seeds)
    if len(records) != len(seeds):
        raise ValueError(f"one set of records per seed: {len(records)} sets for {len(seeds)} seeds")
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    counts = {r.count for r in records}
    if len(counts) != 1:
        raise ValueError(f"every seed needs the same number of records, got {sorted(counts)}")
    need = config.captions_needed
    for r in records:
        if r.captions < need or r.tokens.shape[2] != law.length:
            raise ValueError(f"{config.label} need records of at least {need} caption(s) of "
                             f"{law.length} tokens, got {r.tokens.shape[1:]}")
    check_text_batches(config, law.length, 1, n_ids=law.vocab_size + 1, k=int(k))
    key = _Key(config.task, config.objective, Optimiser.of(config), float(config.lam))
    init_state, run, loss_of = _runner(key)
    stacked = _initial_params(law, int(k), config, seeds)
    directions = config.task != "ntp" and objective_record(config.objective).directions
    finals, curves = [], []
    for s, (seed, rec) in enumerate(zip(seeds, records)):  # one seed at a time (module docstring)
        gen = np.random.default_rng([seed, TEXT_PAIRS])

        def chunk_data(first: int, count: int) -> dict[str, Any]:
            data = {name: jnp.asarray(value) for name, value in draw_steps(rec, law, config, count, gen).items()}
            if directions:  # the objective's steps carry SIGReg directions (its record)
                data["dirs"] = jnp.asarray(np.array([draw_directions(int(k), config.num_directions, seed=seed, step=t)
                                                     for t in range(first, first + count)]))
            return data

        params = jax.tree.map(lambda a: a[s], stacked)
        driven = drive(lambda params, state, data: _one_seed(run(params, state, data)), params, init_state(params),
                       step_chunks(config.steps, config.log_every),
                       lambda steps: chunk_data(int(steps[0]), len(steps)), seeds=(seed,), lr=config.lr,
                       what=f"{config.label}: training")
        params = driven.params
        final = np.asarray(loss_of(params, jax.tree.map(lambda a: a[0], driven.upcoming)))
        check_losses(final.reshape(1, 1), np.array([config.steps]), (seed,), config.lr, what=f"{config.label}: training")
        logged = driven.logged + [config.steps]
        losses = [float(values[0, 0]) for values in driven.losses] + [float(final)]
        finals.append(params)
        curves.append(losses)
    params = jax.tree.map(lambda *leaves: np.stack([np.asarray(leaf) for leaf in leaves]), *finals)
    return TextResult(config, int(k), seeds, params, np.array(logged), np.array(curves),
                      records[0].count, records[0].tokens_seen(), time.perf_counter() - start)


def initial_text(law: CaptionLaw, k: int, config: TextConfig, *, seeds: Sequence[int] = (0,),
                 records: Sequence[Records] | None = None) -> TextResult:
    """The untrained encoders :func:`train_text` starts from (the same seeds give the same initialisation)."""
    import jax

    seeds = tuple(int(s) for s in seeds)
    params = _initial_params(law, int(k), config, seeds)
    count = records[0].count if records else 0
    tokens = records[0].tokens_seen() if records else 0
    return TextResult(config, int(k), seeds, jax.tree.map(np.asarray, params), np.array([0]),
                      np.full((len(seeds), 1), np.nan), count, tokens, 0.0)


def _one_seed(out: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    """One seed's chunk as the driver reads it: its losses on a leading seed axis, (1, L)."""
    params, state, values = out
    return params, state, values[None]


@functools.lru_cache(maxsize=8)
def _embedder(learner: str, weighted: bool = False):
    import jax

    def embed(params: Any, rows: Any, weights: Any = None) -> Any:
        if learner != "ntp":
            return token_apply(params, rows)
        h = token_apply(params["encoder"], rows)
        return (h * weights[..., None]).sum(axis=-2) if weighted else h.mean(axis=-2)

    return jax.jit(jax.vmap(embed, in_axes=(0, None, None)))


def caption_prefixes(tokens: np.ndarray, pad: int) -> np.ndarray:
    """The prefixes of lengths 1..T−1 of each caption (m, T): (m, T − 1, T), prefix i padded after i + 1 tokens."""
    tokens = np.asarray(tokens)
    T = tokens.shape[-1]
    keep = np.arange(T)[None, :] <= np.arange(T - 1)[:, None]  # (prefix, position)
    return np.where(keep[None], tokens[:, None, :], pad).astype(np.int32)


def embed_captions(result: TextResult, law: CaptionLaw, tokens: np.ndarray) -> np.ndarray:
    """Every seed's embedding of whole captions (m, T): (S, m, k) float64 (module docstring)."""
    import jax.numpy as jnp

    tokens = np.asarray(tokens, dtype=np.int32)
    ntp = result.config.task == "ntp"
    weighted = ntp and law.blanks  # the mean over the prefixes that have a target (a next position not blank)
    embed = _embedder(result.config.task, weighted)
    out = np.empty((len(result.seeds), tokens.shape[0], result.k))
    chunk = EMBED_CHUNK if not ntp else max(1, EMBED_CHUNK // law.length)
    for i in range(0, tokens.shape[0], chunk):
        rows = tokens[i:i + chunk]
        weights = None
        if weighted:
            targets = (rows[:, 1:] != law.pad).astype(np.float32)
            weights = jnp.asarray(targets / targets.sum(axis=1, keepdims=True))
        if ntp:
            rows = caption_prefixes(rows, law.pad)
        out[:, i:i + chunk] = np.asarray(embed(result.params, jnp.asarray(rows), weights), dtype=np.float64)
    return out
