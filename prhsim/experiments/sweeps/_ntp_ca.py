"""Next-token prediction against correspondence analysis as dependence weakens (docs/theory.md §5).

For ``worlds`` random emission worlds (:func:`prhsim.worlds.emission_world`: 5 states,
6 tokens, contexts of two tokens, so a (36, 6) joint; one emission table T per world, shared by
every strength) and every emission strength a of the grid, the exact joint ``P`` gives

* the correspondence analysis (CA) of P, the closed form of the whitened two-tower problem, and
  its dependence strength ``σ_1`` (the top canonical correlation);
* the rank-k log-bilinear softmax model fitted by L-BFGS-B to the exact expected cross-entropy
  (:func:`prhsim.learners.fit_log_bilinear`), whose context embeddings h, centred and
  whitened under ``p_c``, are compared with the CA context features: ``s_Θ = ‖sinΘ‖_F/√k``;
* the PMI proxy (top-k SVD of ``D_c^{1/2} PMI_dc D_y^{1/2}``, :func:`prhsim.optima.pmi_proxy`),
  compared with CA and with the fitted h.

docs/theory.md §5 states the agreement is only first order in the dependence: ``s_Θ ≈ c·σ_1`` as
``σ_1 → 0`` with a world-dependent constant c (docs/theory.md §5 reports 0.76 on one world). The summary keeps
the median of ``s_Θ/σ_1`` over the quarter of cells (at least one) with the smallest ``σ_1`` and the
largest deviations.

Measured with the defaults (12 strengths from 0.02 to 1, 3 worlds, k = 2, 3 restarts per fit; about
3 s on a 2-core CPU): ``s_Θ/σ_1`` settles, as ``σ_1 → 0``, to 0.38, 0.76 and 0.57 on the three worlds
(median over the 9 smallest-σ_1 cells 0.57), and is 0.34, 0.55 and 0.80 at a = 1 (``σ_1`` = 0.31, 0.34,
0.41; the largest ``s_Θ`` is 0.32). The PMI proxy is as far from CA as the fit is (``s_Θ/σ_1`` 0.60 at
small σ_1) but 4.6 to 17 times closer to the fit than CA (``s_Θ`` to the fit ≈ 0.08 σ_1), except at
a = 1 on the third world (0.36 to the fit, 0.32 for CA).

Cells: one per world (:func:`cells`, :func:`cell`, :func:`reduce`), every strength of it in the cell. World w's
stream is the seed's w-th spawned child (``spawned_stream(seed, w)``): it spawns the emission table's stream and the
fits' (one child per strength, in the order of the sorted strengths), so a world's numbers depend on the seed, w and
the strengths alone.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Annotated, Any, Callable, Sequence

import numpy as np
from pydantic import Field

from prhsim import __version__
from prhsim._rng import RngLike, check_rng, spawned_stream
from prhsim._types import Progress, as_progress
from prhsim.config import Settings
from prhsim.experiments._record import Record
from prhsim.learners import fit_log_bilinear, whitened_deviation
from prhsim.metrics import principal_angles
from prhsim.optima import correspondence_analysis, pmi_proxy
from prhsim.worlds import emission_world

#: The default emission strengths a: 12 points from 0.02 to 1, log-spaced.
DEFAULT_STRENGTHS = tuple(float(x) for x in np.geomspace(0.02, 1.0, 12))
#: The world of docs/theory.md §5: states, tokens, context tokens.
N_STATES, VOCAB, CONTEXT = 5, 6, 2
#: The summary's "small σ_1" cells: this fraction of all cells (at least one), smallest σ_1 first.
SMALL_FRACTION = 0.25
#: Initialisations per fit (the lowest loss is kept).
RESTARTS = 3


class NtpCaCell(Record):
    """One world at one emission strength.

    ``s_theta``: the whitened fit vs CA; ``pmi_s_theta``: the PMI proxy vs CA; ``pmi_fit_s_theta``:
    the PMI proxy vs the whitened fit (all ``‖sinΘ‖_F/√k`` in L²(p_c)).
    """

    world: int
    strength: float
    sigma_1: float
    sigma_d: float
    gap: float
    s_theta: float
    ratio: float
    pmi_s_theta: float
    pmi_ratio: float
    pmi_fit_s_theta: float
    loss: float
    entropy: float
    kl: float
    information: float
    iterations: int
    converged: bool


class NtpCaResult(Record):
    """Result of :func:`ntp_ca_sweep`; ``cells[w][j]`` is world w at ``strengths[j]``.

    Summary: ``small_cells`` cells with the smallest ``σ_1`` (a quarter, at least one) give the
    medians ``median_small_ratio`` (``s_Θ/σ_1``, fit vs CA), ``median_small_pmi_ratio`` (PMI proxy vs
    CA) and ``median_small_pmi_fit_ratio`` (PMI proxy vs fit, over ``σ_1``); ``max_s_theta`` is the
    largest fit-vs-CA deviation (at ``max_sigma_1``), ``max_pmi_s_theta`` and ``max_pmi_fit_s_theta``
    the largest of the others. ``all_converged``: every fit converged.
    """

    prhsim_version: str
    n_states: int
    vocab: int
    context: int
    k: int
    worlds: int
    restarts: int
    strengths: list[float]
    seed: int | None
    cells: list[list[NtpCaCell]]
    small_cells: int
    median_small_ratio: float
    median_small_pmi_ratio: float
    median_small_pmi_fit_ratio: float
    max_s_theta: float
    max_sigma_1: float
    max_pmi_s_theta: float
    max_pmi_fit_s_theta: float
    all_converged: bool
    seconds: float


def _check_strengths(strengths: Sequence[float]) -> tuple[float, ...]:
    values = tuple(float(x) for x in np.atleast_1d(np.asarray(strengths, dtype=float)))
    if not values:
        raise ValueError("ntp_ca_sweep needs at least one strength")
    bad = [x for x in values if not 0.0 < x <= 1.0]
    if bad:
        raise ValueError(f"every emission strength a must lie in (0, 1] (a = 0 is independence), got {bad[0]}")
    if len(set(values)) != len(values):
        raise ValueError(f"strengths must be distinct, got {list(values)}")
    return tuple(sorted(values))


def ntp_ca_sweep(strengths: Sequence[float] = DEFAULT_STRENGTHS, *, k: int = 2, worlds: int = 3,
                 restarts: int = RESTARTS, rng: RngLike = 0,
                 progress: Callable[..., None] | None = None) -> NtpCaResult:
    """The whitened log-bilinear optimum and the PMI proxy against CA over emission strengths (module docstring).

    Args:
        strengths: emission strengths a in (0, 1], distinct.
        k: embedding dimension (1..5 for the 6-token world).
        worlds: number of random emission tables T (one independent stream each: T, then the
            initialisations of its fits).
        restarts: initialisations per fit, the lowest loss kept (the rank-k problem has spurious
            local minima at strong dependence).
        rng: an int seed gives world w the stream ``spawned_stream(seed, w)`` (the seed's w-th spawned child, the same
            wherever and in whatever order the worlds run); a Generator spawns one stream per world.
        progress: ``progress(message, done, total)`` once per world and at the end, counted in cells (world x a).

    Raises:
        ValueError: on bad arguments.
    """
    start = time.perf_counter()
    values = _check(strengths, k, worlds, restarts)
    k, worlds, restarts = int(k), int(worlds), int(restarts)
    seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
    streams = check_rng(rng).spawn(worlds) if seed is None else None
    records = []
    say, total = as_progress(progress), worlds * len(values)
    for w in range(worlds):
        say(f"world {w + 1} of {worlds}", done=w * len(values), total=total)
        records.append({"row": ntp_ca_row(values, k, restarts, w,
                                          spawned_stream(seed, w) if seed is not None else streams[w])})
    say(f"{worlds} worlds done", done=total, total=total)
    return _reduce(records, k, worlds, restarts, values, seed, time.perf_counter() - start)


def _check(strengths: Sequence[float], k: int, worlds: int, restarts: int) -> tuple[float, ...]:
    """The strengths, checked and sorted, after checking k, worlds and restarts (one-line ValueErrors)."""
    values = _check_strengths(strengths)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= VOCAB - 1:
        raise ValueError(f"k must be an integer in 1..{VOCAB - 1}, got {k!r}")
    if isinstance(worlds, bool) or not isinstance(worlds, (int, np.integer)) or worlds < 1:
        raise ValueError(f"worlds must be a positive integer, got {worlds!r}")
    if isinstance(restarts, bool) or not isinstance(restarts, (int, np.integer)) or restarts < 1:
        raise ValueError(f"restarts must be a positive integer, got {restarts!r}")
    return values


def ntp_ca_row(values: Sequence[float], k: int, restarts: int, w: int,
               rng: np.random.Generator) -> list[dict[str, Any]]:
    """World ``w`` at every strength of ``values``, as JSON values (:class:`NtpCaCell`). ``rng`` spawns the table's
    stream (one T for every strength) and the initialisations' (one child per strength, in the order of ``values``)."""
    table_rng, init_rng = rng.spawn(2)
    row = []
    for a, init in zip(values, init_rng.spawn(len(values))):
        world = emission_world(a, n_states=N_STATES, vocab=VOCAB, context=CONTEXT, rng=copy.deepcopy(table_rng))
        ca = correspondence_analysis(world.joint, k)
        fit = fit_log_bilinear(world.joint, k, rng=init, restarts=restarts)
        proxy = pmi_proxy(world.joint, k)
        s_theta = whitened_deviation(fit.h, ca)
        pmi_s_theta = whitened_deviation(proxy, ca)
        pmi_fit = principal_angles(fit.h - ca.p_c @ fit.h, proxy, ca.p_c).s_theta  # h centred under p_c
        sigma = ca.strength
        row.append(NtpCaCell(
            world=w, strength=a, sigma_1=sigma, sigma_d=float(ca.values[-1]), gap=ca.gap, s_theta=s_theta,
            ratio=s_theta / sigma if sigma > 0 else math.inf, pmi_s_theta=pmi_s_theta,
            pmi_ratio=pmi_s_theta / sigma if sigma > 0 else math.inf, pmi_fit_s_theta=float(pmi_fit),
            loss=fit.loss, entropy=fit.entropy, kl=fit.kl, information=fit.information,
            iterations=fit.iterations, converged=fit.converged).model_dump(mode="json"))
    return row


