"""prhsim: a simulator for the Platonic Representation Theorem of JEPAs.

Subpackages, in dependency order: :mod:`prhsim.worlds` (what the world is),
:mod:`prhsim.jepa` (what a learner converges to), :mod:`prhsim.metrics` (how
representations are compared), :mod:`prhsim.experiments` (what is checked).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("prhsim")
except PackageNotFoundError:  # pragma: no cover - source tree without install
    __version__ = "0.0.0"
