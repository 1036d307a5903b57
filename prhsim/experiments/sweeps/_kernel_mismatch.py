"""The kernel-mismatch sweep: observed drift of the optimum against the §3 bounds (docs/theory.md §3).

Over ``worlds`` random worlds ``(p, Π)`` (:func:`prhsim.worlds.random_world`, dense,
n states) and perturbations t, the second kernel is

``Π_t = (1 − t) Π + t Π'``,  so  ``E = K_t − K = t (K' − K)``,

where ``Π'`` is another world on the same p: a fresh symmetric random affinity (zero
diagonal) scaled to p by :func:`prhsim.worlds.sinkhorn_world`. A convex combination of
two pair laws with marginals p is one again (symmetric, non-negative), so the
perturbation keeps p exactly and its size ``‖E‖`` is linear in t. For every cell
:func:`prhsim.experiments.kernel_mismatch` measures ``‖sinΘ‖_F`` and
``min_Q ‖F_1* − F_2* Q‖_D`` between the centred top-k optima, beside

* Yu–Wang–Samworth: ``‖sinΘ‖_F ≤ 2 min(√k‖E‖_op, ‖E‖_F)/δ`` and the residual
  ``≤ 2^{3/2}·(…)/δ``;
* classical Davis–Kahan: ``‖sinΘ‖_F ≤ ‖E U_2‖_F/δ'`` with ``δ' = μ_k(K_t) − μ_{k+1}(K)``, and its
  Weyl form ``min(√k‖E‖_op, ‖E‖_F)/(δ − ‖E‖_op)``;
* the §2 translation ``residual ≤ √2 ‖sinΘ‖_F``.

A bound whose gap condition fails is None (infinite). Per bound the record keeps the
worst observed/bound ratio (a theorem: at most 1) and the median (how tight it is),
over the cells where the bound is finite and the drift is above rounding.

Default (n = 30, k = 2, 8 worlds x 12 perturbations): about 0.16 s (2-core CPU, one BLAS thread).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np
from pydantic import Field

from prhsim import __version__
from prhsim._rng import RngLike, check_rng, spawned_stream
from prhsim._types import Progress, as_progress
from prhsim.config import Settings
from prhsim.experiments._mismatch import ROUNDING, kernel_mismatch
from prhsim.experiments._record import Record
from prhsim.worlds import FiniteWorld, random_world, sinkhorn_world

#: The default perturbations t: 12 points from 1e-4 to 0.3, log-spaced.
DEFAULT_PERTURBATIONS = tuple(float(x) for x in np.geomspace(1e-4, 0.3, 12))
#: The bounds compared, each with the observed quantity it bounds.
BOUNDS = {"yws_sin": "sin_theta", "yws_residual": "residual", "dk_sin": "sin_theta", "weyl_sin": "sin_theta"}
#: The ratio of the §2 translation ``residual / (√2 ‖sinΘ‖_F)``.
TRANSLATION = "sqrt2_translation"


class MismatchCell(Record):
    """One world at one perturbation: the drift and its bounds (None: the bound's gap condition fails)."""

    world: int
    perturbation: float
    e_op: float
    e_fro: float
    delta: float
    delta_prime: float
    sin_theta: float
    residual: float
    yws_sin: float | None
    yws_residual: float | None
    dk_sin: float | None
    weyl_sin: float | None


class KernelMismatchSweep(Record):
    """Result of :func:`kernel_mismatch_sweep`.

    ``cells[w][j]`` is world w at ``perturbations[j]``. ``median_*[j]`` are medians over the
    worlds at ``perturbations[j]`` (a bound's median is None when it is infinite for half the
    worlds or more). ``worst_ratio`` and ``median_ratio`` are per bound (None: never finite).
    """

    prhsim_version: str
    n: int
    k: int
    worlds: int
    perturbations: list[float]
    seed: int | None
    cells: list[list[MismatchCell]]
    median_e_op: list[float]
    median_sin_theta: list[float]
    median_residual: list[float]
    median_bound: dict[str, list[float | None]]
    worst_ratio: dict[str, float | None]
    median_ratio: dict[str, float | None]
    seconds: float


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _check_perturbations(perturbations: Sequence[float]) -> tuple[float, ...]:
    values = tuple(float(x) for x in np.atleast_1d(np.asarray(perturbations, dtype=float)))
    if not values:
        raise ValueError("kernel_mismatch_sweep needs at least one perturbation")
    bad = [x for x in values if not 0.0 < x <= 1.0]
    if bad:
        raise ValueError(f"every perturbation t must lie in (0, 1] (Π_t = (1 − t)Π + tΠ'), got {bad[0]}")
    if len(set(values)) != len(values):
        raise ValueError(f"perturbations must be distinct, got {list(values)}")
    return tuple(sorted(values))


def _median_or_none(values: list[float | None]) -> float | None:
    m = float(np.median([np.inf if v is None else v for v in values]))
    return m if np.isfinite(m) else None


def kernel_mismatch_sweep(
    n: int = 30,
    perturbations: Sequence[float] = DEFAULT_PERTURBATIONS,
    k: int = 2,
    worlds: int = 8,
    rng: RngLike = 0,
    progress: Callable[..., None] | None = None,
) -> KernelMismatchSweep:
    """Observed ``‖sinΘ‖_F`` and residual against the YWS and Davis–Kahan bounds (module docstring).

    Args:
        n: states per random world (at least k + 2).
        perturbations: the perturbations t in (0, 1].
        k: number of centred features.
        worlds: number of random worlds (one independent stream each).
        rng: seed or Generator.
        progress: ``progress(message, done, total)`` once per world and at the end, counted in cells (world x t).

    Raises:
        ValueError: on bad arguments.
    """
    start = time.perf_counter()
    say = as_progress(progress)
    if isinstance(n, bool) or int(n) != n or n < 4:
        raise ValueError(f"n must be an integer >= 4, got {n}")
    if isinstance(k, bool) or int(k) != k or not 1 <= k <= n - 2:
        raise ValueError(f"k must be an integer in 1..{int(n) - 2} for n = {n}, got {k}")
    if isinstance(worlds, bool) or int(worlds) != worlds or worlds < 1:
        raise ValueError(f"worlds must be a positive integer, got {worlds}")
    n, k, worlds = int(n), int(k), int(worlds)
    perturbations = _check_perturbations(perturbations)
    seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
    total = worlds * len(perturbations)
    rows = []
    for w, stream in enumerate(check_rng(rng).spawn(worlds)):
        say(f"world {w + 1} of {worlds}", done=w * len(perturbations), total=total)
        rows.append(mismatch_row(n, perturbations, k, w, stream))
    say(f"{worlds} worlds done", done=total, total=total)
    return _reduce(rows, n, k, perturbations, seed, time.perf_counter() - start)


def mismatch_row(n: int, perturbations: Sequence[float], k: int, w: int, rng: np.random.Generator) -> list[MismatchCell]:
    """World ``w`` (a random world and a second pair law on its p, from ``rng``) at every perturbation."""
    world = random_world(n, rng=rng)
    affinity = rng.uniform(size=(n, n))
    affinity = (affinity + affinity.T) / 2
    np.fill_diagonal(affinity, 0.0)
    other = sinkhorn_world(affinity, world.p).Pi
    row = []
    for t in perturbations:
        km = kernel_mismatch(world, FiniteWorld(world.p, (1.0 - t) * world.Pi + t * other), k)
        row.append(MismatchCell(
            world=w, perturbation=t, e_op=km.e_op, e_fro=km.e_fro, delta=km.delta, delta_prime=km.delta_prime,
            sin_theta=km.sin_theta, residual=km.residual, yws_sin=_finite(km.yws_sin),
            yws_residual=_finite(km.yws_residual), dk_sin=_finite(km.dk_sin), weyl_sin=_finite(km.weyl_sin)))
    return row


def _reduce(cells: list[list[MismatchCell]], n: int, k: int, perturbations: Sequence[float], seed: int | None,
            seconds: float) -> KernelMismatchSweep:
    """The sweep's record from every world's row (medians per perturbation, worst and median ratios per bound)."""
    flat = [c for row in cells for c in row]
    ratios: dict[str, list[float]] = {name: [] for name in (*BOUNDS, TRANSLATION)}
    for c in flat:
        for name, observed in BOUNDS.items():
            bound, obs = getattr(c, name), getattr(c, observed)
            if bound is not None and bound > 0 and obs >= ROUNDING:
                ratios[name].append(obs / bound)
        if c.sin_theta >= ROUNDING:
            ratios[TRANSLATION].append(c.residual / (np.sqrt(2.0) * c.sin_theta))
    columns = list(zip(*cells))  # per perturbation
    return KernelMismatchSweep(
        prhsim_version=__version__, n=n, k=k, worlds=len(cells), perturbations=list(perturbations), seed=seed,
        cells=cells,
        median_e_op=[float(np.median([c.e_op for c in col])) for col in columns],
        median_sin_theta=[float(np.median([c.sin_theta for c in col])) for col in columns],
        median_residual=[float(np.median([c.residual for c in col])) for col in columns],
        median_bound={name: [_median_or_none([getattr(c, name) for c in col]) for col in columns] for name in BOUNDS},
        worst_ratio={name: float(max(v)) if v else None for name, v in ratios.items()},
        median_ratio={name: float(np.median(v)) if v else None for name, v in ratios.items()},
        seconds=seconds,
    )


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class KernelMismatchSweepSettings(Settings):
    """``prhsim sweep kernel-mismatch``: random worlds and each perturbation against both bounds."""

    grids = ('perturbations',)

    renamed = {"sizes": "perturbations"}

    n: int = Field(30, ge=4, le=5000)
    perturbations: list[float] = Field(default_factory=lambda: list(DEFAULT_PERTURBATIONS), min_length=1)
    k: int = Field(2, ge=1)
    worlds: int = Field(8, ge=1, le=1000)
    seed: int = Field(0, ge=0)



#: Seconds per cell (one world and one t: eigendecompositions of n x n kernels) per n², measured on a shared
#: 2-core CPU: n = 300, 24 cells, 18.5 s; n = 1000, 2 cells, 15.5 s (n = 30, the default: 96 cells, 0.1-0.4 s).
CELL_SECONDS_PER_N2 = 8e-6


def estimate(s: KernelMismatchSweepSettings) -> Any:
    """Cells (worlds x perturbations) x CELL_SECONDS_PER_N2 · n²."""
    from prhsim.experiments.sweeps._registry import Estimate

    cells = s.worlds * len(s.perturbations)
    return Estimate(cells * CELL_SECONDS_PER_N2 * float(s.n) ** 2,
                    f"{cells} cells (worlds x perturbations) of {s.n:,} x {s.n:,} kernels")


def run(s: KernelMismatchSweepSettings, say: Progress | None = None) -> Any:
    """``prhsim sweep kernel-mismatch`` from its settings; ``say`` reports progress (counted in cells)."""
    return kernel_mismatch_sweep(n=s.n, perturbations=s.perturbations, k=s.k, worlds=s.worlds,
                                 rng=s.seed, progress=say)


def cells(s: KernelMismatchSweepSettings) -> list[dict[str, int]]:
    """One cell per random world (its perturbations share the world's kernels)."""
    return [{"world": w} for w in range(s.worlds)]


def cell(s: KernelMismatchSweepSettings, coordinates: dict[str, int]) -> dict[str, Any]:
    """World ``coordinates["world"]`` at every perturbation, from its own stream (:func:`prhsim._rng.spawned_stream`)."""
    start = time.perf_counter()
    w = int(coordinates["world"])
    row = mismatch_row(s.n, _check_perturbations(s.perturbations), s.k, w, spawned_stream(s.seed, w))
    return {"row": [c.model_dump(mode="json") for c in row], "seconds": time.perf_counter() - start}


def reduce(s: KernelMismatchSweepSettings, records: list[dict[str, Any]]) -> KernelMismatchSweep:
    """The sweep's result from its worlds' rows (seconds summed over the cells)."""
    rows = [[MismatchCell.model_validate(c) for c in r["row"]] for r in records]
    return _reduce(rows, s.n, s.k, _check_perturbations(s.perturbations), s.seed,
                   sum(r["seconds"] for r in records))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    lines = [f"{r.worlds} random worlds of {r.n} states, k = {r.k}, {len(r.perturbations)} perturbations"]
    for bound, worst in r.worst_ratio.items():
        median = r.median_ratio.get(bound)
        lines.append(f"{bound}: worst observed/bound {'n/a' if worst is None else f'{worst:.3g}'}, median "
                     f"{'n/a' if median is None else f'{median:.3g}'} (a bound holds when the worst is <= 1)")
    return lines
