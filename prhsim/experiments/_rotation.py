"""Rotation uniqueness across modalities: closed form per modality, every pair compared (docs/theory.md §2, §4).

Prediction (§4): with one π_Z, a positive gap and whitened optima, every
modality's optimum is ``Q_m h*(z)``, so each pair has ``ρ_P = 0``. Under bad(ε)
views, nuisance features (``E[h|z] = 0``) displace slow features: if k_Z of the
k features of each of two modalities are nuisance-free, the cross-covariance
has singular values ``(1^{min k_Z}, 0, …)`` and
``ρ_P = sqrt(2(k − min(k_Z,a, k_Z,b))/k)``; k_Z follows from the merge rule
(:func:`merge_rule`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from prhsim._rng import RngLike, check_rng
from prhsim.optima import (
    FEATURE_LIMIT,
    GAP_TOL,
    FactorFeatures,
    FactorSpectra,
    Optimum,
    alignment_loss,
    closed_form,
    factor_comparison,
    top_eigenpairs,
    whitening_error,
)
from prhsim.learners import ClosedFormLearner, Learner, Representation
from prhsim.metrics import Comparison, coupled_comparison, nuisance_free_dimension, whiten
from prhsim.worlds import InjectivityReport, Modality, ModalWorld, View, World, injectivity_check, view_world


@dataclass(frozen=True)
class MergePrediction:
    """The predicted top of a modal spectrum under a view (docs/theory.md §4, prediction rule).

    Attributes:
        values: predicted ``μ_1 … μ_{k+1}`` of the modal world.
        nuisance_free: predicted k_Z, or None when a tie at k makes it ambiguous.
    """

    values: np.ndarray
    nuisance_free: int | None


#: How far λ_1 of an uncentred spectrum may sit from 1, and rounding allowed in its descent.
TRIVIAL_ATOL = 1e-9
DESCENT_ATOL = 1e-12


def base_spectrum(base: World, m: int) -> np.ndarray:
    """K_Z's uncentred top-m eigenvalues ``λ_1 = 1, λ_2, …``, padded with −inf past the world's n."""
    values = top_eigenpairs(base, min(m, base.n), centred=False).values
    return np.concatenate([values, np.full(m - values.size, -np.inf)])


def check_uncentred(values: np.ndarray) -> np.ndarray:
    """Refuse anything but an uncentred spectrum: ``λ_1 = 1`` (±1e-9), descending, −inf padding only at the end."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size < 1:
        raise ValueError(f"merge_rule needs a vector of eigenvalues, got shape {values.shape}")
    if not abs(values[0] - 1.0) <= TRIVIAL_ATOL:
        raise ValueError("merge_rule needs the uncentred spectrum of K_Z (lambda_1 = 1, then lambda_2, ...); "
                         f"got base_values[0] = {values[0]:.12g} (a centred spectrum starts at lambda_2)")
    padded = values == -np.inf
    first_pad = int(np.argmax(padded)) if padded.any() else values.size
    head = values[:first_pad]
    bad = np.flatnonzero(np.concatenate([~np.isfinite(head), ~padded[first_pad:]]))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"merge_rule needs finite eigenvalues with -inf padding only at the end; "
                         f"got base_values[{i}] = {values[i]}")
    rises = np.flatnonzero(np.diff(head) > DESCENT_ATOL)
    if rises.size:
        i = int(rises[0])
        raise ValueError(f"merge_rule needs the uncentred spectrum of K_Z in descending order; got "
                         f"base_values[{i}] = {head[i]:.12g} < base_values[{i + 1}] = {head[i + 1]:.12g}")
    return values


