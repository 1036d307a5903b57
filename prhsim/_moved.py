"""Names that moved for one release: a module ``__getattr__`` that finds each in its new home, with a warning."""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable


def forwarder(old: str, home: Callable[[str], tuple[str, str] | None]) -> Callable[[str], Any]:
    """A ``__getattr__`` for module ``old``: ``home(name)`` gives (new module, new name), or None for no such name.

    The name resolves there, after a ``DeprecationWarning`` that says where to import it from.
    """

    def __getattr__(name: str) -> Any:
        target = home(name)
        if target is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        module, new = target
        warnings.warn(f"{old}.{name} is deprecated: import {new} from {module}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), new)

    return __getattr__
