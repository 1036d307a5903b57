"""Deprecated: the real-data bridge moved to :mod:`prhsim.real` (feature files to :mod:`prhsim.io`).

Every name it exported still resolves here for one release, with a ``DeprecationWarning``
that names its new home.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

#: Names that moved to prhsim.io rather than prhsim.real.
_IO = frozenset({"FeatureFileError", "load_features"})


def __getattr__(name: str) -> Any:
    package = "prhsim.io" if name in _IO else "prhsim.real"
    module = importlib.import_module(package)
    if name.startswith("_") or not hasattr(module, name):
        raise AttributeError(f"module 'prhsim.experiments.real' has no attribute {name!r}")
    warnings.warn(f"prhsim.experiments.real.{name} is deprecated: import {name} from {package}", DeprecationWarning,
                  stacklevel=2)
    return getattr(module, name)
