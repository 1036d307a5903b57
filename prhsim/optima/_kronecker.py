"""Top-m eigenpairs of a product world without forming K (docs/theory.md §6).

``K = ⊗ K_f`` has eigenvalues ``Π_f λ^{(f)}_{i_f}`` and eigenfunctions
``h_{(i)}(z) = Π_f h^{(f)}_{i_f}(z_f)``. Each factor is sorted by ``|λ|``
(its trivial pair ``(1, √p_f)`` first), and a heap pops index tuples in
decreasing ``|Π_f λ|``; positive products come out in decreasing order, so the
first m positive ones (skipping (0, …, 0) when centred) are the top m. This is
exact for indefinite factors too. If fewer than m positive products exist,
all products are enumerated instead (refused above ENUMERATE_LIMIT states);
small worlds with complete factor spectra are enumerated directly (the same
result, bit for bit).

Only each factor's ``2(m+1)`` pairs of largest |λ| are computed (both ends of
an indefinite spectrum): by one dense tridiagonalisation up to
FULL_FACTOR_UP_TO states, by Lanczos above; small factors are diagonalised in
full. Every pair left out has |λ| at most that of the last pair held, so the
heap stays exact; if it reaches the end of a partial spectrum, that spectrum is
doubled and the heap rerun. :class:`FactorSpectra` keeps factor spectra across
product worlds that share factor objects.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.linalg.lapack as lapack
import scipy.sparse.linalg as spla

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim._types import States, Vector
from prhsim.optima._basis import EIGSH_TOL, EigenBasis, centred_operator, solver_threads
from prhsim.worlds import FiniteWorld, ProductWorld

#: Factors up to this size are diagonalised densely (in full, or their top pairs by |λ| from one
#: tridiagonalisation); larger ones by Lanczos, top-r by |λ|.
FULL_FACTOR_UP_TO = 2_000
#: Dense factors below this size are always diagonalised in full, and so are those asked for at least
#: PARTIAL_FRACTION of their pairs: there a full eigh is as fast as the partial path (measured with one BLAS
#: thread: the partial path wins up to about 40 pairs at 300 states, 170 at 1000, 300 at 1500).
PARTIAL_FROM = 300
#: A dense factor's ``top`` pairs are computed alone when ``top < PARTIAL_FRACTION · n_f``; else in full.
PARTIAL_FRACTION = 1 / 6
#: Largest factor diagonalised in full when every eigenvalue is needed (enumeration fallback).
DENSE_FACTOR_LIMIT = 5_000
#: A product world of at most this many states per wanted pair whose factor spectra are complete is enumerated
#: rather than walked by the heap: the same result, bit for bit, sooner (measured: the heap costs about
#: 9 µs per pair, enumeration 70 µs plus 8 ns per product).
ENUMERATE_PER_PAIR = 500
#: Enumeration sorts every product up to this many; above, only those at least the m-th largest.
SORT_ALL_UP_TO = 2_048
#: Largest product world whose eigenvalues are all enumerated as a fallback.
ENUMERATE_LIMIT = 20_000_000
#: States per block in KroneckerBasis.evaluate (measured at 10^5 states x 64 features: 256-1024 alike,
#: 2x faster than one pass over all states).
EVALUATE_BLOCK = 512
#: Full eigh of a factor holds its K, ``K − 3ssᵀ``, the eigenvectors and the divide-and-conquer
#: workspace: about this many n_f x n_f float tables (measured: 4). The partial path holds fewer.
FACTOR_TABLES = 5


@dataclass(frozen=True)
class FactorSpectrum:
    """A factor's eigenpairs, trivial pair first, then by |λ| descending.

    ``functions[:, i] = vectors[:, i] / sqrt(p)`` are its p-whitened eigenfunctions.
    ``complete`` is False when only the pairs of largest |λ| were computed; every pair left out then has
    |λ| at most that of the last pair held (the heap relies on it).
    """

    values: Vector
    functions: np.ndarray
    complete: bool = True

    @property
    def pairs(self) -> int:
        """Non-trivial pairs held (the trivial pair at index 0 not counted)."""
        return self.values.size - 1


def _ordered(s: Vector, vals: Vector, vecs: np.ndarray, complete: bool) -> FactorSpectrum:
    # spec K ⊂ [−1, 1] (§0); clipping the rounding (a second eigenvalue 1 computed as 1 + 2e-16) keeps the
    # trivial 1.0 first in the |λ| order, which the heap's order (and its equality with enumeration) needs
    vals = np.clip(vals, -1.0, 1.0)
    order = np.lexsort((np.arange(vals.size), -vals, -np.abs(vals)))
    values = np.concatenate([[1.0], vals[order]])
    vectors = np.concatenate([s[:, None], vecs[:, order]], axis=1)
    return FactorSpectrum(values, np.ascontiguousarray(vectors / s[:, None]), complete)


def by_lanczos(n: int, top: int | None) -> bool:
    """Whether ``factor_spectrum(world, top)`` of an n-state factor runs Lanczos (and draws a start vector)."""
    return top is not None and n > FULL_FACTOR_UP_TO and top + 1 < n - 1


def _partial_dense(n: int, top: int | None) -> bool:
    return top is not None and n >= PARTIAL_FROM and top < PARTIAL_FRACTION * n


def _top_by_magnitude(A: np.ndarray, top: int) -> tuple[Vector, np.ndarray]:
    """The ``top`` pairs of largest |λ| of a symmetric A whose smallest eigenvalue (the deflated s) is dropped.

    One tridiagonalisation ``A = Q T Qᵀ`` (``dsytrd``); all eigenvalues of T (``sterf``, O(n²)) tell how
    many of the wanted pairs lie at each end of the spectrum; those eigenpairs of T alone are computed
    (bisection and inverse iteration, ``stebz`` + ``stein``, O(n·top) plus reorthogonalisation within
    clusters; MRRR, ``stemr``, if inverse iteration fails) and taken back by Q (``dormqr`` on the
    reflectors, as ``dormtr`` would): O(n²·top) instead of the O(n³) back-transformation of a full eigh.
    A is overwritten.
    """
    n = A.shape[0]
    lwork = int(lapack.dsytrd_lwork(n, lower=1)[0])
    # A is symmetric: its transpose is the same matrix in Fortran order, reduced in place without a copy
    c, d, e, tau, info = lapack.dsytrd(A.T, lower=1, lwork=lwork, overwrite_a=1)
    if info != 0:  # pragma: no cover - LAPACK argument errors only
        raise RuntimeError(f"dsytrd failed (info {info})")
    w = sla.eigvalsh_tridiagonal(d, e, lapack_driver="sterf")  # ascending; w[0] is s, deflated to −2
    low, high = 0, 0  # pairs taken from the bottom (w[1], w[2], …) and from the top (w[n−1], w[n−2], …)
    for _ in range(top):
        if abs(w[1 + low]) > abs(w[n - 1 - high]):
            low += 1
        else:
            high += 1
    parts = [_tridiagonal_pairs(d, e, span) for span, size in (((1, low), low), ((n - high, n - 1), high)) if size]
    vals = np.concatenate([p[0] for p in parts])
    Z = np.concatenate([p[1] for p in parts], axis=1)
    reflectors = c[1:, : n - 1]
    work = lapack.dormqr("L", "N", reflectors, tau, Z[1:], lwork=-1)[1]
    QZ, _, info = lapack.dormqr("L", "N", reflectors, tau, Z[1:], lwork=max(1, int(work[0])), overwrite_c=1)
    if info != 0:  # pragma: no cover
        raise RuntimeError(f"dormqr failed (info {info})")
    Z[1:] = QZ
    return vals, Z


def _tridiagonal_pairs(d: Vector, e: Vector, span: tuple[int, int]) -> tuple[Vector, np.ndarray]:
    """Eigenpairs ``span[0]..span[1]`` (ascending, 0-based) of the tridiagonal (d, e)."""
    try:
        return sla.eigh_tridiagonal(d, e, select="i", select_range=span, lapack_driver="stebz")
    except np.linalg.LinAlgError:  # pragma: no cover - inverse iteration did not converge
        return sla.eigh_tridiagonal(d, e, select="i", select_range=span, lapack_driver="stemr")


def factor_spectrum(world: FiniteWorld, top: int | None = None, *, rng: RngLike = None,
                    v0: Vector | None = None) -> FactorSpectrum:
    """Diagonalise one factor of ``K − 3ssᵀ`` (s goes to −2; it is restored as (1, s) at index 0).

    * ``top=None``, or a factor below PARTIAL_FROM states, or ``top ≥ PARTIAL_FRACTION·n_f``: every pair,
      by dense ``eigh`` (divide and conquer); ``complete=True``.
    * a factor of at most FULL_FACTOR_UP_TO states: its ``top`` non-trivial pairs of largest |λ| (both
      ends of an indefinite spectrum) from one dense tridiagonalisation (:func:`_top_by_magnitude`);
      deterministic, no start vector.
    * a larger factor: its ``top`` pairs of largest |λ| by Lanczos (``eigsh``, ``which="LM"``) from the
      start vector ``v0``, or one drawn from ``rng`` (``standard_normal(n_f)``) when v0 is None.
    """
    s = world.sqrt_p
    if by_lanczos(world.n, top):
        ncv = min(world.n, max(2 * (top + 1) + 1, 20))  # eigsh's default
        ensure_fits(FLOAT * world.n * (2 * ncv + top + 9),
                    f"Lanczos on a factor of {world.n:,} states ({top + 1} pairs)", "lower k")
        op = centred_operator(world)
        if v0 is None:
            v0 = check_rng(rng).standard_normal(world.n)
        with solver_threads(world.n):
            vals, vecs = spla.eigsh(op, k=top + 1, which="LM", v0=v0, tol=EIGSH_TOL, ncv=ncv)
        keep = np.argsort(vals)[1:]  # drop the deflated trivial pair at -2
        return _ordered(s, vals[keep], vecs[:, keep], complete=False)
    if world.n > DENSE_FACTOR_LIMIT:
        raise ValueError(f"a product world's factor has {world.n} states; its full spectrum is computed densely "
                         f"only up to {DENSE_FACTOR_LIMIT}")
    if _partial_dense(world.n, top):
        ensure_fits((FACTOR_TABLES - 1) * FLOAT * float(world.n) ** 2,
                    f"the top {top} pairs of a factor of {world.n:,} states", "use smaller factors")
        A = world.dense_kernel()
        A -= 3.0 * np.outer(s, s)
        with solver_threads(world.n):
            vals, vecs = _top_by_magnitude(A, top)
        return _ordered(s, vals, vecs, complete=False)
    ensure_fits(FACTOR_TABLES * FLOAT * float(world.n) ** 2, f"the full spectrum of a factor of {world.n:,} states",
                "use smaller factors")
    with solver_threads(world.n):
        vals, vecs = sla.eigh(world.dense_kernel() - 3.0 * np.outer(s, s), driver="evd")  # divide and conquer: robust to clustered spectra
    return _ordered(s, vals[1:], vecs[:, 1:], complete=True)


class FactorSpectra:
    """A cache of factor spectra shared by product worlds with common factor objects (§6).

    Keyed by the factor world's identity; the cache keeps a reference to each factor, so its id cannot be
    reused while the entry lives. ``get(world, top)`` returns a spectrum with at least ``top`` non-trivial
    pairs (or a complete one), computing it only when the held one is too short; a longer or complete
    result replaces the held one.

    Example:
        >>> from prhsim.worlds import ProductWorld, ring
        >>> base = ring(300)
        >>> cache = FactorSpectra()
        >>> a = kronecker_top(ProductWorld([base, ring(4)]), 5, spectra=cache)
        >>> b = kronecker_top(ProductWorld([base, ring(5)]), 5, spectra=cache)
        >>> a.spectra[0] is b.spectra[0], len(cache)
        (True, 3)
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[FiniteWorld, FactorSpectrum]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, world: object) -> bool:
        return id(world) in self._entries and self._entries[id(world)][0] is world

    def held(self, world: FiniteWorld) -> FactorSpectrum | None:
        """The spectrum held for this factor object, if any."""
        entry = self._entries.get(id(world))
        return entry[1] if entry is not None and entry[0] is world else None

    def clear(self) -> None:
        self._entries.clear()

    def get(self, world: FiniteWorld, top: int | None = None, *, rng: RngLike = None,
            v0: Vector | None = None) -> FactorSpectrum:
        """A spectrum of ``world`` with at least ``top`` non-trivial pairs (every pair if top is None).

        The held spectrum if it is complete or long enough (nothing is drawn from ``rng`` then); otherwise
        ``factor_spectrum(world, top, rng=rng, v0=v0)``, which is then held.
        """
        spec = self.held(world)
        if spec is not None and (spec.complete or (top is not None and spec.pairs >= top)):
            return spec
        fresh = factor_spectrum(world, top, rng=rng, v0=v0)
        if spec is None or fresh.complete or fresh.pairs > spec.pairs:
            self._entries[id(world)] = (world, fresh)
        return fresh


