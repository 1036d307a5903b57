"""CKNNA: centred kernel alignment restricted to mutual nearest neighbours (docs/theory.md §10).

Huh et al. 2024 ("The Platonic Representation Hypothesis") define CKNNA as CKA
in which only pairs that are k-nearest neighbours in both representations
count. With rows L2-normalised (x̂_i = a_i/‖a_i‖, ŷ_i = b_i/‖b_i‖), linear
kernels K = X̂X̂ᵀ and L = ŶŶᵀ, their double-centred forms K̄ = HKH and L̄ = HLH
(H = I − 11ᵀ/N), and the neighbour sets N_k^a(i), N_k^b(i) of
:func:`prhsim.metrics._knn.knn_indices` (cosine similarity, i excluded, ties
to the smaller index)::

    Align_α(K̄, L̄) = Σ_i Σ_j α_ij K̄_ij L̄_ij
    CKNNA(a, b; k) = Align_{α^ab}(K̄, L̄) / √( Align_{α^aa}(K̄, K̄) · Align_{α^bb}(L̄, L̄) )

    α^ab_ij = 1[j ∈ N_k^a(i) and j ∈ N_k^b(i)],  α^aa_ij = 1[j ∈ N_k^a(i)],  α^bb_ij = 1[j ∈ N_k^b(i)]

(α_ii = 0 always: a sample is not its own neighbour.) Each side's
normaliser uses that side's own neighbour mask, so CKNNA(a, a) = 1 and, by
Cauchy–Schwarz (α^ab ≤ α^aa, α^ab ≤ α^bb), −1 ≤ CKNNA ≤ 1. With k = N − 1
every off-diagonal pair counts and CKNNA is linear CKA of the normalised
features without the diagonal terms.

Computation. K̄_ij = ⟨c_i, c_j⟩ with c_i = x̂_i − mean_l x̂_l (HKH is the Gram
matrix of the centred rows), so only the N·k entries on neighbour pairs are
needed: no N x N kernel is formed. They are computed by gathering the
neighbours' centred rows in row blocks (small k) or from (rows x N) slabs of
centred inner products (k a sizeable fraction of N). Memory: the normalised
and the centred copies of a and b (N·d each), O(N·k) for the neighbour lists
and one block.

This is the double-centred form fixed in docs/theory.md §10. The public PRH
code differs in two ways: it applies the unbiased HSIC estimator (Song et al.
2012) to the masked, uncentred kernels, and it adds 1e-6 to the denominator.
``convention="prh"`` computes that number on the rows as given (K = aaᵀ,
L = bbᵀ, neighbours by inner product, as the PRH code; its protocol gives
L2-normalised rows): with masks ``M_ab = α^ab``, ``M_aa = α^aa``, ``M_bb = α^bb``
(row i's neighbours; not symmetric) and the unbiased HSIC of two N x N matrices
with zero diagonals ``hsic_u(X, Y) = [Σ_ij X_ij Y_ji + (1ᵀX1)(1ᵀY1)/((N−1)(N−2))
− 2·1ᵀXY1/(N−2)] / (N(N−3))``::

    CKNNA_prh = hsic_u(M_ab∘K, M_ab∘L) / (√(hsic_u(M_aa∘K, M_aa∘K)·hsic_u(M_bb∘L, M_bb∘L)) + 10⁻⁶)

Each term needs only the N·k masked entries: ``Σ_ij X_ij Y_ji`` runs over the
pairs (i, j) whose transpose (j, i) is also in the mask (K and L are symmetric),
and ``1ᵀXY1`` is X's column sums against Y's row sums. The sums are float64 on
the host; the kernel entries are computed in the input's dtype. It needs
N >= 4 and k >= 2 (the PRH code refuses k < 2).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from array_api_compat import device as array_device

from prhsim.metrics._cka import to_host
from prhsim.metrics._convention import PRH_EPS, Convention, check_convention
from prhsim.metrics._arguments import check_knn_k, require_variance
from prhsim.metrics._knn_search import (
    TILE_BYTES,
    as_compute_pair,
    check_block,
    guard_lists,
    knn_search,
    normalised_rows,
)
from prhsim.metrics._knn_ties import GATHER_ELEMENTS


def _neighbour_inner(xp: Any, c: Any, idx: Any) -> Any:
    """(N, k): ⟨c_i, c_{idx[i, p]}⟩, by gathering (small k) or from slabs of c cᵀ (large k)."""
    n, d = c.shape
    k = idx.shape[1]
    out = []
    if 32 * k <= n:
        rows = max(1, GATHER_ELEMENTS // (k * max(d, 1)))
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            near = xp.reshape(xp.take(c, xp.reshape(idx[r0:r1, ...], (-1,)), axis=0), (r1 - r0, k, d))
            out.append(xp.sum(c[r0:r1, None, :] * near, axis=2))
    else:
        rows = max(1, TILE_BYTES // (n * (xp.finfo(c.dtype).bits // 8)))
        ct = xp.permute_dims(c, (1, 0))
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            out.append(xp.take_along_axis(c[r0:r1, ...] @ ct, idx[r0:r1, ...], axis=1))
    return xp.concat(out, axis=0)


class _Masked:
    """A neighbour-masked kernel ``M∘K`` held as its N·k entries: sorted codes ``i·N + j`` and values."""

    def __init__(self, n: int, codes: np.ndarray, values: np.ndarray) -> None:
        order = np.argsort(codes, kind="stable")
        self.n, self.codes, self.values = n, codes[order], values[order]

    @classmethod
    def of_lists(cls, n: int, idx: Any, values: Any) -> _Masked:
        idx = np.asarray(to_host(idx), dtype=np.int64)
        rows = np.repeat(np.arange(n, dtype=np.int64), idx.shape[1])
        return cls(n, rows * n + idx.reshape(-1), np.asarray(to_host(values), dtype=np.float64).reshape(-1))

    def restricted(self, other: _Masked) -> _Masked:
        """The entries of self on the pairs both masks hold (``M_ab = M_aa∘M_bb``)."""
        keep = np.isin(self.codes, other.codes, assume_unique=True)
        return _Masked(self.n, self.codes[keep], self.values[keep])

    def transposed_values(self, other: _Masked) -> np.ndarray:
        """``Y_ji`` for each entry (i, j) of self, Y = other (0 where (j, i) is not in other's mask)."""
        n = self.n
        t = (self.codes % n) * n + self.codes // n
        pos = np.minimum(np.searchsorted(other.codes, t), max(other.codes.size - 1, 0))
        found = other.codes[pos] == t if other.codes.size else np.zeros(t.shape, dtype=bool)
        return np.where(found, other.values[pos] if other.codes.size else 0.0, 0.0)

    def sums(self, axis: int) -> np.ndarray:
        """Row sums (axis=1) or column sums (axis=0)."""
        where = self.codes // self.n if axis == 1 else self.codes % self.n
        return np.bincount(where, weights=self.values, minlength=self.n)


def _hsic_masked(x: _Masked, y: _Masked) -> float:
    """Song et al.'s unbiased HSIC of two masked kernels with zero diagonals (module docstring)."""
    n = x.n
    trace = float(np.sum(x.values * x.transposed_values(y)))
    total = float(np.sum(x.values)) * float(np.sum(y.values)) / ((n - 1) * (n - 2))
    cross = 2.0 * float(x.sums(0) @ y.sums(1)) / (n - 2)
    return (trace + total - cross) / (n * (n - 3))


def _cknna_prh(xp: Any, a: Any, b: Any, ia: Any, ib: Any) -> float:
    """The PRH code's CKNNA of the rows with their inner-product neighbour lists (module docstring)."""
    n = a.shape[0]
    ka = _Masked.of_lists(n, ia, _neighbour_inner(xp, a, ia))
    lb = _Masked.of_lists(n, ib, _neighbour_inner(xp, b, ib))
    kl, lk = ka.restricted(lb), lb.restricted(ka)  # M_ab∘K and M_ab∘L, on the same pairs in the same order
    sim_kk, sim_ll = _hsic_masked(ka, ka), _hsic_masked(lb, lb)
    product = sim_kk * sim_ll
    if not product >= 0.0:
        raise ValueError(f"cknna (convention 'prh') is undefined: the product of the self-HSICs is negative "
                         f"({product:.3g})")
    return _hsic_masked(kl, lk) / (math.sqrt(product) + PRH_EPS)


def cknna(a: Any, b: Any, knn_k: int | None = 10, *, block: int | None = None,
          convention: Convention = "prhsim") -> float:
    """CKNNA: CKA of the L2-normalised features restricted to mutual k-nearest-neighbour pairs.

    ``Σ_{j ∈ N^a(i) ∩ N^b(i)} K̄_ij L̄_ij / √(Σ_{j ∈ N^a(i)} K̄_ij² · Σ_{j ∈ N^b(i)} L̄_ij²)``
    summed over i, with K̄ = HKH, L̄ = HLH the double-centred linear kernels of
    the normalised rows (module docstring; Huh et al. 2024; docs/theory.md §10).
    1 for a representation with itself, in [−1, 1] always, invariant under
    orthogonal maps and positive rescalings of either side and under a common
    permutation of the rows.

    Args:
        a: (N, d_a) representation (numpy, torch or JAX).
        b: (N, d_b) representation of the same N samples, same library.
        knn_k: neighbours per sample, 1 <= knn_k < N; None means N − 1 (every pair:
            CKA without its diagonal terms). The default is resolved before k is checked.
        block: tile side of the neighbour search (see ``knn_indices``).
        convention: "prhsim", or "prh" for the PRH code's unbiased masked form (module docstring).

    Raises:
        ValueError: k out of range, inputs not 2-D or of different N, NaN or inf,
            a zero row; or a vanishing normaliser: Align(K̄, K̄) = 0 (or the same
            for L̄) when a side's centred kernel is exactly zero on all of its
            neighbour pairs (e.g. all rows parallel), where CKNNA is undefined.

    >>> import numpy as np
    >>> x = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-0.6, 0.8], [-1.0, 0.1]])
    >>> round(cknna(x, 2 * x, knn_k=2), 12)
    1.0
    """
    k = knn_k
    convention = check_convention(convention)
    xp, a, b = as_compute_pair(a, b)
    n = a.shape[0]
    k = n - 1 if k is None else k
    k = check_knn_k(k, n)
    require_variance(xp, "a", a, "cknna")  # every row equal: lists of ties only
    require_variance(xp, "b", b, "cknna")
    if convention == "prh" and (k < 2 or n < 4):
        raise ValueError(f"cknna (convention 'prh') needs knn_k >= 2 and N >= 4, got knn_k = {k} and N = {n}")
    block = check_block(block)
    guard_lists(n, k, 2, "for cknna")
    if convention == "prhsim":
        a, b = normalised_rows(xp, a, "a"), normalised_rows(xp, b, "b")
    ia = knn_search(xp, a, k, block)[1]
    ib = knn_search(xp, b, k, block)[1]
    if convention == "prh":
        return _cknna_prh(xp, a, b, ia, ib)
    ka = _neighbour_inner(xp, a - xp.mean(a, axis=0, keepdims=True), ia)
    lb = _neighbour_inner(xp, b - xp.mean(b, axis=0, keepdims=True), ib)
    align_kk = float(xp.sum(ka * ka))
    align_ll = float(xp.sum(lb * lb))
    for side, value in (("a", align_kk), ("b", align_ll)):
        if value == 0.0:
            raise ValueError(f"cknna is undefined: the centred kernel of {side} is zero on all of its "
                             f"k-nearest-neighbour pairs (Align = 0)")
    # Shared neighbours sit side by side once each row's two lists are sorted together
    # (stable: a's entry first); their products K̄_ij L̄_ij make the numerator.
    both = xp.concat([ia, ib], axis=1)
    order = xp.argsort(both, axis=1, stable=True)
    both = xp.take_along_axis(both, order, axis=1)
    vals = xp.take_along_axis(xp.concat([ka, lb], axis=1), order, axis=1)
    shared = both[:, 1:] == both[:, :-1]
    zero = xp.zeros((), dtype=vals.dtype, device=array_device(vals))
    align_kl = float(xp.sum(xp.where(shared, vals[:, :-1] * vals[:, 1:], zero)))
    return align_kl / math.sqrt(align_kk * align_ll)
