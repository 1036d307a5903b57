"""Gap sensitivity: how far a fixed perturbation, and the choice of solver, move the optimum as the gap closes.

docs/theory.md §1.2 (one orbit iff ``μ_k > μ_{k+1}``) and §3 (drift ``∝ ‖E‖/δ``).

The family: the grid ``path(n, move=m_a) ⊗ path(n, move=m_b)`` (uniform p, n² states).
A lazy reflecting path has eigenvalues ``1 − m(1 − cos(πj/n))``, so with
``c = 1 − cos(π/n)``, ``m_a = move`` and ``m_b = move − g/c`` the two slow modes are
``λ_2(a) = 1 − move·c`` and ``λ_2(b) = λ_2(a) + g``: the centred k = 1 optimum has the gap
``δ = μ_1 − μ_2 = g`` exactly, for ``0 ≤ g < move·c·(1 − c/c₂)`` with
``c₂ = 1 − cos(2π/n)`` (above that the second factor's third mode overtakes ``λ_2(a)``).
At ``g = 0`` the two factors are identical and ``μ_1 = μ_2``: a tie, and the optimum is
a continuum of subspaces (any unit vector of the two-dimensional eigenspace).

For every gap, three distances ``s_Θ`` (k = 1, so ``s_Θ = ‖sinΘ‖_F = |sin θ|``):

* perturbed vs unperturbed: the same fixed perturbation ``Π_t = (1 − t)Π + tΠ'``, ``Π'`` one
  Sinkhorn world on the uniform p (drawn once; ``E = t(K' − K_g)`` changes only through
  ``K_g``), against the Yu–Wang–Samworth bound ``2 min(√k‖E‖_op, ‖E‖_F)/δ`` and the
  classical Davis–Kahan bound ``‖E U_2‖_F/δ'`` (:func:`prhsim.experiments.kernel_mismatch`);
* solver vs solver: dense ``eigh`` against Lanczos ``eigsh`` (``top_eigenpairs(backend=…)``);
* start vs start: Lanczos from two independent random start vectors.

At a gap the solvers agree to rounding, and their disagreement grows like
``rounding/δ``; at the tie they return different subspaces (``s_Θ`` of order 1), which is
a property of the solvers, not of the theorem (the record flags the tie).

Cells: one per gap δ (:func:`cells`, :func:`cell`, :func:`reduce`). Π' comes from the seed's first spawned
child (every cell draws the same), the two Lanczos starts from the cell's own stream
``cell_stream(seed, {"gap": δ})``, so a gap's numbers depend on the seed and δ alone.

Default (n = 6, 15 gaps from 0 to 0.05): about 0.12 s (2-core CPU, one BLAS thread).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np
from pydantic import Field

from prhsim import __version__
from prhsim._rng import RngLike, cell_stream, check_rng, spawned_stream
from prhsim._types import Progress, as_progress
from prhsim.config import Settings
from prhsim.experiments._mismatch import kernel_mismatch
from prhsim.experiments._record import Record
from prhsim.metrics import principal_angles
from prhsim.optima import GAP_TOL, top_eigenpairs
from prhsim.worlds import FiniteWorld, grid, sinkhorn_world

#: The default gaps: the tie and 14 log-spaced gaps from 1e-7 to 0.05.
DEFAULT_GAPS = (0.0, *(float(x) for x in np.geomspace(1e-7, 0.05, 14)))
#: The family's number of features (the two factors' slow modes compete for one slot).
K = 1


class GapCell(Record):
    """One gap: the world's own gap, the three distances and the bounds (None: infinite)."""

    gap: float
    observed_gap: float
    tie: bool
    e_op: float
    e_fro: float
    perturbed_s_theta: float
    solver_s_theta: float
    start_s_theta: float
    yws_bound: float | None
    dk_bound: float | None


class GapSensitivity(Record):
    """Result of :func:`gap_sensitivity`; ``cells[i]`` is at ``gaps[i]``."""

    prhsim_version: str
    n: int
    move: float
    perturbation: float
    k: int
    gaps: list[float]
    seed: int | None
    cells: list[GapCell]
    seconds: float


def max_gap(n: int, move: float) -> float:
    """The largest gap of the family: ``move·c·(1 − c/c₂)`` (module docstring)."""
    c, c2 = 1.0 - np.cos(np.pi / n), 1.0 - np.cos(2.0 * np.pi / n)
    return float(move * c * (1.0 - c / c2))


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _s_theta(a, b, p: np.ndarray) -> float:
    return principal_angles(a.evaluate()[:, :K], b.evaluate()[:, :K], p).s_theta


