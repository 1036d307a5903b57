"""The exact pair law an SGD learner's full-batch loss reads (docs/theory.md §1.1): the positive pairs of Π as a list,
or a product world's factors applied one axis at a time, and the population moments of embeddings under it.

``C = E_p x xᵀ`` and ``A = E_π x(z) x(z')ᵀ`` of the embeddings of every state (x = f − μ_p when centred), A
computed either from the list of Π's positive pairs (``A = Σ_i π_i x_{r_i} x_{c_i}ᵀ``) or, for a product world,
factor by factor (``ΠX = (⊗_f Π_f) X``, each factor applied along its own axis of X reshaped to the factor shape;
π is never formed). Written against the array API: numpy, JAX and torch arrays alike.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from array_api_compat import array_namespace

from prhsim._budget import FLOAT, ensure_fits
from prhsim.worlds import World

#: Most pairs of an exact pair list (the loss gathers 2 x pairs x k embeddings every step).
MAX_PAIRS = 20_000_000
#: Bytes per listed pair: two int64 states and a weight.
PAIR_BYTES = 3 * 8
#: A factor is applied as a dense matrix up to this many states.
FACTOR_DENSE_LIMIT = 2048


class PairList(NamedTuple):
    """The positive entries of Π: ``rows``, ``cols`` (int64) and weights ``pi`` (sum 1)."""

    rows: np.ndarray
    cols: np.ndarray
    pi: np.ndarray


class FactorLaw(NamedTuple):
    """Π of a product world as its factors' dense matrices (row-major states, as the world indexes)."""

    shape: tuple[int, ...]
    mats: tuple[np.ndarray, ...]


def _pair_count(world: World) -> int:
    return math.prod(int(np.count_nonzero(f.Pi.data if sp.issparse(f.Pi) else f.Pi)) for f in world.factors)


def pair_list(world: World, *, max_pairs: int = MAX_PAIRS) -> PairList:
    """Every pair ``(z, z')`` with ``π(z, z') > 0`` and its weight (row-major states).

    A finite world lists its stored Π; a product world lists the Kronecker product
    of its factors' Π (``scipy.sparse.kron``). The count is the product of the
    factors' positive entries, refused above ``max_pairs`` before anything is formed.
    """
    total = _pair_count(world)
    if total > max_pairs:
        raise ValueError(f"the exact pair list of this world has {total:,} pairs (limit {max_pairs:,}); "
                         "use data='minibatch' or a smaller world")
    ensure_fits(3.0 * PAIR_BYTES * total, f"the exact pair list of {total:,} pairs", "use data='minibatch'")
    factors = world.factors
    Pi = sp.coo_array(factors[0].Pi)
    for f in factors[1:]:
        Pi = sp.kron(Pi, sp.coo_array(f.Pi), format="coo")
    Pi = sp.coo_array(Pi)
    keep = Pi.data > 0
    pi = Pi.data[keep]
    return PairList(Pi.row[keep].astype(np.int64), Pi.col[keep].astype(np.int64), pi / pi.sum())


def exact_law(world: World, k: int, *, max_pairs: int = MAX_PAIRS) -> PairList | FactorLaw:
    """The cheaper exact representation of π for k features: the pair list, or the factors.

    Applying the factors costs about ``n·k·Σ_f n_f`` per step, the pair list ``nnz·k``;
    a world with one factor, or a factor above 2048 states, uses the pair list.
    """
    factors = world.factors
    sizes = [f.n for f in factors]
    factor_cost = world.n * sum(sizes)
    if len(factors) > 1 and max(sizes) <= FACTOR_DENSE_LIMIT and factor_cost < _pair_count(world):
        ensure_fits(4.0 * FLOAT * world.n * k, f"the exact loss over {world.n:,} states x {k} features",
                    "use data='minibatch' or a smaller world")
        mats = tuple(np.asarray(f.Pi.toarray() if sp.issparse(f.Pi) else f.Pi, dtype=np.float64) for f in factors)
        return FactorLaw(tuple(sizes), mats)
    return pair_list(world, max_pairs=max_pairs)


def apply_factors(X: Any, shape: tuple[int, ...], mats: tuple[Any, ...]) -> Any:
    """``(⊗_f Π_f) X`` for X (n, k) with n = prod(shape): each factor along its axis, ``O(n·k·Σ n_f)``."""
    xp = array_namespace(X)
    n, k = X.shape
    T = X
    for axis, A in enumerate(mats):
        lead = math.prod(shape[:axis])
        size = shape[axis]
        T = A @ xp.reshape(T, (lead, size, (n // (lead * size)) * k))  # (size, size) @ (lead, size, rest)
    return xp.reshape(T, (n, k))


def exact_moments(E: Any, shared: dict[str, Any], *, centred: bool,
                  factor_shape: tuple[int, ...] | None = None) -> tuple[Any, Any]:
    """``C = E_p x xᵀ`` and ``A = E_π x(z) x(z')ᵀ`` of the embeddings E (n, k) of every state.

    π comes from ``shared``: a pair list ("rows", "cols", "pi"), or the factor matrices
    ("mats") of a product world of shape ``factor_shape``.
    """
    xp = array_namespace(E)
    p = shared["p"]
    X = E - p @ E if centred else E
    C = xp.matrix_transpose(X) @ (p[:, None] * X)
    if "rows" in shared:  # a pair list
        A = xp.matrix_transpose(shared["pi"][:, None] * X[shared["rows"], :]) @ X[shared["cols"], :]
    else:
        A = xp.matrix_transpose(X) @ apply_factors(X, factor_shape, shared["mats"])
    return C, A


def exact_tables(law: PairList | FactorLaw) -> dict[str, Any]:
    """The numpy arrays of ``shared`` that describe π (the caller converts them to its library)."""
    if isinstance(law, PairList):
        return {"rows": law.rows, "cols": law.cols, "pi": law.pi}
    return {"mats": law.mats}
