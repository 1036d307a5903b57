"""prhsim: a simulator for the Platonic Representation Theorem of JEPAs.

Subpackages: :mod:`prhsim.worlds` (what the world is), :mod:`prhsim.objectives` (what is
minimised), :mod:`prhsim.optima` (what a learner converges to), :mod:`prhsim.learners` (how it
learns), :mod:`prhsim.metrics` (how representations are compared), :mod:`prhsim.experiments`
(what is checked), :mod:`prhsim.real` (real data), :mod:`prhsim.io`, :mod:`prhsim.config` and
:mod:`prhsim.cli` (docs/architecture.md).
``memory_limit`` bounds the memory any builder or solver may allocate
(half the machine's memory by default); above it they raise ``ResourceError``.
"""

from importlib.metadata import PackageNotFoundError, version

from prhsim._budget import ResourceError as ResourceError, memory_limit as memory_limit

try:
    __version__ = version("prhsim")
except PackageNotFoundError:  # pragma: no cover - source tree without install
    __version__ = "0.0.0"
