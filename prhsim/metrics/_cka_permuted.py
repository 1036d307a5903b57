"""CKA of (A, B[π]) for a batch of row permutations π, on the host in float64 (docs/theory.md §10).

The one route of the registered CKA scores on float64 numpy rows and of their permutation null
(:mod:`prhsim.metrics._calibrate`; docs/prh.md, "Calibrated scores: a permutation null"): the registered
:func:`~prhsim.metrics.linear_cka`, :func:`~prhsim.metrics.unbiased_cka` and :func:`~prhsim.metrics.rbf_cka`
score such rows here as the identity permutation, and the null scores the identity and every π_j here too.
Every permutation's score is formed by arithmetic of its own (a matrix product per permutation, one dot product
per permutation, the Gram route's gather summed per permutation), never by a reduction across the batch, so a
score does not depend on which permutations share its batch: the identity reproduces the registered score bit
for bit (tested), and ties between the observed score and a null score are the inputs', not the routes'.

Why a permutation needs only the cross term: every normaliser of CKA (‖ãᵀã‖_F, ‖b̃ᵀb̃‖_F, the self-HSICs,
1ᵀK̃1, 1ᵀL̃1) and B's centring are unchanged by a row permutation of B, which only enters the cross term:
``‖ãᵀ P b̃‖_F² = Σ_ij K_A[i, j] K_B[π(i), π(j)]`` (centred features ã, b̃, centred Grams K_A = ããᵀ,
K_B = b̃b̃ᵀ). So the invariant parts are formed once and the cross term per permutation, either through the
Grams (an O(N²) gather of the upper block triangle of K_B, both kernels being symmetric, in row blocks that keep
K_A's block in cache across the permutations) or through the features (a matrix product per permutation,
O(N·d_a·d_b)). The Grams are taken where a gathered entry costs less (``GATHER_COST``) and the two N x N Grams
fit within half the memory limit in force; the features otherwise. The choice depends on the sizes and that
limit only, never on the number of permutations, so the registered score and its null take one route.
Unbiased CKA (zero-diagonal Grams K̃, L̃) also needs ``tr(K̃ P L̃ Pᵀ) = ‖ãᵀ P b̃‖_F² − Σ_i s_i t_π(i)``
(s_i = ‖ã_i‖², t_i = ‖b̃_i‖²) and ``1ᵀK̃ P L̃ Pᵀ1 = Σ_i (K̃1)_i (L̃1)_π(i)``, O(N); RBF CKA (its bandwidth, a
median of all pairwise distances, is invariant too) goes through its centred Grams. ``convention="prh"``: the
PRH code's ``+ 10⁻⁶`` in the denominator, no clip, and its fixed RBF bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from prhsim._budget import current_memory_limit, ensure_fits
from prhsim.metrics._arguments import require_variance
from prhsim.metrics._cka_parts import centre, gram_route, hsic_u, rbf_gram
from prhsim.metrics._convention import PRH_EPS, PRH_RBF_SIGMA, Convention

#: The CKA kinds this route scores.
KINDS = ("linear_cka", "unbiased_cka", "rbf_cka")
#: Entries of one batched temporary of the feature route (permuted features).
BLOCK = 2**22
#: One gathered Gram entry costs about this many multiply-adds of a matrix product (CPU, numpy):
#: the Gram route is taken when N² · GATHER_COST < N · d_a · d_b (and the Grams fit).
GATHER_COST = 64
#: Rows of a Gram matrix per block of the Gram route (a block of K_A and one of K_B in cache).
GRAM_ROWS = 64

#: The layers of one side, and a scorer of every layer pair under a chunk of permutations (as in
#: :mod:`prhsim.metrics._calibrate`, which imports this module).
Layers = list[tuple[str, np.ndarray]]
Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class KernelSide:
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
            ensure_fits(8.0 * 3 * n * n, f"a {n:,} x {n:,} Gram matrix for CKA", "use fewer samples N")
            g = self.x @ self.x.T
            if self.kind == "unbiased_cka":
                np.fill_diagonal(g, 0.0)
            self.gram = g
        return self.gram


def kernel_side(kind: str, name: str, x: np.ndarray, convention: Convention = "prhsim",
                sigma: float | None = None) -> KernelSide:
    """Checks and invariant parts of one side, with the registered metric's errors.

    ``sigma``: RBF only, the registered metric's (None: 1.0, a multiple of the median distance under
    ``convention="prhsim"``; the PRH code's fixed bandwidth under ``"prh"``).
    """
    x = x.astype(np.float64)
    n, d = x.shape
    if kind == "unbiased_cka" and n < 4:
        raise ValueError(f"unbiased CKA needs at least 4 rows, got N = {n}")
    require_variance(np, name, x)
    if kind == "rbf_cka":
        relative = convention == "prhsim"
        sigma = (1.0 if relative else PRH_RBF_SIGMA) if sigma is None else float(sigma)
        ensure_fits(8.0 * 4 * n * n, f"RBF CKA of {n:,} samples (N x N kernels)", "use fewer samples N")
        g = rbf_gram(np, name, x, sigma, relative)
        total = float(np.sum(g * g))
        if not total > 0.0:
            raise ValueError(f"{name} has zero variance: CKA is undefined")
        return KernelSide(kind, centre(np, x), total, gram=g)
    xc = centre(np, x)
    by_gram = gram_route(n, d, d)  # the smaller of N x N and d x d
    if kind == "linear_cka":
        g = xc @ xc.T if by_gram else xc.T @ xc  # ‖ããᵀ‖_F = ‖ãᵀã‖_F
        total = float(np.sum(g * g))
        if not total > 0.0:  # underflow of a nearly constant representation
            raise ValueError(f"{name} has zero variance: CKA is undefined")
        return KernelSide(kind, xc, total, gram=g if by_gram else None)
    s = np.sum(xc * xc, axis=1)
    g = xc @ xc.T if by_gram else xc.T @ xc
    tr = float(np.sum(g * g) - np.sum(s * s))  # tr(K̃K̃) = ‖ããᵀ‖_F² − Σ s_i² = ‖ãᵀã‖_F² − Σ s_i²
    if by_gram:
        np.fill_diagonal(g, 0.0)  # K̃, kept for the Gram route
    ones = xc @ np.sum(xc, axis=0) - s  # K̃1
    one, sq = float(np.sum(ones)), float(np.sum(ones * ones))
    h = float(hsic_u(n, tr, one, one, sq))
    eps = float(np.finfo(np.float64).eps)
    size = (abs(tr) + one ** 2 / ((n - 1) * (n - 2)) + 2.0 * sq / (n - 2)) / (n * (n - 3))
    if not h > n * eps * size:
        raise ValueError(f"{name} has a non-positive unbiased self-HSIC ({h:.3g}): unbiased CKA is undefined")
    return KernelSide(kind, xc, h, gram=g if by_gram else None, sq=s, ones=ones, total=one)


def gram_wanted(kind: str, n: int, da: int, db: int) -> bool:
    """Whether the cross term goes through the N x N Grams (an O(N²) gather) or the features (O(N·d_a·d_b)).

    RBF: always (its kernels are Grams). Linear and unbiased: where a gathered entry is cheaper than the
    features' product, ``N² · GATHER_COST < N · d_a · d_b``, and the two Grams (with a third N x N
    temporary each, as :meth:`KernelSide.kernel` counts) fit in half the memory limit in force.
    """
    if kind == "rbf_cka":
        return True
    return n * GATHER_COST < da * db and 2 * 8.0 * 3 * n * n <= current_memory_limit() / 2


def _cross_features(xa: np.ndarray, xb: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """‖xaᵀ xb[π]‖_F² for every permutation: one matrix product and one dot product per permutation.

    ``np.matmul`` of a stack multiplies each permutation's (N, d_b) block by the same call as a stack of one, and
    ``np.vecdot`` sums each product alone: a permutation's value does not depend on its batch.
    """
    n, db = xb.shape
    da = xa.shape[1]
    step = max(1, BLOCK // (n * db + da * db))
    xat = np.ascontiguousarray(xa.T)
    out = np.empty(perms.shape[0])
    for c0 in range(0, perms.shape[0], step):
        p = perms[c0:c0 + step]
        prod = np.matmul(xat, xb[p]).reshape(p.shape[0], da * db)  # (C, d_a·d_b)
        out[c0:c0 + step] = np.vecdot(prod, prod)
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


def kernel_scorer(kind: str, layers_a: Layers, layers_b: Layers, convention: Convention,
                  sigma: float | None = None) -> Scorer:
    """CKA of every layer pair: the invariant parts once, per permutation only the cross term.

    The scorer maps (C, N) permutations (and their inverses, unused) to the (C, L_a, L_b) scores.
    """
    sides_a = [kernel_side(kind, name, x, convention, sigma) for name, x in layers_a]
    sides_b = [kernel_side(kind, name, x, convention, sigma) for name, x in layers_b]
    n = layers_a[0][1].shape[0]
    lo = -1.0 if kind == "unbiased_cka" else 0.0

    def score(perms: np.ndarray, inv: np.ndarray) -> np.ndarray:
        count = perms.shape[0]
        out = np.empty((count, len(sides_a), len(sides_b)))
        for m, sb in enumerate(sides_b):
            cross = np.empty((count, len(sides_a)))
            by_gram = [l for l, sa in enumerate(sides_a) if gram_wanted(kind, n, sa.x.shape[1], sb.x.shape[1])]
            if by_gram:
                cross[:, by_gram] = _cross_grams([sides_a[l].kernel() for l in by_gram], sb.kernel(), perms)
            for l, sa in enumerate(sides_a):
                if l not in by_gram:
                    cross[:, l] = _cross_features(sa.x, sb.x, perms)
                    if kind == "unbiased_cka":  # tr(K̃ P L̃ Pᵀ) = ‖ãᵀ P b̃‖² − Σ_i s_i t_π(i)
                        cross[:, l] -= np.vecdot(sb.sq[perms], sa.sq)
            for l, sa in enumerate(sides_a):
                if kind == "unbiased_cka":
                    kl = np.vecdot(sb.ones[perms], sa.ones)  # 1ᵀK̃ P L̃ Pᵀ 1
                    num = hsic_u(n, cross[:, l], sa.total, sb.total, kl)
                else:
                    num = cross[:, l]
                if convention == "prh":  # the PRH code's ratio: HSIC_kl/(√(HSIC_kk·HSIC_ll) + 10⁻⁶), not clipped
                    out[:, l, m] = num / (math.sqrt(sa.self_term * sb.self_term) + PRH_EPS)
                else:
                    out[:, l, m] = np.clip(num / (math.sqrt(sa.self_term) * math.sqrt(sb.self_term)), lo, 1.0)
        return out

    return score


def identity_cka(kind: str, a: np.ndarray, b: np.ndarray, convention: Convention = "prhsim",
                 sigma: float | None = None) -> float:
    """The CKA of (a, b) as this route scores the identity permutation: the registered score on float64 rows."""
    n = a.shape[0]
    identity = np.arange(n, dtype=np.intp)[None, :]
    return float(kernel_scorer(kind, [("a", a)], [("b", b)], convention, sigma)(identity, identity)[0, 0, 0])
