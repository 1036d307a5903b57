"""``prhsim run``: build a world and its modalities, solve each in closed form, compare, check.

Data flow: RunConfig -> cost plan (refuse what cannot fit) -> world over Z -> one modal world per
modality (``π_Z ⊗ ρ_view`` over ``Z x N_m``) -> closed-form optimum each ->
coupled comparison of every pair -> predictions versus observations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from prhsim import __version__
from prhsim._budget import ResourceError, memory_limit
from prhsim._rng import RUN_PAIR_METRICS
from prhsim._types import Progress
from prhsim.config import RunConfig
from prhsim.experiments._checks import (
    LEARNED_RHO_ATOL,
    RHO_ATOL,
    learned_checks,
    modality_checks,
    pair_checks,
    platonic_check,
)
from prhsim.experiments._pair_metrics import pair_metrics
from prhsim.experiments._plan import plan_run
from prhsim.experiments._results import (
    InjectivitySummary,
    ModalitySummary,
    PairSummary,
    RunResult,
    WorldSummary,
)
from prhsim.experiments._rotation import ModalityOutcome, rotation_uniqueness
from prhsim.learners import Learner
from prhsim.optima import (
    FactorFeatures,
    alignment_loss,
    describe_tie,
    factor_comparison,
    solver_threads,
    top_eigenpairs,
)
from prhsim.metrics import principal_angles
from prhsim.worlds import Modality, View, World, bad, good

#: Eigenvalues of K_Z shown in the report and figure (at least k + 4 when k is larger).
SPECTRUM_HEAD = 24



class WorldBuildError(ValueError):
    """The world's settings admit no world (e.g. a Sinkhorn scaling that does not converge)."""


@dataclass(frozen=True)
class Setup:
    """A built world with its modalities and their views."""

    name: str
    base: World
    modalities: tuple[Modality, ...]
    views: tuple[View, ...]


def build(config: RunConfig) -> Setup:
    """Build the world over Z, the modalities and their views from a RunConfig.

    Raises:
        WorldBuildError: the world's settings admit no world (e.g. a random world whose
            Sinkhorn scaling does not converge).
    """
    w = config.world
    streams = np.random.default_rng(config.seed).spawn(config.modalities + 1)
    try:
        base = w.build(streams[0])
        modalities = w.modalities(base, config.modalities, streams)
    except ResourceError:
        raise
    except ValueError as exc:
        raise WorldBuildError(f"{w.describe()} cannot be built: {exc}") from exc
    if _static(base):
        raise WorldBuildError(f"{w.describe()} never moves (every positive pair is one state twice, Pi = diag(p)): "
                              "K is the identity, no feature but the constant is defined; let the world move")
    views = tuple(bad(config.bad_eps) if v == "bad" else good() for v in config.view_names)
    return Setup(w.kind, base, tuple(modalities), views)


def _static(world) -> bool:
    """Whether every factor's Π is diagonal: then K = I, every eigenvalue ties with the constant's (docs/theory.md §1.2)."""
    for f in world.factors:
        Pi = f.Pi
        total = float(Pi.sum())
        diagonal = float(Pi.diagonal().sum())
        if total - diagonal > 1e-12 * total:
            return False
    return True


def _tie_note(outcome: ModalityOutcome) -> str | None:
    """For a tied optimum: name the tie and exhibit a second optimum with equal loss."""
    opt = outcome.optimum
    if opt is None or opt.unique:
        return None
    k = opt.k
    swap = list(range(k - 1)) + [k]
    if outcome.factor is not None:  # factor space: the k+1 eigenfunctions as product features
        full = FactorFeatures.from_optimum(opt, columns=k + 1)
        delta = full.take(swap).alignment_loss() - full.take(range(k)).alignment_loss()
        s_theta = factor_comparison(full.take(range(k)).with_trivial_nuisance(),
                                    full.take(swap).with_trivial_nuisance()).s_theta
    else:
        table = opt.basis.evaluate()
        p = outcome.world.p
        delta = alignment_loss(outcome.world, table[:, swap]) - alignment_loss(outcome.world, table[:, :k])
        s_theta = principal_angles(table[:, :k], table[:, swap], p).s_theta
    return (f"{describe_tie(opt.eigenvalues, k)}; an equally optimal F' (eigenvector k+1 in place of k) "
            f"differs in loss by {delta:.1e} and lies at s_Theta = {s_theta:.3f}")


