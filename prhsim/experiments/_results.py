"""Plain-data results of ``prhsim run`` (pydantic models serialised to results.json)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Verdict = Literal["PASS", "FAIL", "N/A"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorldSummary(_Record):
    """The world over Z: size, factors, the chosen k and the centred spectrum's head."""

    name: str
    n_states: int
    factor_sizes: list[int]
    k: int
    k_auto: bool
    gap: float
    spectrum_head: list[float]


class InjectivitySummary(_Record):
    checked: int
    exhaustive: bool
    injective: bool


class ModalitySummary(_Record):
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


class PairSummary(_Record):
    """Two modalities compared through the pairs sharing z (whitened, p-weighted)."""

    a: str
    b: str
    rho_p: float
    s_theta: float
    mean_correlation: float
    det_q: float
    predicted_rho_p: float | None


class Check(_Record):
    """A prediction of the theory next to what was observed."""

    claim: str
    subject: str
    predicted: str
    observed: str
    verdict: Verdict


class RunResult(_Record):
    """Everything ``prhsim run`` measured."""

    prhsim_version: str
    world: WorldSummary
    centred: bool
    modalities: list[ModalitySummary]
    pairs: list[PairSummary]
    checks: list[Check]
    seconds: float

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.verdict == "FAIL"]
