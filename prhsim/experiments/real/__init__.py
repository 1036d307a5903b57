"""The bridge to real caption and image data (``prhsim real``), in PyTorch.

Library code here reads and writes files (the only part of prhsim besides the command line that
does): caption datasets (Karpathy-split JSON, JSON lines: :func:`read_captions`), feature files
(:func:`load_features`), a Flickr-format dataset exported from a prhsim world with its known image
representation (:func:`export_synthetic`), DINOv2 image features (:func:`encode_images`), BERT text
encoders trained with the simulator's objectives (:func:`train_real`) and their evaluation against
image features (:func:`evaluate_run`). torch and transformers are imported only where they are used.
"""

from prhsim.experiments.real._export import (
    FEATURES_NAME as FEATURES_NAME,
    IMAGE_DIR as IMAGE_DIR,
    JSON_NAME as JSON_NAME,
    ExportSummary as ExportSummary,
    export_synthetic as export_synthetic,
)
from prhsim.experiments.real._karpathy import (
    CaptionDataset as CaptionDataset,
    DataError as DataError,
    Record as Record,
    read_captions as read_captions,
    read_jsonl as read_jsonl,
    read_karpathy as read_karpathy,
)
from prhsim.experiments.real._feature_files import FeatureFileError as FeatureFileError, load_features as load_features
from prhsim.experiments.real._train import (
    TrainingDiverged as TrainingDiverged,
    TrainSummary as TrainSummary,
    dataset_json as dataset_json,
    train_real as train_real,
)
from prhsim.experiments.real._eval import evaluate_run as evaluate_run
from prhsim.experiments.real._image_features import encode_images as encode_images
from prhsim.experiments.real._parquet import (
    StreamStats as StreamStats,
    shard_slots as shard_slots,
    stream_records as stream_records,
)
