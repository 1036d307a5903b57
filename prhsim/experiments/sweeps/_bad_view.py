"""The bad-view sweep: the merge rule's k_Z and ρ_P against ε, beside the closed form (docs/theory.md §4).

Every modality m observes ``(z, n)`` under the bad(ε) view ``π = π_Z ⊗ ρ_ε`` with
``ρ_ε = (1 − ε) diag(q) + ε qqᵀ`` (ε = 1 is the good view), so ``K = K_Z ⊗ K_N`` and
the modal spectrum is the merge of the nuisance-free candidates ``λ_i(K_Z)`` (i ≥ 2,
centred) with the nuisance candidates ``(1 − ε) λ_i(K_Z)`` (i ≥ 1, each ``|N_m| − 1``
times). For every ε of the grid and every modality this records the merge rule's
predicted k_Z (:func:`prhsim.experiments.merge_rule`) and the observed one (the rank of
``E_p[m mᵀ]``, ``m(z) = E[f | z]``); for every pair the prediction

``ρ_P = sqrt(2(k − min(k_Z,a, k_Z,b))/k)``

and the closed form's observed ``ρ_P`` (coupled comparison through the pairs sharing z).

When is the prediction determined? k_Z is undetermined when a tied block at k mixes
nuisance-free and nuisance candidates (the solver may then pick either kind). A tie
inside one kind leaves k_Z determined: nuisance features have ``E[h | z] = 0`` whichever
are picked, and nuisance-free ones are functions of z. ρ_P then needs the top
``m = min(k_Z)`` slow features to be one subspace, i.e. ``m = 0`` or a gap of K_Z at m;
every choice of the other modality's slow features contains them (docs/theory.md §1.2,
sandwich). This is finer than :func:`prhsim.experiments.rotation_uniqueness`, which
predicts nothing for a pair whose optimum is not one orbit; on the default world every
ε < 0.24 puts a tie into some modality's nuisance block, and the prediction holds there.

Default: ``gridscene(3, objects=1)`` (81 states; pixels 4, caption 8, symbolic 3 nuisance
values), k = 3 by ``k="auto"``, 25 values of ε: about 0.25 s (2-core CPU, one BLAS thread).
"""

from __future__ import annotations

import time
import warnings
from itertools import combinations
from typing import Any, Callable, Literal, Sequence

import numpy as np
from pydantic import Field

from prhsim import __version__
from prhsim._rng import RngLike, cell_stream, check_rng
from prhsim._types import Progress, as_progress
from prhsim.config import GridSceneWorld, RunConfig, Settings, WorldConfig
from prhsim.experiments._record import Record
from prhsim.experiments._rotation import (
    base_spectrum,
    merge_rule,
    predicted_rho,
    rotation_uniqueness,
)
from prhsim.optima import GAP_TOL, TieWarning, closed_form
from prhsim.worlds import Modality, World, bad, good, gridscene

#: The default ε grid: 25 points from 0.02 to 1 (the good view).
BAD_VIEW_EPS = tuple(float(x) for x in np.linspace(0.02, 1.0, 25))


class BadViewModality(Record):
    """One modality across the ε grid (``predicted_kz[i]`` at ``eps_grid[i]``; None: undetermined)."""

    name: str
    n_nuisance: int
    predicted_kz: list[int | None]
    observed_kz: list[int]
    unique: list[bool]


class BadViewPair(Record):
    """One pair across the ε grid: predicted ρ_P (None: undetermined) and the closed form's ρ_P, s_Θ."""

    a: str
    b: str
    predicted_rho_p: list[float | None]
    observed_rho_p: list[float]
    observed_s_theta: list[float]


class BadViewSweep(Record):
    """Result of :func:`bad_view_sweep`; ``max_error`` is the largest ``|observed − predicted|`` ρ_P."""

    prhsim_version: str
    world: str
    n_states: int
    k: int
    k_auto: bool
    base_gap: float
    base_spectrum: list[float]
    eps_grid: list[float]
    seed: int | None
    modalities: list[BadViewModality]
    pairs: list[BadViewPair]
    max_error: float | None
    seconds: float


