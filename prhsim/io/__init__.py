"""Files: a run's folder or one file written whole or not at all, figures as PNGs, and feature files read.

Writers stage into a temporary sibling and rename into place (:func:`staged_folder`,
:func:`atomic_file`), so an interrupted or failed command leaves nothing half-written;
:func:`check_out_folder` refuses an unusable output before any work. :func:`load_features`
reads the PRH benchmark's feature files (npy, safetensors, PRH ``.pt``) as N x L x D arrays.
"""

from prhsim.io._feature_files import (
    SUFFIXES as SUFFIXES,
    FeatureFileError as FeatureFileError,
    file_problem as file_problem,
    load_features as load_features,
)
from prhsim.io._files import (
    RUN_MARKER as RUN_MARKER,
    UMASK as UMASK,
    OutputError as OutputError,
    atomic_file as atomic_file,
    check_free_space as check_free_space,
    check_out_file as check_out_file,
    check_out_folder as check_out_folder,
    full_disk_error as full_disk_error,
    json_text as json_text,
    staged_folder as staged_folder,
    write_text_atomic as write_text_atomic,
)
from prhsim.io._png import DPI as DPI, new_figure as new_figure, save_png as save_png

__all__ = [
    "DPI",
    "RUN_MARKER",
    "SUFFIXES",
    "UMASK",
    "FeatureFileError",
    "OutputError",
    "atomic_file",
    "check_free_space",
    "check_out_file",
    "check_out_folder",
    "file_problem",
    "full_disk_error",
    "json_text",
    "load_features",
    "new_figure",
    "save_png",
    "staged_folder",
    "write_text_atomic",
]