def _reduce(records: Sequence[dict[str, Any]], k: int, worlds: int, restarts: int, values: Sequence[float],
            seed: int | None, seconds: float) -> NtpCaResult:
    """The sweep's record from every world's row (in world order) and the summary over all cells."""
    cells = [[NtpCaCell.model_validate(c) for c in r["row"]] for r in records]
    flat = sorted((c for row in cells for c in row), key=lambda c: c.sigma_1)
    small = flat[:max(1, math.ceil(SMALL_FRACTION * len(flat)))]
    worst = max(flat, key=lambda c: c.s_theta)
    return NtpCaResult(
        prhsim_version=__version__, n_states=N_STATES, vocab=VOCAB, context=CONTEXT, k=k, worlds=worlds,
        restarts=restarts, strengths=list(values), seed=seed, cells=cells, small_cells=len(small),
        median_small_ratio=float(np.median([c.ratio for c in small])),
        median_small_pmi_ratio=float(np.median([c.pmi_ratio for c in small])),
        median_small_pmi_fit_ratio=float(np.median([c.pmi_fit_s_theta / c.sigma_1 for c in small])),
        max_s_theta=worst.s_theta, max_sigma_1=worst.sigma_1,
        max_pmi_s_theta=max(c.pmi_s_theta for c in flat), max_pmi_fit_s_theta=max(c.pmi_fit_s_theta for c in flat),
        all_converged=all(c.converged for c in flat), seconds=seconds)


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class NtpCaSettings(Settings):
    """``prhsim sweep ntp-ca``: the whitened next-token optimum against correspondence analysis over dependence strengths.

    Attributes:
        strengths: emission strengths a in (0, 1] (default 12 from 0.02 to 1).
        k: embedding dimension (1..5).
        worlds: random emission tables.
        restarts: initialisations per fit.
        seed: seeds the tables and the fits.
    """

    grids = ('strengths',)
    renamed = {"d": "k"}

    strengths: list[Annotated[float, Field(gt=0, le=1)]] = Field(default_factory=lambda: list(DEFAULT_STRENGTHS),
                                                                 min_length=1)
    k: int = Field(2, ge=1, le=5)
    worlds: int = Field(3, ge=1, le=100)
    restarts: int = Field(3, ge=1, le=20)
    seed: int = Field(0, ge=0)


