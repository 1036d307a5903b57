"""A caption decoder trained on text alone: from a caption representation back to its tokens (docs/theory.md §5.1).

**Design: autoregressive, one MLP for every position.** The decoder reads a representation r (k)
and the tokens decoded so far, and gives the law of the next token:

    p_θ(x_t | r, x_{<t}) = softmax(mlp([r, onehot(x_{<t} padded to T), onehot(t)]))  over the V tokens,

(GELU MLP of :func:`prhsim.learners._encoders.mlp_apply`; the prefix is the caption's tokens at
positions < t and the pad id V elsewhere, read as the one-hot of every (position, token) pair).
It is trained by teacher forcing, minimising the cross-entropy averaged over the T positions of
captions drawn from the caption law (``z ~ p``, wording ``n ~ q``, r the representation's row of
the caption ``(z, n)``):

    L(θ) = − E_{z,n} (1/T) Σ_t log p_θ(x_t(z, n) | r(z, n), x_{<t}(z, n)),

and decodes greedily (``x̂_t = argmax p_θ(· | r, x̂_{<t})``, t = 0..T−1).

*Why not one softmax per position read off r alone.* A nuisance-free representation does not
see the wording, so the decoder can only learn ``p(x | z) = Σ_n q(n) 1[x = caption(z, n)]``. In
gridscene q is uniform over 8 wordings (synonym set x clause order x word order): each position's
marginal is a tie between wordings (the first token is "alpha" or "at" with one object, the
first object's name or the last's with two), and a per-position argmax mixes them into text of
no wording. Conditioning on the prefix makes the decoder commit to one wording at its first
token and continue it, so a greedy decode is a caption of the grammar (the most likely wording,
ties broken by the trained logits).

The captions are drawn inside the jitted loop (inverse CDF of the law ``p ⊗ q`` of every whole
caption), one ``lax.scan`` over the steps (:func:`prhsim.learners._optimiser.scan_steps`); the
optimiser is every learner's (:class:`prhsim.learners.Optimiser`).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from prhsim._budget import ensure_fits
from prhsim.learners._driver import drive
from prhsim.learners._encoders import mlp_apply, mlp_init
from prhsim.learners._optimiser import Optimiser, positive_int, scan_steps
from prhsim.worlds import CaptionLaw

#: Representations are decoded in chunks of this many rows.
DECODE_CHUNK = 4096


@dataclass(frozen=True, kw_only=True)
class DecoderConfig(Optimiser):
    """Hyperparameters of :func:`train_caption_decoder` (validated on construction): an
    :class:`prhsim.learners.Optimiser` (steps, lr, warmup, end_lr, weight_decay, clip, checked there) and
    the decoder's batch and widths.

    Attributes:
        steps: optimiser steps.
        batch_size: captions per step (each gives its T teacher-forced positions).
        lr, warmup, end_lr, weight_decay, clip: AdamW with linear warmup (a fraction of the steps)
            and cosine decay to ``end_lr·lr``, global-norm clipping (:class:`prhsim.learners.Optimiser`).
        hidden: the MLP's hidden widths.
    """

    lr: float = 3e-3
    batch_size: int = 64
    hidden: tuple[int, ...] = (128, 128)

    def __post_init__(self) -> None:
        super().__post_init__()  # steps, lr, warmup, end_lr, weight_decay, clip: checked once, for every learner
        if self.method != "adamw":
            raise ValueError("the caption decoder trains with method='adamw'; 'precond' preconditions a table on the exact "
                             "whitened loss")
        positive_int("batch_size", self.batch_size)
        hidden = tuple(self.hidden)
        if not hidden or any(isinstance(h, bool) or int(h) != h or h < 1 for h in hidden):
            raise ValueError(f"hidden must be one or more positive widths, got {self.hidden!r}")
        object.__setattr__(self, "hidden", tuple(int(h) for h in hidden))


class CaptionDecoder(NamedTuple):
    """A trained decoder (:func:`train_caption_decoder`).

    Attributes:
        config: the hyperparameters; seed: the seed of the init and of the drawn captions.
        k: the representation's dimension; length: T; vocab_size: V (the pad id is V).
        params: the MLP's parameters (numpy).
        loss: the mean training loss of each block of ``steps // 10`` steps (at least one step each).
        seconds: wall time of the training.
    """

    config: DecoderConfig
    seed: int
    k: int
    length: int
    vocab_size: int
    params: Any
    loss: np.ndarray
    seconds: float


def _inputs(r: Any, prefix: Any, t: Any, length: int, n_ids: int) -> Any:
    """``[r, onehot(prefix) flattened, onehot(t)]`` for r (…, k), prefix (…, T) and t (…,)."""
    import jax
    import jax.numpy as jnp

    hot = jax.nn.one_hot(prefix, n_ids, dtype=r.dtype).reshape(*prefix.shape[:-1], length * n_ids)
    return jnp.concatenate([r, hot, jax.nn.one_hot(t, length, dtype=r.dtype)], axis=-1)


def _logits(params: Any, r: Any, prefix: Any, t: Any, length: int, n_ids: int) -> Any:
    return mlp_apply(params, _inputs(r, prefix, t, length, n_ids))


@functools.lru_cache(maxsize=16)
def _trainer(config: DecoderConfig, length: int, vocab: int):
    """The jitted training loop: one scan over a block of steps, its losses (1, steps) and their mean."""
    import jax
    import jax.numpy as jnp

    T, n_ids = length, vocab + 1
    opt = Optimiser.of(config).build()
    keep = jnp.arange(T)[None, :] < jnp.arange(T)[:, None]  # (t, position): position < t
    positions = jnp.arange(T)

    def loss(params: Any, r: Any, tokens: Any) -> Any:
        # r (B, k), tokens (B, T): every position t of every caption, its prefix padded from t on
        prefix = jnp.where(keep[None], tokens[:, None, :], vocab)  # (B, T, T)
        rr = jnp.broadcast_to(r[:, None, :], (r.shape[0], T, r.shape[1]))
        logits = _logits(params, rr, prefix, jnp.broadcast_to(positions, (r.shape[0], T)), T, n_ids)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[..., None], axis=-1))

    def drawn_loss(params: Any, key: Any, table: Any, captions: Any, cdf: Any) -> Any:
        """The loss on the batch of captions that ``key`` draws (inverse CDF of the caption law)."""
        rows = jnp.searchsorted(cdf, jax.random.uniform(key, (config.batch_size,)) * cdf[-1], side="right")
        rows = jnp.minimum(rows, cdf.shape[0] - 1)
        return loss(params, table[rows], captions[rows])

    steps = scan_steps(drawn_loss, opt)

    def run(params: Any, state: Any, keys: Any, table: Any, captions: Any, cdf: Any) -> tuple[Any, Any, Any]:
        params, state, values = steps(params, state, keys, table, captions, cdf)
        return params, state, (values[None], values.mean())

    return jax.jit(opt.init), jax.jit(run)


def check_decoder(config: DecoderConfig, law: CaptionLaw, k: int) -> None:
    """Refuse (:class:`prhsim._budget.ResourceError`) a decoder that cannot fit, before it is built: per step the
    MLP's input ``(B, T, k + T·(V+1) + T)`` and every layer's activations, float32, kept for the backward pass with
    their gradients (3 copies), and the parameters with AdamW's moments, the gradient and the update (5 copies)."""
    T, V = law.length, law.vocab_size
    widths = (float(k + T * (V + 1) + T), *map(float, config.hidden), float(V))
    params = sum(a * b + b for a, b in zip(widths, widths[1:]))
    activations = float(config.batch_size) * T * sum(widths)
    ensure_fits(4.0 * (5 * params + 3 * activations),
                f"the caption decoder ({config.batch_size:,} captions x {T} positions per step, widths "
                f"{' x '.join(f'{w:,.0f}' for w in widths)})", "lower decoder_batch (or the decoder's hidden widths)")


