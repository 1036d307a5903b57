"""``prhsim real align --unpaired A B``: the map between two encoders' features without a single pair (docs/theory.md §9).

Each feature file (any format ``prhsim prh`` reads; with layers, the last one) is centred and
reduced to its top ``dim`` principal components, whitened: ``y = (x − m) V_dim Λ_dim^{-1/2}``. The
orthogonal map between the two whitened spaces is then found without pairs:

* ``iterative`` (default): :func:`prhsim.metrics.iterative_match` on the features alone (nearest
  neighbours ↔ Procrustes from several starts, kept by the chamfer distance), on at most
  ``FIT_ROWS`` random rows of each file (the scores use every row);
* ``spectral``: :func:`prhsim.metrics.spectral_match`, which also needs each encoder's own positive
  pairs (``pairs_a``, ``pairs_b``: (P, 2, D) features of two views of one input).

Evaluation only (the map never sees it): with ``paired`` the rows of A and B are the same inputs,
scored by top-1/top-5 retrieval through the map (:func:`prhsim.metrics.mapped_retrieval`); with
labels (one integer per row of each file, e.g. ImageNet classes for images and for their class
names' text), a row of A is right at top-k when one of its k nearest rows of B has its label.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from prhsim.io import atomic_file
from prhsim.real._eval import image_features
from prhsim.real.data import DataError

#: The iterative search reads at most this many rows of each file (its cost grows about quadratically).
FIT_ROWS = 2000


def pca_whitening(x: np.ndarray, dim: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, P)`` with ``y = (x − mean) P`` the top-``dim`` principal components of x, whitened."""
    mean = x.mean(axis=0)
    values, vectors = np.linalg.eigh(np.cov(x - mean, rowvar=False).reshape(x.shape[1], x.shape[1]))
    order = np.argsort(values)[::-1][:dim]
    if values[order[-1]] <= 1e-12 * max(values[order[0]], 1e-300):
        raise DataError(f"{name}: the features span fewer than {dim} dimensions (--dim {dim} is too many)")
    return mean, vectors[:, order] / np.sqrt(values[order])


def _label_accuracy(ya: np.ndarray, yb: np.ndarray, labels_a: np.ndarray, labels_b: np.ndarray,
                    ks: tuple[int, ...], block: int = 1024) -> dict[int, float]:
    """Fraction of a-rows whose label is among the labels of their k nearest b-rows (Euclidean), in row blocks."""
    top = min(max(ks), yb.shape[0])
    key_sq = np.sum(yb * yb, axis=1)
    hits = {k: 0 for k in ks}
    for start in range(0, ya.shape[0], block):
        d = key_sq[None, :] - 2 * ya[start:start + block] @ yb.T
        near = np.argpartition(d, top - 1, axis=1)[:, :top] if top < yb.shape[0] else np.tile(np.arange(top), (d.shape[0], 1))
        near = np.take_along_axis(near, np.argsort(np.take_along_axis(d, near, axis=1), axis=1, kind="stable"), axis=1)
        for k in ks:
            hits[k] += int(np.sum(np.any(labels_b[near[:, :k]] == labels_a[start:start + block, None], axis=1)))
    return {k: hits[k] / ya.shape[0] for k in ks}


