"""Restricted encoders: whitened alignment over encoders linear in each modality's rendered observation.

docs/theory.md §0 (restricted class ``f = Wᵀφ(x)``), §1.1 (Ky Fan), §2 (comparison).

Over the class ``f(x) = Wᵀ(φ(x) − E_p φ)`` (centred), the whitened objective
``max tr(Wᵀ ΦᵀΠΦ W)`` subject to ``Wᵀ ΦᵀDΦ W = I`` is the generalised eigenproblem
``ΦᵀΠΦ w = ν ΦᵀDΦ w`` (Φ centred). ``ΦᵀDΦ`` is singular whenever some combination of
inputs is constant on the states (pixels that never change, one-hot blocks summing to
one, more inputs than states), so the problem is solved on its range instead of with a
ridge: with ``Ψ = D^{1/2}Φ = U S Vᵀ`` (thin SVD, singular values below numpy's
``matrix_rank`` tolerance dropped, rank r) the whitened features the class can express
are exactly ``G = D^{1/2}F = U_r Y`` with ``YᵀY = I``, and the objective is ``tr(Yᵀ U_rᵀKU_r Y)``.
So the restricted optimum is the Rayleigh–Ritz projection of K on ``span Ψ``:
``Y`` = top-k eigenvectors of ``U_rᵀKU_r``, ``W = V_r S_r^{-1} Y``, values ``ν_1 ≥ … ≥ ν_r``.
Directions in the null space of ``ΦᵀDΦ`` give features that vanish on every state,
so dropping them loses nothing, and a ridge would only bias W. Where ``ΦᵀDΦ`` is
regular this equals ``scipy.linalg.eigh(ΦᵀΠΦ, ΦᵀDΦ)``.

By Cauchy interlacing ``ν_i ≤ μ_i`` (the unrestricted centred spectrum), so the
restricted loss ``2Σ_{i≤k}(1 − ν_i) ≥ L*`` and the Ky Fan fraction ``Σν/Σμ ≤ 1``. With
``φ`` = one-hot of the modal state (``inputs="state"``: the universal class) ``span Ψ = s^⊥``
and the restricted optimum is the closed form. Each modality's restricted optimum is
compared with its unrestricted closed form (``s_Θ``, ``ρ_P`` on its own states) and the
modalities' restricted optima with each other through the pairs sharing z (as
:func:`prhsim.experiments.rotation_uniqueness` compares the closed forms).

Inputs φ: ``"raw"`` the rendered observation, flattened and standardised
(:func:`prhsim.learners.observation_inputs`, the MLP encoder's input); ``"onehot"`` every
coordinate of the observation one-hot over its values (a categorical reading: a caption's
tokens); ``"state"`` the one-hot of the modal state.

Cells: one per modality (pixels, caption, symbolic, in that order). Modality m's cell holds m's restricted
optimum against its closed form and the pairs (m, m') for every m' after it, recomputing those modalities'
optima (the later ones are the cheaper: the pixel SVD is most of the work). Each modality's closed form breaks
its ties with its own stream, ``cell_stream(seed, {"modality": name})``, wherever it is computed; the symbolic
modality's maps are drawn from the seed as before.

Default (``gridscene(3, objects=1)``, good views, k = 3, raw inputs): about 0.05 s (2-core CPU, one BLAS
thread). The SVD of the 324 x 432 pixel table dominates; with two BLAS threads contending on a busy
machine the same run took up to 4 s.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np
from pydantic import Field

from prhsim import __version__
from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, cell_stream, check_rng
from prhsim._types import Progress, as_progress
from prhsim.config import ConfigError, GridSceneWorld, Settings
from prhsim.experiments._record import Record
from prhsim.experiments._rotation import ModalityOutcome, pair_outcome, rotation_uniqueness
from prhsim.learners import observation_inputs
from prhsim.metrics import (
    coupled_comparison,
    nuisance_free_dimension,
    principal_angles,
    procrustes,
)
from prhsim.optima import TieWarning
from prhsim.worlds import GridScene, Modality, ModalWorld, View, World, bad, good, gridscene, view_world

Inputs = Literal["raw", "onehot", "state"]
INPUTS = ("raw", "onehot", "state")


@dataclass(frozen=True)
class RestrictedOptimum:
    """The whitened optimum over ``f(x) = Wᵀ(φ(x) − mean)``: ``features = (Φ − mean) W``, ``FᵀDF = I``.

    Attributes:
        values: ``ν_1 ≥ … ≥ ν_r`` (all r Ritz values of K on ``span D^{1/2}Φ``).
        features: the feature table F (n x k), whitened and centred under p.
        weights: W (d x k).
        mean: ``E_p φ`` (d,).
        rank: r, the rank of ``ΦᵀDΦ`` after centring.
    """

    values: np.ndarray
    features: np.ndarray
    weights: np.ndarray
    mean: np.ndarray
    rank: int


def restricted_optimum(world: World, phi: np.ndarray, k: int) -> RestrictedOptimum:
    """Top-k generalised eigenvectors of ``(ΦᵀΠΦ, ΦᵀDΦ)``, Φ centred, on the range of ``ΦᵀDΦ``.

    Raises:
        ValueError: if Φ has the wrong number of rows or the class cannot hold k whitened features.
    """
    phi = np.asarray(phi, dtype=np.float64)
    if phi.ndim != 2 or phi.shape[0] != world.n:
        raise ValueError(f"inputs must be a table of {world.n} rows (one per state), got shape {phi.shape}")
    p = np.asarray(world.p)
    mean = p @ phi
    root = np.sqrt(p)[:, None]
    U, S, Vt = np.linalg.svd(root * (phi - mean), full_matrices=False)
    rank = int(np.sum(S > S.max(initial=0.0) * max(phi.shape) * np.finfo(np.float64).eps))
    if rank < k:
        raise ValueError(f"the restricted class spans {rank} centred feature(s), fewer than k = {k}")
    Ur = U[:, :rank]
    C = Ur.T @ world.kernel.matmat(Ur)
    values, Y = np.linalg.eigh((C + C.T) / 2)
    values, Y = values[::-1], Y[:, ::-1]
    weights = Vt[:rank].T @ (Y[:, :k] / S[:rank, None])
    return RestrictedOptimum(values, (Ur @ Y[:, :k]) / root, weights, mean, rank)


def encoder_inputs(world: ModalWorld, inputs: Inputs) -> np.ndarray:
    """The table φ(x) of every modal state for one kind of inputs (module docstring)."""
    if inputs == "raw":
        return observation_inputs(world)
    if inputs == "state":
        ensure_fits(2 * FLOAT * float(world.n) ** 2, f"one-hot inputs of {world.n:,} states", "use a smaller scene")
        return np.eye(world.n)
    obs = world.modality.render_states(np.arange(world.n))
    obs = np.asarray(obs).reshape(world.n, -1)
    blocks = [np.unique(column, return_inverse=True) for column in obs.T]
    ensure_fits(2 * FLOAT * float(world.n) * sum(u.size for u, _ in blocks),
                f"one-hot inputs of {world.n:,} states", "use raw inputs or a smaller scene")
    return np.concatenate([np.eye(u.size)[inverse] for u, inverse in blocks], axis=1)


class RestrictedModality(Record):
    """One modality's restricted optimum against its closed form (``ky_fan_fraction = Σν/Σμ``)."""

    name: str
    view: str
    inputs: Inputs
    n_states: int
    n_inputs: int
    rank: int
    eigenvalues: list[float]
    optimum_eigenvalues: list[float]
    value: float
    optimum_value: float
    ky_fan_fraction: float | None
    gap: float | None
    unique: bool
    s_theta: float
    rho_p: float
    nuisance_free: int