def _modality_summary(outcome: ModalityOutcome) -> ModalitySummary:
    opt, m, report = outcome.optimum, outcome.world.modality, outcome.injectivity
    return ModalitySummary(
        name=m.name, description=m.description, learner=outcome.learner,
        view=outcome.view.label, eps=outcome.view.eps, n_nuisance=m.n_nuisance, n_states=outcome.world.n,
        eigenvalues=None if opt is None else opt.eigenvalues.tolist(),
        predicted_eigenvalues=outcome.predicted.values.tolist(),
        value=None if opt is None else opt.value, loss_via_operator=outcome.loss,
        whitening_error=outcome.whitening_error,
        gap=None if opt is None else opt.gap, unique=outcome.unique,
        nuisance_free_predicted=outcome.predicted.nuisance_free, nuisance_free_observed=outcome.nuisance_free,
        injectivity=InjectivitySummary(checked=report.checked, exhaustive=report.exhaustive, injective=report.injective),
        tie=_tie_note(outcome), collapsed=outcome.collapsed,
    )


def run(config: RunConfig, *, progress: Progress | None = None) -> RunResult:
    """Cost, build and solve the run described by ``config`` (the library's whole ``prhsim run``).

    Raises:
        ResourceError: the run would not fit in memory (see :func:`plan_run`), before anything is allocated.
        ConfigError: k does not fit the world.
        WorldBuildError: the world's settings admit no world.
    """
    plan = plan_run(config)
    # the BLAS threads of prhsim's solvers for the whole run (optima.solver_threads): a run's other BLAS calls
    # (comparisons, sample metrics, the injectivity check) are small, and idle pool threads only spin
    with memory_limit(plan.limit), solver_threads(max(plan.n_states, *plan.modal_states.values())):
        (progress or (lambda message: None))("building the world")
        return solve(config, build(config), progress=progress)


def solve(config: RunConfig, setup: Setup, *, learner: Learner | None = None,
          progress: Progress | None = None) -> RunResult:
    """Represent every modality of a built ``setup`` by ``learner`` (default: the closed form),
    compare every pair, check the theory; then train ``config.learner``'s SGD objectives on
    every modality beside the closed form (:func:`prhsim.experiments._learning.learn`)."""
    say = progress or (lambda message: None)
    start = time.perf_counter()
    outcome = rotation_uniqueness(setup.base, setup.modalities, setup.views, config.k,
                                  centred=config.centred, learner=learner,
                                  tables=config.tables and learner is None, progress=say,
                                  rng=config.seed)
    k = outcome.k
    say("spectrum head")
    head = top_eigenpairs(setup.base, min(max(SPECTRUM_HEAD, k + 4), setup.base.n - (1 if config.centred else 0)),
                          centred=config.centred).values
    world = WorldSummary(name=setup.name, n_states=setup.base.n, factor_sizes=[f.n for f in setup.base.factors],
                         k=k, k_auto=config.k == "auto", gap=outcome.base_gap, spectrum_head=head.tolist())
    modalities = []
    for o in outcome.modalities:
        if o.optimum is not None and not o.optimum.unique:
            say(f"tie at k: a second optimum of {o.name}")
        modalities.append(_modality_summary(o))
    pairs = []
    by_name = {o.name: o for o in outcome.modalities}
    streams = np.random.default_rng([config.seed, RUN_PAIR_METRICS]).spawn(max(1, len(outcome.pairs)))
    for p, stream in zip(outcome.pairs, streams):
        say(f"PRH metrics: {p.a} vs {p.b}")
        a, b = by_name[p.a], by_name[p.b]
        sample = None if a.collapsed or b.collapsed else pair_metrics(
            a.rows, a.world.modality.nuisance, b.rows, b.world.modality.nuisance, setup.base.p, rng=stream,
            permutations=config.calibrate)
        extra = {} if sample is None else dict(
            samples=sample.samples, knn_k=sample.knn_k, metrics=sample.scores, chance=sample.chance,
            permutations=sample.permutations,
            calibrated={name: c.calibrated for name, c in sample.calibrations.items()},
            p_values={name: c.p_value for name, c in sample.calibrations.items()})
        pairs.append(PairSummary(a=p.a, b=p.b, rho_p=p.comparison.rho_p, s_theta=p.comparison.s_theta,
                                 mean_correlation=p.comparison.mean_correlation, det_q=p.comparison.det_q,
                                 predicted_rho_p=p.predicted_rho, **extra))
    closed = all(o.optimum is not None for o in outcome.modalities)
    tol = RHO_ATOL if closed else LEARNED_RHO_ATOL
    checks = [platonic_check(pairs, tol)]
    for m in modalities:
        checks += modality_checks(m, k)
    collapsed = {o.name for o in outcome.modalities if o.collapsed}
    for p in pairs:
        checks += pair_checks(p, k, tol, whitened=not {p.a, p.b} & collapsed)
    learned = []
    if config.sgd_learners and closed:
        from prhsim.experiments._learning import learn

        learned = learn(config, outcome, config.sgd_learners, progress=say)
        for summary in learned:
            checks += learned_checks(summary, {m.name: m.unique for m in modalities})
    return RunResult(prhsim_version=__version__, world=world, centred=config.centred, modalities=modalities,
                     pairs=pairs, checks=checks, seconds=time.perf_counter() - start, learned=learned)
