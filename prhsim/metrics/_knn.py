"""The k-NN sample alignment metrics: mutual and cycle k-nearest neighbours (docs/theory.md §10).

Sample metrics compare two representations ``a`` (N, d_a) and ``b`` (N, d_b) of
the same N samples, every sample with weight 1/N (unlike the p-weighted
population metrics of :mod:`prhsim.metrics`). Inputs are numpy arrays, torch
tensors (any device) or JAX arrays; the work runs in the input's library and on
its device, in float32 or wider (16-bit floats are upcast), and the results are
Python floats.

Neighbours. ``N_k(i)`` is the set of the k rows j ≠ i with the largest inner
products ⟨x_i, x_j⟩, ranked by the key (−⟨x_i, x_j⟩, j) (the smaller index wins
a tie; copies of a row tie exactly): the exact tiled search of
:mod:`prhsim.metrics._knn_search`, optionally screened in bfloat16
(:mod:`prhsim.metrics._knn_screen`; the same neighbours).

Metrics (rows first L2-normalised: x̂_i = x_i / ‖x_i‖, so inner products are cosines):

* mutual kNN (Huh et al. 2024, "The Platonic Representation Hypothesis")::

      mutual_knn(a, b; k) = (1 / N) Σ_i |N_k^a(i) ∩ N_k^b(i)| / k

  Chance level (independent representations): E = k / (N − 1), :func:`knn_chance`.
* cycle kNN (the PRH code's ``cycle_knn``): step to the k neighbours j of i in b,
  then ask whether i is among the k neighbours of some such j in a::

      cycle_knn(a, b; k) = (1 / N) Σ_i 1[∃ j ∈ N_k^b(i) : i ∈ N_k^a(j)]

Cost. The neighbour search (:mod:`prhsim.metrics._knn_search`: about N²d/2
multiply-adds in tiles, memory a few tiles plus O(N·k)); then O(N·k) (mutual
kNN) and O(N·k²) time (cycle kNN). Where both sides take the screen on the
CPU, the searches of a and b run side by side. The metrics return Python floats
and so cannot run inside ``jax.jit``.
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Any

import numpy as np  # noqa: F401  (the doctests' np)
from array_api_compat import array_namespace, device as array_device

from prhsim.metrics import _knn_screen
from prhsim.metrics._convention import Convention, check_convention
from prhsim.metrics._arguments import check_knn_k, require_variance
from prhsim.metrics._knn_search import (
    as_compute,
    as_compute_pair,
    check_block,
    check_screen,
    guard_lists,
    knn_search,
    row_max_abs,
    row_scale,
)
from prhsim.metrics._knn_ties import GATHER_ELEMENTS


# --------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------
def knn_indices(x: Any, knn_k: int, *, block: int | None = None, screen: bool | None = None,
                normalise: bool = False) -> Any:
    """The k nearest rows of each row by inner product, excluding the row itself.

    Row i of the result lists the k rows j != i with the largest ⟨x_i, x_j⟩,
    ordered by the key (−⟨x_i, x_j⟩, j): among equal inner products the smaller
    index comes first and wins the last places (the tie rule of docs/theory.md
    §10): copies of a row tie exactly, other ties are decided on the inner
    products as computed (:mod:`prhsim.metrics._knn_search`). No
    normalisation is applied unless ``normalise``: then the rows are L2-normalised tile by tile exactly as
    :func:`mutual_knn` normalises them, so its lists are the ones mutual k-NN compares (cosine neighbours).
    Exact; the inner products are formed in B x B tiles, B = ``block``, either
    directly or screened in bfloat16 under a proven error bound and re-ranked
    (:mod:`prhsim.metrics._knn_screen`, docs/theory.md §10; same answer).

    Args:
        x: (N, d) array (numpy, torch or JAX); computed in its library, on its device.
        knn_k: neighbours per row, 1 <= knn_k < N.
        block: tile side B; None picks B so that one tile is about 64 MB (the screen: equal
            blocks of at most 3500 rows).
        screen: True screens at bf16 precision (numpy or torch inputs; needs torch), False
            never; None screens where it pays: N >= 2048, k <= N/32, CPU data (bf16
            products on AMX or AVX512-BF16 CPUs, float32 products truncated to bf16 on
            others; not automatic on CUDA, where the exact tiles are faster).

    Returns:
        (N, k) integer array of ``x``'s library.

    Raises:
        ValueError: k out of range, x not 2-D, x containing NaN or inf, or
            entries so large that inner products could overflow.
        TypeError: x not real floating point, k not an integer, screen not a bool or None.

    >>> knn_indices(np.array([[0.0], [1.0], [3.0], [1.0]]), 2).tolist()
    [[1, 2], [2, 3], [1, 3], [2, 1]]
    """
    k = knn_k
    xp, x = as_compute(x, "x")
    n = x.shape[0]
    k = check_knn_k(k, n)
    block = check_block(block)
    screen = check_screen(screen, x)
    if n and x.shape[1]:
        # |x_ij| <= bound keeps every ⟨x_i, x_j⟩ (and every partial sum) finite
        bound = math.sqrt(float(xp.finfo(x.dtype).max) / x.shape[1])
        if float(xp.max(row_max_abs(xp, x))) > bound:
            raise ValueError(f"x is too large: entries above {bound:.3g} can overflow the inner products "
                             f"in {x.dtype}; scale it down")
    guard_lists(n, k, 1, "for knn_indices")
    scale = row_scale(xp, x, "x") if normalise else None
    return knn_search(xp, x, k, block, scale, screen=screen)[1]


def knn_chance(n: int, knn_k: int) -> float:
    """Expected :func:`mutual_knn` of two independent representations: k / (N − 1).

    >>> knn_chance(101, 10)
    0.1
    """
    k = knn_k
    if isinstance(n, bool) or not isinstance(n, Integral) or n < 2:
        raise ValueError(f"the number of samples N must be an integer of at least 2, got {n!r}")
    return check_knn_k(k, int(n)) / (int(n) - 1)


def _cosine_lists(xp: Any, a: Any, b: Any, k: int, block: int | None, screen: bool | None,
                  normalise: bool = True) -> tuple[Any, Any]:
    """The k-NN sets of a's and of b's L2-normalised rows (normalised tile by tile), each row's in any order;
    ``normalise=False``: of the rows as given (inner products, the PRH code's ranking)."""
    if normalise:
        scale_a, scale_b = row_scale(xp, a, "a"), row_scale(xp, b, "b")  # both checked before the work
    else:
        scale_a = scale_b = None
    screen_a = _knn_screen.wanted(a, k) if screen is None else screen
    screen_b = _knn_screen.wanted(b, k) if screen is None else screen
    if screen_a and screen_b and _knn_screen.side_by_side(a):  # two CPU searches, one per core
        from concurrent.futures import ThreadPoolExecutor

        import torch  # noqa: F401  (here, not first in the worker: an import there could wait on this thread's)

        with ThreadPoolExecutor(max_workers=1) as runner:
            lists_a = runner.submit(knn_search, xp, a, k, block, scale_a, True, False)
            lists_b = knn_search(xp, b, k, block, scale_b, True, ordered=False)[1]
            return lists_a.result()[1], lists_b
    return (knn_search(xp, a, k, block, scale_a, screen_a, ordered=False)[1],
            knn_search(xp, b, k, block, scale_b, screen_b, ordered=False)[1])


def _mutual_counts(xp: Any, ia: Any, ib: Any) -> Any:
    """|N^a(i) ∩ N^b(i)| for every i (each list holds distinct indices): equal neighbours sort side by side."""
    both = xp.sort(xp.concat([ia, ib], axis=1), axis=1)
    return xp.sum(both[:, 1:] == both[:, :-1], axis=1)


def _both_lists(a: Any, b: Any, k: Any, block: Any, screen: Any, what: str,
                normalise: bool = True) -> tuple[Any, int, int, Any, Any]:
    """Checked inputs and both sides' k-NN lists of normalised rows (``normalise=False``: of the rows as
    given): ``(xp, N, k, lists of a, lists of b)``."""
    xp, a, b = as_compute_pair(a, b)
    n = a.shape[0]
    k = check_knn_k(k, n)
    require_variance(xp, "a", a, what)  # every row equal: lists of ties only
    require_variance(xp, "b", b, what)
    block = check_block(block)
    screen = check_screen(screen, a)
    guard_lists(n, k, 2, f"for {what}")
    ia, ib = _cosine_lists(xp, a, b, k, block, screen, normalise)
    return xp, n, k, ia, ib


def mutual_knn(a: Any, b: Any, knn_k: int = 10, *, block: int | None = None, screen: bool | None = None,
               convention: Convention = "prhsim") -> float:
    """Mean fraction of shared k nearest neighbours (cosine similarity) in two representations.

    ``(1/N) Σ_i |N_k^a(i) ∩ N_k^b(i)| / k`` with rows L2-normalised and the tie
    rule of :func:`knn_indices` (Huh et al. 2024; docs/theory.md §10). 1 when
    the neighbour sets agree, :func:`knn_chance` in expectation for independent
    representations. Invariant under orthogonal maps and positive rescalings
    of either side and under a common permutation of the rows.

    Args:
        a: (N, d_a) representation (numpy, torch or JAX).
        b: (N, d_b) representation of the same N samples, same library.
        knn_k: neighbours per sample, 1 <= knn_k < N.
        block: tile side of the neighbour search (see :func:`knn_indices`).
        screen: screening of the neighbour search: True, False, None = where it pays (:func:`knn_indices`).
        convention: "prhsim", or "prh": neighbours by inner product of the rows as given, as the PRH code
            ranks them (the same lists on L2-normalised rows, which its protocol scores).

    Raises:
        ValueError: k out of range, inputs not 2-D or of different N, NaN or inf, a zero row.

    >>> x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> mutual_knn(x, 3 * x, knn_k=1)
    1.0
    """
    k = knn_k
    normalise = check_convention(convention) == "prhsim"
    xp, n, k, ia, ib = _both_lists(a, b, k, block, screen, "mutual_knn", normalise)
    return float(xp.sum(_mutual_counts(xp, ia, ib))) / (n * k)


def shared_neighbours(lists_a: Any, lists_b: Any) -> float:
    """``(1/N) Σ_i |N^a(i) ∩ N^b(i)| / k`` from two sides' k-NN lists (N x k each, distinct indices per row): on the
    lists of ``knn_indices(x, k, normalise=True)`` this is :func:`mutual_knn`, so a side's lists can be found once
    and reused.

    >>> shared_neighbours(np.array([[1, 2], [0, 2], [0, 1]]), np.array([[2, 1], [2, 0], [1, 2]]))
    0.8333333333333334
    """
    xp = array_namespace(lists_a)
    ia, ib = lists_a, lists_b
    if ia.ndim != 2 or ia.shape != ib.shape or ia.shape[1] < 1:
        raise ValueError(f"both sides need N x k lists of one shape, got {tuple(ia.shape)} and {tuple(ib.shape)}")
    n, k = ia.shape
    return float(xp.sum(_mutual_counts(xp, ia, ib))) / (n * k)


def cycle_knn(a: Any, b: Any, knn_k: int = 10, *, block: int | None = None, screen: bool | None = None,
               convention: Convention = "prhsim") -> float:
    """Fraction of samples that return to themselves along a neighbour cycle b → a.

    ``(1/N) Σ_i 1[∃ j ∈ N_k^b(i) : i ∈ N_k^a(j)]``: from i, step to each of its
    k nearest neighbours j in b, then ask whether i is among j's k nearest
    neighbours in a (the definition of the PRH code's ``cycle_knn``, which
    indexes a's lists by b's). Rows L2-normalised, the tie rule of
    :func:`knn_indices`; docs/theory.md §10. O(N·k²) time after the neighbour search.

    Args:
        a: (N, d_a) representation of the return step.
        b: (N, d_b) representation of the first step, same library.
        knn_k: neighbours per sample, 1 <= knn_k < N.
        block: tile side of the neighbour search.
        screen: screening of the neighbour search (see :func:`knn_indices`).
        convention: "prhsim", or "prh": neighbours by inner product of the rows as given, as the PRH code
            ranks them (the same lists on L2-normalised rows, which its protocol scores).

    Raises:
        ValueError: k out of range, inputs not 2-D or of different N, NaN or inf, a zero row.

    >>> x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> cycle_knn(x, x, knn_k=1)
    1.0
    """
    k = knn_k
    normalise = check_convention(convention) == "prhsim"
    xp, n, k, ia, ib = _both_lists(a, b, k, block, screen, "cycle_knn", normalise)
    rows = max(1, GATHER_ELEMENTS // (k * k))
    hits = 0
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        back = xp.reshape(xp.take(ia, xp.reshape(ib[r0:r1, ...], (-1,)), axis=0), (r1 - r0, k * k))
        me = xp.arange(r0, r1, dtype=back.dtype, device=array_device(back))[:, None]
        hits += int(xp.sum(xp.astype(xp.any(back == me, axis=1), xp.int32)))
    return hits / n
