"""The time of a transformer's forward pass, as a rough class for the note before a long extraction or encoding.

A forward pass over ``tokens`` tokens in all costs about ``2 x blocks x (4D² + 2·D·I) x tokens`` float operations
(per block the four D x D attention projections and the MLP's two D x I matrices, a multiply and an add each; the
attention scores and the embeddings are left out), plus ``2·D·V x tokens`` for a decoder's logits over its
vocabulary V. :func:`extraction_seconds` divides by a rate measured with that count on whole extraction calls
(:data:`CPU_FORWARD_FLOPS`, :data:`CUDA_FORWARD_FLOPS`), so tokenizing, reading images and copying are inside it.
"""

from __future__ import annotations

#: Float operations per second of a whole extraction call by :func:`forward_flops`'s count, measured with it and
#: rounded down (``python benchmarks/bench_extract.py``): on this project's 2-core CPU in float32, quiet, 1.0e11 for a
#: random BERT-B (128 captions), 1.5e11 for a random DINOv2-B/14 (16 images), 8.2e10 for all-MiniLM-L6-v2 (512
#: captions) and 4.9e10 for the tiny random BERT (1,024 captions; its fixed costs weigh); on an H200 in bf16 DINOv2-S/14
#: read 12,000 images a second (1.3e14).
CPU_FORWARD_FLOPS, CUDA_FORWARD_FLOPS = 5e10, 1e14


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def forward_flops(config, tokens: float, *, logits: bool = False) -> float:
    """``2 x blocks x (4D² + 2·D·I) x tokens`` float operations of ``config``'s transformer over ``tokens`` tokens in
    all, plus ``2·D·V x tokens`` with ``logits`` (a decoder's head). Blocks, D and V are the config's
    ``num_hidden_layers``, ``hidden_size`` and ``vocab_size``; ``I`` is ``mlp_ratio x D`` where the config has a ratio
    (DINOv2), else its ``intermediate_size`` (BERT, ViT, CLIP, SigLIP) or ``n_inner`` (GPT-2), else ``4D``. A size
    the config does not give counts 0."""
    blocks, width = (getattr(config, name, None) for name in ("num_hidden_layers", "hidden_size"))
    blocks, width = (v if _positive(v) else 0 for v in (blocks, width))
    ratio = getattr(config, "mlp_ratio", None)
    sizes = [v for v in (getattr(config, "intermediate_size", None), getattr(config, "n_inner", None)) if _positive(v)]
    mlp = ratio * width if _positive(ratio) else (sizes[0] if sizes else 4 * width)
    vocab = getattr(config, "vocab_size", None) if logits else 0
    per_token = 2.0 * blocks * (4.0 * width * width + 2.0 * width * mlp) + 2.0 * width * (vocab if _positive(vocab) else 0)
    return per_token * float(tokens)


def extraction_seconds(flops: float, *, cuda: bool) -> float:
    """Seconds of ``flops`` (:func:`forward_flops`) at :data:`CUDA_FORWARD_FLOPS` or :data:`CPU_FORWARD_FLOPS`."""
    return flops / (CUDA_FORWARD_FLOPS if cuda else CPU_FORWARD_FLOPS)


def forward_notes(subject: str, seconds: float, config, *, inputs: int, noun: str, tokens: int,
                  model_type: str | None = None) -> list[str]:
    """The note before a forward pass of minutes or hours (:func:`prhsim._budget.time_notes`): ``this <subject> may take
    <class>: N <noun> of T tokens through <model type> (B blocks of width D) (about S s estimated; …)``."""
    from prhsim._budget import time_notes

    kind = model_type or getattr(config, "model_type", "the model")
    return time_notes(subject, seconds, f"{inputs:,} {noun} of {tokens:,} tokens through {kind} "
                                        f"({getattr(config, 'num_hidden_layers', '?')} blocks of width "
                                        f"{getattr(config, 'hidden_size', '?')})")
