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
from prhsim.experiments._rotation import RotationUniqueness
from prhsim.learners import (
    LEARNERS,
    SGDLearner,
    TrainConfig,
    curve_rate,
    evaluate_learned,
    evaluate_sampled,
    exact_law,
    seed_spread,
)
from prhsim.metrics import coupled_comparison, whiten
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
                encoder: str | None = None):
    """The :class:`prhsim.learners.SGDLearner` that ``training`` describes for one objective and data mode.

    ``spectrum`` (the modality's ``μ_1 … μ_{k+1}``, e.g. its closed form's eigenvalues) sets
    precond's step and momentum (:meth:`prhsim.learners.TrainConfig.preconditioned`) unless
    ``training.lr`` / ``training.momentum`` are given.
    """

    encoder = encoder or ("tabular" if training.encoder == "auto" else training.encoder)
    fields = dict(objective=objective, encoder=encoder, data=data, steps=training.steps,
                  batch_size=training.batch_size, log_every=max(1, training.steps // 50),
                  lam=training.lam, convention=training.convention, invariance_dims=training.invariance_dims,
                  num_directions=training.num_directions, tol=training.tol if training.stop else None,
                  plateau=training.plateau)
    if method(objective, data, training, encoder) == "precond":
        given = {name: getattr(training, name) for name in ("lr", "momentum") if getattr(training, name) is not None}
        return SGDLearner(TrainConfig.preconditioned(spectrum, **fields, **given))
    lr = training.lr or (EXACT_TABLE_LR if data == "exact" and encoder == "tabular" else DEFAULT_LR)
    return SGDLearner(TrainConfig(lr=lr, **fields))


def learn(config: RunConfig, outcome: RotationUniqueness, objectives: Sequence[str], *,
          progress: Progress | None = None) -> list[LearnerSummary]:
    """Train every objective on every modality of a closed-form ``outcome`` through the learner seam
    (:meth:`prhsim.learners.SGDLearner.fit`, every seed at once) and compare (see the module docstring)."""
    say = progress or (lambda message: None)
    training = config.training
    seeds = tuple(config.seed + s for s in range(training.n_seeds))
    k = outcome.k
    encoder = encoder_for(training, [o.world for o in outcome.modalities])
    summaries = []
    for objective in objectives:
        start = time.perf_counter()
        modalities, whitened = [], {}
        for i, o in enumerate(outcome.modalities):
            data = data_mode(objective, o.world, k, training, encoder)
            learner = sgd_learner(objective, data, training, o.optimum.eigenvalues, encoder)
            say(f"learner {objective}: {o.name} ({data}, {encoder}, {learner.config.method}, "
                f"{training.n_seeds} seed(s), up to {training.steps} steps)")
            try:
                result = learner.fit(o.world, k, centred=outcome.centred, seeds=modality_seeds(seeds, i),
                                     reference=o.optimum)
            except ResourceError:
                raise
            except ValueError as exc:  # divergence, or exact data this world cannot list
                raise LearnerError(f"learner {objective} on {o.name}: {exc}") from None
            modalities.append(_modality(o.name, data, result, o.world, o.optimum, outcome.centred))
            whitened[o.name] = ([None] * len(seeds) if result.states is not None else
                                _whitened(result.features, result.collapsed, o.world.p, outcome.centred))
        pairs = []
        closed_pairs = {(p.a, p.b): p for p in outcome.pairs}
        by_name = {o.name: o for o in outcome.modalities}
        base_p = outcome.modalities[0].world.base.p
        for a, b in combinations([o.name for o in outcome.modalities], 2):
            rho = [None if Fa is None or Fb is None else
                   coupled_comparison(Fa, by_name[a].world.modality.nuisance, Fb,
                                      by_name[b].world.modality.nuisance, base_p).rho_p
                   for Fa, Fb in zip(whitened[a], whitened[b])]
            pairs.append(LearnedPair(a=a, b=b, rho_p=rho, predicted_rho_p=closed_pairs[(a, b)].predicted_rho,
                                     closed_form_rho_p=closed_pairs[(a, b)].comparison.rho_p))
        summaries.append(LearnerSummary(
            learner=objective, encoder=encoder, steps=training.steps, seeds=list(seeds),
            lam=training.lam if LEARNERS[objective].objective.weighted else None,
            convention=training.convention if LEARNERS[objective].objective.weighted else None,
            modalities=modalities, pairs=pairs, seconds=time.perf_counter() - start))
    return summaries


def _whitened(features: np.ndarray, collapsed: np.ndarray, p: np.ndarray, centred: bool) -> list[np.ndarray | None]:
    """Each seed's features whitened under p, or None for a collapsed seed (no cross-modal ρ_P then)."""
    out = []
    for F, dead in zip(features, collapsed):
        if dead:
            out.append(None)
            continue
        try:
            out.append(whiten(F, p, centre=centred))
        except ValueError:  # a singular covariance: collapsed
            out.append(None)
    return out


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
