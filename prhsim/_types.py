"""Array aliases used in signatures: shapes are documented in the names' strings.

These are plain aliases (no runtime checking); the string after each name
gives the shape convention used in docstrings: ``n`` states, ``k`` features,
``m`` eigenpairs.
"""

from __future__ import annotations

from typing import Callable, Union

import numpy as np
import scipy.sparse as sp

Vector = np.ndarray  # "n"
Matrix = np.ndarray  # "n k" or "n n"
Features = np.ndarray  # "n k": row z is f(z)
PairMatrix = Union[np.ndarray, sp.spmatrix, sp.sparray]  # "n n", dense or sparse
States = np.ndarray  # "s": integer state indices

Progress = Callable[[str], None]  # a long computation's progress lines, one message a call