@dataclass(frozen=True)
class KroneckerBasis(EigenBasis):
    """Eigenpairs of a product world as index tuples into the factors' spectra."""

    values: Vector
    indices: np.ndarray  # (m, F): per eigenpair, the index into each factor's spectrum
    spectra: tuple[FactorSpectrum, ...]
    world: ProductWorld
    backend: str = "kronecker"

    @property
    def n(self) -> int:
        return self.world.n

    def evaluate(self, states: States | None = None) -> np.ndarray:
        """``h_{(i)}(z) = Π_f h^{(f)}_{i_f}(z_f)`` at the given states (all states if None).

        Columns first: each factor's table is cut to the m columns used (n_f x m, C-ordered) before any
        row is gathered, and rows are gathered and multiplied in blocks of EVALUATE_BLOCK states so the
        gathered rows stay in cache (never an (s x |factor spectrum|) table).
        """
        rows = self.world.n if states is None else int(np.size(states))
        m, F = self.indices.shape[0], len(self.spectra)
        ensure_fits(FLOAT * rows * (2 * m + F + 1), f"eigenfunctions of {rows:,} states x {m} features",
                    "evaluate on fewer states")
        if states is None:
            states = np.arange(self.world.n, dtype=np.int64)
        zs = [np.ravel(z) for z in self.world.unravel(states)]
        tables = [np.ascontiguousarray(spec.functions[:, self.indices[:, f]]) for f, spec in enumerate(self.spectra)]
        out = np.empty((rows, m))
        block = np.empty((min(EVALUATE_BLOCK, rows), m))
        for start in range(0, rows, EVALUATE_BLOCK):
            stop = min(start + EVALUATE_BLOCK, rows)
            acc, tmp = out[start:stop], block[: stop - start]
            np.take(tables[0], zs[0][start:stop], axis=0, out=acc)
            for table, z in zip(tables[1:], zs[1:]):
                np.take(table, z[start:stop], axis=0, out=tmp)
                acc *= tmp
        return out

    def take(self, m: int) -> "KroneckerBasis":
        return KroneckerBasis(self.values[:m], self.indices[:m], self.spectra, self.world)