def merge_rule(base_values: np.ndarray | World, view: View, n_nuisance: int, k: int, *,
               centred: bool = True) -> MergePrediction:
    """Merge K_Z's eigenvalues with the nuisance copies and take the top k (+1 for the gap).

    ``base_values`` are K_Z's uncentred top eigenvalues ``λ_1 = 1, λ_2, …`` (at least k+2,
    descending; −inf pads a spectrum shorter than that), or the world over Z itself.
    Nuisance-free candidates: ``λ_i`` (``i ≥ 2`` centred, ``i ≥ 1`` uncentred);
    nuisance candidates: ``(1−ε)·λ_i``, ``i ≥ 1``, each repeated ``|N| − 1`` times.
    k_Z is undetermined (None) when a tie straddles k and its block of equal candidates holds
    both kinds: the optimum may then take any of them. A tie among one kind leaves k_Z fixed.

    Raises:
        ValueError: if ``base_values`` is not an uncentred spectrum (a centred one,
            ``λ_2, λ_3, …``, would merge the wrong values and predict wrongly).
    """
    if isinstance(base_values, World):
        base_values = base_spectrum(base_values, k + 2)
    base_values = check_uncentred(base_values)
    if base_values.size < k + 2:
        raise ValueError(f"merge_rule needs at least k+2 = {k + 2} base eigenvalues, got {base_values.size}")
    free = base_values[1:] if centred else base_values
    copies = n_nuisance - 1
    scaled = base_values.copy()  # -inf entries pad a spectrum shorter than k+2 and stay -inf
    finite = np.isfinite(scaled)
    scaled[finite] *= 1.0 - view.eps
    nuis = np.repeat(scaled, copies) if copies else np.empty(0)
    values = np.concatenate([free, nuis])
    is_free = np.concatenate([np.ones(free.size, bool), np.zeros(nuis.size, bool)])
    order = np.argsort(-values, kind="stable")
    top = values[order[: k + 1]]
    kz = int(np.sum(is_free[order[:k]]))
    ambiguous = False
    if abs(top[k - 1] - top[k]) <= GAP_TOL:  # a tie straddles k: which of its candidates enter is arbitrary
        block = np.abs(values - top[k - 1]) <= GAP_TOL
        ambiguous = bool(np.any(is_free[block]) and not np.all(is_free[block]))
    return MergePrediction(top, None if ambiguous else kz)


@dataclass(frozen=True)
class ModalityOutcome:
    """One modality's representation (from the learner) and its checks.

    Attributes:
        learner: the learner's name ("closed" for the closed form).
        optimum: the closed-form optimum, when the learner is the closed form.
        unique: the optimum is one rotation orbit (from the closed form when the learner is
            the closed form, else from the merge rule's predicted gap).
        loss: the alignment loss of the compared features through the kernel (docs/theory.md §1.1).
        whitening_error: ``‖FᵀDF − I‖_F`` of the learner's raw features.
        collapsed: the learner reported collapse, or its features could not be whitened;
            a collapsed modality's pairs get no prediction.
        info: what the learner knows about itself (steps, seconds, …).
        table: the compared features as a table over every modal state (the table path):
            the learner's, whitened under p when they come from a learner other than the closed
            form (whose features are whitened already). None in factor space.
        factor: the closed-form features in factor space (the default path of the closed form;
            docs/theory.md §6, "Factor space"), or None.
        raw: a learner's features before whitening (None for the closed form).
        representation: what the learner returned (:class:`prhsim.learners.Representation`).
    """

    name: str
    view: View
    world: ModalWorld
    injectivity: InjectivityReport
    learner: str
    optimum: Optimum | None
    unique: bool
    predicted: MergePrediction
    nuisance_free: int
    loss: float
    whitening_error: float
    collapsed: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)
    table: np.ndarray | None = None
    factor: FactorFeatures | None = None
    raw: np.ndarray | None = None
    representation: Representation | None = None

    @cached_property
    def features(self) -> np.ndarray:
        """The compared features over every modal state (materialised from factor space when needed).

        Raises:
            ValueError: in factor space, above FEATURE_LIMIT modal states.
        """
        if self.table is not None:
            return self.table
        if self.world.n > FEATURE_LIMIT:
            raise ValueError(f"refusing to materialise the features of {self.world.n:,} modal states "
                             f"(limit {FEATURE_LIMIT:,}); use rows(states)")
        return self.factor.table()

    def rows(self, states: np.ndarray) -> np.ndarray:
        """The compared features at the given modal states ``z·|N| + n``."""
        if self.table is not None:
            return self.table[np.asarray(states, dtype=np.int64)]
        return self.factor.rows(states)


@dataclass(frozen=True)
class PairOutcome:
    """One pair of modalities compared through the pairs sharing z."""

    a: str
    b: str
    comparison: Comparison
    predicted_rho: float | None


@dataclass(frozen=True)
class RotationUniqueness:
    """Result of :func:`rotation_uniqueness`."""

    k: int
    centred: bool
    base_values: np.ndarray
    base_gap: float
    modalities: tuple[ModalityOutcome, ...]
    pairs: tuple[PairOutcome, ...]


