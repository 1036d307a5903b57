"""The pair-free sweep: when the map between two modalities can be found without a cross-modal pair (docs/theory.md §9).

The world is designed so its spectrum is set by hand: on n states with a seeded Dirichlet law p,
``Π = D(11ᵀ + H diag(μ) Hᵀ)D`` with H (n x 3) random skewed functions orthonormal under p and
centred (:func:`designed_world`), so the centred spectrum is exactly ``μ = (μ_2 + gap, μ_2, μ_3)``
and k = 2. Two modalities see it through random codebooks with nuisance (|N| values each):
a through the good view, b through the good view or a bad(ε) view (nuisance kept with probability
1 − ε). Their closed forms (:func:`prhsim.optima.closed_form` of each view world) are rotated by
independent Haar-random Q_a, Q_b, as two trained encoders would be.

Each cell draws, for each modality separately, S states from p (one nuisance each) and S positive
pairs from its own π: no row of a corresponds to a row of b. Two estimators:

* ``spectral``: :func:`prhsim.metrics.spectral_match` (each modality's own pairs: eigenvalue order
  and third-moment signs);
* ``iterative``: :func:`prhsim.metrics.iterative_match` (features only: nearest neighbours ↔
  Procrustes from k + 1 moment starts and 16 others, kept by the chamfer distance), on at most
  ``ITERATIVE_ROWS`` rows. It never reads Π, so along the gap axis (same p, features and draws)
  its inputs are the same: one measurement repeated.

Scores: the map error ``‖Q − Q_true‖₂`` (Q_true the p-weighted Procrustes map between a's features
and b's conditional means over every state; it exists, and aligns the two exactly, when b is
nuisance-free: every canonical correlation 1, ``alignable``; otherwise there is no map to find and
the error is None) and top-1/top-5 retrieval of every state's a-rendering among every state's
b-rendering through the estimated rotation, in the population's whitened coordinates (the
features are whitened under p by construction, so this scores the rotation alone), beside the same
through Q_true (chance 1/n). A cell is a success when b is alignable and the map error is below
``SUCCESS``. The theory (§9) predicts the spectral estimator's failures:

* at a tie (gap 0) the rotation inside the eigenspace is not identifiable;
* from S pairs the off-diagonal of ``M = sym E[g(z) g(z')ᵀ]`` errs by about ``1/√(2S)`` (unit
  variances, weak dependence), which turns each modality's eigenvectors by ``M_12/gap``; the two
  modalities' errors add, so the map turns by an angle of standard deviation ``1/(gap·√S)``, and its
  error ``2|sin(θ/2)| ≈ |θ|`` stays below ``SUCCESS`` with probability ``erf(SUCCESS·gap·√S/√2)``
  (:func:`predicted_success`, drawn on the figure; sign and whitening errors come on top);
* under a bad view the nuisance features, of eigenvalue 1 − ε, overtake μ_2 when ε < 1 − μ_2, and
  b's representation holds nuisance that no map can align.

The iterative estimator reads the whole geometry of the sample (higher moments, not only the pairs'
second moments), so the theory sets it no gap limit: it can succeed at a tie.

Default (n = 200, |N| = 3, μ_2 = 0.08, μ_3 = 0.02, 30 seeds; 6 gaps at S = 30,000, 6 sample sizes at
gap 0.07, 7 values of ε at gap 0.07 and S = 30,000).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace
from typing import Annotated, Any, Literal, Sequence

import numpy as np
from pydantic import Field, model_validator

from prhsim import __version__
from prhsim._rng import RngLike, check_rng
from prhsim._types import Progress, as_progress
from prhsim.config import Settings
from prhsim.experiments._record import Record
from prhsim.metrics import (
    Whitening,
    haar_orthogonal,
    iterative_match,
    map_error,
    mapped_retrieval,
    orthogonal_map,
    spectral_match,
)
from prhsim.optima import TieWarning, closed_form
from prhsim.worlds import FiniteWorld, bad, codebook, good, view_world

DEFAULT_GAPS = (0.0, 0.003, 0.01, 0.02, 0.04, 0.07)
DEFAULT_SAMPLES = (300, 1000, 3000, 10_000, 30_000, 100_000)
PAIR_FREE_EPS = (0.5, 0.85, 0.9, 0.91, 0.93, 0.95, 1.0)
#: A map error below this is a recovered map.
SUCCESS = 0.25
#: b counts as nuisance-free (alignable) when every canonical correlation with a is above 1 − this.
ALIGNABLE_TOL = 1e-6
#: The iterative estimator reads at most this many rows of each modality.
ITERATIVE_ROWS = 2000
#: The raw feature values are clipped here (bounded features keep Π non-negative).
CLIP = 3.0
#: The designed world's features: k = 2 of 3 designed directions.
K = 2
METHODS = ("spectral", "iterative")
Axis = Literal["gap", "samples", "eps"]


class DesignedWorld:
    """A world whose centred spectrum is ``mu`` exactly: ``Π = D(11ᵀ + H diag(μ) Hᵀ)D`` (module docstring)."""

    def __init__(self, p: np.ndarray, H: np.ndarray, mu: np.ndarray) -> None:
        self.p, self.H, self.mu = p, H, mu
        K_ = 1.0 + (H * mu) @ H.T
        if K_.min() < 0:
            raise ValueError(f"the eigenvalues {np.round(mu, 4).tolist()} are too large for these features: "
                             f"Π would have a negative entry ({K_.min():.3g})")
        self.world = FiniteWorld(p, p[:, None] * K_ * p[None, :], symmetrize=True)


def designed_world(n: int, mu: Sequence[float], *, concentration: float = 5.0, rng: RngLike = None) -> DesignedWorld:
    """n states, p ~ Dirichlet(concentration), and features H whose centred eigenvalues are ``mu``.

    H: exponential (skewed) random columns clipped at ``CLIP``, centred and orthonormalised under p
    (``Hᵀ D H = I``, ``pᵀ H = 0``) by a Cholesky factor. Clipping bounds the features, so Π stays
    non-negative for the default eigenvalues (checked on construction).
    """
    gen = check_rng(rng)
    mu = np.asarray(mu, dtype=np.float64)
    p = gen.dirichlet(np.full(n, concentration))
    G = np.minimum(gen.exponential(size=(n, mu.size)), CLIP)
    G = G - p @ G
    L = np.linalg.cholesky(G.T @ (p[:, None] * G))
    return DesignedWorld(p, np.linalg.solve(L, G.T).T, mu)


class PairFreeCell(Record):
    """One (axis value, seed, estimator): the estimated map against the best one."""

    axis: Axis
    gap: float
    samples: int
    eps: float
    seed: int
    method: str
    map_error: float | None
    r1: float
    r5: float
    r1_true: float
    identifiable: bool | None
    alignable: bool
    success: bool


class PairFreeResult(Record):
    """The sweep: every cell, the world's settings and the theory's thresholds."""

    n_states: int
    n_nuisance: int
    k: int
    mu_2: float
    mu_3: float
    base_gap: float
    base_samples: int
    gaps: list[float]
    sample_sizes: list[int]
    eps_grid: list[float]
    n_seeds: int
    success_threshold: float
    eps_threshold: float
    chance_r1: float
    cells: list[PairFreeCell]
    seconds: float
    prhsim_version: str

    def rate(self, axis: str, method: str, value: float) -> float:
        """The fraction of seeds whose map was recovered at one value of one axis."""
        hits = [c.success for c in self.cells if c.axis == axis and c.method == method and getattr(c, axis) == value]
        return float(np.mean(hits)) if hits else float("nan")


def predicted_success(gap: float | np.ndarray, samples: float | np.ndarray) -> np.ndarray:
    """The spectral estimator's predicted success rate, ``erf(SUCCESS · gap · √S / √2)`` (module docstring)."""
    from scipy.special import erf

    x = SUCCESS * np.asarray(gap, dtype=np.float64) * np.sqrt(np.asarray(samples, dtype=np.float64))
    return erf(x / np.sqrt(2.0))


