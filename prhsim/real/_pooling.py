"""What ``prhsim prh extract`` pools: a Hugging Face model's kind, the pooling of its hidden states, the layers kept.

Model kinds and pooling (``pool="auto"``), as the public PRH code pools:

* **language models** (a config with a vocabulary and no image input: BERT-family encoders,
  GPT-2-style decoders): ``mean``, every hidden state averaged over the non-padding tokens (the
  attention mask). ``last-token`` (decoders only) takes the hidden state at the last non-padding
  token; ``cls`` the first token's.
* **vision encoders** (ViT, DINOv2, the CLIP and SigLIP vision towers, or a whole CLIP/SigLIP model,
  whose vision tower is used): ``cls``, the class token (position 0) of every hidden state; SigLIP
  has no class token, so its ``auto`` is ``mean`` over the patch tokens.
* anything else (an encoder-decoder such as T5 or BART, an audio model) is refused.

Layers: index i is ``hidden_states[i]`` as transformers returns it: 0 the embeddings, i the output of
block i (L + 1 states for L blocks). ``layers="all"`` keeps every one, ``"last"`` the last, or a list of
indices (negative ones count from the end).
"""

from __future__ import annotations

from typing import Sequence

from prhsim.real.data import DataError

#: Pooling choices: ``auto`` picks by model kind (module docstring).
POOLS = ("auto", "mean", "cls", "last-token")
#: Vision model types with a class token at position 0 of every hidden state.
CLS_VISION = ("vit", "dinov2", "dinov2_with_registers", "deit", "beit", "clip_vision_model", "clip", "data2vec-vision")
#: Vision model types without one (their ``auto`` pooling is ``mean``).
NO_CLS_VISION = ("siglip_vision_model", "siglip", "siglip2_vision_model", "siglip2")
#: Whole image-text models whose vision tower is used.
TOWERED = ("clip", "siglip", "siglip2")


def model_kind(config) -> str:
    """"text" or "vision" for a transformers config, or a DataError for a kind that cannot be pooled."""
    model_type = str(getattr(config, "model_type", ""))
    if getattr(config, "is_encoder_decoder", False):
        raise DataError(f"model type {model_type!r} is an encoder-decoder: prhsim prh extract pools encoders "
                        "(BERT, ViT, DINOv2, CLIP/SigLIP vision) and decoders (GPT-2 style), not seq2seq models")
    if model_type in CLS_VISION or model_type in NO_CLS_VISION:
        return "vision"
    if getattr(config, "vocab_size", None) and not hasattr(config, "num_channels"):
        return "text"
    raise DataError(f"model type {model_type!r} is neither a language model nor a known vision encoder "
                    f"({', '.join(CLS_VISION + NO_CLS_VISION)}): it cannot be pooled")


def is_decoder(config) -> bool:
    """Whether a language model attends causally (GPT-2 style, or a config with ``is_decoder``)."""
    if getattr(config, "is_decoder", False):
        return True
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

    kind = config.model_type
    return kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def pooled_config(config, kind: str):
    """The config of the transformer that is pooled: a towered model's vision tower, a text model's text config."""
    inner = config.vision_config if kind == "vision" and config.model_type in TOWERED else config
    if kind == "text" and hasattr(inner, "get_text_config"):
        inner = inner.get_text_config()
    return inner


def resolve_pool(pool: str, kind: str, config) -> str:
    """The pooling ``pool`` means for this model (``auto`` by kind; module docstring), or a DataError."""
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
    no_cls = kind == "vision" and config.model_type in NO_CLS_VISION
    if pool == "auto":
        return "mean" if kind == "text" or no_cls else "cls"
    if pool == "last-token" and (kind == "vision" or not is_decoder(config)):
        raise DataError(f"--pool last-token is for decoders; {config.model_type!r} is a "
                        f"{'vision encoder' if kind == 'vision' else 'bidirectional encoder'} (use mean or cls)")
    if pool == "cls" and no_cls:
        raise DataError(f"{config.model_type!r} has no class token: use --pool mean (or auto)")
    return pool


def parse_layers(spec: str | Sequence[int], count: int) -> tuple[int, ...]:
    """Hidden-state indices of ``spec`` ("all", "last", "i,j,..." or a list; negative counts from the end) among
    ``count`` hidden states, in the order given."""
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text == "all":
            return tuple(range(count))
        if text == "last":
            return (count - 1,)
        try:
            wanted = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"--layers must be all, last or comma-separated integers, got {spec!r}") from None
    else:
        wanted = [int(x) for x in spec]
    if not wanted:
        raise ValueError(f"--layers names no layer: {spec!r}")
    out = []
    for i in wanted:
        if not -count <= i < count:
            raise ValueError(f"--layers: index {i} is out of range for {count} hidden states "
                             f"(0 the embeddings .. {count - 1} the last block)")
        out.append(i % count)
    if len(set(out)) != len(out):
        raise ValueError(f"--layers names a layer twice: {spec!r}")
    return tuple(out)


def pool_hidden(hidden: Sequence, mask, pool: str, layers: Sequence[int]):
    """(B, len(layers), D) float32 from hidden states (each (B, T, D)) and the (B, T) attention mask (None: all
    tokens count)."""
    import torch

    states = [hidden[i].float() for i in layers]
    if pool == "cls":
        return torch.stack([h[:, 0] for h in states], dim=1)
    if mask is None:
        mask = torch.ones(states[0].shape[:2], dtype=torch.long, device=states[0].device)
    if pool == "mean":  # Σ_t m_t h_t / Σ_t m_t as one (1 x T)(T x D) product a row: no B x T x D temporary
        weight = mask.to(torch.float32)
        weight = (weight / weight.sum(1, keepdim=True).clamp_min(1.0)).unsqueeze(1)
        return torch.stack([torch.bmm(weight, h).squeeze(1) for h in states], dim=1)
    # last-token: the last position the mask keeps (works for left and right padding)
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    last = torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(1).values.clamp_min(0)
    rows = torch.arange(mask.shape[0], device=mask.device)
    return torch.stack([h[rows, last] for h in states], dim=1)
