"""The learners of ``prhsim run --learner``, by name: the closed form and one learner per SGD objective of
:data:`prhsim.learners._objectives.OBJECTIVES`, one registry that the settings, the plan and the labels come from."""

from __future__ import annotations

from dataclasses import dataclass

from prhsim.learners._objectives import OBJECTIVES, TrainingObjective


@dataclass(frozen=True)
class LearnerKind:
    """One learner of the simulator.

    Attributes:
        name: its ``--learner`` name (for an SGD learner also the objective it minimises).
        description: one line for help texts and reports.
        sgd: trained by SGD (False: the closed form itself).
        covered: whether the theorem's uniqueness covers its optimum (docs/theory.md §1, §7): hard
            whitening is, SIGReg is not (a run does not check it against the closed form).
        objective: what an SGD learner minimises (its record, read by the losses, the plan, the checks and the
            report); None for the closed form.

    One taxonomy for every learner of prhsim: a family and, for a JEPA, the objective it minimises. The simulator's
    SGD learners are JEPAs on the world's views, each named by its objective (``whiten``, ``sigreg``); a text
    learner is ``jepa`` with an ``objective`` of the same records (:data:`prhsim.learners._objectives.OBJECTIVES`)
    and its ``views``, or ``ntp`` (next-token prediction); the closed form is the optimum they converge to.
    """

    name: str
    description: str
    sgd: bool
    covered: bool
    objective: TrainingObjective | None = None

    @property
    def family(self) -> str:
        """"closed" (the optimum itself) or "jepa" (an SGD learner on two views, named by its objective)."""
        return "jepa" if self.sgd else "closed"


#: Every learner, in the order the command line lists them: the closed form, then each SGD objective.
LEARNERS: dict[str, LearnerKind] = {k.name: k for k in (
    LearnerKind("closed", "the whitened closed form (what a learner converges to)", sgd=False, covered=True),
    *(LearnerKind(o.name, o.description, sgd=True, covered=o.covered, objective=o) for o in OBJECTIVES.values()),
)}

#: The SGD objectives, in order: the learners trained by SGD.
SGD_OBJECTIVES: tuple[str, ...] = tuple(name for name, kind in LEARNERS.items() if kind.sgd)
