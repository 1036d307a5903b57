"""Learned versus closed form: train each modality by SGD and measure how close it gets (docs/theory.md §1.1, §2, §7).

For each SGD objective ("whiten": hard whitening, the objective the theorem covers;
"sigreg": LeJEPA's SIGReg, where uniqueness is not proven) and each modality, S seeds
are trained on the modality's world (:func:`prhsim.learners.train`) and compared with that
world's whitened closed form: ``s_Θ`` and ``ρ_P`` after centring and whitening under p,
``‖Cov_p f − I‖``, the whitened alignment loss over L* (≥ 1 for every feasible
representation, by Ky Fan), the seed-to-seed ``ρ_P``, and, for every pair of
modalities, the cross-modal ``ρ_P`` of the learned representations (the same coupled
comparison as the closed form's, :func:`prhsim.metrics.coupled_comparison`) beside the
closed form's prediction. The distance to the closed form is logged along training for
the convergence figure.
"""

from __future__ import annotations

import time
from itertools import combinations
from typing import Sequence

import numpy as np

from prhsim._budget import ResourceError
from prhsim._types import Progress
from prhsim.config import RunConfig, TrainingSettings
from prhsim.experiments._results import LearnedModality, LearnedPair, LearnerSummary
from prhsim.experiments._rotation import ModalityOutcome, RotationUniqueness, modality_outcome, pair_outcome
from prhsim.learners import (
    LEARNERS,
    Representation,
    SGDLearner,
    TrainConfig,
    curve_rate,
    evaluate_learned,
    evaluate_sampled,
    exact_law,
    seed_spread,
)
from prhsim.optima import Optimum
from prhsim.worlds import World

#: Modality i trains the seeds ``seed + s + MODALITY_SEED_STRIDE·i``: its own init and data stream, so the
#: modalities' SGD noise is independent (a shared pair stream would correlate them).
MODALITY_SEED_STRIDE = 1000
#: Default peak learning rates of AdamW: an exact table tolerates a large one.
EXACT_TABLE_LR, DEFAULT_LR = 0.1, 1e-2
#: The s_Θ an unconverged seed's remaining steps are estimated to (a tenth of the check's threshold).
CONVERGED_TARGET = 1e-3


class LearnerError(ValueError):
    """An SGD learner could not train (it diverged, or its data mode does not fit the world); one line."""


def modality_seeds(seeds: Sequence[int], index: int) -> tuple[int, ...]:
    """The seeds modality ``index`` trains (see :data:`MODALITY_SEED_STRIDE`)."""
    return tuple(s + MODALITY_SEED_STRIDE * index for s in seeds)


def encoder_for(training: TrainingSettings, worlds: Sequence[World]) -> str:
    """The encoder ``training.encoder`` resolves to: "auto" is a table unless a modal world holds more
    states than a feature table (:data:`prhsim.optima.FEATURE_LIMIT`), then an MLP on rendered observations."""
    if training.encoder != "auto":
        return training.encoder
    from prhsim.optima import FEATURE_LIMIT

    return "mlp" if any(w.n > FEATURE_LIMIT for w in worlds) else "tabular"


def data_mode(objective: str, world: World, k: int, training: TrainingSettings, encoder: str = "tabular") -> str:
    """The data mode ``training.data`` resolves to for this objective and world ("exact" or "minibatch");
    an MLP on a world above a feature table's size trains on minibatches of rendered observations."""
    if training.data != "auto":
        return training.data
    from prhsim.optima import FEATURE_LIMIT

    if encoder == "mlp" and world.n > FEATURE_LIMIT:
        return "minibatch"
    if not LEARNERS[objective].objective.auto_exact(world.n, training):
        return "minibatch"

    try:
        exact_law(world, k)
    except ValueError:  # too many pairs to list, and no factors to apply
        return "minibatch"
    return "exact"