def gap_sensitivity(
    gaps: Sequence[float] = DEFAULT_GAPS,
    perturbation: float = 1e-3,
    n: int = 6,
    move: float = 0.9,
    rng: RngLike = 0,
    progress: Callable[..., None] | None = None,
) -> GapSensitivity:
    """Distances between k = 1 optima across a family of worlds of known gap (module docstring).

    Args:
        gaps: the gaps δ, each in [0, max_gap(n, move)); 0 is the tie.
        perturbation: the perturbation's t in (0, 1].
        n: states per path (the world has n² states), at least 3.
        move: the first path's step probability, in (0, 1].
        rng: seeds Π' (the seed's first spawned child, drawn once) and the Lanczos start vectors of every gap: an
            int seed gives the gap δ the stream ``cell_stream(seed, {"gap": δ})`` (:func:`prhsim._rng.cell_stream`:
            the same wherever and in whatever order the gaps run); a Generator spawns one stream per gap instead.
        progress: ``progress(message, done, total)`` once per gap and at the end, counted in gaps.

    Raises:
        ValueError: on bad arguments.
    """
    start = time.perf_counter()
    values = _check(gaps, perturbation, n, move)
    n = int(n)
    seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
    streams = check_rng(rng).spawn(len(values) + 1)
    other = _other(n, streams[0])
    records = []
    say = as_progress(progress)
    for i, g in enumerate(values):
        say(f"gap {g:.3g} ({i + 1} of {len(values)})", done=i, total=len(values))
        stream = cell_stream(seed, {"gap": g}) if seed is not None else streams[1 + i]
        records.append(gap_cell(n, move, perturbation, other, g, stream))
    say(f"{len(values)} gaps done", done=len(values), total=len(values))
    return _reduce(records, n, move, perturbation, values, seed, time.perf_counter() - start)


def _check(gaps: Sequence[float], perturbation: float, n: int, move: float) -> tuple[float, ...]:
    """The gaps, checked and sorted (a one-line ValueError on a bad argument)."""
    if isinstance(n, bool) or int(n) != n or n < 3:
        raise ValueError(f"n must be an integer >= 3, got {n}")
    n = int(n)
    if not 0.0 < move <= 1.0:
        raise ValueError(f"move must lie in (0, 1], got {move}")
    if not 0.0 < perturbation <= 1.0:
        raise ValueError(f"perturbation must lie in (0, 1], got {perturbation}")
    values = tuple(float(g) for g in np.atleast_1d(np.asarray(gaps, dtype=float)))
    if not values:
        raise ValueError("gap_sensitivity needs at least one gap")
    top = max_gap(n, move)
    out = [g for g in values if not 0.0 <= g < top]
    if out:
        raise ValueError(f"every gap must lie in [0, {top:.4g}) for n = {n}, move = {move}, got {out[0]}")
    if len(set(values)) != len(values):
        raise ValueError(f"gaps must be distinct, got {list(values)}")
    return tuple(sorted(values))


def _other(n: int, rng: np.random.Generator) -> np.ndarray:
    """Π': one Sinkhorn world on the uniform p of n² states, from ``rng``."""
    p = np.full(n * n, 1.0 / (n * n))
    affinity = rng.uniform(size=(n * n, n * n))
    affinity = (affinity + affinity.T) / 2
    np.fill_diagonal(affinity, 0.0)
    return sinkhorn_world(affinity, p).Pi


def gap_cell(n: int, move: float, perturbation: float, other: np.ndarray, g: float,
             rng: np.random.Generator) -> dict[str, Any]:
    """The gap ``g``'s :class:`GapCell` as JSON values; ``rng`` spawns the two Lanczos start streams."""
    c = 1.0 - np.cos(np.pi / n)
    world = grid((n, n), move=(move, move - g / c)).to_finite()
    km = kernel_mismatch(world, FiniteWorld(world.p, (1.0 - perturbation) * world.Pi + perturbation * other), K)
    dense = top_eigenpairs(world, K + 1, backend="dense")
    first, second = (top_eigenpairs(world, K + 1, backend="sparse", rng=s) for s in rng.spawn(2))
    observed_gap = float(dense.values[K - 1] - dense.values[K])
    tie = observed_gap <= GAP_TOL  # a rounding-level δ would give a finite but meaningless bound
    return GapCell(
        gap=g, observed_gap=observed_gap, tie=tie, e_op=km.e_op, e_fro=km.e_fro,
        perturbed_s_theta=km.sin_theta / np.sqrt(K), solver_s_theta=_s_theta(dense, first, world.p),
        start_s_theta=_s_theta(first, second, world.p),
        yws_bound=None if tie else _finite(km.yws_sin / np.sqrt(K)),
        dk_bound=None if tie else _finite(km.dk_sin / np.sqrt(K))).model_dump(mode="json")


