"""Text encoders of ``prhsim real``: transformers' BERT, a projector head, and the next-token twin.

* ``tiny`` (2 layers, width 64, 2 heads; for tests and CPU runs), ``bert-s`` (12 layers, width 384,
  6 heads, 33M parameters with a 30k vocabulary) and ``bert-b`` (12 layers, width 768, 12 heads);
  initialised at random, or from a local Hugging Face BERT checkpoint directory (:mod:`._weights`:
  its config.json sets the size; loaded silently, with causal attention for next-token prediction;
  a sentence-transformers directory's Normalize module L2-normalises the features evaluation reads,
  not the projector's input); a run
  saves the model's configuration, so evaluation rebuilds the same model without the checkpoint
  directory.
* JEPA learners: ``BertModel`` (bidirectional), the mean of the last hidden states over the real
  tokens, then a projector (Linear, GELU, Linear) into the space the objective sees.
* Next-token prediction: the same configuration with causal attention (``is_decoder``) and BERT's
  LM head; its loss is :func:`prhsim.objectives.next_token_cross_entropy` on the head's transformed
  states and decoder weights (the objective the simulator checks, not a re-implementation).
* Every learner is evaluated on its backbone: the mean of the last hidden states over the real
  tokens (the platonic-representation protocol's pooling), before any projector.
* Training reads packed rows (:mod:`._packing`): many views per row, each attending to itself with
  its own position ids, pooled by segment; the same function of each view as reading it alone.
  Each view carries the tokenizer's special tokens (:mod:`._batches`) and is pooled over all its
  tokens, those included: for a sentence-transformers checkpoint, a whole caption's pooled state is
  its sentence embedding (the mean over the attention mask of ``[CLS] … [SEP]``) before Normalize.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from torch import nn

from prhsim.real._packing import attention_mask, next_token_targets, segment_mean
from prhsim.real.data import DataError
from prhsim.objectives import next_token_cross_entropy

ModelKind = Literal["tiny", "bert-s", "bert-b"]
#: The attention backend: PyTorch's scaled_dot_product_attention reads the packed rows' boolean block masks
#: (transformers' eager BERT attention would add them as numbers, and flash attention would ignore them).
ATTENTION = "sdpa"
#: (hidden size, layers, heads, intermediate size) of each model kind.
SIZES: dict[str, tuple[int, int, int, int]] = {"tiny": (64, 2, 2, 128), "bert-s": (384, 12, 6, 1536),
                                               "bert-b": (768, 12, 12, 3072)}


def quiet_transformers() -> None:
    """Turn off transformers' progress bars (loading and saving weights), which would interleave with prhsim's own."""
    from transformers.utils import logging

    logging.disable_progress_bar()


def _config(kind: str, vocab_size: int, max_length: int, causal: bool, dropout: float):
    from transformers import BertConfig

    hidden, layers, heads, inter = SIZES[kind]
    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                      intermediate_size=inter, max_position_embeddings=max(64, max_length), is_decoder=causal,
                      pad_token_id=0, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                      attn_implementation=ATTENTION)


class TextEncoder(nn.Module):
    """A BERT text encoder with a projector (JEPA) or an LM head (next-token prediction)."""

    def __init__(self, kind: ModelKind, vocab_size: int, max_length: int, *, causal: bool, proj_dim: int = 128,
                 weights: Path | None = None, config: dict | None = None, dropout: float = 0.1,
                 normalize: bool = False) -> None:
        super().__init__()
        from transformers import BertLMHeadModel, BertModel

        quiet_transformers()

        if kind not in SIZES:
            raise ValueError(f"model must be one of {tuple(SIZES)}, got {kind!r}")
        self.causal = causal
        self.normalize = normalize
        if weights is not None:
            from prhsim.real._weights import Checkpoint, load_pretrained, read_checkpoint

            checkpoint = weights if isinstance(weights, Checkpoint) else read_checkpoint(weights)
            where = checkpoint.path
            self.normalize = checkpoint.normalize
            positions = checkpoint.config.get("max_position_embeddings", 0)
            if positions < max_length:
                raise DataError(f"{where}: the checkpoint has {positions} positions, fewer than max_length {max_length}")
            cls = BertLMHeadModel if causal else BertModel
            extra = {} if causal else {"add_pooling_layer": False}  # as built at random: no unused pooler
            self.model = load_pretrained(cls, checkpoint, new=("cls.",), is_decoder=causal,
                                         hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                                         attn_implementation=ATTENTION, **extra)
            if self.model.config.is_decoder != causal:  # a bidirectional model would see the token it predicts
                raise DataError(f"{where}: the checkpoint could not be loaded with causal={causal} attention")
            if self.model.config.vocab_size != vocab_size:
                raise DataError(f"{where}: the checkpoint's vocabulary has {self.model.config.vocab_size} tokens, "
                                f"the tokenizer {vocab_size}: give the checkpoint's own tokenizer")
        else:
            from transformers import BertConfig

            config = (BertConfig.from_dict(config, attn_implementation=ATTENTION) if config is not None
                      else _config(kind, vocab_size, max_length, causal, dropout))
            self.model = BertLMHeadModel(config) if causal else BertModel(config, add_pooling_layer=False)
        hidden = self.model.config.hidden_size
        self.projector = None if causal else nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(),
                                                           nn.Linear(hidden, proj_dim))

    @property
    def backbone(self):
        return self.model.bert if self.causal else self.model

    def features(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The mean of the last hidden states over the real tokens (L2-normalised for a sentence-transformers
        checkpoint with a Normalize module): (B, hidden)."""
        hidden = self.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return self._normalized((hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0))

    def _normalized(self, pooled: torch.Tensor) -> torch.Tensor:
        """The pooled features, L2-normalised when the checkpoint's sentence-transformers modules say so."""
        return nn.functional.normalize(pooled, dim=-1) if self.normalize else pooled

    def embed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The projector's output on the pooled features (JEPA learners), from padded rows: (B, proj_dim)."""
        return self.projector(self.features(ids, mask))

    def compile_training(self, mode: str = "default") -> None:
        """Compile the encoder of the training call (:meth:`encode_packed`) with ``torch.compile`` (``mode``:
        "default", "reduce-overhead" or "max-autotune", the last two with CUDA graphs on a GPU), one graph per
        packed shape (rows, row length; ``dynamic=False``); the parameters, and so the checkpoints, stay the
        module's own. The next-token loss that follows stays eager (it selects its targets on the host)."""
        import torch._dynamo

        limit = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
        setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 64))
        self._encode = torch.compile(self.encode_packed, mode=mode, dynamic=False)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, segments: torch.Tensor, count: int) -> torch.Tensor:
        """What the training objective reads (the call data-parallel training wraps), from ``count`` sequences packed
        in rows (:mod:`._packing`): the projector's output of each, (count, proj_dim) (JEPA learners), or the
        mean cross-entropy of every next token within a sequence (next-token prediction)."""
        encoded = getattr(self, "_encode", self.encode_packed)(ids, positions, segments, count)
        if not self.causal:
            return encoded
        head = self.model.cls.predictions
        valid = next_token_targets(segments).reshape(-1)
        states = encoded.reshape(-1, encoded.shape[-1])[valid]
        return next_token_cross_entropy(states, head.decoder.weight, ids[:, 1:].reshape(-1)[valid], head.bias)

    def encode_packed(self, ids: torch.Tensor, positions: torch.Tensor, segments: torch.Tensor,
                      count: int) -> torch.Tensor:
        """The encoder on packed rows: the projector's output of each sequence, (count, proj_dim) (JEPA learners),
        or the LM head's transformed states of every position but the last, (R, L − 1, hidden) (next-token
        prediction)."""
        if self.model.config._attn_implementation != ATTENTION:
            raise ValueError(f"packed rows need {ATTENTION!r} attention (boolean block masks), the model has "
                             f"{self.model.config._attn_implementation!r}")
        hidden = self._packed_states(ids, positions, segments)
        if not self.causal:
            return self.projector(segment_mean(hidden, segments, count))  # the projector reads the raw mean
        return self.model.cls.predictions.transform(hidden[:, :-1])

    def _packed_states(self, ids: torch.Tensor, positions: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        """The backbone's last hidden states on packed rows, each sequence attending to itself: (R, L, hidden)."""
        extra = {"use_cache": False} if self.causal else {}
        return self.backbone(input_ids=ids, attention_mask=attention_mask(segments, causal=self.causal),
                             position_ids=positions, **extra).last_hidden_state

    def pooled_packed(self, ids: torch.Tensor, positions: torch.Tensor, segments: torch.Tensor,
                      count: int) -> torch.Tensor:
        """What the projector reads in training: the mean of the last hidden states over each sequence's tokens
        (special tokens included), from packed rows, (count, hidden); not normalised."""
        return segment_mean(self._packed_states(ids, positions, segments), segments, count)

    def next_token_loss(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of every real next token given its prefix (causal attention), from padded rows (the
        reading :meth:`packed` must agree with)."""
        hidden = self.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
        head = self.model.cls.predictions
        valid = (mask[:, 1:] > 0).reshape(-1)
        states = head.transform(hidden[:, :-1]).reshape(-1, hidden.shape[-1])[valid]
        targets = ids[:, 1:].reshape(-1)[valid]
        return next_token_cross_entropy(states, head.decoder.weight, targets, head.bias)
