"""prhsim: a simulator for the Platonic Representation Theorem of JEPAs.

Subpackages, in dependency order: :mod:`prhsim.worlds` (what the world is),
:mod:`prhsim.jepa` (what a learner converges to), :mod:`prhsim.metrics` (how
representations are compared), :mod:`prhsim.experiments` (what is checked).
``memory_limit`` bounds the memory any builder or solver may allocate
(half the machine's memory by default); above it they raise ``ResourceError``.
"""

from importlib.metadata import PackageNotFoundError, version

from prhsim._budget import ResourceError as ResourceError, memory_limit as memory_limit

try:
    __version__ = version("prhsim")
except PackageNotFoundError:  # pragma: no cover - source tree without install
    __version__ = "0.0.0"