def _reduce(records: Sequence[dict[str, Any]], n: int, move: float, perturbation: float, gaps: Sequence[float],
            seed: int | None, seconds: float) -> GapSensitivity:
    """The sweep's record from the gaps' cells (in the order of ``gaps``)."""
    cells = [GapCell.model_validate({k: v for k, v in r.items() if k != "seconds"}) for r in records]
    return GapSensitivity(prhsim_version=__version__, n=n, move=float(move), perturbation=float(perturbation), k=K,
                          gaps=list(gaps), seed=seed, cells=cells, seconds=seconds)


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class GapSensitivitySettings(Settings):
    """``prhsim sweep gap-sensitivity``: path(n) x path(n) with the gap at k = 1 set to each value."""

    grids = ('gaps',)

    renamed = {"size": "perturbation"}

    gaps: list[float] = Field(default_factory=lambda: list(DEFAULT_GAPS), min_length=1)
    perturbation: float = Field(1e-3, gt=0, le=1)
    n: int = Field(6, ge=3, le=200)
    move: float = Field(0.9, gt=0, le=1)
    seed: int = Field(0, ge=0)



#: Seconds per gap: a fixed part, and the dense and Lanczos solves of the n² states, which grow about as
#: (n²)⁴ here, measured on a shared 2-core CPU: n = 6 (the default, 15 gaps) 0.17-0.75 s, n = 20 0.56 s a gap,
#: n = 30 15.7 s a gap (SECONDS_AT_30).
GAP_SECONDS, SECONDS_AT_30 = 0.01, 16.0


def estimate(s: GapSensitivitySettings) -> Any:
    """Gaps x (GAP_SECONDS + SECONDS_AT_30 · (n/30)⁸)."""
    from prhsim.experiments.sweeps._registry import Estimate

    gaps = len(s.gaps)
    return Estimate(gaps * (GAP_SECONDS + SECONDS_AT_30 * (s.n / 30.0) ** 8),
                    f"{gaps} gaps on path({s.n}) x path({s.n}) ({s.n * s.n:,} states)")


def run(s: GapSensitivitySettings, say: Progress | None = None) -> Any:
    """``prhsim sweep gap-sensitivity`` from its settings; ``say`` reports progress (counted in gaps)."""
    return gap_sensitivity(gaps=s.gaps, perturbation=s.perturbation, n=s.n, move=s.move, rng=s.seed,
                           progress=say)


def cells(s: GapSensitivitySettings) -> list[dict[str, float]]:
    """One cell per gap δ (sorted)."""
    return [{"gap": g} for g in _check(s.gaps, s.perturbation, s.n, s.move)]


def cell(s: GapSensitivitySettings, coordinates: dict[str, float]) -> dict[str, Any]:
    """The cell at ``coordinates["gap"]``: Π' from the seed's first spawned child, the Lanczos starts from the cell's
    own stream (``cell_stream(seed, {"gap": δ})``), with its seconds."""
    start = time.perf_counter()
    g = float(coordinates["gap"])
    other = _other(s.n, spawned_stream(s.seed, 0))
    record = gap_cell(s.n, s.move, s.perturbation, other, g, cell_stream(s.seed, {"gap": g}))
    return {**record, "seconds": time.perf_counter() - start}


def reduce(s: GapSensitivitySettings, records: list[dict[str, Any]]) -> GapSensitivity:
    """The sweep's result from its cells (the same record as :func:`run`'s, seconds summed over the cells)."""
    return _reduce(records, s.n, s.move, s.perturbation, _check(s.gaps, s.perturbation, s.n, s.move), s.seed,
                   sum(r["seconds"] for r in records))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    lines = [f"path({r.n}) x path({r.n}), k = {r.k}, perturbation t = {r.perturbation:g}, {len(r.gaps)} gaps"]
    for c in r.cells:
        lines.append(f"gap {c.gap:.2e}{' (tie)' if c.tie else ''}: perturbed s_Theta {c.perturbed_s_theta:.3g}, "
                     f"solver vs solver {c.solver_s_theta:.2g}, start vs start {c.start_s_theta:.2g}")
    return lines