def kronecker_top(world: ProductWorld, m: int, *, centred: bool = True, rng: RngLike = None,
                  spectra: FactorSpectra | None = None) -> KroneckerBasis:
    """Top-m eigenpairs of ``⊗ K_f`` (centred: excluding the trivial tuple), in O(mF log(mF)) after the factors.

    Each factor starts with its ``2(m+1)`` non-trivial pairs of largest |λ| (:func:`factor_spectrum`: in
    full for small factors, by one dense tridiagonalisation up to FULL_FACTOR_UP_TO states, by Lanczos
    above); if the heap reaches the end of a partial spectrum, that factor's spectrum is doubled and the
    heap rerun, so the result is exact. A factor object that occurs twice is diagonalised once.

    ``spectra``: a :class:`FactorSpectra` cache to read factor spectra from and add them to (a fresh one
    for this call if None). A factor it holds with at least ``2(m+1)`` pairs (or complete) is not recomputed.

    ``rng``: one ``standard_normal(n_f)`` start vector is drawn for every factor that takes the Lanczos path
    (``by_lanczos(n_f, 2(m+1))``), in factor order, before any factor is solved, whether or not the cache
    holds that factor; then one more for each extension of a Lanczos factor. Dense factors draw nothing.
    The draws do not depend on the cache, so with a cache the result is bitwise identical to the result
    without it whenever each held spectrum has the pairs this call would compute: the same number of
    pairs and, for a Lanczos factor, from the same start vector (the same seed, the factor at the same
    place among the Lanczos factors). A held spectrum with more pairs (or a complete one) gives the same
    eigenvalues to rounding and the same eigenspaces at gaps.
    """
    cache = FactorSpectra() if spectra is None else spectra
    top = 2 * (m + 1)
    lanczos = [by_lanczos(f.n, top) for f in world.factors]
    gen = check_rng(rng) if rng is not None or any(lanczos) else None  # default_rng(0) only when it is used
    starts = [gen.standard_normal(f.n) if use else None for f, use in zip(world.factors, lanczos)]
    with solver_threads(max(world.shape)):
        current = [cache.get(f, top, v0=v0) for f, v0 in zip(world.factors, starts)]
        if world.n <= ENUMERATE_PER_PAIR * m and all(spec.complete for spec in current):
            values, indices = _enumerate(tuple(current), m, centred)  # the heap's result, sooner
            return KroneckerBasis(values, indices, tuple(current), world)
        while True:
            result = _heap(current, m, centred)
            if isinstance(result, list):
                break
            f = result  # a factor whose partial spectrum ran out
            current[f] = cache.get(world.factors[f], 2 * current[f].pairs, rng=gen)
        if len(result) < m:
            return _enumerate_all(world, m, centred, cache)
    values = np.array([v for v, _ in result])
    indices = np.array([idx for _, idx in result], dtype=np.int64)
    return KroneckerBasis(values, indices, tuple(current), world)


