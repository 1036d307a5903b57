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

The iterative search says each start as it ends (``progress``), after a note when its estimate
(:func:`iterative_seconds`) is minutes or more (``notes``). Pair and label files are plain numeric .npy
arrays (nothing pickled); a file that is not, or features whose products overflow float64, is a one-line
DataError naming the option and the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from prhsim._types import as_progress
from prhsim.io import atomic_file
from prhsim.real._feature_checks import image_features, too_large
from prhsim.real.data import DataError

#: The iterative search reads at most this many rows of each file (its cost grows about quadratically).
FIT_ROWS = 2000
#: The most match/Procrustes rounds of one start (:func:`prhsim.metrics.iterative_match`'s default).
ITERATIONS = 50
#: Seconds per coordinate of one row-to-row distance in the iterative search (:func:`iterative_seconds`; scipy's cKDTree
#: queries degrade to a scan in 16 whitened dimensions of unstructured features). Measured with ``align_unpaired`` on
#: 64-wide random Gaussian rows, default dim 16 and starts 16, on a 2-CPU x86 machine (CPU time, one BLAS thread):
#: 7.0 s, 32 s and 83 s at 500, 1,000 and 1,500 rows a side, i.e. 0.52, 0.59 and 0.68 ns; rounded up, as the cost
#: grows with the rows (at most FIT_ROWS a side). Features with structure converge sooner: an upper estimate.
SECONDS_PER_DISTANCE = 0.8e-9


def pca_whitening(x: np.ndarray, dim: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, P)`` with ``y = (x − mean) P`` the top-``dim`` principal components of x, whitened; a DataError naming
    ``name`` when they do not exist (too few dimensions, or values whose squares overflow float64)."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean = x.mean(axis=0)
        cov = np.cov(x - mean, rowvar=False).reshape(x.shape[1], x.shape[1])
    if not np.all(np.isfinite(cov)):
        raise too_large(x, name)
    values, vectors = np.linalg.eigh(cov)
    order = np.argsort(values)[::-1][:dim]
    if values[order[-1]] <= 1e-12 * max(values[order[0]], 1e-300):
        raise DataError(f"{name}: the features span fewer than {dim} dimensions (--dim {dim} is too many)")
    return mean, vectors[:, order] / np.sqrt(values[order])


