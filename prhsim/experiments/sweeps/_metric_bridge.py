"""The metric bridge: the theory's distance ρ_P against the numbers PRH papers report (docs/theory.md §2, §10).

Pairs of representations with a controlled amount of misalignment are scored both ways:
by the population distances of the theory (``ρ_P``, ``s_Θ``: p-weighted, after whitening
under p) and by the sample metrics of the Platonic-Representation literature (the registry's
reported metrics, :func:`prhsim.metrics.reported_metrics`: mutual k-NN, linear CKA, R@1; and
CKNNA), computed on N states drawn from p without replacement (each row one state; the metrics
weigh rows equally; a fitted metric, R@1, fits on a random half of the rows).

Families, each a path from "the same representation up to rotation" to "unrelated":

* ``noise``: the closed form F* of a gridscene world and ``whiten(F* Q + σ G)`` for a random
  rotation Q and i.i.d. Gaussian noise G of size σ;
* ``kernel``: F* and the closed form of a perturbed world ``Π_t = (1 − t)Π + tΠ'`` on the same
  p (Π' a Sinkhorn world; docs/theory.md §3);
* ``bad-view``: the pixels modality's closed form under the good view and under bad(ε)
  (docs/theory.md §4), on the modal world Z x N. Under a good view the optimum is
  nuisance-free, so the |N| rows of one z are identical: retrieval among them is a tie
  (broken uniformly), which caps R@1 below 1 even for identical representations.

The summary answers "what does a mutual k-NN of x mean in ρ_P": per family, ρ_P
interpolated at a few mutual k-NN values (None outside the family's range).

A cell (:func:`cells`) is one level of one family. A family's draws (its rows, retrieval split,
rotation, noise and Π') come from the stream ``cell_stream(seed, {"family": family})``, shared
by its levels so each family stays one path; a cell draws nothing else, so its record does not
depend on where or in what order the cells run.
"""

from __future__ import annotations

import functools
import time
import warnings
from typing import Any, Callable, Literal

import numpy as np
from pydantic import Field

from prhsim import __version__
from prhsim._rng import RngLike, cell_stream, check_rng
from prhsim._types import Progress, as_progress
from prhsim.config import GridSceneWorld, Settings
from prhsim.experiments._record import Record
from prhsim.metrics import metric_record, principal_angles, procrustes, reported_metrics, whiten
from prhsim.optima import TieWarning, closed_form
from prhsim.worlds import (
    FiniteWorld,
    World,
    bad,
    good,
    gridscene,
    sinkhorn_world,
    view_world,
)

Family = Literal["noise", "kernel", "bad-view"]
FAMILIES: tuple[Family, ...] = ("noise", "kernel", "bad-view")
#: Mutual k-NN values at which ρ_P is read off each family's curve.
READ_AT = (0.1, 0.2, 0.4, 0.6, 0.8)
#: Largest ρ_P step between two cells that the read-off interpolates across.
READ_MAX_STEP = 0.3
#: Metrics the bridge scores beside the registry's reported ones.
BRIDGE_EXTRA_METRICS = ("cknna",)


def bridge_metrics() -> tuple[str, ...]:
    """The registered metrics the bridge scores: the reported ones, then :data:`BRIDGE_EXTRA_METRICS`."""
    return tuple(dict.fromkeys((*reported_metrics(), *BRIDGE_EXTRA_METRICS)))


class BridgeCell(Record):
    """One pair of representations, scored by the theory's distances and the sample metrics (``metrics[name]``)."""

    family: Family
    level: float
    rho_p: float
    s_theta: float
    metrics: dict[str, float]


class MetricBridge(Record):
    """Result of :func:`metric_bridge`; ``rho_at_mutual_knn[family][x]`` is ρ_P where mutual k-NN = x.

    ``rows[family]`` states were drawn for each of that family's pairs (``samples`` capped at the
    world's size), and ``chance[family][name]`` is each metric's chance level there, where its record
    has one (mutual k-NN: k/(rows − 1)); ``metrics`` names the metrics scored, in order.
    """

    prhsim_version: str
    world: str
    k: int
    samples: int
    knn_k: int
    metrics: list[str]
    rows: dict[str, int]
    chance: dict[str, dict[str, float]]
    seed: int | None
    cells: list[BridgeCell]
    rho_at_mutual_knn: dict[str, dict[str, float | None]]
    seconds: float


