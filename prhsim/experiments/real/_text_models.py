"""Text encoders of ``prhsim real``: transformers' BERT, a projector head, and the next-token twin.

* ``tiny`` (2 layers, width 64, 2 heads; for tests and CPU runs), ``bert-s`` (12 layers, width 384,
  6 heads, 33M parameters with a 30k vocabulary) and ``bert-b`` (12 layers, width 768, 12 heads);
  initialised at random, or from a local Hugging Face checkpoint directory (loaded with causal
  attention for next-token prediction); a run saves the model's configuration, so evaluation
  rebuilds the same model without the checkpoint directory.
* JEPA learners: ``BertModel`` (bidirectional), the mean of the last hidden states over the real
  tokens, then a projector (Linear, GELU, Linear) into the space the objective sees.
* Next-token prediction: the same configuration with causal attention (``is_decoder``) and BERT's
  LM head; its loss is :func:`prhsim.jepa.next_token_cross_entropy` on the head's transformed
  states and decoder weights (the objective the simulator checks, not a re-implementation).
* Every learner is evaluated on its backbone: the mean of the last hidden states over the real
  tokens (the platonic-representation protocol's pooling), before any projector.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from torch import nn

from prhsim.experiments.real._karpathy import DataError
from prhsim.jepa import next_token_cross_entropy

ModelKind = Literal["tiny", "bert-s", "bert-b"]
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
                      pad_token_id=0, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


class TextEncoder(nn.Module):
    """A BERT text encoder with a projector (JEPA) or an LM head (next-token prediction)."""

    def __init__(self, kind: ModelKind, vocab_size: int, max_length: int, *, causal: bool, proj_dim: int = 128,
                 weights: Path | None = None, config: dict | None = None, dropout: float = 0.1) -> None:
        super().__init__()
        from transformers import BertLMHeadModel, BertModel

        quiet_transformers()

        if kind not in SIZES:
            raise ValueError(f"model must be one of {tuple(SIZES)}, got {kind!r}")
        self.causal = causal
        if weights is not None:
            weights = Path(weights)
            if not (weights / "config.json").is_file():
                raise DataError(f"{weights}: not a Hugging Face checkpoint directory (expected config.json and weights)")
            cls = BertLMHeadModel if causal else BertModel
            extra = {} if causal else {"add_pooling_layer": False}  # as built at random: no unused pooler
            self.model = cls.from_pretrained(str(weights), local_files_only=True, is_decoder=causal,
                                             hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                                             **extra)
            if self.model.config.is_decoder != causal:  # a bidirectional model would see the token it predicts
                raise DataError(f"{weights}: the checkpoint could not be loaded with causal={causal} attention")
            if self.model.config.vocab_size != vocab_size:
                raise DataError(f"{weights}: the checkpoint's vocabulary has {self.model.config.vocab_size} tokens, "
                                f"the tokenizer {vocab_size}: give the checkpoint's own tokenizer")
        else:
            from transformers import BertConfig

            config = (BertConfig.from_dict(config) if config is not None
                      else _config(kind, vocab_size, max_length, causal, dropout))
            self.model = BertLMHeadModel(config) if causal else BertModel(config, add_pooling_layer=False)
        hidden = self.model.config.hidden_size
        self.projector = None if causal else nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(),
                                                           nn.Linear(hidden, proj_dim))

    @property
    def backbone(self):
        return self.model.bert if self.causal else self.model

    def features(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The mean of the last hidden states over the real tokens: (B, hidden)."""
        hidden = self.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)

    def embed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The projector's output on the pooled features (JEPA learners): (B, proj_dim)."""
        return self.projector(self.features(ids, mask))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """What the training objective reads (the call data-parallel training wraps): the projector's
        output (JEPA learners), or the next-token loss (next-token prediction)."""
        return self.next_token_loss(ids, mask) if self.causal else self.embed(ids, mask)

    def next_token_loss(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of every real next token given its prefix (causal attention)."""
        hidden = self.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
        head = self.model.cls.predictions
        valid = (mask[:, 1:] > 0).reshape(-1)
        states = head.transform(hidden[:, :-1]).reshape(-1, hidden.shape[-1])[valid]
        targets = ids[:, 1:].reshape(-1)[valid]
        return next_token_cross_entropy(states, head.decoder.weight, targets, head.bias)