def predicted_gap(prediction: MergePrediction, k: int) -> float:
    """The predicted ``μ_k − μ_{k+1}`` of a modal world (from the merge rule)."""
    return float(prediction.values[k - 1] - prediction.values[k])


def predicted_rho(k: int, kz_a: int | None, kz_b: int | None) -> float | None:
    """``sqrt(2(k − min(k_Z,a, k_Z,b))/k)``, or None when a k_Z is undetermined."""
    if kz_a is None or kz_b is None:
        return None
    return float(np.sqrt(2.0 * (k - min(kz_a, kz_b)) / k))


def rotation_uniqueness(
    base: World,
    modalities: Sequence[Modality],
    views: Sequence[View],
    k: int | Literal["auto"] = "auto",
    *,
    centred: bool = True,
    learner: Learner | None = None,
    tables: bool = False,
    progress=None,
    rng: RngLike = None,
) -> RotationUniqueness:
    """Each modality's representation by ``learner``, and ``ρ_P``, ``s_Θ`` for every pair, with predictions.

    Args:
        base: the world over Z (π_Z shared by every modality).
        modalities: the modalities (nuisance laws and renderers).
        views: one view per modality.
        k: number of features, or "auto": K_Z's k by :func:`prhsim.optima.pick_k`
            (largest relative gap, k in 1..min(32, n−2) centred).
        centred: centred whitened objective (default).
        learner: maps (modal world, k) to a representation (default None:
            ``ClosedFormLearner(tables=tables)``, the closed form in factor space, where no table
            over a modal world is formed, docs/theory.md §6). A representation in factor space is
            compared in factor space; a table is compared as a table, whitened under p first
            when it is not the closed form's.
        tables: with the default learner, compute the closed form's quantities from full
            feature tables over every modal state (the slow twin of the factor-space path,
            for small worlds); a learner passed here decides this itself.
        progress: optional callable ``progress(message)`` for long runs.
        rng: seeds the sample of the injectivity check on huge state spaces, and (one
            independent stream per modality) the learner.

    Raises:
        ValueError: if a renderer is not injective in (z, n) (the theorem assumes it), or
            a modality renders a world of another size than ``base``.
    """
    if len(modalities) != len(views):
        raise ValueError(f"need one view per modality: {len(modalities)} modalities, {len(views)} views")
    if len(modalities) < 1:
        raise ValueError("need at least one modality")
    names = [m.name for m in modalities]
    if len(set(names)) != len(names):
        raise ValueError(f"modality names must be distinct, got {names}")
    for modality in modalities:
        modality.check_world(base)
    say = progress or (lambda message: None)
    reports = []
    for modality in modalities:
        say(f"injectivity check: {modality.name}")
        report = injectivity_check(modality, base.n, rng=rng)
        report.raise_if_not_injective()
        reports.append(report)
    if learner is not None and tables:
        raise ValueError("tables=True applies to the default closed-form learner; pass "
                         "learner=ClosedFormLearner(tables=True) or tables alone")
    learner = learner or ClosedFormLearner(tables=tables)
    say("closed form: the world over Z")
    # the modal worlds share Z's factors: each is diagonalised once (with the closed-form learner's cache)
    spectra = learner.spectra if isinstance(learner, ClosedFormLearner) else FactorSpectra()
    base_opt = closed_form(base, k, centred=centred, spectra=spectra)
    k = base_opt.k
    base_values = base_spectrum(base, k + 2)
    streams = check_rng(rng).spawn(len(modalities))
    outcomes = []
    for modality, view, report, stream in zip(modalities, views, reports, streams):
        say(f"{'closed form' if learner.name == 'closed' else 'learner ' + learner.name}: "
            f"{modality.name} ({view.label})")
        world = view_world(base, modality, view)
        predicted = merge_rule(base_values, view, modality.n_nuisance, k, centred=centred)
        common = dict(name=modality.name, view=view, world=world, injectivity=report, predicted=predicted)
        rep = learner(world, k, centred=centred, rng=stream)
        if rep.n_seeds != 1:
            raise ValueError(f"learner {learner.name!r} returned {rep.n_seeds} seeds for one call without seeds; "
                             "rotation_uniqueness compares one representation per modality")
        outcomes.append(modality_outcome(rep, k, centred, base.p, **common))
    pairs = []
    for a, b in combinations(outcomes, 2):
        say(f"compare: {a.name} vs {b.name}")
        pairs.append(pair_outcome(a, b, k, base.p))
    return RotationUniqueness(k, centred, base_opt.eigenvalues, base_opt.gap, tuple(outcomes), tuple(pairs))


