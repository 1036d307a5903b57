"""Optional dependencies: a command that needs an extra refuses in one line, before any work, when it is missing."""

from __future__ import annotations

import importlib.util
from typing import Sequence

#: The SGD learners' libraries (the ``jax`` extra).
JAX_MODULES = ("jax", "optax")


def missing(modules: Sequence[str]) -> list[str]:
    """The modules of ``modules`` that cannot be imported here (found without importing them)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require(what: str, modules: Sequence[str], extra: str) -> None:
    """Raise a one-line ValueError naming ``what``, the missing modules and the extra that installs them."""
    absent = missing(modules)
    if absent:
        raise ValueError(f"{what} needs {', '.join(absent)}: pip install 'prhsim[{extra}]'")
