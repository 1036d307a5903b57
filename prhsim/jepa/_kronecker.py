"""Top-m eigenpairs of a product world without forming K (docs/theory.md §6).

``K = ⊗ K_f`` has eigenvalues ``Π_f λ^{(f)}_{i_f}`` and eigenfunctions
``h_{(i)}(z) = Π_f h^{(f)}_{i_f}(z_f)``. Each factor is sorted by ``|λ|``
(its trivial pair ``(1, √p_f)`` first), and a heap pops index tuples in
decreasing ``|Π_f λ|``; positive products come out in decreasing order, so the
first m positive ones (skipping (0, …, 0) when centred) are the top m. This is
exact for indefinite factors too. If fewer than m positive products exist,
all products are enumerated instead (refused above ENUMERATE_LIMIT states).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as spla

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim._types import States, Vector
from prhsim.jepa._basis import EIGSH_TOL, EigenBasis, centred_operator
from prhsim.worlds import FiniteWorld, ProductWorld

#: Factors up to this size are diagonalised in full (dense); larger ones by Lanczos, top-r by |λ|.
FULL_FACTOR_UP_TO = 2_000
#: Largest factor diagonalised in full when every eigenvalue is needed (enumeration fallback).
DENSE_FACTOR_LIMIT = 5_000
#: Largest product world whose eigenvalues are all enumerated as a fallback.
ENUMERATE_LIMIT = 20_000_000
#: Full eigh of a factor holds its K, ``K − 3ssᵀ``, the eigenvectors and the divide-and-conquer
#: workspace: about this many n_f x n_f float tables (measured: 4).
FACTOR_TABLES = 5


@dataclass(frozen=True)
class FactorSpectrum:
    """A factor's eigenpairs, trivial pair first, then by |λ| descending.

    ``functions[:, i] = vectors[:, i] / sqrt(p)`` are its p-whitened eigenfunctions.
    ``complete`` is False when only the pairs of largest |λ| were computed.
    """

    values: Vector
    functions: np.ndarray
    complete: bool = True


def _ordered(s: Vector, vals: Vector, vecs: np.ndarray, complete: bool) -> FactorSpectrum:
    order = np.lexsort((np.arange(vals.size), -vals, -np.abs(vals)))
    values = np.concatenate([[1.0], vals[order]])
    vectors = np.concatenate([s[:, None], vecs[:, order]], axis=1)
    return FactorSpectrum(values, vectors / s[:, None], complete)


def factor_spectrum(world: FiniteWorld, top: int | None = None, *, rng: RngLike = None) -> FactorSpectrum:
    """Diagonalise one factor of ``K − 3ssᵀ`` (s goes to −2; it is restored as (1, s) at index 0).

    Small factors (or ``top=None``) are diagonalised in full with ``eigh``; a
    factor above FULL_FACTOR_UP_TO states with ``top`` given gets its ``top``
    non-trivial pairs of largest |λ| by Lanczos (``eigsh``, ``which="LM"``),
    started from a vector drawn from ``rng``.
    """
    s = world.sqrt_p
    if top is not None and world.n > FULL_FACTOR_UP_TO and top + 1 < world.n - 1:
        ncv = min(world.n, max(2 * (top + 1) + 1, 20))  # eigsh's default
        ensure_fits(FLOAT * world.n * (2 * ncv + top + 9),
                    f"Lanczos on a factor of {world.n:,} states ({top + 1} pairs)", "lower k")
        op = centred_operator(world)
        v0 = check_rng(rng).standard_normal(world.n)
        vals, vecs = spla.eigsh(op, k=top + 1, which="LM", v0=v0, tol=EIGSH_TOL, ncv=ncv)
        keep = np.argsort(vals)[1:]  # drop the deflated trivial pair at -2
        return _ordered(s, vals[keep], vecs[:, keep], complete=False)
    if world.n > DENSE_FACTOR_LIMIT:
        raise ValueError(f"a product world's factor has {world.n} states; its full spectrum is computed densely "
                         f"only up to {DENSE_FACTOR_LIMIT}")
    ensure_fits(FACTOR_TABLES * FLOAT * float(world.n) ** 2, f"the full spectrum of a factor of {world.n:,} states",
                "use smaller factors")
    vals, vecs = sla.eigh(world.dense_kernel() - 3.0 * np.outer(s, s), driver="evd")  # divide and conquer: robust to clustered spectra
    return _ordered(s, vals[1:], vecs[:, 1:], complete=True)


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
        """``h_{(i)}(z) = Π_f h^{(f)}_{i_f}(z_f)`` at the given states (all states if None)."""
        rows = self.world.n if states is None else int(np.size(states))
        m, F = self.indices.shape[0], len(self.spectra)
        ensure_fits(FLOAT * rows * (2 * m + F + 1), f"eigenfunctions of {rows:,} states x {m} features",
                    "evaluate on fewer states")
        if states is None:
            states = np.arange(self.world.n, dtype=np.int64)
        zs = self.world.unravel(states)
        out = np.ones((np.size(states), self.indices.shape[0]))
        for f, (spec, z_f) in enumerate(zip(self.spectra, zs)):
            out *= spec.functions[:, self.indices[:, f]][np.ravel(z_f)]  # columns first: never (s x |factor|)
        return out

    def take(self, m: int) -> "KroneckerBasis":
        return KroneckerBasis(self.values[:m], self.indices[:m], self.spectra, self.world)


def kronecker_top(world: ProductWorld, m: int, *, centred: bool = True, rng: RngLike = None) -> KroneckerBasis:
    """Top-m eigenpairs of ``⊗ K_f`` (centred: excluding the trivial tuple), in O(mF log(mF)).

    Large factors start with their ``2(m+1)`` pairs of largest |λ|; if the heap
    reaches the end of such a partial spectrum, it is doubled and the heap rerun.
    ``rng`` seeds the Lanczos start vectors of large factors (one stream shared in factor order).
    """
    gen = check_rng(rng)
    top = 2 * (m + 1)
    spectra = [factor_spectrum(f, top, rng=gen) for f in world.factors]
    while True:
        result = _heap(spectra, m, centred)
        if isinstance(result, list):
            break
        exhausted = result  # a factor whose partial spectrum ran out
        top *= 2
        spectra[exhausted] = factor_spectrum(world.factors[exhausted], top, rng=gen)
    if len(result) < m:
        return _enumerate_all(world, m, centred)
    values = np.array([v for v, _ in result])
    indices = np.array([idx for _, idx in result], dtype=np.int64)
    return KroneckerBasis(values, indices, tuple(spectra), world)


def _heap(spectra: list[FactorSpectrum], m: int, centred: bool) -> list[tuple[float, tuple[int, ...]]] | int:
    """Pop index tuples by decreasing |Π λ|; return the first m positive ones (fewer if the products run out),
    or the number of a factor whose partial spectrum would be needed beyond its end."""
    F = len(spectra)
    sizes = [s.values.size for s in spectra]

    def value(idx: tuple[int, ...]) -> float:
        v = 1.0
        for spec, i in zip(spectra, idx):
            v *= spec.values[i]
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
            elif not spectra[f].complete:
                return f
    return found


def _enumerate_all(world: ProductWorld, m: int, centred: bool) -> KroneckerBasis:
    if world.n > ENUMERATE_LIMIT:
        raise ValueError(
            f"fewer than {m} positive eigenvalues in a product world of {world.n} states; "
            f"full enumeration is limited to {ENUMERATE_LIMIT} states"
        )
    ensure_fits(4 * FLOAT * float(world.n), f"enumerating all {world.n:,} eigenvalues (fewer than {m} are positive)",
                "lower k")
    spectra = tuple(factor_spectrum(f) for f in world.factors)
    all_values = np.ones(1)
    for spec in spectra:
        all_values = np.kron(all_values, spec.values)
    if centred:
        all_values[0] = -np.inf  # the trivial tuple (0, …, 0) is flat index 0
    order = np.argsort(-all_values, kind="stable")[:m]
    indices = np.stack(np.unravel_index(order, [s.values.size for s in spectra]), axis=1)
    return KroneckerBasis(all_values[order], indices.astype(np.int64), spectra, world)