def modality_outcome(rep: Representation, k: int, centred: bool, p_z: np.ndarray, *, name: str, view: View,
                     world: ModalWorld, injectivity: InjectivityReport, predicted: MergePrediction) -> ModalityOutcome:
    """One modality's outcome from one seed of a representation (``rep.seed(i)``): in factor space from the factor
    Grams, else from the table, whitened under p first when it is not the closed form's (docs/theory.md §2)."""
    if rep.n_seeds != 1:
        raise ValueError(f"compare one seed at a time (rep.seed(i)); learner {rep.learner!r} gave {rep.n_seeds}")
    rep = rep.seed(0)  # its own info (loss, collapsed) merged with the learner's
    common = dict(name=name, view=view, world=world, injectivity=injectivity, predicted=predicted)
    if rep.factor is not None:
        return _factor_outcome(rep, k, common)
    return _table_outcome(world, k, centred, rep, p_z, common)


def pair_outcome(a: ModalityOutcome, b: ModalityOutcome, k: int, p_z: np.ndarray) -> PairOutcome:
    """Two modalities compared through the pairs sharing z (in factor space when both are), with the predicted
    ``ρ_P`` (None unless both optima are unique and neither collapsed)."""
    if a.factor is not None and b.factor is not None:
        comp = factor_comparison(a.factor, b.factor)
    else:
        comp = coupled_comparison(a.features, a.world.modality.nuisance, b.features, b.world.modality.nuisance, p_z)
    pred = predicted_rho(k, a.predicted.nuisance_free, b.predicted.nuisance_free)
    if not (a.unique and b.unique) or a.collapsed or b.collapsed:
        pred = None
    return PairOutcome(a.name, b.name, comp, pred)


def _factor_outcome(rep: Representation, k: int, common: dict) -> ModalityOutcome:
    """A closed form in factor space (no table over Z x N): its quantities from the factor Grams."""
    F, opt = rep.factor, rep.optimum
    if F.k != k or F.shape != common["world"].shape:
        raise ValueError(f"learner {rep.learner!r} returned factor-space features of {F.k} features over factors "
                         f"{F.shape}, expected {k} over {common['world'].shape}")
    if opt is None:
        raise ValueError(f"learner {rep.learner!r} returned factor-space features without their optimum")
    return ModalityOutcome(**common, learner=rep.learner, optimum=opt, unique=opt.unique,
                           nuisance_free=F.nuisance_free_dimension(), loss=F.alignment_loss(),
                           whitening_error=F.whitening_error(), info=rep.info, factor=F, representation=rep)


def _table_outcome(world: ModalWorld, k: int, centred: bool, rep: Representation, p_z: np.ndarray,
                   common: dict) -> ModalityOutcome:
    """One modal world represented as a table over every modal state (one seed)."""
    raw = rep.table(0)
    if rep.states is not None or raw.shape != (world.n, k):
        shape = raw.shape if rep.states is None else f"{raw.shape} on a sample of states"
        raise ValueError(f"learner {rep.learner!r} returned features of shape {shape}, expected ({world.n}, {k})")
    collapsed = bool(rep.info.get("collapsed", False))
    F = raw
    if rep.optimum is None:
        try:
            F = whiten(raw, world.p, centre=centred)
        except ValueError:  # a singular covariance: the representation collapsed
            collapsed = True
    predicted = common["predicted"]
    unique = rep.optimum.unique if rep.optimum is not None else predicted_gap(predicted, k) > GAP_TOL
    return ModalityOutcome(
        **common, learner=rep.learner, optimum=rep.optimum, unique=unique,
        nuisance_free=nuisance_free_dimension(F, world.modality.nuisance, p_z),
        loss=alignment_loss(world, F), whitening_error=whitening_error(world, raw),
        collapsed=collapsed, info=rep.info, table=F, raw=None if rep.optimum is not None else raw,
        representation=rep,
    )
