"""The map between two modalities from features alone: iterative matching (docs/theory.md §9).

Without within-modality pairs, :func:`iterative_match` alternates, in whitened coordinates
``y = (x − m) C^{-1/2}`` of each modality,

1. matching: each a-row to its nearest b-row under the current Q and each b-row to its nearest
   a-row (``matching="nearest"``), or a one-to-one assignment minimising ``Σ‖y_a,i Q − y_b,σ(i)‖²``
   (``"assignment"``, scipy's ``linear_sum_assignment``; equal sizes, no weights);
2. Procrustes on the matched rows: ``Q = U Vᵀ`` for ``Σ w y_aᵀ y_b = U S Vᵀ`` (the Q maximising
   ``tr(Qᵀ M)``),

from several starts, until the matching stops changing. The starts are the identity, Haar-random
orthogonal matrices and, from the higher moments of p pushed through the features (§9), the alignment
of the eigenvectors of ``N = E[‖y‖² y yᵀ]`` (``N_b = Qᵀ N_a Q``), each signed by its third moment, with
its k single sign flips (random starts alone rarely reach the true map's basin beyond k = 2). The
kept start minimises the pair-free criterion :func:`chamfer_distance`,
``½(Σ_i w_i min_j ‖y_a,i Q − y_b,j‖ + Σ_j w_j min_i ‖y_a,i Q − y_b,j‖)``. The result is exact in the
noiseless population limit only when the sample's geometry has no non-trivial isometry (§9).
Repeated rows are merged first (their weights summed): finite worlds repeat states.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

import numpy as np

from prhsim._rng import RngLike, check_rng
from prhsim.metrics._pair_free import RowMap, Whitening, rows, weights, whitening
from prhsim.metrics._procrustes import orthogonal_map

#: The largest side of an assignment (an S x S cost matrix per iteration).
ASSIGNMENT_LIMIT = 2000


@dataclass(frozen=True)
class IterativeMap(RowMap):
    """Result of :func:`iterative_match`.

    Attributes:
        map: Q (k x k, orthogonal) of the kept start: whitened b ≈ whitened a @ Q.
        method: "iterative nearest" or "iterative assignment".
        criterion: the kept start's :func:`chamfer_distance` (lower is better).
        criteria, iterations, converged: per start, the final criterion, the iterations run and
            whether the matching stopped changing.
        chosen: the index of the kept start (0 is the identity; the k + 1 moment starts come last).
        whitening_a, whitening_b: each modality's :class:`~prhsim.metrics.Whitening`.
    """

    map: np.ndarray
    method: str
    criterion: float
    criteria: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    chosen: int
    whitening_a: Whitening
    whitening_b: Whitening


def _merged(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of x with the summed weights of their copies."""
    unique, inverse = np.unique(x, axis=0, return_inverse=True)
    return unique, np.bincount(inverse.ravel(), weights=w, minlength=unique.shape[0])


def haar_orthogonal(k: int, gen: np.random.Generator) -> np.ndarray:
    """A Haar-random orthogonal k x k matrix (QR of a Gaussian, signs fixed by R's diagonal)."""
    q, r = np.linalg.qr(gen.normal(size=(k, k)))
    return q * np.sign(np.diag(r))