class RestrictedPair(Record):
    """Two modalities' restricted optima compared through the pairs sharing z, beside their closed forms."""

    a: str
    b: str
    rho_p: float
    s_theta: float
    unrestricted_rho_p: float
    unrestricted_s_theta: float
    predicted_rho_p: float | None


class RestrictedEncoder(Record):
    """Result of :func:`restricted_encoder`."""

    prhsim_version: str
    world: str
    n_states: int
    k: int
    k_auto: bool
    seed: int | None
    modalities: list[RestrictedModality]
    pairs: list[RestrictedPair]
    seconds: float


def restricted_encoder(
    scene: GridScene | None = None,
    k: int | Literal["auto"] = "auto",
    *,
    views: Sequence[View] | None = None,
    inputs: Inputs | Mapping[str, Inputs] = "raw",
    rng: RngLike = 0,
    progress: Callable[..., None] | None = None,
) -> RestrictedEncoder:
    """Each modality's whitened optimum over encoders linear in its inputs, against the closed forms (module docstring).

    Args:
        scene: the gridscene; None: ``gridscene(3, objects=1)``.
        k: number of features, or "auto" (K_Z's k).
        views: one view per modality (pixels, caption, symbolic); None: good views.
        inputs: "raw", "onehot" or "state" for every modality, or a mapping name -> kind.
        rng: seeds the symbolic modality's maps and each modality's closed form: an int seed gives modality m the
            stream ``cell_stream(seed, {"modality": m})`` (the same in whichever cell it is computed); a Generator
            spawns one stream per modality instead.
        progress: ``progress(message, done, total)`` once per modality (cell) and at the end (counted in modalities).

    Raises:
        ValueError: on bad arguments, or a class too small for k whitened features.
    """
    start = time.perf_counter()
    scene = gridscene(3, objects=1) if scene is None else scene
    if not isinstance(scene, GridScene):
        raise ValueError(f"scene must be a GridScene, got {type(scene).__name__}")
    seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
    streams = check_rng(rng).spawn(2)
    modalities = tuple(scene.modalities(rng=streams[0]))
    names = [m.name for m in modalities]
    kinds = dict.fromkeys(names, inputs) if isinstance(inputs, str) else dict(inputs)
    if set(kinds) != set(names):
        raise ValueError(f"inputs must name every modality {names}, got {sorted(kinds)}")
    for name, kind in kinds.items():
        if kind not in INPUTS:
            raise ValueError(f"inputs of {name!r} must be one of {INPUTS}, got {kind!r}")
    views = tuple(good() for _ in modalities) if views is None else tuple(views)
    if len(views) != len(modalities):
        raise ValueError(f"need one view per modality ({len(modalities)}), got {len(views)}")
    if seed is not None:
        def stream(name: str) -> np.random.Generator:
            return cell_stream(seed, {"modality": name})
    else:
        children = dict(zip(names, streams[1].bit_generator.seed_seq.spawn(len(names))))

        def stream(name: str) -> np.random.Generator:  # a fresh generator at each call: the same draws in any cell
            return np.random.default_rng(children[name])
    say = as_progress(progress)
    known: dict[str, Any] = {}  # each modality's part computed once here (a cell recomputes the ones it needs)
    records = []
    for i, name in enumerate(names):
        say(f"restricted optimum of {name} and its pairs", done=i, total=len(names))
        records.append(restricted_cell(scene, modalities, views, kinds, k, name, stream, known))
    say(f"{len(names)} modalities done", done=len(names), total=len(names))
    return _reduce(records, scene, k, seed, time.perf_counter() - start)


