"""Settings of ``prhsim real`` (one strict pydantic model per subcommand)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from prhsim.config import GridSceneWorld, Settings, WorldConfig


class ExportSettings(Settings):
    """``prhsim real export-synthetic``: a Flickr-format dataset from a prhsim world.

    Attributes:
        world: a world with pixel and caption renderers (gridscene; default 4x4 grid, 2 objects).
        images: records; captions: sentences per image (each of its own wording).
        val, test: fractions of the images in the val and test splits.
        pixel_scale: each pixel becomes a square of this side (default: 224 px images).
        k: the pixel closed form's features ("auto": at its gap).
        seed: seeds the states, the lightings, the wordings and the splits.
    """

    world: WorldConfig = Field(default_factory=GridSceneWorld)
    images: int = Field(2000, ge=3, le=1_000_000)
    captions: int = Field(5, ge=1, le=100)
    val: float = Field(0.1, gt=0, lt=1)
    test: float = Field(0.1, gt=0, lt=1)
    pixel_scale: int | None = Field(None, ge=1, le=64)
    k: int | Literal["auto"] = "auto"
    seed: int = Field(0, ge=0, le=2**63 - 1)  # torch seeds are signed 64-bit integers

    @model_validator(mode="after")
    def _renderable(self) -> "ExportSettings":
        if self.world.kind != "gridscene":
            raise ValueError(f"export-synthetic needs a world with pixel and caption renderers (gridscene), "
                             f"got {self.world.kind}")
        if self.val + self.test >= 1:
            raise ValueError(f"val + test must leave images for training, got {self.val} + {self.test}")
        return self


class RealTrainSettings(Settings):
    """``prhsim real train``: a text encoder on a caption dataset, with the objectives of ``prhsim.objectives``.

    Attributes:
        data: the dataset: a folder holding one ``dataset_*.json`` (Karpathy split format) or
            ``*.jsonl``, that file itself, or parquet shards (a folder of ``*.parquet``, or one file),
            read as a stream (Recap-DataComp style).
        text_columns, id_column: the parquet columns whose texts are an image's captions (the
            views), and an optional integer id column.
        shuffle_buffer: records in the shuffle buffer of each parquet reader.
        tokenizer_records: parquet records the WordPiece vocabulary is built from (when no tokenizer is given).
        num_workers: data-loader worker processes building the batches (0: in the training process).
        learner: "jepa" (the JEPA objective on two views: LeJEPA's invariance + SIGReg) or "ntp"
            (next-token prediction with causal attention; no views; ``views="ntp"`` is refused, naming it).
        views: the JEPA learner's views: "good" (spans of different captions of an image) or "bad"
            (two spans of one caption).
        model: "tiny", "bert-s" or "bert-b", the size of a randomly initialised encoder (not used with ``weights``).
        weights: a local Hugging Face BERT checkpoint directory, or a sentence-transformers one (random init if
            None); its config.json sets the model's size (:mod:`prhsim.real._weights`).
        tokenizer: a local tokenizer.json or vocab.txt (None: the checkpoint's own ``weights/tokenizer.json`` when
            there is one, else WordPiece trained on the training captions, ``vocab_size`` tokens).
        max_length: tokens kept per caption.
        row_multiple: the views of a batch are packed in rows as long as the longest (rounded up to a
            multiple of 8), as many rows as they need rounded up to a multiple of this (few shapes for
            a compiled encoder).
        compile: "none" (eager), or a ``torch.compile`` mode for the encoder ("default",
            "reduce-overhead": CUDA graphs on a GPU, "max-autotune").
        steps, batch_size: optimiser steps and images per step (the global batch: under torchrun each
            of the W processes reads batch_size / W images).
        dropout: BERT's hidden and attention dropout.
        lr, weight_decay, warmup, clip: AdamW, linear warmup (a fraction of the steps) then cosine
            decay to 0, gradient clipping at this global norm.
        lam, num_directions, proj_dim: SIGReg's weight (λ·SIGReg + (1 − λ)·invariance), its
            directions M and the projector's output dimension (JEPA views).
        sigreg_views: "per_view" (SIGReg of each view, averaged: LeJEPA's minimal code) or "pooled" (one SIGReg
            of all views' rows: stable-pretraining's LeJEPA); docs/theory.md §7.
        features: the image features file for evaluation (default: the dataset folder's image_features.npy).
        checkpoint_every, log_every: steps between checkpoints and between metric lines.
        tensorboard: also log the metrics to ``RUN/tensorboard`` when the tensorboard package is installed.
        device: "auto" (CUDA when available), "cpu" or "cuda".
        seed: seeds the initialisation, the batches, the views and the directions.
    """

    data: str
    learner: Literal["jepa", "ntp"] = "jepa"
    views: Literal["good", "bad"] = "good"
    model: Literal["tiny", "bert-s", "bert-b"] = "bert-s"
    weights: str | None = None
    tokenizer: str | None = None
    vocab_size: int = Field(8192, ge=16, le=1_000_000)
    max_length: int = Field(64, ge=4, le=512)
    row_multiple: int = Field(8, ge=1, le=4096)
    compile: Literal["none", "default", "reduce-overhead", "max-autotune"] = "none"
    steps: int = Field(1000, ge=1)
    batch_size: int = Field(256, ge=2)
    dropout: float = Field(0.1, ge=0, lt=1)
    lr: float = Field(5e-4, gt=0)
    weight_decay: float = Field(0.05, ge=0)
    warmup: float = Field(0.1, ge=0, lt=1)
    clip: float = Field(1.0, gt=0)
    lam: float = Field(0.02, ge=0, lt=1)
    num_directions: int = Field(256, ge=1)
    proj_dim: int = Field(128, ge=1)
    sigreg_views: Literal["per_view", "pooled"] = "per_view"
    features: str | None = None
    text_columns: list[str] = Field(default_factory=lambda: ["org_caption", "re_caption"], min_length=1)
    id_column: str | None = None
    shuffle_buffer: int = Field(10_000, ge=1)
    tokenizer_records: int = Field(100_000, ge=1)
    num_workers: int = Field(0, ge=0, le=256)
    tensorboard: bool = True
    checkpoint_every: int = Field(100, ge=1)
    log_every: int = Field(10, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    seed: int = Field(0, ge=0, le=2**63 - 1)  # torch seeds are signed 64-bit integers

    @model_validator(mode="before")
    @classmethod
    def _ntp_is_a_learner(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("views") == "ntp":
            raise ValueError("views='ntp': next-token prediction is a learner, not a view; use learner='ntp' "
                             "(--learner ntp)")
        return data

    @model_validator(mode="after")
    def _views_belong_to_jepa(self) -> "RealTrainSettings":
        if self.learner == "ntp" and self.views != "good":
            raise ValueError(f"views={self.views!r} applies to the jepa learner; next-token prediction (learner='ntp') "
                             "has no views")
        return self

    @property
    def views_used(self) -> str | None:
        """The views the run trains on: ``views`` for the JEPA learner, None for next-token prediction."""
        return None if self.learner == "ntp" else self.views

    @property
    def task(self) -> Literal["good", "bad", "ntp"]:
        """What a batch holds: pairs of good or of bad views (the JEPA learner), or captions (next-token prediction)."""
        return "ntp" if self.learner == "ntp" else self.views

    @property
    def label(self) -> str:
        """The run's training in a few words: "good views", "bad views" or "next-token prediction"."""
        return "next-token prediction" if self.learner == "ntp" else f"{self.views} views"