def _check_eps(eps: Sequence[float]) -> tuple[float, ...]:
    values = tuple(float(x) for x in np.atleast_1d(np.asarray(eps, dtype=float)))
    if not values:
        raise ValueError("bad_view_sweep needs at least one value of eps")
    bad_values = [x for x in values if not 0.0 < x <= 1.0]
    if bad_values:
        raise ValueError(f"every eps must lie in (0, 1], got {bad_values[0]}")
    if len(set(values)) != len(values):
        raise ValueError(f"eps values must be distinct, got {list(values)}")
    return tuple(sorted(values))


def determined_kz(base_values: np.ndarray, eps: float, n_nuisance: int, k: int) -> int | None:
    """The merge rule's k_Z (None when a tied block at k mixes nuisance-free and nuisance candidates)."""
    return merge_rule(base_values, good() if eps == 1.0 else bad(eps), n_nuisance, k).nuisance_free


def determined_rho(base_values: np.ndarray, k: int, kz_a: int | None, kz_b: int | None) -> float | None:
    """``sqrt(2(k − m)/k)`` with ``m = min(k_Z)``, when both k_Z and the top-m slow subspace are determined."""
    rho = predicted_rho(k, kz_a, kz_b)
    if rho is None:
        return None
    m = min(kz_a, kz_b)
    mu = base_values[1:]  # centred
    return rho if m == 0 or mu[m - 1] - mu[m] > GAP_TOL else None


def bad_view_sweep(
    base: World | None = None,
    modalities: Sequence[Modality] | None = None,
    eps_grid: Sequence[float] = BAD_VIEW_EPS,
    k: int | Literal["auto"] = "auto",
    rng: RngLike = 0,
    *,
    name: str | None = None,
    progress: Callable[..., None] | None = None,
) -> BadViewSweep:
    """Predicted and observed k_Z and ρ_P for bad(ε) views of every modality, for each ε (module docstring).

    Args:
        base: the world over Z; None: ``gridscene(3, objects=1)`` (then ``modalities`` must be None too).
        modalities: the modalities (all under the same view in a cell); None: the gridscene's three.
        eps_grid: the values of ε; 1 is the good view.
        k: number of features, or "auto" (K_Z's k, :func:`prhsim.optima.pick_k`).
        rng: seeds the symbolic modality's maps (default world) and every cell: an int seed gives the cell at ε
            the stream ``cell_stream(seed, {"eps": ε})`` (:func:`prhsim._rng.cell_stream`: the same wherever and
            in whatever order the cells run); a Generator spawns one stream per ε instead.
        name: the world's name in the record (default: the gridscene's, or ``repr(base)``).
        progress: ``progress(message, done, total)`` once per ε and at the end (done and total in cells of ε).

    Raises:
        ValueError: on a bad grid, a base without modalities (or modalities without a base), or bad k.
    """
    start = time.perf_counter()
    eps = _check_eps(eps_grid)
    gen = check_rng(rng)
    seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
    if (base is None) != (modalities is None):
        raise ValueError("pass both base and modalities, or neither (the default gridscene(3, objects=1))")
    streams = gen.spawn(len(eps) + 1)
    if base is None:
        scene = gridscene(3, objects=1)
        base, modalities = scene.world, scene.modalities(rng=streams[0])
        name = name or "gridscene(3, objects=1)"
    else:
        name = name or repr(base)
    modalities = tuple(modalities)
    if len(modalities) < 2:
        raise ValueError(f"bad_view_sweep needs at least two modalities to compare, got {len(modalities)}")
    base_opt, base_values = _base(base, k)
    say = as_progress(progress)
    records = []
    for i, e in enumerate(eps):
        say(f"eps = {e:g} ({i + 1} of {len(eps)})", done=i, total=len(eps))
        stream = cell_stream(seed, {"eps": e}) if seed is not None else streams[1 + i]
        records.append(bad_view_cell(base, modalities, base_values, base_opt.k, e, stream))
    say(f"{len(eps)} values of eps done", done=len(eps), total=len(eps))
    return _reduce(records, base, modalities, base_opt, k, seed, name, time.perf_counter() - start)