def align_unpaired(features_a: Path | str, features_b: Path | str, *, dim: int = 16,
                   method: Literal["iterative", "spectral"] = "iterative", pairs_a: Path | str | None = None,
                   pairs_b: Path | str | None = None, paired: bool = False, labels_a: Path | str | None = None,
                   labels_b: Path | str | None = None, starts: int = 16, out: Path | str | None = None,
                   seed: int = 0) -> dict[str, Any]:
    """The pair-free map between two feature files, and its scores when pairs or labels are given (module docstring).

    Writes ``out`` (.npz) when given: ``mean_a``, ``proj_a``, ``mean_b``, ``proj_b`` (each file's PCA whitening,
    ``y = (x − mean) proj``), ``map`` and ``offset`` (``y_b ≈ y_a @ map + offset``) and ``rotation`` (the
    orthogonal map between the estimator's whitened coordinates).

    Raises:
        DataError: an unreadable file, rows that do not match, too many dimensions, a missing pair file.
    """
    from prhsim.metrics import iterative_match, mapped_retrieval, spectral_match

    xa, xb = image_features(features_a), image_features(features_b)  # any encoder's features, in any format
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1 or dim > min(xa.shape[1], xb.shape[1]):
        raise DataError(f"--dim must be an integer from 1 to {min(xa.shape[1], xb.shape[1])} (the smaller feature "
                        f"width), got {dim!r}")
    mean_a, proj_a = pca_whitening(xa, dim, str(features_a))
    mean_b, proj_b = pca_whitening(xb, dim, str(features_b))
    ya, yb = (xa - mean_a) @ proj_a, (xb - mean_b) @ proj_b
    if method == "spectral":
        if pairs_a is None or pairs_b is None:
            raise DataError("method 'spectral' needs each encoder's own positive pairs (--pairs-a and --pairs-b: "
                            "(P, 2, D) features of two views of one input)")
        pa, pb = (_pair_features(path, name, width, mean, proj) for path, name, width, mean, proj in
                  ((pairs_a, "--pairs-a", xa.shape[1], mean_a, proj_a), (pairs_b, "--pairs-b", xb.shape[1], mean_b, proj_b)))
        result = spectral_match(ya, pa, yb, pb)
        extra = {"identifiable": result.identifiable, "ambiguities": list(result.ambiguities)}
    elif method == "iterative":
        gen = np.random.default_rng(seed)  # the search reads at most FIT_ROWS rows of each file; scores use all
        fit_a = ya if ya.shape[0] <= FIT_ROWS else ya[gen.choice(ya.shape[0], FIT_ROWS, replace=False)]
        fit_b = yb if yb.shape[0] <= FIT_ROWS else yb[gen.choice(yb.shape[0], FIT_ROWS, replace=False)]
        result = iterative_match(fit_a, fit_b, starts=starts, rng=gen)
        extra = {"criterion": result.criterion, "chosen_start": result.chosen}
    else:
        raise DataError(f"method must be 'iterative' or 'spectral', got {method!r}")
    report: dict[str, Any] = {"features_a": str(features_a), "features_b": str(features_b), "rows_a": xa.shape[0],
                              "rows_b": xb.shape[0], "dim": dim, "method": method, **extra}
    linear, offset = _affine(result)
    if paired:
        if xa.shape[0] != xb.shape[0]:
            raise DataError(f"--paired needs the same rows in both files, got {xa.shape[0]} and {xb.shape[0]}")
        recall = mapped_retrieval(result, ya, yb, ks=(1, 5))
        report |= {"r1_a_to_b": recall.a_to_b[1], "r5_a_to_b": recall.a_to_b[5], "r1_b_to_a": recall.b_to_a[1],
                   "r5_b_to_a": recall.b_to_a[5], "chance_r1": 1.0 / xa.shape[0]}
    if (labels_a is None) != (labels_b is None):
        raise DataError("labels are scored in pairs: give both --labels-a and --labels-b")
    if labels_a is not None:
        la, lb = _labels(labels_a, xa.shape[0]), _labels(labels_b, xb.shape[0])
        accuracy = _label_accuracy(ya @ linear + offset, yb, la, lb, (1, 5))
        report |= {"top1_accuracy": accuracy[1], "top5_accuracy": accuracy[5]}
    if out is not None:
        with atomic_file(Path(out)) as tmp:
            with open(tmp, "wb") as handle:
                np.savez(handle, mean_a=mean_a, proj_a=proj_a, mean_b=mean_b, proj_b=proj_b, map=linear,
                         offset=offset, rotation=result.map)
        report["out"] = str(out)
    return report


def _affine(result) -> tuple[np.ndarray, np.ndarray]:
    """The estimator's map on the PCA coordinates as ``y_b ≈ y_a @ map + offset`` (it re-whitens its inputs:
    ``colour_b(whiten_a(y) Q)``, nearly ``y Q`` since the PCA coordinates are whitened already)."""
    linear = result.whitening_a.whitener @ result.map @ result.whitening_b.colourer
    return linear, result.whitening_b.mean - result.whitening_a.mean @ linear


def _pair_features(path: Path | str, name: str, width: int, mean: np.ndarray, proj: np.ndarray) -> np.ndarray:
    try:
        pairs = np.load(path)
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a .npy array ({str(exc).splitlines()[0]})") from None
    if pairs.ndim != 3 or pairs.shape[1] != 2 or pairs.shape[2] != width:
        raise DataError(f"{path}: {name} must hold (P, 2, {width}) features of positive pairs, got {pairs.shape}")
    return (np.asarray(pairs, dtype=np.float64) - mean) @ proj


def _labels(path: Path | str, rows: int) -> np.ndarray:
    try:
        labels = np.load(path)
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a .npy array of labels ({str(exc).splitlines()[0]})") from None
    if labels.shape != (rows,):
        raise DataError(f"{path}: expected one label per row, shape ({rows},), got {labels.shape}")
    if np.issubdtype(labels.dtype, np.integer) or labels.dtype == bool:
        return labels
    floating = np.issubdtype(labels.dtype, np.floating)
    whole = np.isfinite(labels) & (labels == np.round(labels)) if floating else np.zeros(labels.shape, dtype=bool)
    if not np.all(whole):  # 3.0 is class 3; 3.7, nan or a string is no class
        raise DataError(f"{path}: labels must be integer classes, got {labels.dtype} values such as "
                        f"{labels[~whole][0]!r}")
    return labels.astype(np.int64)
