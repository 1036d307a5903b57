"""The training losses of the SGD learners, written once against the array API (docs/theory.md §1.1, §7).

:func:`make_loss` composes the objectives of this package into
``loss(params, step, shared) -> scalar``; the JAX learner and the torch loop call
the very same function on their own arrays (``apply`` is the encoder's forward pass).

Minibatch (B sampled pairs ``(z_n, z'_n) ~ π``, embeddings a, b):

* ``whiten``: :func:`prhsim.objectives.whitened_invariance` of (a, b): the two views pooled
  into 2B rows, whitened with that pooled batch's moments (one affine map for both
  views), scored by the pairwise invariance; ``tr(C⁻¹Δ)``, no ``eigh``.
* ``sigreg``: :func:`prhsim.objectives.lejepa_loss` of the (2, B, k) stack (batch SIGReg ≈ B·EP).

Exact (every pair of π, no sampling noise): the population moments
``C = E_p x xᵀ`` and ``A = E_π x(z) x(z')ᵀ`` of the embeddings of every state
(x = f − μ_p when centred), A computed either from the list of Π's positive pairs
(``A = Σ_i π_i x_{r_i} x_{c_i}ᵀ``) or, for a product world, factor by factor
(``ΠX = (⊗_f Π_f) X``, each factor applied along its own axis of X reshaped to the
factor shape; π is never formed):

* ``whiten``: :func:`prhsim.objectives.whitened_alignment` ``2 tr(C⁻¹(C − A)) = E_π‖f̃(z) − f̃(z')‖²``;
  on a table its minimum is ``L* = 2 Σ_{i≤k}(1 − μ_i)``.
* ``sigreg``: invariance ``(tr C − tr A)/2 = E_π‖f(z) − f(z')‖²/4`` (uncentred moments; the
  value :func:`prhsim.objectives.invariance` has on two views) and the regulariser
  ``nominal_n · population_sigreg(F, p, directions)``. The factor ``nominal_n`` (the
  configured batch size B) is the N of the batch statistic, whose expectation is about
  N·EP: so λ weighs the regulariser the same way in both data modes (in §7's additive
  terms, ``β = 4λ·nominal_n``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Literal, NamedTuple

import numpy as np
import scipy.sparse as sp
from array_api_compat import array_namespace

from prhsim._budget import FLOAT, ensure_fits
from prhsim.objectives import Dims
from prhsim.objectives import Convention, lejepa_loss
from prhsim.objectives import population_sigreg
from prhsim.objectives import whitened_alignment, whitened_invariance
from prhsim.worlds import World
from prhsim.learners._registry import SGD_OBJECTIVES

SGDObjective = Literal["whiten", "sigreg"]
Data = Literal["exact", "minibatch"]
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


def covariance_precondition(centred: bool) -> Callable[[Any, Any, Any], Any]:
    """``precondition(grads, params, shared)`` for a table on the exact whitened loss (docs/theory.md §1.5).

    The gradient of ``2 tr(C⁻¹(C − A))`` in the table F is ``∇ = −4(J X C⁻¹ − P X C⁻¹AC⁻¹)``
    (X = F − 1pᵀF when centred); the preconditioned gradient ``¼ P⁻¹ ∇ C = −(TX − X C⁻¹A)``
    (T = P⁻¹J) is minus the eigen-residual, so a step of size 1 is one step of subspace
    iteration and heavy-ball momentum accelerates it. States with p = 0 get no step.
    """

    def precondition(grads: Any, params: Any, shared: Any) -> Any:
        F = params["table"]
        xp = array_namespace(F)
        p = shared["p"]
        X = F - p @ F if centred else F
        C = xp.matrix_transpose(X) @ (p[:, None] * X)
        inv_p = xp.where(p > 0, 1.0 / xp.where(p > 0, p, 1.0), 0.0)
        return {"table": 0.25 * (inv_p[:, None] * grads["table"]) @ C}

    return precondition


def combine(inv: Any, reg: Any, lam: Any, convention: Convention) -> Any:
    """``λ·reg + (1 − λ)·inv`` ("lejepa") or ``inv + λ·reg`` ("additive"), as :func:`prhsim.objectives.lejepa_loss`."""
    return lam * reg + (1.0 - lam) * inv if convention == "lejepa" else inv + lam * reg


def make_loss(objective: SGDObjective, data: Data, *, centred: bool, convention: Convention,
              apply: Callable[[Any, Any], Any], factor_shape: tuple[int, ...] | None = None,
              dims: Dims = "sum", rendered: bool = False) -> Callable[[Any, Any, Any], Any]:
    """``loss(params, step, shared) -> scalar`` for one seed (see the module docstring).

    ``shared`` holds the inputs of every state ("inputs"), λ ("lam") and, in exact mode,
    the law p ("p"), the nominal batch size ("nominal_n") and π (:func:`exact_tables`;
    for a factor law, its shape is ``factor_shape``, static under jit); ``step`` holds the step's sampled
    states ("z", "z2") in minibatch mode and its SIGReg directions ("dirs"). ``dims`` is SIGReg's
    invariance convention ("mean" divides the squared norm by k, as LeJEPA's code does). ``rendered``:
    the minibatch's inputs come with the step ("x", "x2": the observations of "z" and "z2"), not
    from a table of every state.
    """
    if objective not in SGD_OBJECTIVES or data not in ("exact", "minibatch") or dims not in ("sum", "mean"):
        raise ValueError(f"unknown objective, data mode or dims: {objective!r}, {data!r}, {dims!r}")

    def exact(params: Any, step: Any, shared: Any) -> Any:
        E = apply(params, shared["inputs"])  # (n, k): every state
        if objective == "whiten":
            return whitened_alignment(*exact_moments(E, shared, centred=centred, factor_shape=factor_shape))
        C, A = exact_moments(E, shared, centred=False, factor_shape=factor_shape)
        xp = array_namespace(E)
        inv = (xp.sum(xp.linalg.diagonal(C)) - xp.sum(xp.linalg.diagonal(A))) / 2.0
        if dims == "mean":
            inv = inv / E.shape[-1]
        reg = shared["nominal_n"] * population_sigreg(E, shared["p"], step["dirs"])
        return combine(inv, reg, shared["lam"], convention)

    def minibatch(params: Any, step: Any, shared: Any) -> Any:
        if rendered:
            a, b = apply(params, step["x"]), apply(params, step["x2"])
        else:
            inputs = shared["inputs"]
            a, b = apply(params, inputs[step["z"]]), apply(params, inputs[step["z2"]])
        if objective == "sigreg":
            xp = array_namespace(a)
            return lejepa_loss(xp.stack([a, b]), step["dirs"], lam=shared["lam"], convention=convention, dims=dims)
        return whitened_invariance(a, b, centred=centred)

    return exact if data == "exact" else minibatch