def _heap(spectra: list[FactorSpectrum], m: int, centred: bool) -> list[tuple[float, tuple[int, ...]]] | int:
    """Pop index tuples by decreasing |Π λ|; return the first m positive ones (fewer if the products run out),
    or the number of a factor whose partial spectrum would be needed beyond its end.

    Products are formed left to right from 1.0 in factor order (as ``np.kron`` forms them), ties in |Π λ|
    pop in lexicographic (row-major) order of the tuples: the result is the enumeration's, bit for bit.
    """
    F = len(spectra)
    tables = [spec.values.tolist() for spec in spectra]  # Python floats: the same IEEE products, faster
    sizes = [len(t) for t in tables]
    partial = [not spec.complete for spec in spectra]

    def value(idx: tuple[int, ...]) -> float:
        v = 1.0
        for table, i in zip(tables, idx):
            v *= table[i]
        return v

    trivial = (0,) * F
    heap = [(-1.0, trivial)]
    seen = {trivial}
    found: list[tuple[float, tuple[int, ...]]] = []
    while heap and len(found) < m:
        neg_mag, idx = heapq.heappop(heap)
        if neg_mag == 0.0:
            break  # every remaining product is zero
        v = value(idx)
        if v > 0 and not (centred and idx == trivial):
            found.append((v, idx))
        for f in range(F):
            if idx[f] + 1 < sizes[f]:
                nxt = idx[:f] + (idx[f] + 1,) + idx[f + 1:]
                if nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(heap, (-abs(value(nxt)), nxt))
            elif partial[f]:
                return f
    return found