def _levels(family: Family, levels: int) -> np.ndarray:
    if family == "noise":
        return np.concatenate([[0.0], np.geomspace(0.02, 3.0, levels - 1)])
    if family == "kernel":  # the optimum moves little until Π' dominates: dense towards t = 1
        return np.concatenate([[0.0], 1.0 - np.geomspace(1.0 - 1e-3, 3e-3, levels - 2), [1.0]])
    return np.linspace(1.0, 0.05, levels)


def metric_bridge(size: int = 4, objects: int = 1, *, levels: int = 16, samples: int = 1000, knn_k: int = 10,
                  k: int | Literal["auto"] = "auto", rng: RngLike = 0,
                  progress: Callable[..., None] | None = None) -> MetricBridge:
    """Score the three families of misaligned pairs by ρ_P, s_Θ and the PRH sample metrics (module docstring).

    Runs :func:`bridge_cell` on every (family, level) in order and reduces them as :func:`reduce` does.

    Args:
        size, objects: the gridscene (default 4x4, one object: 144 states; pixels: 576 modal states).
        levels: points per family (at least 3; the first is the aligned pair).
        samples: N, states drawn per pair (capped at the world's size).
        knn_k: the k of mutual k-NN and CKNNA.
        k: number of features, or "auto".
        rng: seeds each family's draws (the rotation, noise, Π', the drawn states and the retrieval split, shared by
            its levels): an int seed gives family f the stream ``cell_stream(seed, {"family": f})``
            (:func:`prhsim._rng.cell_stream`); a Generator spawns one stream per family instead.
        progress: ``progress(message, done, total)`` once per cell (family x level) and at the end, counted in cells.

    Raises:
        ValueError: on a bad argument.
    """
    with warnings.catch_warnings():  # a bad view's tie is part of the family's path, not a problem of the call
        warnings.simplefilter("ignore", TieWarning)
        return _metric_bridge(size, objects, levels, samples, knn_k, k, rng, as_progress(progress))


def _metric_bridge(size: int, objects: int, levels: int, samples: int, knn_k: int, k: int | Literal["auto"],
                   rng: RngLike, say: Progress) -> MetricBridge:
    start = time.perf_counter()
    if int(levels) != levels or levels < 3:
        raise ValueError(f"levels must be an integer >= 3, got {levels}")
    if int(samples) != samples or samples < 4:
        raise ValueError(f"samples must be an integer >= 4, got {samples}")
    gen = check_rng(rng)
    seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
    scene = _Scene(size, objects, k)
    for family in FAMILIES:
        _check_rows(scene, family, samples, knn_k)
    streams = dict(zip(FAMILIES, gen.spawn(len(FAMILIES)))) if seed is None else {}
    plan = [(family, float(level)) for family in FAMILIES for level in _levels(family, levels)]
    records = []
    for i, (family, level) in enumerate(plan):
        if i == 0 or plan[i - 1][0] != family:
            path = _Path(scene, family, samples, streams[family] if seed is None else family_stream(seed, family))
        say(f"{family}: level {level:.3g} ({i + 1} of {len(plan)})", done=i, total=len(plan))
        records.append(bridge_cell(path, level, knn_k))
    say(f"{len(FAMILIES)} families done", done=len(plan), total=len(plan))
    return _reduce(records, size, objects, samples, knn_k, seed, time.perf_counter() - start)


def family_stream(seed: int, family: str) -> np.random.Generator:
    """Family f's stream at an int seed: ``cell_stream(seed, {"family": f})`` (shared by its levels)."""
    return cell_stream(seed, {"family": family})


class _Scene:
    """The gridscene, its base world, the base closed form's k and the pixels modality (which draws nothing)."""

    def __init__(self, size: int, objects: int, k: int | Literal["auto"]) -> None:
        self.scene = gridscene(size, objects=objects)
        self.base = self.scene.world.to_finite()
        self.k = closed_form(self.base, k).k
        self.pixels = self.scene.modalities(rng=0)[0]  # the rng seeds only the symbolic modality's maps

    def world(self, family: Family) -> World:
        return self.base if family != "bad-view" else view_world(self.scene.world, self.pixels, good())


