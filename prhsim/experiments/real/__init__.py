"""The bridge to real caption and image data (``prhsim real``): datasets, and the synthetic export that tests it.

Library code here reads and writes files (the only part of prhsim besides the command line that
does): Karpathy-split caption datasets (:func:`read_karpathy`) and a Flickr-format dataset
exported from a prhsim world with its known image representation (:func:`export_synthetic`).
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
