"""Plain-data results of ``prhsim run`` (pydantic models serialised to results.json)."""

from __future__ import annotations

from typing import Literal

from prhsim.experiments._record import Record
from prhsim.learners import SGD_OBJECTIVES

Verdict = Literal["PASS", "FAIL", "N/A", "UNCONVERGED"]


class WorldSummary(Record):
    """The world over Z: size, factors, the chosen k and the centred spectrum's head."""

    name: str
    n_states: int
    factor_sizes: list[int]
    k: int
    k_auto: bool
    gap: float
    spectrum_head: list[float]


class InjectivitySummary(Record):
    checked: int
    exhaustive: bool
    injective: bool


class ModalitySummary(Record):
    """One modality's representation and its checks.

    ``eigenvalues``, ``value`` (L*) and ``gap`` are the closed form's: None when the
    representation comes from another learner.
    """

    name: str
    description: str
    learner: str = "closed"
    view: str
    eps: float
    n_nuisance: int
    n_states: int
    eigenvalues: list[float] | None
    predicted_eigenvalues: list[float]
    value: float | None
    loss_via_operator: float
    whitening_error: float
    gap: float | None
    unique: bool
    nuisance_free_predicted: int | None
    nuisance_free_observed: int
    injectivity: InjectivitySummary
    tie: str | None = None
    collapsed: bool = False


class PairSummary(Record):
    """Two modalities compared through the pairs sharing z (whitened, p-weighted), and the PRH sample
    metrics on sampled paired observations (``samples`` rows; None on worlds too small to sample).

    ``metrics[name]`` is each reported metric's score (:func:`prhsim.metrics.reported_metrics`),
    ``chance[name]`` its chance level where known; with ``permutations`` K, ``calibrated[name]`` and
    ``p_values[name]`` of every metric calibrated against K row permutations.
    """

    a: str
    b: str
    rho_p: float
    s_theta: float
    mean_correlation: float
    det_q: float
    predicted_rho_p: float | None
    samples: int | None = None
    knn_k: int | None = None
    metrics: dict[str, float] = {}
    chance: dict[str, float] = {}
    permutations: int | None = None
    calibrated: dict[str, float] = {}
    p_values: dict[str, float] = {}


class LearnedModality(Record):
    """One modality learned by SGD, per seed, against its closed form (None where a seed collapsed).

    ``distance[s][j]`` is seed s's ``s_Θ`` to the closed form after ``logged[j]`` steps, and
    ``loss[s][j]`` its training loss there. How each seed stopped: ``converged[s]``, the step
    ``stopped_at[s]`` (the budget when it did not converge) and ``reason[s]`` ("residual":
    its bound on s_Θ met ``tol``; "plateau": its loss stopped moving; "budget": the steps ran
    out), with ``bound[s][j]`` the Davis–Kahan bound on s_Θ at the logged steps (hard
    whitening on exact data, docs/theory.md §1.5) and, for a seed that ran out of steps,
    ``progress[s]``: how fast its s_Θ still falls and the steps it would still need.
    ``predicted_rate``: the factor per 100 steps by which the theory's linear rate shrinks
    s_Θ near the optimum (heavy ball: ``√β``), or None. A minibatch learner's
    ``batch_size`` sets its bias: batch whitening's expected loss is not the population
    loss, so s_Θ stops at a floor that shrinks with the batch. ``evaluated_on``: None when the
    seeds were compared with the closed form on every state; an MLP on rendered observations
    of a world too large for a feature table is compared on that many states drawn from p,
    with ``s_theta_se`` the bootstrap standard error of each seed's s_Θ (no loss / L* then).
    """

    name: str
    data: Literal["exact", "minibatch"]
    lr: float
    method: Literal["adamw", "precond"]
    momentum: float
    batch_size: int | None
    converged: list[bool]
    stopped_at: list[int]
    reason: list[Literal["residual", "plateau", "budget"]]
    bound: list[list[float | None]] | None
    progress: list[str | None]
    predicted_rate: float | None
    evaluated_on: int | None = None
    s_theta_se: list[float | None] | None = None
    s_theta: list[float | None]
    rho_p: list[float | None]
    cov_error: list[float | None]
    alignment_ratio: list[float | None]
    trace_cov: list[float]
    collapsed: list[bool]
    seed_rho_p_max: float | None
    logged: list[int]
    distance: list[list[float]]
    loss: list[list[float]]
    seconds: float


class LearnedPair(Record):
    """Two modalities' learned representations compared through the pairs sharing z, per seed."""

    a: str
    b: str
    rho_p: list[float | None]
    predicted_rho_p: float | None
    closed_form_rho_p: float


class LearnerSummary(Record):
    """One SGD objective trained on every modality (``prhsim run --learner``).

    ``seeds`` are the first modality's; modality i trains ``seed + 1000·i`` for each, its own
    initialisation and data stream.
    """

    learner: Literal[SGD_OBJECTIVES]  # type: ignore[valid-type]
    encoder: Literal["tabular", "mlp"]  # training.encoder, resolved
    steps: int
    seeds: list[int]
    lam: float | None
    convention: Literal["lejepa", "additive"] | None
    modalities: list[LearnedModality]
    pairs: list[LearnedPair]
    seconds: float


class Check(Record):
    """A prediction of the theory next to what was observed."""

    claim: str
    subject: str
    predicted: str
    observed: str
    verdict: Verdict


class RunResult(Record):
    """Everything ``prhsim run`` measured."""

    prhsim_version: str
    world: WorldSummary
    centred: bool
    modalities: list[ModalitySummary]
    pairs: list[PairSummary]
    checks: list[Check]
    seconds: float
    learned: list[LearnerSummary] = []

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.verdict == "FAIL"]


class SweepResult(Record):
    """``prhsim sweep sigreg-weight``: one SIGReg learner per weight λ (``cells[i]`` was trained at ``lams[i]``)."""

    prhsim_version: str
    world: str
    n_states: int
    k: int
    views: list[str]
    convention: Literal["lejepa", "additive"]
    lams: list[float]
    cells: list[LearnerSummary]
    closed_form_rho_p: dict[str, float]
    seconds: float