def _check_rows(scene: _Scene, family: Family, samples: int, knn_k: int) -> None:
    n = scene.world(family).n
    if not 2 * knn_k < min(samples, n):
        raise ValueError(f"knn_k = {knn_k} needs more than {2 * knn_k} samples; the {family} world has {n} states "
                         f"and samples = {samples}")


class _Path:
    """One family's path: its world, the aligned reference, the drawn rows and retrieval split, and what its levels
    share (the rotation and noise of ``noise``, Π' of ``kernel``), all drawn from the family's ``stream``."""

    def __init__(self, scene: _Scene, family: Family, samples: int, stream: np.random.Generator) -> None:
        self.scene, self.family = scene, family
        self.world = world = scene.world(family)
        self.reference = closed_form(world, scene.k).features()
        n = world.n
        self.rows = np.sort(stream.choice(n, size=min(samples, n), replace=False, p=world.p))
        self.fit = np.zeros(self.rows.size, dtype=bool)
        self.fit[stream.permutation(self.rows.size)[: self.rows.size // 2]] = True
        self.other = None
        if family == "kernel":
            affinity = stream.uniform(size=(n, n))
            self.other = sinkhorn_world((affinity + affinity.T) / 2, world.p).Pi
        self.Q, _ = np.linalg.qr(stream.standard_normal((scene.k, scene.k)))
        self.noise = stream.standard_normal((n, scene.k))


def bridge_cell(path: _Path, level: float, knn_k: int) -> dict[str, Any]:
    """One cell (JSON values): the pair at ``level`` of ``path``'s family, scored by ρ_P, s_Θ and the sample metrics,
    with the family's rows drawn and the base's k. It draws nothing: its randomness is the path's."""
    scene, world, reference, k = path.scene, path.world, path.reference, path.scene.k
    if path.family == "noise":
        B = whiten(reference @ path.Q + level * path.noise, world.p)
    elif path.family == "kernel":
        B = closed_form(FiniteWorld(world.p, (1.0 - level) * world.Pi + level * path.other), k).features()
    else:
        view = good() if level >= 1.0 else bad(float(level))
        B = closed_form(view_world(scene.scene.world, scene.pixels, view), k).features()
    rows = path.rows
    scores = {m.name: float(m(reference[rows], B[rows], knn_k=knn_k, fit=path.fit))
              for m in (metric_record(name) for name in bridge_metrics())}
    return {"family": path.family, "level": float(level), "rho_p": float(procrustes(B, reference, world.p).rho),
            "s_theta": float(principal_angles(B, reference, world.p).s_theta), "metrics": scores,
            "rows": int(rows.size), "k": int(k)}


def _reduce(records: list[dict[str, Any]], size: int, objects: int, samples: int, knn_k: int, seed: int | None,
            seconds: float) -> MetricBridge:
    """The sweep's record from its cells' records (in the order of :func:`cells`)."""
    metrics = [metric_record(name) for name in bridge_metrics()]
    cells = [BridgeCell(**{key: r[key] for key in ("family", "level", "rho_p", "s_theta", "metrics")})
             for r in records]
    rows_used = {r["family"]: int(r["rows"]) for r in records}
    return MetricBridge(prhsim_version=__version__, world=f"gridscene({size}, objects={objects})",
                        k=int(records[0]["k"]), samples=int(samples), knn_k=int(knn_k),
                        metrics=[m.name for m in metrics], rows=rows_used,
                        chance={f: {m.name: m.chance_level(r, knn_k) for m in metrics if m.chance is not None}
                                for f, r in rows_used.items()}, seed=seed,
                        cells=cells, rho_at_mutual_knn={f: _read_off([c for c in cells if c.family == f])
                                                        for f in FAMILIES},
                        seconds=seconds)


def _read_off(cells: list[BridgeCell]) -> dict[str, float | None]:
    """ρ_P at each mutual k-NN value of READ_AT, linearly interpolated along the family's path.

    None outside the path, and where the bracketing cells differ by more than READ_MAX_STEP in ρ_P
    (a jump the grid does not resolve: interpolating across it would be invention, not measurement).
    """
    out: dict[str, float | None] = {}
    for x in READ_AT:
        value = None
        for c0, c1 in zip(cells, cells[1:]):
            y0, y1 = c0.metrics["mutual_knn"], c1.metrics["mutual_knn"]
            lo, hi = sorted((y0, y1))
            if lo <= x <= hi and hi > lo and abs(c1.rho_p - c0.rho_p) <= READ_MAX_STEP:
                w = (x - y0) / (y1 - y0)
                value = float(c0.rho_p + w * (c1.rho_p - c0.rho_p))
                break
        out[f"{x:g}"] = value
    return out


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class MetricBridgeSettings(Settings):
    """``prhsim sweep metric-bridge``: pairs at controlled misalignment scored by ρ_P and by the PRH metrics."""

    size: int = Field(4, ge=2, le=10)
    objects: int = Field(1, ge=1, le=2)
    levels: int = Field(16, ge=3, le=100)
    samples: int = Field(1000, ge=4, le=100_000)
    knn_k: int = Field(10, ge=1)
    k: int | Literal["auto"] = "auto"
    seed: int = Field(0, ge=0)


#: Seconds per cell (one family, one level): a fixed part and the dense solves over the n states of the
#: gridscene (n³), measured on a shared 2-core CPU: size 4 (144 states, the default, 48 cells) 0.5-0.6 s,
#: size 6 (324 states) 0.9 s, 48 levels 1.5 s.
CELL_SECONDS, CELL_SECONDS_PER_N3 = 0.01, 2.6e-10


def estimate(s: MetricBridgeSettings) -> Any:
    """Cells (families x levels) x (CELL_SECONDS + CELL_SECONDS_PER_N3 · n³)."""
    from prhsim.experiments.sweeps._registry import Estimate

    n = GridSceneWorld(size=s.size, objects=s.objects).n_states
    cells = sum(len(_levels(family, s.levels)) for family in FAMILIES)
    return Estimate(cells * (CELL_SECONDS + CELL_SECONDS_PER_N3 * float(n) ** 3),
                    f"{cells} cells (families x levels) on gridscene({s.size}, objects={s.objects}), {n:,} states")


def run(s: MetricBridgeSettings, say: Progress | None = None) -> Any:
    """``prhsim sweep metric-bridge`` from its settings; ``say`` reports progress (counted in cells)."""
    return metric_bridge(s.size, s.objects, levels=s.levels, samples=s.samples, knn_k=s.knn_k, k=s.k, rng=s.seed,
                         progress=say)


def cells(s: MetricBridgeSettings) -> list[dict[str, Any]]:
    """One cell per family and level, in the result's order."""
    return [{"family": family, "level": float(level)} for family in FAMILIES for level in _levels(family, s.levels)]


@functools.lru_cache(maxsize=1)
def _scene(size: int, objects: int, k: int | str) -> _Scene:
    return _Scene(size, objects, k)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=len(FAMILIES))
def _path(size: int, objects: int, k: int | str, family: Family, samples: int, knn_k: int, seed: int) -> _Path:
    """A family's path, built once per process for the cells that run there."""
    scene = _scene(size, objects, k)
    _check_rows(scene, family, samples, knn_k)
    return _Path(scene, family, samples, family_stream(seed, family))


def cell(s: MetricBridgeSettings, coordinates: dict[str, Any]) -> dict[str, Any]:
    """The cell at ``coordinates`` (:func:`bridge_cell`; the family's draws from :func:`family_stream`: the seed and
    the family), with its seconds."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)
        path = _path(s.size, s.objects, s.k, coordinates["family"], s.samples, s.knn_k, s.seed)
        record = bridge_cell(path, float(coordinates["level"]), s.knn_k)
    return {**record, "seconds": time.perf_counter() - start}


def reduce(s: MetricBridgeSettings, records: list[dict[str, Any]]) -> MetricBridge:
    """The sweep's result from its cells (the same record as :func:`run`'s, seconds summed over the cells)."""
    return _reduce(records, s.size, s.objects, s.samples, s.knn_k, s.seed, sum(r["seconds"] for r in records))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    rows = ", ".join(f"{f}: {n} states, chance {r.chance[f]['mutual_knn']:.3g}" for f, n in r.rows.items())
    lines = [f"{r.world}, k = {r.k}: mutual k-NN with k = {r.knn_k} ({rows})",
             "rho_P where mutual k-NN equals (-: outside the path, or across a jump the grid does not resolve):"]
    for family, table in r.rho_at_mutual_knn.items():
        cells = ", ".join(f"{x}: {'-' if v is None else f'{v:.3f}'}" for x, v in table.items())
        lines.append(f"  {family}: {cells}")
    return lines