@dataclass(frozen=True)
class _Part:
    """One modality's closed form (its outcome) and restricted optimum, in the modal world of its view."""

    outcome: ModalityOutcome
    world: ModalWorld
    optimum: RestrictedOptimum
    n_inputs: int
    k: int


def _part(scene: GridScene, modality: Modality, view: View, kind: Inputs, k: int | Literal["auto"],
          rng: np.random.Generator) -> _Part:
    """The modality's closed form (ties broken by ``rng``) and its restricted optimum at the closed form's k."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)
        outcome = rotation_uniqueness(scene.world, [modality], [view], k, rng=rng)
    world = view_world(scene.world, modality, view)
    phi = encoder_inputs(world, kind)
    return _Part(outcome.modalities[0], world, restricted_optimum(world, phi, outcome.k), phi.shape[1], outcome.k)


def restricted_cell(scene: GridScene, modalities: Sequence[Modality], views: Sequence[View],
                    kinds: Mapping[str, Inputs], k: int | Literal["auto"], name: str,
                    stream: Callable[[str], np.random.Generator], known: dict[str, Any] | None = None) -> dict[str, Any]:
    """One cell: modality ``name``'s restricted optimum against its closed form, and its pairs with every modality
    after it (JSON values). ``stream(m)`` is modality m's closed-form stream, a fresh generator at each call;
    ``known`` keeps the parts already computed (the same numbers: each part is a function of its modality alone)."""
    known = {} if known is None else known
    names = [m.name for m in modalities]
    first = names.index(name)

    def part(i: int) -> _Part:
        m = modalities[i]
        if m.name not in known:
            known[m.name] = _part(scene, m, views[i], kinds[m.name], k, stream(m.name))
        return known[m.name]

    own = part(first)
    m, world, opt, k_used = own.outcome, own.world, own.optimum, own.k
    mu = np.asarray(m.optimum.eigenvalues)
    nu = opt.values[: k_used + 1]
    record = RestrictedModality(
        name=m.name, view=m.view.label, inputs=kinds[m.name], n_states=world.n, n_inputs=own.n_inputs,
        rank=opt.rank, eigenvalues=[float(v) for v in nu], optimum_eigenvalues=[float(v) for v in mu],
        value=2.0 * float(np.sum(1.0 - nu[:k_used])), optimum_value=float(m.optimum.value),
        ky_fan_fraction=float(nu[:k_used].sum() / mu[:k_used].sum()) if mu[:k_used].sum() > 0 else None,
        gap=float(nu[k_used - 1] - nu[k_used]) if nu.size > k_used else None, unique=bool(m.unique),
        s_theta=principal_angles(opt.features, m.features, world.p).s_theta,
        rho_p=procrustes(opt.features, m.features, world.p).rho,
        nuisance_free=nuisance_free_dimension(opt.features, m.world.modality.nuisance, scene.world.p))
    pairs = []
    for j in range(first + 1, len(modalities)):
        other = part(j)
        b = other.outcome
        closed = pair_outcome(m, b, k_used, scene.world.p)
        comp = coupled_comparison(opt.features, m.world.modality.nuisance, other.optimum.features,
                                  b.world.modality.nuisance, scene.world.p)
        pairs.append(RestrictedPair(a=m.name, b=b.name, rho_p=comp.rho_p, s_theta=comp.s_theta,
                                    unrestricted_rho_p=closed.comparison.rho_p,
                                    unrestricted_s_theta=closed.comparison.s_theta,
                                    predicted_rho_p=closed.predicted_rho))
    return {"modality": record.model_dump(mode="json"), "k": k_used,
            "pairs": [p.model_dump(mode="json") for p in pairs]}


def _reduce(records: Sequence[Mapping[str, Any]], scene: GridScene, k: int | Literal["auto"], seed: int | None,
            seconds: float) -> RestrictedEncoder:
    """The sweep's record from its cells' (in the order of the modalities)."""
    return RestrictedEncoder(
        prhsim_version=__version__, world=f"gridscene({scene.size}, objects={scene.n_objects})",
        n_states=scene.n, k=records[0]["k"], k_auto=k == "auto", seed=seed,
        modalities=[RestrictedModality.model_validate(r["modality"]) for r in records],
        pairs=[RestrictedPair.model_validate(p) for r in records for p in r["pairs"]], seconds=seconds)


# --------------------------------------------------------------------------------------
# the command: settings, run, summary
# --------------------------------------------------------------------------------------
class RestrictedEncoderSettings(Settings):
    """``prhsim sweep restricted-encoder``: encoders linear in each gridscene modality's rendering."""

    size: int = Field(3, ge=2, le=10)
    objects: int = Field(1, ge=1, le=3)
    k: int | Literal["auto"] = "auto"
    views: Literal["good", "bad"] = "good"
    eps: float = Field(0.1, gt=0, le=1)
    inputs: Literal["raw", "onehot", "state"] = "raw"
    seed: int = Field(0, ge=0)


