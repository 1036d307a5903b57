"""The bridge to real caption and image data (``prhsim real``), in PyTorch.

Library code here reads and writes files, environment variables and forks data-loader workers (the
only part of prhsim besides the command line that does): caption datasets (Karpathy-split JSON, JSON
lines: :func:`read_captions`; the readers of every data format: :mod:`prhsim.real.data`), a
Flickr-format dataset exported from a prhsim world with its known image representation
(:func:`export_synthetic`), DINOv2 image features (:func:`encode_images`), BERT text encoders trained
with the simulator's objectives (:func:`train_real`) and their evaluation against image features
(:func:`evaluate_run`), PRH feature files from any local Hugging Face checkpoint
(:func:`extract_features`), maps between encoders found without pairs (:func:`align_unpaired`)
and the GPU smoke test (:func:`smoke`); the settings of every ``prhsim real`` command
(:class:`RealTrainSettings`, :class:`ExportSettings`) live beside them. Nothing outside ``prhsim.real`` and
``prhsim.cli`` imports it. torch and transformers are imported only where they are used: ``import
prhsim.real`` stays free of them (the names of :data:`_LAZY` load their modules on first use).
"""

from prhsim.real._export import (
    FEATURES_NAME as FEATURES_NAME,
    IMAGE_DIR as IMAGE_DIR,
    JSON_NAME as JSON_NAME,
    ExportPlan as ExportPlan,
    ExportSummary as ExportSummary,
    export_synthetic as export_synthetic,
    check_export as check_export,
    export_cost as export_cost,
    plan_export as plan_export,
    write_export as write_export,
)
from prhsim.real.data import (
    CaptionDataset as CaptionDataset,
    DataError as DataError,
    Record as Record,
    StreamStats as StreamStats,
    dataset_json as dataset_json,
    parquet_shards as parquet_shards,
    read_captions as read_captions,
    read_jsonl as read_jsonl,
    read_karpathy as read_karpathy,
    shard_slots as shard_slots,
    stream_records as stream_records,
)
from prhsim.real._train import (
    TrainingDiverged as TrainingDiverged,
    TrainSummary as TrainSummary,
    train_real as train_real,
)
from prhsim.real._eval import evaluate_run as evaluate_run
from prhsim.real._image_features import encode_images as encode_images
from prhsim.real._extract import (
    ExtractSummary as ExtractSummary,
    cached_features as cached_features,
    check_extractable as check_extractable,
    extract_features as extract_features,
)
from prhsim.real._extract_cache import (
    data_digest as data_digest,
    features_key as features_key,
    shard_folder as shard_folder,
)
from prhsim.real._forward_cost import extraction_seconds as extraction_seconds, forward_flops as forward_flops
from prhsim.real._settings import ExportSettings as ExportSettings, RealTrainSettings as RealTrainSettings
from prhsim.real._plan import TrainingPlan as TrainingPlan, plan_training as plan_training
from prhsim.real._align import align_unpaired as align_unpaired
from prhsim.real._smoke import smoke as smoke

__all__ = [
    "CaptionDataset",
    "DataError",
    "ExportSettings",
    "ExtractSummary",
    "ExportPlan",
    "ExportSummary",
    "FEATURES_NAME",
    "IMAGE_DIR",
    "JSON_NAME",
    "RealTrainSettings",
    "TrainingPlan",
    "plan_training",
    "Record",
    "StreamStats",
    "TrainSummary",
    "TrainingDiverged",
    "align_unpaired",
    "dataset_json",
    "encode_images",
    "evaluate_run",
    "export_synthetic",
    "extract_features",
    "cached_features",
    "check_extractable",
    "forward_flops",
    "extraction_seconds",
    "features_key",
    "data_digest",
    "shard_folder",
    "check_export",
    "export_cost",
    "plan_export",
    "write_export",
    "has_checkpoint",
    "launched",
    "parquet_shards",
    "read_captions",
    "read_jsonl",
    "read_karpathy",
    "shard_slots",
    "smoke",
    "stream_records",
    "train_real",
]

#: Names whose modules import torch at module level, loaded on first use (``import prhsim.real`` stays light).
_LAZY = {"has_checkpoint": "prhsim.real._checkpoint", "launched": "prhsim.real._distributed"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'prhsim.real' has no attribute {name!r}")

