"""The readers of caption and image data that ``prhsim real`` and ``prhsim prh extract`` use, one module per format.

Records and errors (:mod:`._records`: :class:`Record`, :class:`CaptionDataset`, :class:`DataError`); the
Karpathy-split JSON of Flickr30k and COCO (:mod:`._karpathy`); JSON lines (:mod:`._jsonl`); parquet, streamed by
shard or read whole (:mod:`._parquet`); a dataset named by a path and read by its suffix (:mod:`._datasets`); the
image files of a folder or a dataset (:mod:`._images`). Nothing here imports torch; pyarrow is imported where
parquet is read. Every problem is a :class:`DataError` of one line naming the file.
"""

from prhsim.real.data._datasets import (
    dataset_json as dataset_json,
    read_captions as read_captions,
    read_texts as read_texts,
)
from prhsim.real.data._images import (
    IMAGE_SUFFIXES as IMAGE_SUFFIXES,
    image_folder as image_folder,
    image_paths as image_paths,
    looks_like_images as looks_like_images,
)
from prhsim.real.data._jsonl import read_jsonl as read_jsonl
from prhsim.real.data._karpathy import read_karpathy as read_karpathy
from prhsim.real.data._parquet import (
    StreamStats as StreamStats,
    parquet_shards as parquet_shards,
    shard_slots as shard_slots,
    stream_records as stream_records,
)
from prhsim.real.data._records import CaptionDataset as CaptionDataset, DataError as DataError, Record as Record

__all__ = [
    "CaptionDataset",
    "DataError",
    "IMAGE_SUFFIXES",
    "Record",
    "StreamStats",
    "dataset_json",
    "image_folder",
    "image_paths",
    "looks_like_images",
    "parquet_shards",
    "read_captions",
    "read_jsonl",
    "read_karpathy",
    "read_texts",
    "shard_slots",
    "stream_records",
]