def _enumerate(spectra: tuple[FactorSpectrum, ...], m: int, centred: bool) -> tuple[Vector, np.ndarray]:
    """Top-m of every product of complete factor spectra by a stable sort: values and index tuples.

    The products are ``np.kron``'s (``a[i]·b[j]`` at ``i·|b| + j``, left to right from 1.0): row-major.
    """
    all_values = np.ones(1)
    for spec in spectra:
        all_values = np.multiply.outer(all_values, spec.values).ravel()
    if centred:
        all_values[0] = -np.inf  # the trivial tuple (0, …, 0) is flat index 0
    keys = -all_values
    if m < keys.size and keys.size > SORT_ALL_UP_TO:  # only products ≥ the m-th largest can make the top m
        candidates = np.flatnonzero(keys <= np.partition(keys, m - 1)[m - 1])  # ascending flat index
        order = candidates[np.argsort(keys[candidates], kind="stable")[:m]]
    else:
        order = np.argsort(keys, kind="stable")[:m]
    indices = np.array(np.unravel_index(order, [s.values.size for s in spectra]), dtype=np.int64).T
    return all_values[order], np.ascontiguousarray(indices)


def _enumerate_all(world: ProductWorld, m: int, centred: bool, cache: FactorSpectra) -> KroneckerBasis:
    if world.n > ENUMERATE_LIMIT:
        raise ValueError(
            f"fewer than {m} positive eigenvalues in a product world of {world.n} states; "
            f"full enumeration is limited to {ENUMERATE_LIMIT} states"
        )
    ensure_fits(4 * FLOAT * float(world.n), f"enumerating all {world.n:,} eigenvalues (fewer than {m} are positive)",
                "lower k")
    spectra = tuple(cache.get(f) for f in world.factors)
    values, indices = _enumerate(spectra, m, centred)
    return KroneckerBasis(values, indices, spectra, world)