#: Seconds of the sweep: a fixed part and a part per modal state (the three modalities' states, each holding
#: its inputs' one-hot table), measured on a shared 2-core CPU: size 3 (the default, 1,215 modal states)
#: 0.5-3 s, size 5 (3,375) 7.3 s, size 4 with 2 objects (311,040) 85 s.
BASE_SECONDS, SECONDS_PER_MODAL_STATE = 0.3, 2.7e-4


def estimate(s: RestrictedEncoderSettings) -> Any:
    """BASE_SECONDS + SECONDS_PER_MODAL_STATE x the modal states of the three modalities."""
    from prhsim.experiments.sweeps._registry import Estimate

    w = GridSceneWorld(size=s.size, objects=s.objects)
    modal = w.n_states * sum(w.nuisance_sizes(3))
    return Estimate(BASE_SECONDS + SECONDS_PER_MODAL_STATE * modal,
                    f"3 modalities of gridscene({s.size}, objects={s.objects}), {modal:,} modal states")


def _scene(s: RestrictedEncoderSettings) -> GridScene:
    try:
        return gridscene(s.size, objects=s.objects)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def run(s: RestrictedEncoderSettings, say: Progress | None = None) -> Any:
    """``prhsim sweep restricted-encoder`` from its settings; ``say`` reports progress (counted in modalities)."""
    view = good() if s.views == "good" else bad(s.eps)
    return restricted_encoder(_scene(s), s.k, views=[view] * 3, inputs=s.inputs, rng=s.seed, progress=say)


