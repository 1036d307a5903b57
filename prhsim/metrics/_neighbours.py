"""``knn_k``, the neighbours of a k-NN metric: the name every k-NN function takes them by.

``k`` is the number of features everywhere in prhsim; the k-NN functions took their neighbours
as ``k`` in an earlier release, so :func:`knn_k_keyword` still accepts ``k=`` for one release,
with a DeprecationWarning naming ``knn_k``.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable


def knn_k_keyword(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(..., knn_k=...)`` that also takes the deprecated keyword ``k=`` (warning once per call)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "k" in kwargs:
            if "knn_k" in kwargs:
                raise TypeError(f"{fn.__name__}() got both knn_k and its deprecated spelling k")
            warnings.warn(f"{fn.__name__}(k=...) is deprecated (k is a number of features everywhere else): "
                          "use knn_k=", DeprecationWarning, stacklevel=2)
            kwargs["knn_k"] = kwargs.pop("k")
        return fn(*args, **kwargs)

    return wrapper