def train_caption_decoder(law: CaptionLaw, features: np.ndarray, config: DecoderConfig | None = None, *,
                          seed: int = 0) -> CaptionDecoder:
    """Train the decoder (module docstring) on captions drawn from ``law``, read through ``features``.

    Args:
        law: the caption law (its p, q, T, V and every whole caption).
        features: the caption representation of every whole caption ``z·|N| + n``, (|Z|·|N|, k).
        config: hyperparameters.
        seed: a non-negative integer: the init (``jax.random.key(seed)``) and the drawn captions.

    Raises:
        ValueError: on a bad argument, or when the loss stops being finite.
    """
    import jax
    import jax.numpy as jnp

    start = time.perf_counter()
    config = config or DecoderConfig()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    n_z, n_n = law.n_states, law.modality.n_nuisance
    F = np.asarray(features, dtype=np.float64)
    if F.ndim != 2 or F.shape[0] != n_z * n_n or F.shape[1] < 1:
        raise ValueError(f"the caption representation needs one row per whole caption ({n_z * n_n:,}), "
                         f"got shape {F.shape}")
    if not np.all(np.isfinite(F)):
        raise ValueError("the caption representation is not finite")
    units = np.arange(n_z * n_n)
    captions = law.captions(units // n_n, units % n_n)
    T, V, k = law.length, law.vocab_size, int(F.shape[1])
    check_decoder(config, law, k)
    blocks = min(10, config.steps)
    init_state, run = _trainer(config, T, V)
    key, sub = jax.random.split(jax.random.key(int(seed)))
    params = mlp_init(sub, k + T * (V + 1) + T, V, config.hidden)
    cdf = jnp.asarray(np.cumsum(np.outer(law.p, law.q).ravel()), dtype=jnp.float32)
    table, tokens = jnp.asarray(F, dtype=jnp.float32), jnp.asarray(captions)
    bounds = np.linspace(0, config.steps, blocks + 1).round().astype(int)
    chunks = [np.arange(a, b) for a, b in zip(bounds, bounds[1:])]
    means = []

    def block(params: Any, state: Any, keys: Any) -> tuple[Any, Any, Any]:
        params, state, (values, mean) = run(params, state, keys, table, tokens, cdf)
        means.append(mean)
        return params, state, values

    def keys_of(steps: np.ndarray) -> Any:  # block b's keys: fold_in(key, b) split once per step
        b = int(np.searchsorted(bounds, steps[0], side="right")) - 1
        return None if b >= len(chunks) else jax.random.split(jax.random.fold_in(key, b), len(steps))

    params = drive(block, params, init_state(params), chunks, keys_of, seeds=(int(seed),), lr=config.lr,
                   what="decoder training").params
    return CaptionDecoder(config, int(seed), k, T, V, jax.tree.map(np.asarray, params),
                          np.array([float(mean) for mean in means]),
                          time.perf_counter() - start)


@functools.lru_cache(maxsize=16)
def _greedy(length: int, vocab: int):
    import jax
    import jax.numpy as jnp

    def decode(params: Any, r: Any) -> Any:
        m = r.shape[0]

        def body(t: Any, prefix: Any) -> Any:
            logits = _logits(params, r, prefix, jnp.full(m, t), length, vocab + 1)
            return prefix.at[:, t].set(jnp.argmax(logits, axis=-1).astype(prefix.dtype))

        return jax.lax.fori_loop(0, length, body, jnp.full((m, length), vocab, dtype=jnp.int32))

    return jax.jit(decode)


def decode_captions(decoder: CaptionDecoder, representations: np.ndarray) -> np.ndarray:
    """Greedy decodes of rows of representations (m, k): token ids (m, T), int32."""
    import jax.numpy as jnp

    R = np.asarray(representations, dtype=np.float64)
    if R.ndim != 2 or R.shape[1] != decoder.k:
        raise ValueError(f"the decoder reads representations of {decoder.k} features, got shape {R.shape}")
    if not np.all(np.isfinite(R)):
        raise ValueError("the representations to decode are not finite")
    decode = _greedy(decoder.length, decoder.vocab_size)
    out = np.empty((R.shape[0], decoder.length), dtype=np.int32)
    for i in range(0, R.shape[0], DECODE_CHUNK):
        out[i:i + DECODE_CHUNK] = np.asarray(decode(decoder.params, jnp.asarray(R[i:i + DECODE_CHUNK],
                                                                                 dtype=jnp.float32)))
    return out