def cells(s: RestrictedEncoderSettings) -> list[dict[str, str]]:
    """One cell per modality (pixels, caption, symbolic): its optimum and its pairs with the modalities after it."""
    return [{"modality": m.name} for m in _scene(s).modalities(rng=check_rng(s.seed).spawn(2)[0])]


def cell(s: RestrictedEncoderSettings, coordinates: dict[str, str]) -> dict[str, Any]:
    """The cell of ``coordinates["modality"]`` (each closed form's ties broken by its modality's own stream), with
    its seconds."""
    start = time.perf_counter()
    scene = _scene(s)
    modalities = scene.modalities(rng=check_rng(s.seed).spawn(2)[0])  # the symbolic maps, as the library draws them
    view = good() if s.views == "good" else bad(s.eps)
    record = restricted_cell(scene, modalities, [view] * len(modalities), {m.name: s.inputs for m in modalities},
                             s.k, coordinates["modality"], lambda name: cell_stream(s.seed, {"modality": name}))
    return {**record, "seconds": time.perf_counter() - start}


def reduce(s: RestrictedEncoderSettings, records: list[dict[str, Any]]) -> RestrictedEncoder:
    """The sweep's result from its cells (the same record as :func:`run`'s, seconds summed over the cells)."""
    return _reduce(records, _scene(s), s.k, s.seed, sum(r["seconds"] for r in records))


def summary(r: Any) -> list[str]:
    """The lines the command prints after the sweep."""
    lines = [f"{r.world}: {r.n_states:,} states, k = {r.k}"]
    for m in r.modalities:
        fraction = "n/a" if m.ky_fan_fraction is None else f"{m.ky_fan_fraction:.3f}"
        lines.append(f"{m.name} ({m.inputs}, rank {m.rank}): Ky Fan fraction {fraction}, "
                     f"s_Theta to the unrestricted optimum {m.s_theta:.3g}")
    for p in r.pairs:
        lines.append(f"{p.a} vs {p.b}: rho_P {p.rho_p:.3g} restricted, {p.unrestricted_rho_p:.2g} unrestricted")
    return lines