class _Setup:
    """The two modalities' closed forms over one designed world, rotated by Q_a and Q_b."""

    def __init__(self, designed: DesignedWorld, n_nuisance: int, eps: float, gen: np.random.Generator) -> None:
        world = designed.world
        self.p = world.p
        self.n = world.n
        self.mods = [codebook(self.n, n_nuisance, rng=gen) for _ in range(2)]
        self.pi = np.asarray(world.Pi).ravel()
        views = [good(), good() if eps >= 1.0 else bad(eps)]
        self.eps = eps
        with warnings.catch_warnings():  # near ε = 1 − μ_2 the bad view's nuisance block ties at k: recorded below
            warnings.simplefilter("ignore", TieWarning)
            self.F = [closed_form(view_world(world, m, v), K).features() for m, v in zip(self.mods, views)]
        self.Q = [haar_orthogonal(K, gen), haar_orthogonal(K, gen)]
        self.F = [F @ Q for F, Q in zip(self.F, self.Q)]
        # Q_true: p-weighted Procrustes between a's features (a function of z: the good view) and b's
        # conditional means over z
        means = [(F.reshape(self.n, m.n_nuisance, K) * m.nuisance[None, :, None]).sum(axis=1)
                 for F, m in zip(self.F, self.mods)]
        cross = means[0].T @ (self.p[:, None] * means[1])
        # b is nuisance-free when its conditional means are whitened too: every singular value of the
        # cross-covariance is 1; otherwise no orthogonal map aligns the two and Q_true is undefined
        self.alignable = bool(np.linalg.svd(cross, compute_uv=False).min() > 1.0 - ALIGNABLE_TOL)
        self.Q_true = orthogonal_map(cross)

    def draw(self, side: int, samples: int, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """S renderings of states drawn from p, and S positive pairs of this modality's own view."""
        mod, F = self.mods[side], self.F[side]
        N = mod.n_nuisance
        z = gen.choice(self.n, size=samples, p=self.p)
        x = F[z * N + gen.choice(N, size=samples, p=mod.nuisance)]
        pair = gen.choice(self.n * self.n, size=samples, p=self.pi)
        z1, z2 = np.divmod(pair, self.n)
        n1 = gen.choice(N, size=samples, p=mod.nuisance)
        fresh = gen.choice(N, size=samples, p=mod.nuisance)
        keep = gen.random(samples) < (1.0 - self.eps) if side == 1 else np.zeros(samples, dtype=bool)
        n2 = np.where(keep, n1, fresh)
        return x, np.stack([F[z1 * N + n1], F[z2 * N + n2]], axis=1)

    def held_out(self, side: int, gen: np.random.Generator) -> np.ndarray:
        """Every state once, with a fresh nuisance."""
        mod = self.mods[side]
        return self.F[side][np.arange(self.n) * mod.n_nuisance + gen.choice(mod.n_nuisance, size=self.n,
                                                                            p=mod.nuisance)]


def _cell(axis: Axis, designed: DesignedWorld, *, gap: float, samples: int, eps: float, seed: int,
          n_nuisance: int, base_seed: int) -> list[PairFreeCell]:
    gen = np.random.default_rng([base_seed, seed])
    setup = _Setup(designed, n_nuisance, eps, gen)
    xa, pairs_a = setup.draw(0, samples, gen)
    xb, pairs_b = setup.draw(1, samples, gen)
    test_a, test_b = setup.held_out(0, gen), setup.held_out(1, gen)
    spectral = spectral_match(xa, pairs_a, xb, pairs_b)
    rows = min(samples, ITERATIVE_ROWS)
    iterative = iterative_match(xa[:rows], xb[:rows], rng=gen)
    population = Whitening(np.zeros(K), np.eye(K), np.eye(K))  # the features are whitened under p by construction
    truth = mapped_retrieval(replace(spectral, map=setup.Q_true, whitening_a=population, whitening_b=population),
                             test_a, test_b).a_to_b[1]
    cells = []
    for method, estimate, identifiable in (("spectral", spectral, spectral.identifiable),
                                           ("iterative", iterative, None)):
        error = map_error(estimate.map, setup.Q_true) if setup.alignable else None
        recall = mapped_retrieval(replace(estimate, whitening_a=population, whitening_b=population),
                                  test_a, test_b).a_to_b
        cells.append(PairFreeCell(axis=axis, gap=gap, samples=samples, eps=eps, seed=seed, method=method,
                                  map_error=error, r1=recall[1], r5=recall[5], r1_true=truth,
                                  identifiable=identifiable, alignable=setup.alignable,
                                  success=error is not None and error < SUCCESS))
    return cells


def pair_free_sweep(gaps: Sequence[float] = DEFAULT_GAPS, sample_sizes: Sequence[int] = DEFAULT_SAMPLES,
                    eps_grid: Sequence[float] = PAIR_FREE_EPS, *, base_gap: float = 0.07, base_samples: int = 30_000,
                    n: int = 200, n_nuisance: int = 3, mu_2: float = 0.08, mu_3: float = 0.02,
                    n_seeds: int = 30, rng: RngLike = 0, progress=None) -> PairFreeResult:
    """Success of pair-free alignment against the gap, the sample size and ε (module docstring)."""
    start = time.perf_counter()
    say = as_progress(progress)
    if not 0 < mu_3 < mu_2:
        raise ValueError(f"need 0 < mu_3 < mu_2, got mu_2 = {mu_2}, mu_3 = {mu_3}")
    base_seed = int(check_rng(rng).integers(2**31))
    worlds: dict[float, DesignedWorld] = {}
    plan = _plan(gaps, sample_sizes, eps_grid, base_gap, base_samples)
    cells: list[PairFreeCell] = []
    units = [n_seeds * cell_units(entry["samples"]) for entry in plan]
    for i, entry in enumerate(plan):
        axis = entry["axis"]
        say(f"{axis} {entry[axis]:g} ({i + 1}/{len(plan)})", done=sum(units[:i]), total=sum(units))
        if entry["gap"] not in worlds:  # one set of features for every gap: only μ_1 moves
            worlds[entry["gap"]] = designed_world(n, (mu_2 + entry["gap"], mu_2, mu_3), rng=base_seed)
        cells += _entry(entry, worlds[entry["gap"]], n_seeds, n_nuisance, base_seed)
    say(f"{len(plan)} cells done", done=sum(units), total=sum(units))
    return _result(cells, gaps, sample_sizes, eps_grid, base_gap, base_samples, n, n_nuisance, mu_2, mu_3, n_seeds,
                   time.perf_counter() - start)


def _plan(gaps: Sequence[float], sample_sizes: Sequence[int], eps_grid: Sequence[float], base_gap: float,
          base_samples: int) -> list[dict[str, Any]]:
    """The sweep's entries, in order: each gap (at the base sample size), each sample size (at the base gap), each ε."""
    plan = [dict(axis="gap", gap=float(g), samples=base_samples, eps=1.0) for g in gaps]
    plan += [dict(axis="samples", gap=base_gap, samples=int(size), eps=1.0) for size in sample_sizes]
    plan += [dict(axis="eps", gap=base_gap, samples=base_samples, eps=float(e)) for e in eps_grid]
    return plan


def _entry(entry: dict[str, Any], designed: DesignedWorld, n_seeds: int, n_nuisance: int,
           base_seed: int) -> list[PairFreeCell]:
    """Every seed of one entry of the plan (seed s draws from ``[base_seed, s]`` wherever the entry runs)."""
    out: list[PairFreeCell] = []
    for seed in range(n_seeds):
        out += _cell(entry["axis"], designed, gap=entry["gap"], samples=entry["samples"], eps=entry["eps"], seed=seed,
                     n_nuisance=n_nuisance, base_seed=base_seed)
    return out


def _result(cells: list[PairFreeCell], gaps: Sequence[float], sample_sizes: Sequence[int], eps_grid: Sequence[float],
            base_gap: float, base_samples: int, n: int, n_nuisance: int, mu_2: float, mu_3: float, n_seeds: int,
            seconds: float) -> PairFreeResult:
    return PairFreeResult(n_states=n, n_nuisance=n_nuisance, k=K, mu_2=mu_2, mu_3=mu_3, base_gap=base_gap,
                          base_samples=base_samples, gaps=[float(g) for g in gaps],
                          sample_sizes=[int(s) for s in sample_sizes],
                          eps_grid=[float(e) for e in eps_grid], n_seeds=n_seeds, success_threshold=SUCCESS,
                          eps_threshold=1.0 - mu_2, chance_r1=1.0 / n, cells=cells,
                          seconds=seconds, prhsim_version=__version__)


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class PairFreeSettings(Settings):
    """``prhsim sweep pair-free``: the map between two modalities from unpaired samples, against the gap, S and eps.

    Attributes:
        gaps: gaps μ_1 − μ_2 of the designed world (default 0 to 0.07), at ``base_samples``.
        sample_sizes: states and pairs drawn per modality, S (default 300 to 100,000), at ``base_gap``.
        eps_grid: bad-view eps of modality b (1 is the good view; default 0.5 to 1), at both bases.
        base_gap, base_samples: the other axes' fixed values.
        n, n_nuisance: the designed world's states and each modality's nuisance values.
        mu_2, mu_3: the second and third eigenvalues (μ_1 = μ_2 + gap; the designed features must keep Π ≥ 0).
        n_seeds: draws (renderers, rotations and samples) per cell.
        seed: seeds the world and every draw.
    """

    grids = ('gaps', 'sample_sizes', 'eps_grid')

    renamed = {"seeds": "n_seeds", "eps": "eps_grid", "samples": "sample_sizes", "n_states": "n"}

    gaps: list[Annotated[float, Field(ge=0, le=0.5)]] = Field(default_factory=lambda: list(DEFAULT_GAPS), min_length=1)
    sample_sizes: list[Annotated[int, Field(ge=10, le=10_000_000)]] = Field(
        default_factory=lambda: list(DEFAULT_SAMPLES), min_length=1)
    eps_grid: list[Annotated[float, Field(gt=0, le=1)]] = Field(default_factory=lambda: list(PAIR_FREE_EPS),
                                                                min_length=1)
    base_gap: float = Field(0.07, ge=0, le=0.5)
    base_samples: int = Field(30_000, ge=10, le=10_000_000)
    n: int = Field(200, ge=10, le=5000)
    n_nuisance: int = Field(3, ge=2, le=50)
    mu_2: float = Field(0.08, gt=0, lt=1)
    mu_3: float = Field(0.02, gt=0, lt=1)
    n_seeds: int = Field(30, ge=1, le=1000)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> "PairFreeSettings":
        if not self.mu_3 < self.mu_2:
            raise ValueError(f"mu_3 must be below mu_2 (k = 2 needs a gap after mu_2), got {self.mu_3} and {self.mu_2}")
        return self


#: A seed of a cell costs about CELL_SAMPLES + S samples' worth of work (S drawn per modality), a sample
#: SAMPLE_SECONDS; measured at n = 200 on a shared 2-core CPU (30 seeds a cell: S = 300 3.5 s,
#: S = 30,000 8.1 s, S = 100,000 19.1 s; the default's 19 cells 100-190 s).
CELL_SAMPLES, SAMPLE_SECONDS = 22_000, 5.2e-6


def cell_units(samples: int) -> int:
    """Work units of one seed of a cell drawing ``samples`` per modality (:data:`CELL_SAMPLES` + samples)."""
    return CELL_SAMPLES + int(samples)


def estimate(s: PairFreeSettings) -> Any:
    """Seeds x Σ over cells of :func:`cell_units` x SAMPLE_SECONDS."""
    from prhsim.experiments.sweeps._registry import Estimate

    gaps, samples, eps = s.gaps, s.sample_sizes, s.eps_grid
    sizes = [s.base_samples] * (len(gaps) + len(eps)) + list(samples)
    units = s.n_seeds * sum(cell_units(size) for size in sizes)
    return Estimate(units * SAMPLE_SECONDS, f"{len(sizes)} cells x {s.n_seeds} seeds, "
                                            f"{s.n_seeds * sum(sizes):,} samples per modality in all")


def run(s: PairFreeSettings, say: Progress | None = None) -> Any:
    """``prhsim sweep pair-free`` from its settings; ``say`` reports progress (counted in :func:`cell_units`)."""
    return pair_free_sweep(*_grids(s), base_gap=s.base_gap, base_samples=s.base_samples, n=s.n,
                           n_nuisance=s.n_nuisance, mu_2=s.mu_2, mu_3=s.mu_3, n_seeds=s.n_seeds, rng=s.seed, progress=say)


def _grids(s: PairFreeSettings) -> tuple[Sequence[float], Sequence[int], Sequence[float]]:
    return s.gaps, s.sample_sizes, s.eps_grid


def cells(s: PairFreeSettings) -> list[dict[str, Any]]:
    """One cell per entry of the plan (a gap, a sample size or an ε), with all its seeds."""
    return _plan(*_grids(s), s.base_gap, s.base_samples)


def cell(s: PairFreeSettings, coordinates: dict[str, Any]) -> dict[str, Any]:
    """One entry of the plan, every seed (each from ``[base seed, seed]``), as records of :class:`PairFreeCell`."""
    start = time.perf_counter()
    base_seed = int(check_rng(s.seed).integers(2**31))
    designed = designed_world(s.n, (s.mu_2 + coordinates["gap"], s.mu_2, s.mu_3), rng=base_seed)
    rows = _entry(coordinates, designed, s.n_seeds, s.n_nuisance, base_seed)
    return {"cells": [row.model_dump(mode="json") for row in rows], "seconds": time.perf_counter() - start}


def reduce(s: PairFreeSettings, records: list[dict[str, Any]]) -> PairFreeResult:
    """The sweep's result from its entries' records (seconds summed over the cells)."""
    rows = [PairFreeCell.model_validate(row) for r in records for row in r["cells"]]
    return _result(rows, *_grids(s), s.base_gap, s.base_samples, s.n, s.n_nuisance, s.mu_2, s.mu_3, s.n_seeds,
                   sum(r["seconds"] for r in records))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    lines = [f"{r.n_states} states, k = {r.k}, mu_2 = {r.mu_2:g}, mu_3 = {r.mu_3:g}, {r.n_seeds} seeds; "
             f"recovered = map error below {r.success_threshold:g}; fraction of seeds, spectral / iterative:"]
    for axis, values, fixed in (("gap", r.gaps, f"S = {r.base_samples:,}"), ("samples", r.sample_sizes, f"gap {r.base_gap:g}"),
                                ("eps", r.eps_grid, f"gap {r.base_gap:g}, S = {r.base_samples:,}")):
        cells = ", ".join(f"{v:g}: {r.rate(axis, 'spectral', v):.1f} / {r.rate(axis, 'iterative', v):.1f}" for v in values)
        lines.append(f"  {axis} ({fixed}): {cells}")
    lines.append(f"  bad views: b holds nuisance no map aligns for eps below 1 - mu_2 = {r.eps_threshold:g}")
    return lines