def _base(base: World, k: int | Literal["auto"]) -> tuple[Any, np.ndarray]:
    """The base world's closed form (its k, gap and spectrum) and its uncentred top k+2 eigenvalues."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)
        base_opt = closed_form(base, k)
    return base_opt, base_spectrum(base, base_opt.k + 2)


def bad_view_cell(base: World, modalities: Sequence[Modality], base_values: np.ndarray, k: int, eps: float,
                  rng: RngLike) -> dict[str, Any]:
    """One cell: every modality under bad(ε) (good at ε = 1), its predicted and observed k_Z and uniqueness, and
    every pair's predicted ρ_P, observed ρ_P and s_Θ (JSON values; ``rng`` breaks the closed form's ties)."""
    view = good() if eps == 1.0 else bad(eps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)
        outcome = rotation_uniqueness(base, modalities, [view] * len(modalities), k, rng=rng)
    kz = {m.name: determined_kz(base_values, eps, m.world.n_nuisance, k) for m in outcome.modalities}
    return {"eps": eps,
            "modalities": {m.name: {"predicted_kz": kz[m.name], "observed_kz": int(m.nuisance_free),
                                    "unique": bool(m.unique)} for m in outcome.modalities},
            "pairs": {f"{p.a}-{p.b}": {"predicted_rho_p": determined_rho(base_values, k, kz[p.a], kz[p.b]),
                                       "observed_rho_p": float(p.comparison.rho_p),
                                       "observed_s_theta": float(p.comparison.s_theta)} for p in outcome.pairs}}


def _reduce(records: Sequence[dict[str, Any]], base: World, modalities: Sequence[Modality], base_opt: Any,
            k: int | Literal["auto"], seed: int | None, name: str, seconds: float) -> BadViewSweep:
    """The sweep's record from its cells' (in the order of ε)."""
    pairs = list(combinations([m.name for m in modalities], 2))
    columns = {(a, b): [r["pairs"][f"{a}-{b}"] for r in records] for a, b in pairs}
    errors = [abs(c["observed_rho_p"] - c["predicted_rho_p"]) for cells in columns.values() for c in cells
              if c["predicted_rho_p"] is not None]
    return BadViewSweep(
        prhsim_version=__version__, world=name, n_states=base.n, k=base_opt.k, k_auto=k == "auto",
        base_gap=float(base_opt.gap), base_spectrum=[float(v) for v in base_opt.eigenvalues],
        eps_grid=[r["eps"] for r in records], seed=seed,
        modalities=[BadViewModality(name=m.name, n_nuisance=m.n_nuisance,
                                    **{key: [r["modalities"][m.name][key] for r in records]
                                       for key in ("predicted_kz", "observed_kz", "unique")}) for m in modalities],
        pairs=[BadViewPair(a=a, b=b, **{key: [c[key] for c in cells] for key in
                                        ("predicted_rho_p", "observed_rho_p", "observed_s_theta")})
               for (a, b), cells in columns.items()],
        max_error=max(errors) if errors else None,
        seconds=seconds,
    )


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class BadViewSweepSettings(Settings):
    """``prhsim sweep bad-view``: every modality under bad(eps) for each eps of a grid (1 is the good view).

    Attributes:
        world: the world over Z (default gridscene, 3x3 grid, one object).
        modalities: how many modalities (gridscene: pixels, caption, symbolic).
        eps_grid: the values of eps (default 25 points from 0.02 to 1).
        k: number of features, or "auto".
        seed: seeds the world, the modalities and one stream per eps.
    """

    grids = ('eps_grid',)

    world: WorldConfig = Field(default_factory=lambda: GridSceneWorld(size=3, objects=1))
    renamed = {"eps": "eps_grid"}

    modalities: int = Field(3, ge=2, le=8)
    eps_grid: list[float] = Field(default_factory=lambda: list(BAD_VIEW_EPS), min_length=1)
    k: int | Literal["auto"] = "auto"
    seed: int = Field(0, ge=0)


def _config(s: BadViewSweepSettings) -> Any:
    return RunConfig(world=s.world, modalities=s.modalities, seed=s.seed, figures=False)


def estimate(s: BadViewSweepSettings) -> Any:
    """One run of the world's closed forms per ε and one for the base: (cells + 1) x the run plan's seconds."""
    from prhsim.experiments._plan import plan_run
    from prhsim.experiments.sweeps._registry import Estimate

    cells = len(s.eps_grid)
    each = plan_run(_config(s)).seconds
    return Estimate((cells + 1) * each, f"{cells} values of eps, each about {each:.2g} s of closed forms "
                                        f"({s.world.describe()}, {s.modalities} modalities)")


def _setup(s: BadViewSweepSettings) -> Any:
    from prhsim.experiments._plan import plan_run
    from prhsim.experiments._run import build

    config = _config(s)
    plan_run(config)
    return build(config)


def run(s: BadViewSweepSettings, say: Progress | None = None) -> Any:
    """``prhsim sweep bad-view`` from its settings; ``say`` reports progress (counted in values of eps)."""
    setup = _setup(s)
    return bad_view_sweep(setup.base, setup.modalities, eps_grid=s.eps_grid, k=s.k, rng=s.seed,
                          name=s.world.describe(), progress=say)


def cells(s: BadViewSweepSettings) -> list[dict[str, float]]:
    """One cell per value of ε."""
    return [{"eps": e} for e in _check_eps(s.eps_grid)]


def cell(s: BadViewSweepSettings, coordinates: dict[str, float]) -> dict[str, Any]:
    """The cell at ``coordinates["eps"]`` (its ties broken by the cell's own stream: the seed and ε), with its seconds."""
    start = time.perf_counter()
    setup = _setup(s)
    base_opt, base_values = _base(setup.base, s.k)
    eps = float(coordinates["eps"])
    stream = cell_stream(s.seed, {"eps": eps})
    record = bad_view_cell(setup.base, setup.modalities, base_values, base_opt.k, eps, stream)
    return {**record, "seconds": time.perf_counter() - start}


def reduce(s: BadViewSweepSettings, records: list[dict[str, Any]]) -> BadViewSweep:
    """The sweep's result from its cells (the same record as :func:`run`'s, seconds summed over the cells)."""
    setup = _setup(s)
    base_opt, _ = _base(setup.base, s.k)
    return _reduce(records, setup.base, setup.modalities, base_opt, s.k, s.seed, s.world.describe(),
                   sum(r["seconds"] for r in records))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    lines = [f"{r.world}: {r.n_states:,} states, k = {r.k}, {len(r.eps_grid)} values of eps from {r.eps_grid[0]:g} to {r.eps_grid[-1]:g}"]
    for p in r.pairs:
        determined = sum(x is not None for x in p.predicted_rho_p)
        lines.append(f"{p.a} vs {p.b}: rho_P from {p.observed_rho_p[0]:.4f} (eps {r.eps_grid[0]:g}) to "
                     f"{p.observed_rho_p[-1]:.2g} (eps {r.eps_grid[-1]:g}); predicted in {determined}/{len(r.eps_grid)} cells")
    err = "n/a" if r.max_error is None else f"{r.max_error:.1e}"
    lines.append(f"largest |observed - predicted| rho_P: {err}")
    return lines
