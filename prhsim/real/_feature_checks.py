"""The image features a run reads (``real train --features``, ``real eval``, ``real align``): one row per image of the
dataset, finite, and with spread enough for the alignment metrics; each problem a one-line DataError naming the
file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from prhsim.io import FeatureFileError, load_features
from prhsim.real.data import DataError


def image_features(path: Path | str, images: int | None = None) -> np.ndarray:
    """The features in ``path`` (their last layer), (N, D) float64, checked against the dataset's ``images`` rows
    when given; a file that cannot be read is a one-line DataError."""

    try:
        feats = load_features(path)
    except FeatureFileError as exc:
        raise DataError(str(exc)) from None
    if images is not None and feats.shape[0] != images:
        raise DataError(f"{path}: {feats.shape[0]} rows of image features, but the dataset has {images} images "
                        "(expected one row per image, in the dataset JSON's order)")
    return np.asarray(feats[:, -1], dtype=np.float64)


def check_spread(x: np.ndarray, what: str) -> None:
    """Refuse (N, D) features the alignment metrics are undefined on, in one DataError naming ``what``: every row
    equal, or values so large that the products of their centred sums of squares overflow float64 (CKA's norms)."""
    if np.all(x == x[:1]):
        raise DataError(f"{what}: zero variance (every row equal): the alignment metrics are undefined")
    with np.errstate(over="ignore", invalid="ignore"):
        centred = x - x.mean(axis=0)
        total = np.sum(centred * centred)
        fits = bool(np.isfinite(total * total))
    if not fits:
        raise too_large(x, what)


def too_large(x: np.ndarray, what: str) -> DataError:
    """The one-line DataError of features ``what`` whose products overflow float64, naming their largest value."""
    return DataError(f"{what}: values up to {np.max(np.abs(x)):.3g} are too large for float64 arithmetic (their "
                     "products overflow); rescale the features")