#: Seconds per fit (one world, one strength, one restart), measured on a shared 2-core CPU: the default
#: (3 worlds x 12 strengths x 3 restarts) 1.7-3.8 s, 6 worlds x 6 restarts 8.2 s.
FIT_SECONDS = 0.02


def estimate(s: NtpCaSettings) -> Any:
    """Fits (worlds x strengths x restarts) x FIT_SECONDS."""
    from prhsim.experiments.sweeps._registry import Estimate

    fits = s.worlds * len(s.strengths) * s.restarts
    return Estimate(fits * FIT_SECONDS, f"{fits} fits (worlds x strengths x restarts)")


def run(s: NtpCaSettings, say: Progress | None = None) -> Any:
    """``prhsim sweep ntp-ca`` from its settings; ``say`` reports progress (counted in cells)."""
    return ntp_ca_sweep(s.strengths, k=s.k, worlds=s.worlds, restarts=s.restarts, rng=s.seed,
                        progress=say)


def cells(s: NtpCaSettings) -> list[dict[str, int]]:
    """One cell per world (its strengths share the world's emission table)."""
    _check(s.strengths, s.k, s.worlds, s.restarts)
    return [{"world": w} for w in range(s.worlds)]


def cell(s: NtpCaSettings, coordinates: dict[str, int]) -> dict[str, Any]:
    """World ``coordinates["world"]`` at every strength, from its own stream (``spawned_stream(seed, w)``), with its
    seconds."""
    start = time.perf_counter()
    w = int(coordinates["world"])
    row = ntp_ca_row(_check(s.strengths, s.k, s.worlds, s.restarts), s.k, s.restarts, w, spawned_stream(s.seed, w))
    return {"row": row, "seconds": time.perf_counter() - start}


def reduce(s: NtpCaSettings, records: list[dict[str, Any]]) -> NtpCaResult:
    """The sweep's result from its worlds' rows (the same record as :func:`run`'s, seconds summed over the cells)."""
    return _reduce(records, s.k, s.worlds, s.restarts, _check(s.strengths, s.k, s.worlds, s.restarts), s.seed,
                   sum(r["seconds"] for r in records))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    return [f"{r.worlds} emission worlds ({r.n_states} states, {r.vocab} tokens, contexts of {r.context}), k = {r.k}, "
            f"{len(r.strengths)} strengths",
            f"s_Theta(whitened next-token optimum, CA) / sigma_1 at the {r.small_cells} weakest dependences: "
            f"median {r.median_small_ratio:.3g}; PMI proxy vs CA {r.median_small_pmi_ratio:.3g}, "
            f"PMI proxy vs the optimum {r.median_small_pmi_fit_ratio:.3g}",
            f"largest s_Theta to CA: {r.max_s_theta:.3g} (sigma_1 = {r.max_sigma_1:.3g}); "
            f"every fit converged: {r.all_converged}"]
