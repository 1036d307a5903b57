"""The CKA fast path of the permutation null: linear, unbiased and RBF CKA of (A, B[π]) from the cross term alone.

Null scores of :mod:`prhsim.metrics._calibrate` (docs/prh.md, "Calibrated scores: a permutation null"; CKA:
docs/theory.md §10). Why it equals the recomputed null: every normaliser of CKA (‖ãᵀã‖_F, ‖b̃ᵀb̃‖_F, the
self-HSICs, 1ᵀK̃1, 1ᵀL̃1) and B's centring are unchanged by a row permutation of B, which only enters the
cross term: ``‖ãᵀ P b̃‖_F² = Σ_ij K_A[i, j] K_B[π(i), π(j)]`` (centred features ã, b̃, centred Grams
K_A = ããᵀ, K_B = b̃b̃ᵀ). So the invariant parts are formed once and the cross term per permutation, either
through the Grams (an O(N²) gather of the upper block triangle of K_B, both kernels being symmetric, in row
blocks that keep K_A's block in cache across the permutations) or through the features (one batched matrix
product, O(N·d_a·d_b)), whichever is cheaper (``GATHER_COST``). Unbiased CKA (zero-diagonal Grams K̃, L̃) also
needs ``tr(K̃ P L̃ Pᵀ) = ‖ãᵀ P b̃‖_F² − Σ_i s_i t_π(i)`` (s_i = ‖ã_i‖², t_i = ‖b̃_i‖²) and
``1ᵀK̃ P L̃ Pᵀ1 = Σ_i (K̃1)_i (L̃1)_π(i)``, O(N); RBF CKA (its bandwidth, a median of all pairwise distances,
is invariant too) goes through its centred Grams. ``convention="prh"``: the PRH code's ``+ 10⁻⁶`` in the
denominator, no clip, and its fixed RBF bandwidth. Computed on the host in float64: the registered metric's
value up to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from prhsim._budget import ensure_fits
from prhsim.metrics._cka import centre, gram_route, hsic_u, rbf_gram, require_variance
from prhsim.metrics._convention import PRH_EPS, PRH_RBF_SIGMA, Convention

#: Entries of one batched temporary of the feature route (permuted features).
BLOCK = 2**22
#: One gathered Gram entry costs about this many multiply-adds of a matrix product (CPU, numpy):
#: the Gram route is taken when N² · GATHER_COST < N · d_a · d_b.
GATHER_COST = 64
#: Rows of a Gram matrix per block of the Gram route (a block of K_A and one of K_B in cache).
GRAM_ROWS = 64

#: The layers of one side, and a scorer of every layer pair under a chunk of permutations (as in
#: :mod:`prhsim.metrics._calibrate`, which imports this module).
Layers = list[tuple[str, np.ndarray]]
Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]


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
        g = rbf_gram(np, name, x, 1.0) if convention == "prhsim" else rbf_gram(np, name, x, PRH_RBF_SIGMA, False)
        total = float(np.sum(g * g))
        if not total > 0.0:
            raise ValueError(f"{name} has zero variance: CKA is undefined")
        return _KernelSide(kind, centre(np, x), total, gram=g)
    xc = centre(np, x)
    if kind == "linear_cka":
        by_gram = gram_route(n, d, d)
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
    h = float(hsic_u(n, tr, one, one, sq))
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


def kernel_scorer(kind: str, layers_a: Layers, layers_b: Layers, convention: Convention) -> Scorer:
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
                    num = hsic_u(n, cross[:, l], sa.total, sb.total, kl)
                else:
                    num = cross[:, l]
                if convention == "prh":  # the PRH code's ratio: HSIC_kl/(√(HSIC_kk·HSIC_ll) + 10⁻⁶), not clipped
                    out[:, l, m] = num / (math.sqrt(sa.self_term * sb.self_term) + PRH_EPS)
                else:
                    out[:, l, m] = np.clip(num / (math.sqrt(sa.self_term) * math.sqrt(sb.self_term)), lo, 1.0)
        return out

    return score