def _moment_basis(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Eigenvectors V of ``N = E_w[‖y‖² y yᵀ]`` (descending), each signed so that ``E_w[(y v)³] ≥ 0``."""
    N = y.T @ ((w * np.sum(y * y, axis=1))[:, None] * y)
    vals, V = np.linalg.eigh((N + N.T) / 2)
    V = V[:, np.argsort(-vals, kind="stable")]
    return V * np.where(w @ (y @ V) ** 3 < 0, -1.0, 1.0)


def _moment_starts(ya: np.ndarray, wa: np.ndarray, yb: np.ndarray, wb: np.ndarray) -> list[np.ndarray]:
    """``V_a Vbᵀ`` (``N_b = Qᵀ N_a Q`` when ``y_b = y_a Q``) and its k single sign flips ``V_a S_i V_bᵀ``."""
    Va, Vb = _moment_basis(ya, wa), _moment_basis(yb, wb)
    flips = [np.ones(ya.shape[1])] + [np.where(np.arange(ya.shape[1]) == i, -1.0, 1.0) for i in range(ya.shape[1])]
    return [(Va * s) @ Vb.T for s in flips]


def _starts(starts: Any, k: int, rng: RngLike) -> list[np.ndarray]:
    if isinstance(starts, numbers.Integral) and not isinstance(starts, bool):
        if starts < 1:
            raise ValueError(f"starts must be at least 1, got {starts}")
        gen = check_rng(rng)
        return [np.eye(k)] + [haar_orthogonal(k, gen) for _ in range(int(starts) - 1)]
    out = [np.asarray(s, dtype=np.float64) for s in starts]
    for i, s in enumerate(out):
        if s.shape != (k, k) or not np.allclose(s.T @ s, np.eye(k), atol=1e-8):
            raise ValueError(f"starts[{i}] must be an orthogonal matrix of shape ({k}, {k}), got shape {s.shape}")
    if not out:
        raise ValueError("starts must hold at least one matrix")
    return out


def chamfer_distance(ya: Any, yb: Any, *, weights_a: Any = None, weights_b: Any = None) -> float:
    """``½(Σ_i w_a,i min_j ‖ya_i − yb_j‖ + Σ_j w_b,j min_i ‖ya_i − yb_j‖)``: 0 iff the supports coincide."""
    ya = rows(ya, "ya")
    yb = rows(yb, "yb", ya.shape[1])
    wa, wb = weights(weights_a, ya.shape[0], "weights_a"), weights(weights_b, yb.shape[0], "weights_b")
    from scipy.spatial import cKDTree  # here: scipy.spatial and scipy.optimize cost a run's start-up 0.2 s

    return 0.5 * float(wa @ cKDTree(yb).query(ya)[0] + wb @ cKDTree(ya).query(yb)[0])


def iterative_match(xa: Any, xb: Any, *, weights_a: Any = None, weights_b: Any = None,
                    starts: int | Sequence[np.ndarray] = 16, iterations: int = 50,
                    matching: Literal["nearest", "assignment"] = "nearest", moments: bool = True,
                    rng: RngLike = None, progress: Callable[[int, int, float], None] | None = None) -> IterativeMap:
    """The map a → b from features alone: matching ↔ Procrustes from several starts (docs/theory.md §9).

    Args:
        xa: (Sa, k) features of modality a; xb: (Sb, k) of modality b (unpaired; the same k).
        weights_a, weights_b: optional row weights (normalised; uniform when None).
        starts: the number of starts (the identity, then Haar-random orthogonal matrices drawn
            from ``rng``), or the k x k orthogonal start matrices themselves.
        iterations: the most match/Procrustes rounds per start.
        matching: "nearest" (both ways) or "assignment" (one-to-one; Sa = Sb ≤ 2000, no weights).
        moments: also start from the fourth-moment alignment ``V_a V_bᵀ`` and its k single sign flips
            (placed after ``starts``).
        rng: seed or Generator for the random starts.
        progress: called after each start as ``progress(done, total, criterion)`` (starts done, starts in all,
            that start's chamfer distance).

    Returns:
        :class:`IterativeMap`: the start of lowest :func:`chamfer_distance` and every start's record.
    """
    xa = rows(xa, "xa")
    k = xa.shape[1]
    xb = rows(xb, "xb", k)
    if isinstance(iterations, bool) or not isinstance(iterations, numbers.Integral) or iterations < 1:
        raise ValueError(f"iterations must be a positive integer, got {iterations!r}")
    if matching not in ("nearest", "assignment"):
        raise ValueError(f"matching must be 'nearest' or 'assignment', got {matching!r}")
    if matching == "assignment" and (weights_a is not None or weights_b is not None or xa.shape[0] != xb.shape[0]
                                     or xa.shape[0] > ASSIGNMENT_LIMIT):
        raise ValueError(f"matching='assignment' needs unweighted xa and xb with the same number of rows, at most "
                         f"{ASSIGNMENT_LIMIT}; got {xa.shape[0]} and {xb.shape[0]}")
    wa, wb = weights(weights_a, xa.shape[0], "weights_a"), weights(weights_b, xb.shape[0], "weights_b")
    whiten_a, whiten_b = whitening(xa, wa, "xa"), whitening(xb, wb, "xb")
    if matching == "nearest":
        (xa, wa), (xb, wb) = _merged(xa, wa), _merged(xb, wb)
    ya, yb = whiten_a.whiten(xa), whiten_b.whiten(xb)
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial import cKDTree
    from scipy.spatial.distance import cdist

    tree_a, tree_b = cKDTree(ya), cKDTree(yb)

    def step(Q: np.ndarray) -> tuple[np.ndarray, Any]:
        """The Procrustes map of the matching under Q, and the matching."""
        if matching == "assignment":
            r, c = linear_sum_assignment(cdist(ya @ Q, yb, "sqeuclidean"))
            return orthogonal_map(ya[r].T @ yb[c]), c[np.argsort(r)]
        ia, ib = tree_b.query(ya @ Q)[1], tree_a.query(yb @ Q.T)[1]
        return orthogonal_map((wa[:, None] * ya).T @ yb[ia] + ya[ib].T @ (wb[:, None] * yb)), np.concatenate([ia, ib])

    maps, criteria, counts, done = [], [], [], []
    initial = _starts(starts, k, rng) + (_moment_starts(ya, wa, yb, wb) if moments else [])
    for Q in initial:
        previous, converged, count = None, False, 0
        for count in range(1, int(iterations) + 1):
            Q, match = step(Q)
            if previous is not None and np.array_equal(match, previous):
                converged = True
                break
            previous = match
        maps.append(Q)
        criteria.append(0.5 * float(wa @ tree_b.query(ya @ Q)[0] + wb @ tree_a.query(yb @ Q.T)[0]))
        counts.append(count)
        done.append(converged)
        if progress is not None:
            progress(len(maps), len(initial), criteria[-1])
    best = int(np.argmin(criteria))
    return IterativeMap(maps[best], f"iterative {matching}", criteria[best], np.array(criteria), np.array(counts),
                        np.array(done), best, whiten_a, whiten_b)