def method(objective: str, data: str, training: TrainingSettings, encoder: str = "tabular") -> str:
    """The optimiser method ``training.method`` resolves to: "precond" for a table on the exact whitened
    loss under "auto", else "adamw"."""
    if training.method != "auto":
        return training.method
    precond = LEARNERS[objective].objective.eigen_residual and (data, encoder) == ("exact", "tabular")
    return "precond" if precond else "adamw"


def sgd_learner(objective: str, data: str, training: TrainingSettings, spectrum: Sequence[float] | None = None,
                encoder: str | None = None, reference: Optimum | None = None) -> SGDLearner:
    """The :class:`prhsim.learners.SGDLearner` that ``training`` describes for one objective and data mode.

    ``spectrum`` (the modality's ``μ_1 … μ_{k+1}``, e.g. its closed form's eigenvalues) sets
    precond's step and momentum (:meth:`prhsim.learners.TrainConfig.preconditioned`) unless
    ``training.lr`` / ``training.momentum`` are given; ``reference`` (the modality's closed form) is what
    the learner logs its distance to.
    """

    encoder = encoder or ("tabular" if training.encoder == "auto" else training.encoder)
    fields = dict(objective=objective, encoder=encoder, data=data, steps=training.steps,
                  batch_size=training.batch_size, log_every=max(1, training.steps // 50),
                  lam=training.lam, convention=training.convention, invariance_dims=training.invariance_dims,
                  num_directions=training.num_directions, tol=training.tol if training.stop else None,
                  plateau=training.plateau)
    if method(objective, data, training, encoder) == "precond":
        given = {name: getattr(training, name) for name in ("lr", "momentum") if getattr(training, name) is not None}
        return SGDLearner(TrainConfig.preconditioned(spectrum, **fields, **given), reference=reference)
    lr = training.lr or (EXACT_TABLE_LR if data == "exact" and encoder == "tabular" else DEFAULT_LR)
    return SGDLearner(TrainConfig(lr=lr, **fields), reference=reference)


def learn(config: RunConfig, outcome: RotationUniqueness, objectives: Sequence[str], *,
          progress: Progress | None = None) -> list[LearnerSummary]:
    """Train every objective on every modality of a closed-form ``outcome`` through the learner seam (each
    modality's :class:`prhsim.learners.SGDLearner`, called with every seed at once) and compare (module docstring).

    Each seed's representations are compared across modalities by the closed form's own code
    (:func:`prhsim.experiments.modality_outcome`, :func:`prhsim.experiments.pair_outcome`).
    """
    say = progress or (lambda message: None)
    training = config.training
    seeds = tuple(config.seed + s for s in range(training.n_seeds))
    k = outcome.k
    encoder = encoder_for(training, [o.world for o in outcome.modalities])
    base_p = outcome.modalities[0].world.base.p
    summaries = []
    for objective in objectives:
        start = time.perf_counter()
        modalities, compared = [], []
        for i, o in enumerate(outcome.modalities):
            data = data_mode(objective, o.world, k, training, encoder)
            learner = sgd_learner(objective, data, training, o.optimum.eigenvalues, encoder, reference=o.optimum)
            say(f"learner {objective}: {o.name} ({data}, {encoder}, {learner.config.method}, "
                f"{training.n_seeds} seed(s), up to {training.steps} steps)")
            try:
                rep = learner(o.world, k, centred=outcome.centred, seeds=modality_seeds(seeds, i))
            except ResourceError:
                raise
            except ValueError as exc:  # divergence, or exact data this world cannot list
                raise LearnerError(f"learner {objective} on {o.name}: {exc}") from None
            modalities.append(_modality(o.name, data, rep.result, o.world, o.optimum, outcome.centred))
            compared.append([_compared(rep.seed(s), o, k, outcome.centred, base_p) for s in range(rep.n_seeds)])
        pairs = []
        closed_pairs = {(p.a, p.b): p for p in outcome.pairs}
        for (a, seeds_a), (b, seeds_b) in combinations(zip(outcome.modalities, compared), 2):
            rho = [None if A is None or B is None else pair_outcome(A, B, k, base_p).comparison.rho_p
                   for A, B in zip(seeds_a, seeds_b)]
            closed = closed_pairs[(a.name, b.name)]
            pairs.append(LearnedPair(a=a.name, b=b.name, rho_p=rho, predicted_rho_p=closed.predicted_rho,
                                     closed_form_rho_p=closed.comparison.rho_p))
        summaries.append(LearnerSummary(
            learner=objective, encoder=encoder, steps=training.steps, seeds=list(seeds),
            lam=training.lam if LEARNERS[objective].objective.weighted else None,
            convention=training.convention if LEARNERS[objective].objective.weighted else None,
            modalities=modalities, pairs=pairs, seconds=time.perf_counter() - start))
    return summaries


def _compared(rep: Representation, closed: ModalityOutcome, k: int, centred: bool,
              base_p: np.ndarray) -> ModalityOutcome | None:
    """One seed's representation of a modality as the closed form's comparison sees it, or None when it cannot be
    compared across modalities: evaluated on a sample of states only, or collapsed."""
    if rep.states is not None or rep.info.get("collapsed", False):
        return None
    learned = modality_outcome(rep, k, centred, base_p, name=closed.name, view=closed.view, world=closed.world,
                               injectivity=closed.injectivity, predicted=closed.predicted)
    return None if learned.collapsed else learned


def _modality(name: str, data: str, result, world: World, optimum, centred: bool) -> LearnedModality:
    sampled = result.states is not None
    reference = optimum.features(result.states) if sampled else None
    evaluations = []
    for F, collapsed in zip(result.features, result.collapsed):
        try:
            if collapsed:
                evaluations.append(None)
            elif sampled:
                evaluations.append(evaluate_sampled(F, reference, centred=centred))
            else:
                evaluations.append(evaluate_learned(F, world, optimum, ep=False))
        except ValueError:  # cannot be whitened: collapsed
            evaluations.append(None)
    whole = [e for e in evaluations if e is not None]
    spread = seed_spread(result.features, world.p, centred=centred) \
        if not sampled and len(whole) == len(evaluations) > 1 else None

    def per_seed(field: str) -> list[float | None]:
        return [None if e is None or not hasattr(e, field) else float(getattr(e, field)) for e in evaluations]

    stop = result.stop
    config = result.config
    bound = None if stop.bound is None else [[None if not np.isfinite(b) else float(b) for b in row]
                                             for row in stop.bound]
    progress = []
    for s, converged in enumerate(stop.converged):
        if converged or result.distance is None:
            progress.append(None)
            continue
        status = curve_rate(result.logged, result.distance[s], CONVERGED_TARGET)
        progress.append(None if status is None else status.describe("s_Theta"))
    predicted = None
    if config.method == "precond":
        predicted = float(np.sqrt(config.momentum) ** 100) if config.momentum else None
    return LearnedModality(
        name=name, data=data, lr=config.lr, method=config.method, momentum=config.momentum,
        batch_size=config.batch_size if data == "minibatch" else None,
        converged=[bool(c) for c in stop.converged], stopped_at=[int(t) for t in stop.at],
        reason=list(stop.reason), bound=bound, progress=progress, predicted_rate=predicted,
        evaluated_on=int(result.states.size) if sampled else None,
        s_theta_se=per_seed("s_theta_se") if sampled else None,
        s_theta=per_seed("s_theta"), rho_p=per_seed("rho_p"),
        cov_error=per_seed("cov_error"), alignment_ratio=per_seed("alignment_ratio"),
        trace_cov=[float(t) for t in result.trace_cov],
        collapsed=[bool(c) or e is None for c, e in zip(result.collapsed, evaluations)],
        seed_rho_p_max=None if spread is None else float(np.max(spread.rho_p)),
        logged=[int(t) for t in result.logged], distance=[[float(d) for d in row] for row in result.distance],
        loss=[[float(v) for v in row] for row in result.loss], seconds=result.seconds)
