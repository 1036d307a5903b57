"""The k-NN fast path of the permutation null: mutual and cycle k-NN of (A, B[π]) without a search per π.

Null scores of :mod:`prhsim.metrics._calibrate` (docs/prh.md, "Calibrated scores: a permutation null"; the
metrics: docs/theory.md §10). Why it equals the recomputed null: a row permutation of B moves B's rows but
changes none of their inner products, so B[π]'s neighbour lists are B's, relabelled. A's lists ``L_A`` and
B's lists ``L_B`` are searched once with the registered metric's own search (:mod:`prhsim.metrics._knn_search`:
normalised rows, or the rows as given under ``convention="prh"``; the tie rule (−⟨x_i, x_j⟩, j), copies as one
point). B[π] has row i equal to row π(i) of B, so ``L_{B[π]}(i) = π⁻¹(L_B(π(i)))``, and with r = π(i) and
``M_A[i, j] = [j ∈ L_A(i)]``::

    mutual(A, B[π]) = (1/(N k)) Σ_r Σ_{j ∈ L_B(r)} M_A[π⁻¹(r), π⁻¹(j)]
    cycle(A, B[π])  = (1/N) Σ_r 1[∃ j ∈ L_B(r) : M_A[π⁻¹(j), π⁻¹(r)]]

The one thing π does change is the tie rule, which ranks equal inner products by index: where row r's k-th
place is shared by t candidates (copies of a row, exact ties), the list of B[π] holds the candidates above that
value and the ones of the tied candidates with the smallest labels π⁻¹(j); B's lists are searched deep enough
to see every such tie, and the choice is made per permutation. The counts are integers and the lists are kept
in the input's float dtype, so every null score is the registered metric's exactly. Cost: O(N·k) gathers per
permutation, batched over permutations, on the host in numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from prhsim.metrics import _knn_screen
from prhsim.metrics._convention import Convention
from prhsim.metrics._arguments import check_knn_k, require_variance
from prhsim.metrics._knn_search import as_compute, guard_lists, knn_search, row_scale

#: A's k-NN relation is an N x N boolean mask up to this many entries, sorted pair codes above.
MASK_ENTRIES = 2**26
#: Entries of one batched temporary of the k-NN paths: small enough to stay in cache (measured
#: 10x faster than 2**22 at N = 1024, k = 10).
KNN_BLOCK = 2**17

#: The layers of one side, and a scorer of every layer pair under a chunk of permutations (as in
#: :mod:`prhsim.metrics._calibrate`, which imports this module).
Layers = list[tuple[str, np.ndarray]]
Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]


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
    _, x = as_compute(x, name)
    k = check_knn_k(k, x.shape[0])
    scale = row_scale(np, x, name) if convention == "prhsim" else None
    return x, scale, k, bool(_knn_screen.wanted(x, k))


def _relation(name: str, x: np.ndarray, k: int, convention: Convention = "prhsim") -> _Relation:
    """A's side: its k-NN sets as the registered metric forms them."""
    x, scale, k, screen = _knn_side(name, x, k, convention)
    guard_lists(x.shape[0], k, 1, f"for {name}")
    lists = knn_search(np, x, k, None, scale, screen, ordered=False)[1]
    return _Relation(np.asarray(lists).astype(np.int64))


def _open_lists(name: str, x: np.ndarray, k: int, convention: Convention = "prhsim") -> _Lists:
    """B's side: its lists ranked by (−v, j), searched deep enough to hold every tie of the k-th value."""
    x, scale, k, screen = _knn_side(name, x, k, convention)
    n = x.shape[0]
    depth = min(n - 1, k + 1)
    while True:
        guard_lists(n, depth, 1, f"for {name}")
        vals, idx = (np.asarray(v) for v in knn_search(np, x, depth, None, scale, screen, ordered=True))
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


def knn_scorer(name: str, layers_a: Layers, layers_b: Layers, knn_k: int, convention: Convention) -> Scorer:
    """Mutual or cycle k-NN of every layer pair from lists searched once per layer."""
    for layer, x in [*layers_a, *layers_b]:  # the registered metric's refusal
        require_variance(np, layer, x, name)
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
