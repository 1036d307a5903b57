"""The learners of ``prhsim run --learner``, by name: one registry that the settings and labels come from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LearnerKind:
    """One learner of the simulator.

    Attributes:
        name: its ``--learner`` name (for an SGD learner also the objective it minimises).
        description: one line for help texts and reports.
        sgd: trained by SGD (False: the closed form itself).
        covered: whether the theorem's uniqueness covers its optimum (docs/theory.md §1, §7): hard
            whitening is, SIGReg is not (a run does not check it against the closed form).
    """

    name: str
    description: str
    sgd: bool
    covered: bool


#: Every learner, in the order the command line lists them.
LEARNERS: dict[str, LearnerKind] = {k.name: k for k in (
    LearnerKind("closed", "the whitened closed form (what a learner converges to)", sgd=False, covered=True),
    LearnerKind("whiten", "SGD on hard whitening (the objective the theorem covers)", sgd=True, covered=True),
    LearnerKind("sigreg", "SGD on LeJEPA's SIGReg (uniqueness not proven)", sgd=True, covered=False),
)}

#: The SGD objectives, in order: the learners trained by SGD.
SGD_OBJECTIVES: tuple[str, ...] = tuple(name for name, kind in LEARNERS.items() if kind.sgd)
