"""What an SGD learner minimises, as one record per objective that every piece around the training reads
(docs/theory.md §1.1, §1.5, §7).

A :class:`TrainingObjective` holds its two losses, on the exact law and on a minibatch, and what the code around
them needs to know: which per-step randomness a step carries, whether it reads λ, the smallest minibatch, the
rule that picks its data mode under ``data="auto"``, its rough cost per step, and what the checks, the report
and the figures say of it. The losses and the plan, the stopping rules, the checks, the labels and the colours
read the record, so a new SGD objective for ``prhsim run --learner`` is its loss in ``prhsim.objectives`` and one
entry of :data:`OBJECTIVES` (the learner registry, :data:`prhsim.learners.LEARNERS`, is built from it).

The entries (embeddings a, b of B sampled pairs; E of every state on the exact law, with the moments C, A of
:func:`prhsim.learners._exact_law.exact_moments`):

* ``whiten``, hard whitening (§1.1, the objective the theorem covers). Minibatch:
  :func:`prhsim.objectives.whitened_invariance` of (a, b), the two views pooled into 2B rows and whitened with
  that pooled batch's moments, scored by the pairwise invariance; exact:
  :func:`prhsim.objectives.whitened_alignment` ``2 tr(C⁻¹(C − A)) = E_π‖f̃(z) − f̃(z')‖²``, whose minimum on a
  table is ``L* = 2 Σ_{i≤k}(1 − μ_i)``. Its gradient on a table is the eigen-residual, so a table on exact data
  trains by preconditioned heavy-ball steps and stops on the residual's bound (§1.5).
* ``sigreg``, LeJEPA's SIGReg (§7, uniqueness not proven). Minibatch: :func:`prhsim.objectives.lejepa_loss` of the
  (2, B, k) stack (batch SIGReg ≈ B·EP, on M directions drawn per step); exact: invariance
  ``(tr C − tr A)/2 = E_π‖f(z) − f(z')‖²/4`` (uncentred moments) and the regulariser
  ``nominal_n · population_sigreg(E, p, directions)``, where ``nominal_n`` (the configured B) is the N of the batch
  statistic, whose expectation is about N·EP, so λ weighs the regulariser alike in both data modes (``β =
  4λ·nominal_n`` in §7's additive terms).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, NamedTuple

from array_api_compat import array_namespace

from prhsim._budget import FLOAT
from prhsim.objectives import Convention, lejepa_loss, population_sigreg, whitened_alignment, whitened_invariance
from prhsim.learners._exact_law import exact_moments


class LossContext(NamedTuple):
    """What fixes a loss besides its inputs: centring, SIGReg's convention and invariance dims, a factor law's shape."""

    centred: bool
    convention: Convention
    dims: Literal["sum", "mean"]
    factor_shape: tuple[int, ...] | None


@dataclass(frozen=True)
class TrainingObjective:
    """An SGD objective and what the code around its training reads (module docstring).

    Attributes:
        name: its ``--learner`` name.
        description: one line for help texts and reports.
        covered: whether the theorem's uniqueness covers its optimum (docs/theory.md §1, §7): a run checks that
            SGD reaches the closed form only for a covered objective.
        exact: ``(E, shared, step, ctx) -> scalar``: the loss of the embeddings E (n, k) of every state under the
            exact law (``shared``: p, π, λ, nominal_n; ``step``: the step's randomness).
        minibatch: ``(a, b, step, shared, ctx) -> scalar``: the loss of the embeddings of B sampled pairs.
        directions: whether a step carries SIGReg directions (``step["dirs"]``, drawn per seed and step); a loss
            with resampled directions is noisy on exact data too.
        weighted: whether it reads λ and the convention (the results record them with the learner).
        min_batch: the smallest minibatch its loss is defined on.
        eigen_residual: whether its gradient on a table is the eigen-residual of the pair operator: a table on
            exact data then trains by covariance-preconditioned heavy-ball steps (``method="auto"``) and stops on
            the residual's Davis–Kahan bound, and its minibatch estimate has a floor (batch whitening's bias).
        affine_blind: whether the loss is unchanged by an affine map of the features (then ‖Cov − I‖ says nothing
            of the training, and the report leaves it out).
        auto_exact: ``(n, training) -> bool``: under ``data="auto"``, whether it trains on the exact law of n
            states (when that law can be listed).
        step_flops: ``(data, n, k, factors, batch_size, num_directions) -> float``: rough float operations of one
            step of one seed on a table (the run's cost plan).
        exact_bytes: ``(n, num_directions) -> float`` or None: the bytes per seed that the exact loss's gradient
            keeps, refused before training when they cannot fit.
        label: how reports and figures name it; ``colour``: its matplotlib colour in the figures.
    """

    name: str
    description: str
    covered: bool
    exact: Callable[..., Any]
    minibatch: Callable[..., Any]
    directions: bool = False
    weighted: bool = False
    min_batch: int = 1
    eigen_residual: bool = False
    affine_blind: bool = False
    auto_exact: Callable[[int, Any], bool] = lambda n, training: True
    step_flops: Callable[..., float] = lambda data, n, k, factors, batch_size, num_directions: 0.0
    exact_bytes: Callable[[int, int], float] | None = None
    label: str = ""
    colour: str = "tab:gray"


#: Rough float operations per element of the whitened and the SIGReg losses (and their gradients), per step.
WHITEN_FLOPS_PER_ELEMENT, SIGREG_FLOPS_PER_ELEMENT = 6, 20
#: Float arrays of n² x M that reverse-mode autodiff of the exact SIGReg keeps per seed (differences, exponentials).
EXACT_SIGREG_COPIES = 3


def _whiten_exact(E: Any, shared: Any, step: Any, ctx: LossContext) -> Any:
    return whitened_alignment(*exact_moments(E, shared, centred=ctx.centred, factor_shape=ctx.factor_shape))


def _whiten_minibatch(a: Any, b: Any, step: Any, shared: Any, ctx: LossContext) -> Any:
    return whitened_invariance(a, b, centred=ctx.centred)


def _whiten_flops(data: str, n: int, k: int, factors: int, batch_size: int, num_directions: int) -> float:
    if data == "exact":
        return WHITEN_FLOPS_PER_ELEMENT * float(n) * k * (factors + k)
    return WHITEN_FLOPS_PER_ELEMENT * 2.0 * batch_size * k * k


def combine(inv: Any, reg: Any, lam: Any, convention: Convention) -> Any:
    """``λ·reg + (1 − λ)·inv`` ("lejepa") or ``inv + λ·reg`` ("additive"), as :func:`prhsim.objectives.lejepa_loss`."""
    return lam * reg + (1.0 - lam) * inv if convention == "lejepa" else inv + lam * reg


def _sigreg_exact(E: Any, shared: Any, step: Any, ctx: LossContext) -> Any:
    C, A = exact_moments(E, shared, centred=False, factor_shape=ctx.factor_shape)
    xp = array_namespace(E)
    inv = (xp.sum(xp.linalg.diagonal(C)) - xp.sum(xp.linalg.diagonal(A))) / 2.0
    if ctx.dims == "mean":
        inv = inv / E.shape[-1]
    reg = shared["nominal_n"] * population_sigreg(E, shared["p"], step["dirs"])
    return combine(inv, reg, shared["lam"], ctx.convention)


def _sigreg_minibatch(a: Any, b: Any, step: Any, shared: Any, ctx: LossContext) -> Any:
    xp = array_namespace(a)
    return lejepa_loss(xp.stack([a, b]), step["dirs"], lam=shared["lam"], convention=ctx.convention, dims=ctx.dims)


def _sigreg_flops(data: str, n: int, k: int, factors: int, batch_size: int, num_directions: int) -> float:
    if data == "exact":
        return SIGREG_FLOPS_PER_ELEMENT * float(n) ** 2 * num_directions
    return SIGREG_FLOPS_PER_ELEMENT * 2.0 * batch_size * num_directions * 17


def _sigreg_auto_exact(n: int, training: Any) -> bool:
    return n**2 * training.num_directions <= training.exact_sigreg_work


def _sigreg_exact_bytes(n: int, num_directions: int) -> float:
    return EXACT_SIGREG_COPIES * FLOAT * float(n) ** 2 * num_directions


#: Every SGD objective, in the order the command line lists them.
OBJECTIVES: dict[str, TrainingObjective] = {o.name: o for o in (
    TrainingObjective("whiten", "SGD on hard whitening (the objective the theorem covers)", covered=True,
                      exact=_whiten_exact, minibatch=_whiten_minibatch, min_batch=2, eigen_residual=True,
                      affine_blind=True, step_flops=_whiten_flops, label="whiten", colour="tab:blue"),
    TrainingObjective("sigreg", "SGD on LeJEPA's SIGReg (uniqueness not proven)", covered=False,
                      exact=_sigreg_exact, minibatch=_sigreg_minibatch, directions=True, weighted=True,
                      auto_exact=_sigreg_auto_exact, step_flops=_sigreg_flops, exact_bytes=_sigreg_exact_bytes,
                      label="sigreg", colour="tab:orange"),
)}


def objective_record(name: Any) -> TrainingObjective:
    """The record of a registered SGD objective.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if not isinstance(name, str) or name not in OBJECTIVES:
        raise ValueError(f"unknown SGD objective {name!r}; known: {', '.join(OBJECTIVES)}")
    return OBJECTIVES[name]
