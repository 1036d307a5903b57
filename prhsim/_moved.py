"""Names that moved for one release: a module ``__getattr__`` that finds each in its new home, and a keyword
that was renamed, each with a warning."""

from __future__ import annotations

import functools
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


def renamed_keyword(old: str, new: str, why: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: ``fn(..., new=...)`` also takes its earlier keyword ``old=`` for one release, with a
    ``DeprecationWarning`` naming ``new`` (``why``, when given, says why it was renamed); both at once is a TypeError."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"{fn.__name__}() got both {new} and its deprecated spelling {old}")
                reason = f" ({why})" if why else ""
                warnings.warn(f"{fn.__name__}({old}=...) is deprecated{reason}: use {new}=", DeprecationWarning,
                              stacklevel=2)
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper

    return decorate
