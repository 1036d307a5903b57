"""Deprecated: the real-data bridge moved to :mod:`prhsim.real` (feature files to :mod:`prhsim.io`).

Every name it exported still resolves here for one release, with a ``DeprecationWarning``
that names its new home.
"""

from __future__ import annotations

import importlib

from prhsim._moved import forwarder

#: Names that moved to prhsim.io rather than prhsim.real.
_IO = frozenset({"FeatureFileError", "load_features"})


def _home(name: str) -> tuple[str, str] | None:
    package = "prhsim.io" if name in _IO else "prhsim.real"
    if name.startswith("_") or not hasattr(importlib.import_module(package), name):
        return None
    return package, name


__getattr__ = forwarder("prhsim.experiments.real", _home)
