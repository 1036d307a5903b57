"""Permutation-null calibration of alignment scores (Gröger, Wen & Brbić 2026, "calibrated similarity").

A sample metric scores paired rows: row i of ``A`` (N x d_a) and row i of ``B``
(N x d_b) are the same item, and ``s = metric(A, B)``. Breaking the pairing
gives the null: for K row permutations π_1..π_K, ``s_j = metric(A, B[π_j])``,
where ``B[π]`` has row i equal to row π(i) of B. Then

* the add-one p-value ``p = (1 + #{j : s_j >= s}) / (K + 1)``;
* the critical value τ: the m-th smallest of the multiset ``{s, s_1, …, s_K}``
  (1-based), ``m = ⌈(1 − α)(K + 1)⌉`` (evaluated up to 1e-9, so that the binary
  rounding of a decimal α such as 0.05 cannot move the rank);
* the calibrated score ``clamp((s − τ)/(s_max − τ), 0, 1)``, with s_max the
  metric's largest value (1 for every registered metric), and 0 when s_max <= τ.

Layer tables: with ``A`` and ``B`` sequences of (N, d_l) arrays, the statistic is the
aggregate ("max" or "mean") of the table ``metric(A_l, B_m)`` over all layer pairs; the
null applies the same π_j to every layer of B and aggregates the permuted table.

Fast paths. A row permutation of B changes only what couples the two sides, so what
it leaves alone is computed once:

* mutual and cycle k-NN: the k-NN lists ``L_A`` and ``L_B`` are searched once with
  prhsim's own search (:mod:`prhsim.metrics._knn`: normalised rows, the tie rule
  (−⟨x_i, x_j⟩, j), copies as one point). ``B[π]`` has the lists
  ``L_{B[π]}(i) = π⁻¹(L_B(π(i)))``, so with r = π(i) and ``M_A[i, j] = [j ∈ L_A(i)]``::

      mutual(A, B[π]) = (1/(N k)) Σ_r Σ_{j ∈ L_B(r)} M_A[π⁻¹(r), π⁻¹(j)]
      cycle(A, B[π])  = (1/N) Σ_r 1[∃ j ∈ L_B(r) : M_A[π⁻¹(j), π⁻¹(r)]]

  O(N·k) gathers per permutation, batched over permutations. The tie rule ranks
  equal inner products by index, and π relabels the indices: where row r's k-th
  place is shared by t candidates (copies of a row, exact ties), the list of B[π]
  holds the candidates above that value and the ones of the tied candidates with
  the smallest labels π⁻¹(j); B's lists are searched deep enough to see every such tie.
* linear, unbiased and RBF CKA: every normaliser (‖ãᵀã‖_F, ‖b̃ᵀb̃‖_F, the self-HSICs,
  1ᵀK̃1, 1ᵀL̃1) is permutation invariant, and a permutation P only enters the
  cross term: ``‖ãᵀ P b̃‖_F² = Σ_ij K_A[i, j] K_B[π(i), π(j)]`` (centred features
  ã, b̃, centred Grams K_A = ããᵀ, K_B = b̃b̃ᵀ), computed either through the Grams
  (an O(N²) gather of the upper block triangle of K_B, both kernels being symmetric, in row
  blocks that keep K_A's block in cache across the permutations) or through the features (one batched matrix product, O(N·d_a·d_b)),
  whichever is cheaper. Unbiased CKA (zero-diagonal Grams K̃, L̃)
  also needs ``tr(K̃ P L̃ Pᵀ) = ‖ãᵀ P b̃‖_F² − Σ_i s_i t_π(i)`` (s_i = ‖ã_i‖², t_i = ‖b̃_i‖²)
  and ``1ᵀK̃ P L̃ Pᵀ1 = Σ_i (K̃1)_i (L̃1)_π(i)``, O(N); RBF CKA (its bandwidth is a
  median of all pairwise distances, also invariant) goes through its centred Grams.
* ``convention="prh"``: the same paths (k-NN: neighbours by inner product of the rows
  as given; CKA: the PRH code's ``+ 10⁻⁶`` in the denominator, no clip, and its fixed
  RBF bandwidth).
* every other registered metric (cknna, svcca): the generic path recomputes
  ``metric(A_l, B_m[π_j])`` for every permutation and layer pair: correct, K times
  the cost of one table.

The fast paths run on the host in numpy (inputs of any library are copied there).
The k-NN paths keep the input's float dtype, so their scores are those of the
registered metric exactly; the CKA paths compute in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np

from prhsim._budget import ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim.metrics import _protocol
from prhsim.metrics._cka import _gram_route, _hsic_u, _rbf_gram, centre, require_variance, to_host
from prhsim.metrics._convention import PRH_EPS, PRH_RBF_SIGMA, Convention, check_convention
from prhsim.metrics._protocol import METRICS, Metric

Aggregate = Literal["max", "mean"]

#: The largest value of a metric (the calibrated score's 1); 1.0 for every metric not listed.
S_MAX: dict[str, float] = {}
#: Entries of one batched temporary of the fast paths (gathered labels, permuted features).
BLOCK = 2**22
#: A's k-NN relation is an N x N boolean mask up to this many entries, sorted pair codes above.
MASK_ENTRIES = 2**26
#: One gathered Gram entry costs about this many multiply-adds of a matrix product (CPU, numpy):
#: the Gram route is taken when N² · GATHER_COST < N · d_a · d_b.
GATHER_COST = 64
#: Rows of a Gram matrix per block of the Gram route (a block of K_A and one of K_B in cache).
GRAM_ROWS = 64
#: Entries of one batched temporary of the k-NN paths: small enough to stay in cache (measured
#: 10x faster than 2**22 at N = 1024, k = 10).
KNN_BLOCK = 2**17
#: Permutations per top-level chunk: about this many permuted labels at once.
CHUNK_ENTRIES = 2**20


@dataclass(frozen=True, eq=False)
class Calibration:
    """A score against its permutation null (module docstring).

    Attributes:
        metric: the metric's name in :data:`prhsim.metrics._protocol.METRICS`.
        raw: the observed score s (layer tables: the aggregate of the unpermuted table).
        calibrated: ``clamp((s − τ)/(s_max − τ), 0, 1)``, 0 when s_max <= τ.
        p_value: ``(1 + #{j : s_j >= s}) / (K + 1)``.
        tau: the critical value, the ⌈(1 − α)(K + 1)⌉-th smallest of {s, s_1, …, s_K}.
        alpha: the level α.
        permutations: K, the number of null scores.
        null: the K null scores s_j in the order of the permutations (float64, read-only).

    Records compare by identity (``eq=False``: they hold an array).
    """

    metric: str
    raw: float
    calibrated: float
    p_value: float
    tau: float
    alpha: float
    permutations: int
    null: np.ndarray = field(repr=False)

    def quantile(self, q: float) -> float:
        """The q-quantile of the null scores (numpy's linear interpolation), 0 <= q <= 1."""
        if isinstance(q, bool) or not isinstance(q, Real) or not 0.0 <= float(q) <= 1.0:
            raise ValueError(f"q must be a number in [0, 1], got {q!r}")
        return float(np.quantile(self.null, float(q)))


def calibrate(metric: str, a: Any, b: Any, *, permutations: int | np.ndarray = 1000, alpha: float = 0.05,
              rng: RngLike = None, aggregate: Aggregate | None = None, knn_k: int = 10,
              convention: Convention = "prhsim") -> Calibration:
    """Calibrate ``metric(a, b)`` against K random re-pairings of the rows (module docstring).

    Args:
        metric: a name in :data:`prhsim.metrics._protocol.METRICS`.
        a: (N, d_a) array, or a sequence (list or tuple) of them: layers (numpy, torch or JAX;
            integer and boolean arrays are read as float64).
        b: (N, d_b) array, or a sequence of them; an array beside a sequence is one layer.
        permutations: K, the number of permutations, drawn as ``rng.permutation(N)`` K times;
            or an integer array (K, N) whose rows are permutations of range(N).
        alpha: the level of the critical value τ, in (0, 1).
        rng: seed or Generator for drawn permutations (:func:`prhsim._rng.check_rng`: None is
            seed 0); ignored with an explicit array.
        aggregate: None for two arrays; "max" or "mean" over all layer pairs for sequences.
        knn_k: neighbours of the k-NN metrics (ignored by the others).
        convention: the metric's definition, "prhsim" or "prh" (:mod:`prhsim.metrics._convention`).

    Returns:
        :class:`Calibration`.

    Raises:
        ValueError: an unknown metric, alpha outside (0, 1), arrays that are not 2-D, hold
            NaN/inf or differ in N, N < 2, K < 1, an array of permutations of the wrong
            shape or with a row that is not a permutation, a missing or unknown aggregate
            for sequences (or one given for two arrays), knn_k outside [1, N) for a k-NN
            metric, or the metric's own errors (zero rows, zero variance, ...).

    >>> x = np.random.default_rng(0).normal(size=(40, 3))
    >>> cal = calibrate("linear_cka", x, 2 * x, permutations=99)
    >>> cal.raw, cal.p_value, cal.calibrated
    (1.0, 0.01, 1.0)
    """
    record = _record(metric)
    alpha = _check_alpha(alpha)
    convention = check_convention(convention)
    layers_a, layers_b, layered = _layers(a, b)
    statistic = _aggregator(aggregate, layered)
    n = layers_a[0][1].shape[0]
    if record.neighbours:
        _check_knn_k(knn_k, n)
    count, chunks = _permutation_chunks(permutations, n, rng, max(1, CHUNK_ENTRIES // n))
    scorer = _scorer(record, layers_a, layers_b, knn_k, convention)
    parts, raw = [], None
    for perms in chunks:
        if raw is None:  # the identity rides with the first chunk: s and the s_j through the same computation
            perms = np.concatenate([np.arange(n, dtype=np.intp)[None, :], perms], axis=0)
        scores = statistic(scorer(perms, _inverse(perms)))
        if raw is None:
            raw, scores = float(scores[0]), scores[1:]
        parts.append(scores)
    null = np.ascontiguousarray(np.concatenate(parts), dtype=np.float64)
    null.setflags(write=False)
    p_value = (1 + int(np.count_nonzero(null >= raw))) / (count + 1)
    tau = float(np.sort(np.append(null, raw))[_rank(alpha, count) - 1])
    s_max = S_MAX.get(record.name, 1.0)
    calibrated = 0.0 if s_max <= tau else min(max((raw - tau) / (s_max - tau), 0.0), 1.0)
    return Calibration(record.name, raw, float(calibrated), float(p_value), tau, alpha, count, null)


# --------------------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------------------
def calibrated_protocol(feats_a: Any, feats_b: Any, *, permutations: int | np.ndarray = 1000, alpha: float = 0.05,
                        rng: RngLike = None, **protocol: Any) -> _protocol.ProtocolScore:
    """:func:`prhsim.metrics.prh_protocol` (``protocol``: metric, knn_k, clip_quantile, clip_scope, convention) with
    its best score calibrated (``score.calibration``): the null statistic is the max over every layer pair of the
    clipped, normalised stacks with B's rows permuted, one permutation for every pair, so the search over layers is
    part of the null."""
    score = _protocol.prh_protocol(feats_a, feats_b, **protocol)
    convention = protocol.get("convention", "prhsim")
    _, A, B = _protocol.prepared_pair(feats_a, feats_b, protocol.get("clip_quantile", 0.95),
                                      protocol.get("clip_scope", "tensor"), convention)
    calibration = calibrate(protocol.get("metric", "mutual_knn"), A, B, permutations=permutations, alpha=alpha,
                            rng=rng, aggregate="max", knn_k=protocol.get("knn_k", 10), convention=convention)
    return score._replace(calibration=calibration)


def holm(p_values: Any, alpha: float = 0.05) -> np.ndarray:
    """Holm's step-down correction: which of m p-values reach α with the family-wise error held at α.

    Sort the p-values ascending, p_(1) ≤ … ≤ p_(m); reject p_(i) while ``p_(i) <= α / (m − i + 1)``
    and stop at the first that does not. Returns a boolean array of the input's shape.

    Example:
        >>> holm([0.01, 0.04, 0.03, 0.2], alpha=0.05).tolist()
        [True, False, False, False]
    """
    alpha = _check_alpha(alpha)
    p = np.asarray(p_values, dtype=np.float64)
    flat = p.ravel()
    if flat.size == 0 or np.any(~np.isfinite(flat)) or np.any((flat < 0) | (flat > 1)):
        raise ValueError("p_values must be a non-empty array of numbers in [0, 1]")
    order = np.argsort(flat, kind="stable")
    m = flat.size
    passed = flat[order] <= alpha / (m - np.arange(m))
    keep = np.cumprod(passed).astype(bool)  # up to the first that fails
    out = np.zeros(m, dtype=bool)
    out[order] = keep
    return out.reshape(p.shape)


def _record(metric: Any) -> Metric:
    if not isinstance(metric, str) or metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(sorted(METRICS))}")
    return METRICS[metric]


def _check_alpha(alpha: Any) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, Real) or not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    return float(alpha)


def _check_knn_k(knn_k: Any, n: int) -> None:
    if isinstance(knn_k, bool) or not isinstance(knn_k, Integral) or not 1 <= int(knn_k) < n:
        raise ValueError(f"knn_k must be an integer with 1 <= knn_k < N = {n}, got {knn_k!r}")


def _rank(alpha: float, count: int) -> int:
    """m = ⌈(1 − α)(K + 1)⌉ (1-based), evaluated up to 1e-9 and kept in [1, K + 1]."""
    return min(count + 1, max(1, math.ceil((1.0 - alpha) * (count + 1) - 1e-9)))


def _as_layer(x: Any, name: str) -> np.ndarray:
    """One representation as a 2-D, finite, real numpy array (integers and booleans as float64)."""
    arr = to_host(x)
    if arr.dtype == bool or np.issubdtype(arr.dtype, np.integer):
        arr = arr.astype(np.float64)
    elif not np.issubdtype(arr.dtype, np.floating):
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (N, d) or a sequence of them, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _layers(a: Any, b: Any) -> tuple[list[tuple[str, np.ndarray]], list[tuple[str, np.ndarray]], bool]:
    """Both sides as lists of (name, array), and whether they are layer tables."""
    layered = isinstance(a, (list, tuple)) or isinstance(b, (list, tuple))
    sides = []
    for side, x in (("a", a), ("b", b)):
        if not layered:
            sides.append([(side, _as_layer(x, side))])
            continue
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        if not xs:
            raise ValueError(f"{side} is an empty sequence of layers")
        sides.append([(f"{side}[{i}]", _as_layer(v, f"{side}[{i}]")) for i, v in enumerate(xs)])
    layers_a, layers_b = sides
    for layers in sides:
        name0, x0 = layers[0]
        for name, x in layers[1:]:
            if x.shape[0] != x0.shape[0]:
                raise ValueError(f"every layer must have the same N rows: {name} has {x.shape[0]}, "
                                 f"{name0} has {x0.shape[0]}")
    na, nb = layers_a[0][1].shape[0], layers_b[0][1].shape[0]
    if na != nb:
        raise ValueError(f"a and b must have the same number of rows N, got {na} and {nb}")
    if na < 2:
        raise ValueError(f"calibrate needs at least 2 rows, got N = {na}")
    return layers_a, layers_b, layered


def _aggregator(aggregate: Any, layered: bool) -> Callable[[np.ndarray], np.ndarray]:
    """The statistic of a (C, L_a, L_b) table of scores: one per permutation."""
    if aggregate is not None and aggregate not in ("max", "mean"):
        raise ValueError(f"aggregate must be None, 'max' or 'mean', got {aggregate!r}")
    if layered and aggregate is None:
        raise ValueError("a and b are layer sequences: pass aggregate='max' or aggregate='mean'")
    if not layered and aggregate is not None:
        raise ValueError(f"aggregate={aggregate!r} is for layer sequences; a and b are single arrays "
                         f"(pass aggregate=None)")
    if aggregate == "max":
        return lambda t: t.max(axis=(1, 2))
    if aggregate == "mean":
        return lambda t: t.mean(axis=(1, 2))
    return lambda t: t[:, 0, 0]


def _permutation_chunks(permutations: Any, n: int, rng: RngLike, step: int) -> tuple[int, Iterator[np.ndarray]]:
    """K and the permutations in chunks of at most ``step`` rows, each (C, N) intp."""
    if isinstance(permutations, bool):
        raise ValueError(f"permutations must be an int K or an integer array (K, N), got {permutations!r}")
    if isinstance(permutations, Integral):
        count = int(permutations)
        if count < 1:
            raise ValueError(f"permutations must be at least 1, got {count}")
        gen = check_rng(rng)

        def drawn() -> Iterator[np.ndarray]:
            for c0 in range(0, count, step):
                yield np.stack([gen.permutation(n) for _ in range(min(step, count - c0))]).astype(np.intp)

        return count, drawn()
    perms = np.asarray(permutations)
    if perms.dtype == bool or not np.issubdtype(perms.dtype, np.integer):
        raise ValueError(f"permutations must be an int K or an integer array (K, N), got dtype {perms.dtype}")
    if perms.ndim != 2 or perms.shape[1] != n:
        raise ValueError(f"permutations must have shape (K, N) with N = {n}, got shape {perms.shape}")
    if perms.shape[0] < 1:
        raise ValueError("permutations must hold at least 1 permutation, got 0 rows")
    bad = np.flatnonzero(np.any(np.sort(perms, axis=1) != np.arange(n), axis=1))
    if bad.size:
        raise ValueError(f"row {int(bad[0])} of permutations is not a permutation of range({n})")
    perms = perms.astype(np.intp)
    return perms.shape[0], (perms[c0:c0 + step] for c0 in range(0, perms.shape[0], step))


def _inverse(perms: np.ndarray) -> np.ndarray:
    """π⁻¹ of every row: inv[j, perms[j, i]] = i."""
    inv = np.empty_like(perms)
    np.put_along_axis(inv, perms, np.broadcast_to(np.arange(perms.shape[1], dtype=perms.dtype), perms.shape), axis=1)
    return inv


#: The registry functions with a fast path (another function under one of these names takes the generic path).
_FAST: dict[str, Any] = {
    "mutual_knn": _protocol._mutual_knn,
    "cycle_knn": _protocol._cycle_knn,
    "linear_cka": _protocol._linear_cka,
    "unbiased_cka": _protocol._unbiased_cka,
    "rbf_cka": _protocol._rbf_cka,
}

Layers = list[tuple[str, np.ndarray]]
Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _scorer(record: Metric, layers_a: Layers, layers_b: Layers, knn_k: int, convention: Convention) -> Scorer:
    """``(perms, inverses) -> (C, L_a, L_b)`` scores of every layer pair under each permutation."""
    if _FAST.get(record.name) is record.score:
        if record.name in ("mutual_knn", "cycle_knn"):
            return _knn_scorer(record.name, layers_a, layers_b, knn_k, convention)
        return _kernel_scorer(record.name, layers_a, layers_b, convention)
    return _generic_scorer(record, layers_a, layers_b, knn_k, convention)


# --------------------------------------------------------------------------------------
# the generic path
# --------------------------------------------------------------------------------------
def _generic_scorer(record: Metric, layers_a: Layers, layers_b: Layers, knn_k: int, convention: Convention) -> Scorer:
    """Recompute ``metric(A_l, B_m[π])`` for every permutation and pair: K + 1 tables."""
    layered = layers_a[0][0] != "a"  # layer tables name their arrays a[0], a[1], ...

    def score(perms: np.ndarray, inv: np.ndarray) -> np.ndarray:
        out = np.empty((perms.shape[0], len(layers_a), len(layers_b)))
        for c, p in enumerate(perms):
            for m, (_, b) in enumerate(layers_b):
                bp = b[p]
                for l, (_, a) in enumerate(layers_a):
                    try:
                        out[c, l, m] = record(a, bp, knn_k=knn_k, convention=convention)
                    except ValueError as err:
                        if not layered:
                            raise
                        raise ValueError(f"layer pair ({l}, {m}): {err}") from None
        return out

    return score


# --------------------------------------------------------------------------------------
# mutual and cycle k-NN
# --------------------------------------------------------------------------------------
class _Relation:
    """A's k-NN relation, ``M[i, j] = [j ∈ L_A(i)]``, queried elementwise on broadcast (i, j) arrays."""

    def __init__(self, lists: np.ndarray) -> None:
        n = lists.shape[0]
        self.n = n
        codes = (np.arange(n, dtype=np.int64)[:, None] * n + lists).reshape(-1)
        if n * n <= MASK_ENTRIES:
            self.mask: np.ndarray | None = np.zeros(n * n, dtype=bool)
            self.mask[codes] = True
        else:
            self.mask, self.codes = None, np.sort(codes)

    def __call__(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        q = i * self.n + j
        if self.mask is not None:
            return self.mask[q]
        pos = np.minimum(np.searchsorted(self.codes, q), self.codes.size - 1)
        return self.codes[pos] == q


@dataclass(frozen=True)
class _Lists:
    """B's k-NN lists with the boundary ties kept open (their order depends on the labels).

    Row r keeps ``fixed[r][valid[r]]`` whatever the labels (all k entries where no
    candidate outside the list ties the k-th value), and for the ``tied_rows`` the
    ``need`` candidates of ``tied[tied_valid]`` (all tied at the k-th value) with the
    smallest labels.
    """

    fixed: np.ndarray
    valid: np.ndarray | None
    tied_rows: np.ndarray
    tied: np.ndarray
    tied_valid: np.ndarray
    need: np.ndarray


def _knn_side(name: str, x: np.ndarray, k: int, convention: Convention = "prhsim") -> tuple[Any, Any, int, bool]:
    """``(x, scale, k, screen)``: x checked as the k-NN metrics check it (in its compute dtype); the rows are
    normalised through ``scale`` (None under the PRH convention: neighbours by inner product of the rows)."""
    from prhsim.metrics import _knn, _knn_screen

    _, x = _knn._as_compute(x, name)
    k = _knn._check_k(k, x.shape[0])
    scale = _knn._row_scale(np, x, name) if convention == "prhsim" else None
    return x, scale, k, bool(_knn_screen.wanted(x, k))


def _relation(name: str, x: np.ndarray, k: int, convention: Convention = "prhsim") -> _Relation:
    """A's side: its k-NN sets as the registered metric forms them."""
    from prhsim.metrics import _knn

    x, scale, k, screen = _knn_side(name, x, k, convention)
    _knn._guard_lists(x.shape[0], k, 1, f"for {name}")
    lists = _knn._knn(np, x, k, None, scale, screen, ordered=False)[1]
    return _Relation(np.asarray(lists).astype(np.int64))


def _open_lists(name: str, x: np.ndarray, k: int, convention: Convention = "prhsim") -> _Lists:
    """B's side: its lists ranked by (−v, j), searched deep enough to hold every tie of the k-th value."""
    from prhsim.metrics import _knn

    x, scale, k, screen = _knn_side(name, x, k, convention)
    n = x.shape[0]
    depth = min(n - 1, k + 1)
    while True:
        _knn._guard_lists(n, depth, 1, f"for {name}")
        vals, idx = (np.asarray(v) for v in _knn._knn(np, x, depth, None, scale, screen, ordered=True))
        kth = vals[:, k - 1:k]
        if depth == n - 1 or not np.any(vals[:, -1:] == kth):
            break
        depth = min(n - 1, 2 * depth + 8)
    idx = idx.astype(np.intp)
    sure = np.sum(vals[:, :k] > kth, axis=1)  # the places above the k-th value
    ties = np.sum(vals == kth, axis=1)  # every candidate at the k-th value (all within the depth)
    tied_rows = np.flatnonzero(sure + ties > k)
    fixed = np.ascontiguousarray(idx[:, :k])
    if tied_rows.size == 0:
        empty = np.zeros((0, 0), dtype=np.intp)
        return _Lists(fixed, None, tied_rows, empty, empty.astype(bool), np.zeros(0, dtype=np.intp))
    valid = np.ones((n, k), dtype=bool)
    valid[tied_rows] = np.arange(k)[None, :] < sure[tied_rows, None]
    fixed[~valid] = 0
    width = int(ties[tied_rows].max())
    tied_valid = np.arange(width)[None, :] < ties[tied_rows, None]
    pos = np.where(tied_valid, sure[tied_rows, None] + np.arange(width)[None, :], 0)
    tied = np.where(tied_valid, np.take_along_axis(idx[tied_rows], pos, axis=1), 0)
    return _Lists(fixed, valid, tied_rows, tied, tied_valid, (k - sure[tied_rows]).astype(np.intp))


def _knn_counts(cycle: bool, rel: _Relation, lists: _Lists, inv: np.ndarray) -> np.ndarray:
    """Per permutation (rows of inv = π⁻¹): Σ_r |relabelled L_B(r) ∩ L_A(π⁻¹(r))| (mutual) or the number
    of rows r with some j ∈ L_B(r) such that π⁻¹(r) ∈ L_A(π⁻¹(j)) (cycle)."""
    n, k = lists.fixed.shape
    tied = lists.tied_rows.size > 0
    step = max(1, KNN_BLOCK // (n * k + lists.tied.size))
    out = np.empty(inv.shape[0], dtype=np.int64)
    if tied:
        width = int(lists.need.max())
        take = np.arange(width)[None, :] < lists.need[:, None]  # (R, w): the places a tied row fills
    for c0 in range(0, inv.shape[0], step):
        iv = inv[c0:c0 + step]
        me = iv[:, :, None]  # the new label of row r
        nb = iv[:, lists.fixed]  # (C, N, k): the new labels of r's neighbours
        hit = rel(nb, me) if cycle else rel(me, nb)
        if lists.valid is not None:
            hit &= lists.valid
        if tied:
            tm = iv[:, lists.tied_rows][:, :, None]
            labels = np.where(lists.tied_valid, iv[:, lists.tied], n)
            labels.sort(axis=2)  # the tie rule in the new labels: the smallest win
            chosen = np.where(take, labels[:, :, :width], 0)
            tied_hit = (rel(chosen, tm) if cycle else rel(tm, chosen)) & take
        if cycle:
            back = hit.any(axis=2)
            if tied:
                back[:, lists.tied_rows] |= tied_hit.any(axis=2)
            out[c0:c0 + step] = back.sum(axis=1)
        else:
            out[c0:c0 + step] = hit.sum(axis=(1, 2)) + (tied_hit.sum(axis=(1, 2)) if tied else 0)
    return out


def _knn_scorer(name: str, layers_a: Layers, layers_b: Layers, knn_k: int, convention: Convention) -> Scorer:
    """Mutual or cycle k-NN of every layer pair from lists searched once per layer."""
    relations = [_relation(la, x, knn_k, convention) for la, x in layers_a]
    lists = [_open_lists(lb, x, knn_k, convention) for lb, x in layers_b]
    cycle = name == "cycle_knn"
    n = layers_a[0][1].shape[0]

    def score(perms: np.ndarray, inv: np.ndarray) -> np.ndarray:
        out = np.empty((perms.shape[0], len(relations), len(lists)))
        for m, lb in enumerate(lists):
            denom = n if cycle else n * lb.fixed.shape[1]
            for l, rel in enumerate(relations):
                out[:, l, m] = _knn_counts(cycle, rel, lb, inv) / denom
        return out

    return score


# --------------------------------------------------------------------------------------
# linear, unbiased and RBF CKA
# --------------------------------------------------------------------------------------
@dataclass
class _KernelSide:
    """One representation prepared for a CKA: what no permutation changes.

    ``x``: the centred features (float64); ``gram``: the kernel the cross term pairs
    (linear: ããᵀ; unbiased: ããᵀ with a zero diagonal; RBF: the centred Gaussian Gram),
    formed on first use; ``self_term``: ‖ãᵀã‖_F² (linear, RBF: ‖K‖_F²) or the self-HSIC
    (unbiased); unbiased only: ``sq`` = s_i = ‖ã_i‖², ``ones`` = K̃1 and ``total`` = 1ᵀK̃1.
    """

    kind: str
    x: np.ndarray
    self_term: float
    gram: np.ndarray | None = None
    sq: np.ndarray | None = None
    ones: np.ndarray | None = None
    total: float = 0.0

    def kernel(self) -> np.ndarray:
        if self.gram is None:
            n = self.x.shape[0]
            ensure_fits(8.0 * 3 * n * n, f"a {n:,} x {n:,} Gram matrix for the permutation null", "use fewer samples N")
            g = self.x @ self.x.T
            if self.kind == "unbiased_cka":
                np.fill_diagonal(g, 0.0)
            self.gram = g
        return self.gram


def _kernel_side(kind: str, name: str, x: np.ndarray, convention: Convention = "prhsim") -> _KernelSide:
    """Checks and invariant parts of one side, with the registered metric's errors."""
    x = x.astype(np.float64)
    n, d = x.shape
    if kind == "unbiased_cka" and n < 4:
        raise ValueError(f"unbiased CKA needs at least 4 rows, got N = {n}")
    require_variance(np, name, x)
    if kind == "rbf_cka":
        ensure_fits(8.0 * 4 * n * n, f"RBF CKA of {n:,} samples (N x N kernels)", "use fewer samples N")
        g = _rbf_gram(np, name, x, 1.0) if convention == "prhsim" else _rbf_gram(np, name, x, PRH_RBF_SIGMA, False)
        total = float(np.sum(g * g))
        if not total > 0.0:
            raise ValueError(f"{name} has zero variance: CKA is undefined")
        return _KernelSide(kind, centre(np, x), total, gram=g)
    xc = centre(np, x)
    if kind == "linear_cka":
        by_gram = _gram_route(n, d, d)
        g = xc @ xc.T if by_gram else xc.T @ xc  # ‖ããᵀ‖_F = ‖ãᵀã‖_F
        total = float(np.sum(g * g))
        if not total > 0.0:  # underflow of a nearly constant representation
            raise ValueError(f"{name} has zero variance: CKA is undefined")
        return _KernelSide(kind, xc, total, gram=g if by_gram else None)
    s = np.sum(xc * xc, axis=1)
    gx = xc.T @ xc
    tr = float(np.sum(gx * gx) - np.sum(s * s))
    ones = xc @ np.sum(xc, axis=0) - s  # K̃1
    one, sq = float(np.sum(ones)), float(np.sum(ones * ones))
    h = float(_hsic_u(n, tr, one, one, sq))
    eps = float(np.finfo(np.float64).eps)
    size = (abs(tr) + one ** 2 / ((n - 1) * (n - 2)) + 2.0 * sq / (n - 2)) / (n * (n - 3))
    if not h > n * eps * size:
        raise ValueError(f"{name} has a non-positive unbiased self-HSIC ({h:.3g}): unbiased CKA is undefined")
    return _KernelSide(kind, xc, h, sq=s, ones=ones, total=one)


def _gram_wanted(kind: str, n: int, da: int, db: int) -> bool:
    """Whether the cross term goes through the N x N Grams (an O(N²) gather) or the features (O(N·d_a·d_b))."""
    return kind == "rbf_cka" or n * n * GATHER_COST < n * da * db


def _cross_features(xa: np.ndarray, xb: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """‖xaᵀ xb[π]‖_F² for every permutation: a few batched matrix products."""
    n, db = xb.shape
    da = xa.shape[1]
    step = max(1, BLOCK // (n * db + da * db))
    xat = np.ascontiguousarray(xa.T)
    out = np.empty(perms.shape[0])
    for c0 in range(0, perms.shape[0], step):
        p = perms[c0:c0 + step]
        stacked = xb[p.T].reshape(n, -1)  # (N, C·d_b): column block c is xb[π_c]
        prod = xat @ stacked
        out[c0:c0 + step] = np.einsum("ij,ij->j", prod, prod).reshape(p.shape[0], db).sum(axis=1)
    return out


def _cross_grams(grams_a: list[np.ndarray], kb: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """``Σ_ij K_A[i, j] K_B[π(i), π(j)]`` for every permutation and every K_A: (C, len(grams_a)).

    Both kernels are symmetric, so only the upper block triangle is gathered: for the row block
    I = [r0, r1) and the columns J = [r0, N), the sum over I x J counts its diagonal block I x I once
    and the rest twice (``2·Σ_{I x J} − Σ_{I x I}``), about N²/2 gathered entries per permutation. A
    block of GRAM_ROWS rows of each K_A stays in cache while every permutation gathers the matching
    rows of K_B and their permuted columns: the gather is the cost.
    """
    n = kb.shape[0]
    out = np.zeros((perms.shape[0], len(grams_a)))
    for r0 in range(0, n, GRAM_ROWS):
        r1 = min(n, r0 + GRAM_ROWS)
        rows_a = [g[r0:r1, r0:] for g in grams_a]
        part = np.empty((r1 - r0, n - r0))
        for c, p in enumerate(perms):
            np.take(kb[p[r0:r1]], p[r0:], axis=1, out=part, mode="clip")  # p is a permutation: nothing is clipped
            for l, ga in enumerate(rows_a):
                # einsum, not BLAS: a threaded dot of one long vector is slow on a busy machine
                whole = np.einsum("ij,ij->", ga, part)
                diagonal = np.einsum("ij,ij->", ga[:, :r1 - r0], part[:, :r1 - r0])
                out[c, l] += 2.0 * whole - diagonal
    return out


def _kernel_scorer(kind: str, layers_a: Layers, layers_b: Layers, convention: Convention) -> Scorer:
    """CKA of every layer pair: the invariant parts once, per permutation only the cross term."""
    sides_a = [_kernel_side(kind, name, x, convention) for name, x in layers_a]
    sides_b = [_kernel_side(kind, name, x, convention) for name, x in layers_b]
    n = layers_a[0][1].shape[0]
    lo = -1.0 if kind == "unbiased_cka" else 0.0

    def score(perms: np.ndarray, inv: np.ndarray) -> np.ndarray:
        count = perms.shape[0]
        out = np.empty((count, len(sides_a), len(sides_b)))
        for m, sb in enumerate(sides_b):
            cross = np.empty((count, len(sides_a)))
            by_gram = [l for l, sa in enumerate(sides_a) if _gram_wanted(kind, n, sa.x.shape[1], sb.x.shape[1])]
            if by_gram:
                cross[:, by_gram] = _cross_grams([sides_a[l].kernel() for l in by_gram], sb.kernel(), perms)
            for l, sa in enumerate(sides_a):
                if l not in by_gram:
                    cross[:, l] = _cross_features(sa.x, sb.x, perms)
                    if kind == "unbiased_cka":  # tr(K̃ P L̃ Pᵀ) = ‖ãᵀ P b̃‖² − Σ_i s_i t_π(i)
                        cross[:, l] -= sb.sq[perms] @ sa.sq
            for l, sa in enumerate(sides_a):
                if kind == "unbiased_cka":
                    kl = sb.ones[perms] @ sa.ones  # 1ᵀK̃ P L̃ Pᵀ 1
                    num = _hsic_u(n, cross[:, l], sa.total, sb.total, kl)
                else:
                    num = cross[:, l]
                if convention == "prh":  # the PRH code's ratio: HSIC_kl/(√(HSIC_kk·HSIC_ll) + 10⁻⁶), not clipped
                    out[:, l, m] = num / (math.sqrt(sa.self_term * sb.self_term) + PRH_EPS)
                else:
                    out[:, l, m] = np.clip(num / (math.sqrt(sa.self_term) * math.sqrt(sb.self_term)), lo, 1.0)
        return out

    return score