def iterative_seconds(rows_a: int, rows_b: int, dim: int, starts: int) -> float:
    """Estimated seconds of the iterative search on ``rows_a`` x ``rows_b`` rows in ``dim`` dimensions: its
    ``starts + dim + 1`` starts (with the moment starts) of at most :data:`ITERATIONS` rounds and the final criterion,
    each querying every row's nearest row on the other side, at :data:`SECONDS_PER_DISTANCE`."""
    return SECONDS_PER_DISTANCE * (starts + dim + 1) * (ITERATIONS + 1) * 2 * rows_a * rows_b * dim


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
                   seed: int = 0, progress: Callable[..., None] | None = None,
                   notes: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The pair-free map between two feature files, and its scores when pairs or labels are given (module docstring).

    Writes ``out`` (.npz) when given: ``mean_a``, ``proj_a``, ``mean_b``, ``proj_b`` (each file's PCA whitening,
    ``y = (x − mean) proj``), ``map`` and ``offset`` (``y_b ≈ y_a @ map + offset``) and ``rotation`` (the
    orthogonal map between the estimator's whitened coordinates). ``progress(message, done, total)`` is called
    at each stage and after each start of the iterative search; ``notes(line)`` once before that search where it
    may take minutes or hours (:func:`prhsim._budget.time_notes` of :func:`iterative_seconds`).

    Raises:
        DataError: an unreadable file, rows that do not match, too many dimensions, a missing pair file, values
            that are not finite or whose products overflow, a negative seed.
    """
    from prhsim._budget import time_notes
    from prhsim.metrics import mapped_retrieval, spectral_match

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"--seed must be a non-negative integer, got {seed!r}")
    say = as_progress(progress)  # nothing is said before the inputs are checked: a refusal stays one line
    xa, xb = image_features(features_a), image_features(features_b)  # any encoder's features, in any format
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1 or dim > min(xa.shape[1], xb.shape[1]):
        raise DataError(f"--dim must be an integer from 1 to {min(xa.shape[1], xb.shape[1])} (the smaller feature "
                        f"width), got {dim!r}")
    if isinstance(starts, bool) or not isinstance(starts, int) or starts < 1:
        raise DataError(f"--starts must be a positive integer, got {starts!r}")
    if paired and xa.shape[0] != xb.shape[0]:  # what only scores the map is checked before the search, too
        raise DataError(f"--paired needs the same rows in both files, got {xa.shape[0]} and {xb.shape[0]}")
    if (labels_a is None) != (labels_b is None):
        raise DataError("labels are scored in pairs: give both --labels-a and --labels-b")
    if labels_a is not None:
        la, lb = _labels(labels_a, "--labels-a", xa.shape[0]), _labels(labels_b, "--labels-b", xb.shape[0])
    mean_a, proj_a = pca_whitening(xa, dim, str(features_a))
    mean_b, proj_b = pca_whitening(xb, dim, str(features_b))
    ya, yb = (xa - mean_a) @ proj_a, (xb - mean_b) @ proj_b
    if method == "spectral":
        if pairs_a is None or pairs_b is None:
            raise DataError("method 'spectral' needs each encoder's own positive pairs (--pairs-a and --pairs-b: "
                            "(P, 2, D) features of two views of one input)")
        pa, pb = (_pair_features(path, name, width, mean, proj) for path, name, width, mean, proj in
                  ((pairs_a, "--pairs-a", xa.shape[1], mean_a, proj_a), (pairs_b, "--pairs-b", xb.shape[1], mean_b, proj_b)))
        say(f"spectral match of {dim} principal components")
        result = spectral_match(ya, pa, yb, pb)
        extra = {"identifiable": result.identifiable, "ambiguities": list(result.ambiguities)}
    elif method == "iterative":
        gen = np.random.default_rng(seed)  # the search reads at most FIT_ROWS rows of each file; scores use all
        fit_a = ya if ya.shape[0] <= FIT_ROWS else ya[gen.choice(ya.shape[0], FIT_ROWS, replace=False)]
        fit_b = yb if yb.shape[0] <= FIT_ROWS else yb[gen.choice(yb.shape[0], FIT_ROWS, replace=False)]
        if notes is not None:
            seconds = iterative_seconds(fit_a.shape[0], fit_b.shape[0], dim, starts)
            why = (f"{starts + dim + 1} starts of the iterative method on {fit_a.shape[0]:,} x {fit_b.shape[0]:,} rows "
                   f"in {dim} dimensions")
            for line in time_notes("search", seconds, why):
                notes(line)
        result = _iterative_match(fit_a, fit_b, starts, gen, say)
        extra = {"criterion": result.criterion, "chosen_start": result.chosen}
    else:
        raise DataError(f"method must be 'iterative' or 'spectral', got {method!r}")
    report: dict[str, Any] = {"features_a": str(features_a), "features_b": str(features_b), "rows_a": xa.shape[0],
                              "rows_b": xb.shape[0], "dim": dim, "method": method, **extra}
    linear, offset = _affine(result)
    if paired:
        say(f"scoring retrieval of {xa.shape[0]:,} paired rows")
        recall = mapped_retrieval(result, ya, yb, ks=(1, 5))
        report |= {"r1_a_to_b": recall.a_to_b[1], "r5_a_to_b": recall.a_to_b[5], "r1_b_to_a": recall.b_to_a[1],
                   "r5_b_to_a": recall.b_to_a[5], "chance_r1": 1.0 / xa.shape[0]}
    if labels_a is not None:
        say(f"scoring the labels of {xa.shape[0]:,} rows")
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


def _iterative_match(fit_a: np.ndarray, fit_b: np.ndarray, starts: int, gen: np.random.Generator, say):
    """:func:`prhsim.metrics.iterative_match` of ``fit_a`` and ``fit_b`` with ``starts`` random starts from ``gen``,
    saying each start as it ends (``say(message, done, total)``)."""
    from prhsim.metrics import iterative_match

    total = starts + fit_a.shape[1] + 1  # the random starts, then the k + 1 moment starts
    say(f"iterative search: {total} starts on {fit_a.shape[0]:,} x {fit_b.shape[0]:,} rows", 0, total)
    best = [np.inf]

    def progress(done: int, count: int, criterion: float) -> None:
        best[0] = min(best[0], criterion)
        say(f"start {done}/{count}: chamfer distance {criterion:.4f} (best {best[0]:.4f})", done, count)

    return iterative_match(fit_a, fit_b, starts=starts, rng=gen, progress=progress)


def _npy_array(path: Path | str, name: str) -> np.ndarray:
    """The one array of the .npy file ``path`` given to option ``name`` (nothing pickled), or a one-line DataError
    naming both."""
    try:
        with open(path, "rb") as handle:
            array = np.load(handle, allow_pickle=False)
            if not isinstance(array, np.ndarray):  # a zip (.npz, or torch's .pt) is an archive of several arrays
                raise DataError(f"{name} {path} cannot be read as a .npy array (it is a zip archive, such as .npz or "
                                ".pt; save one array with numpy.save)")
    except DataError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            why = "the file is empty"
        elif "pickled" in str(exc):  # numpy's answer to any file without the .npy magic
            why = "not in the .npy format"
        elif "Object arrays" in str(exc):
            why = "an array of Python objects, not numbers"
        else:
            why = getattr(exc, "strerror", None) or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise DataError(f"{name} {path} cannot be read as a .npy array ({why})") from None
    return array


def _pair_features(path: Path | str, name: str, width: int, mean: np.ndarray, proj: np.ndarray) -> np.ndarray:
    """The (P, 2, D) pairs of option ``name``'s file in its side's PCA coordinates, or a one-line DataError naming
    both."""
    pairs = _npy_array(path, name)
    if pairs.dtype.kind not in "fiu":
        raise DataError(f"{name} {path}: features must be numbers, got dtype {pairs.dtype}")
    if pairs.ndim != 3 or pairs.shape[0] < 1 or pairs.shape[1] != 2 or pairs.shape[2] != width:
        raise DataError(f"{name} {path} must hold (P, 2, {width}) features of positive pairs, got {pairs.shape}")
    pairs = np.asarray(pairs, dtype=np.float64)
    if not np.all(np.isfinite(pairs)):
        raise DataError(f"{name} {path}: features contain NaN or inf")
    with np.errstate(over="ignore", invalid="ignore"):
        projected = (pairs - mean) @ proj
        fits = bool(np.isfinite(np.sum(projected * projected)))  # the spectral match multiplies them
    if not fits:
        raise too_large(pairs, f"{name} {path}")
    return projected


def _labels(path: Path | str, name: str, rows: int) -> np.ndarray:
    """The integer class of each row in option ``name``'s file, or a one-line DataError naming both."""
    labels = _npy_array(path, name)
    if labels.shape != (rows,):
        raise DataError(f"{name} {path}: expected one label per row, shape ({rows},), got {labels.shape}")
    if np.issubdtype(labels.dtype, np.integer) or labels.dtype == bool:
        return labels
    floating = np.issubdtype(labels.dtype, np.floating)
    whole = np.isfinite(labels) & (labels == np.round(labels)) if floating else np.zeros(labels.shape, dtype=bool)
    if not np.all(whole):  # 3.0 is class 3; 3.7, nan or a string is no class
        raise DataError(f"{name} {path}: labels must be integer classes, got {labels.dtype} values such as "
                        f"{labels[~whole][0]!r}")
    return labels.astype(np.int64)
