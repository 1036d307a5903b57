"""SIGReg: the sliced Epps–Pulley statistic as LeJEPA computes it on a batch (docs/theory.md §7).

For one projected sample ``x_1..x_N`` (the embeddings times a unit direction a),
with knots ``t_k`` on ``[0, t_max]`` (LeJEPA: 17 knots on [0, 3], spacing Δ) and
the trapezoid weights doubled by the symmetry ``t ↦ −t``,

    w_k = Δ · exp(−t_k²/2) · c_k,   c_k = 1 at the two ends, 2 inside,
    C_k = mean_n cos(t_k x_n),      S_k = mean_n sin(t_k x_n),
    T   = N · Σ_k w_k [(C_k − exp(−t_k²/2))² + S_k²],

a quadrature of ``N ∫_ℝ |φ_N(t) − e^{−t²/2}|² e^{−t²/2} dt`` (φ_N the empirical
characteristic function). SIGReg is the mean of T over M unit directions (and
over any leading axes, e.g. views: ``views="per_view"``), or, with ``views="pooled"``, T of
the V views' rows pooled into one sample of V·N rows (:func:`pool_views`; the N that
multiplies T is then V·N). Reference values: ``E[T] = Σ_k w_k (1 − e^{−t_k²})
≈ 1.0525`` for N(0, 1) data at every N, and ``T = N · Σ_k w_k (1 − e^{−t_k²/2})² ≈ 0.402·N``
for a collapsed batch.

Every function takes arrays of any array-API library (numpy, JAX inside
jit/grad/vmap, torch with autograd) and computes in that library; none imports
torch or jax. Memory: the phases ``t_k x`` form an ``(…, N, M, K)`` array.

    >>> import numpy as np
    >>> A = draw_directions(4, 8, seed=0, step=0)
    >>> round(float(sigreg(np.zeros((10, 4)), A)) / 10, 6)  # collapse: Σ_k w_k (1 − e^{−t_k²/2})²
    0.402048
"""

from __future__ import annotations

from typing import Any, Callable, Literal, NamedTuple

import numpy as np
from array_api_compat import array_namespace, device as array_device

from prhsim.objectives._arrays import like, upcast

#: LeJEPA's quadrature: 17 knots on [0, 3].
KNOTS = 17
T_MAX = 3.0

Reduce = Callable[[Any], Any]
#: How SIGReg treats V views (axis −3 of the embeddings): the mean of a statistic per view (LeJEPA's minimal code,
#: prhsim's default), or one statistic of all views' rows pooled (stable-pretraining's LeJEPA).
ViewPooling = Literal["per_view", "pooled"]
VIEW_POOLINGS: tuple[str, ...] = ("per_view", "pooled")


class Quadrature(NamedTuple):
    """Knots ``t`` (K,) and doubled trapezoid weights ``w`` (K,) of the Epps–Pulley integral."""

    t: Any
    w: Any


def epps_pulley_quadrature(*, knots: int = KNOTS, t_max: float = T_MAX, xp: Any = None,
                           dtype: Any = None, device: Any = None) -> Quadrature:
    """``t_k = k·Δ`` on ``[0, t_max]`` (Δ = t_max/(knots−1)) and ``w_k = Δ·exp(−t_k²/2)·c_k``.

    ``c_k`` is 1 at the two ends and 2 inside: the trapezoid rule on ``[0, t_max]``
    doubled because the integrand is even in t (docs/theory.md §7).

        >>> q = epps_pulley_quadrature()
        >>> q.t.shape, float(q.t[-1]), float(q.w[0])
        ((17,), 3.0, 0.1875)
    """
    if int(knots) != knots or knots < 2:
        raise ValueError(f"knots must be an integer >= 2, got {knots}")
    if not t_max > 0:
        raise ValueError(f"t_max must be positive, got {t_max}")
    t = np.linspace(0.0, float(t_max), int(knots))
    c = np.full(int(knots), 2.0)
    c[0] = c[-1] = 1.0
    w = (t[1] - t[0]) * np.exp(-t**2 / 2) * c
    if xp is None or xp is np:
        dt = np.float64 if dtype is None else dtype
        return Quadrature(t.astype(dt), w.astype(dt))
    return Quadrature(xp.asarray(t, dtype=dtype, device=device), xp.asarray(w, dtype=dtype, device=device))


def draw_directions(dim: int, num: int, *, seed: int, step: int = 0, xp: Any = None,
               device: Any = None, dtype: Any = None) -> Any:
    """M = ``num`` unit directions (columns of a ``(dim, num)`` array): Gaussian columns, normalised.

    Drawn with numpy's Generator seeded by ``(seed, step)`` in float64, then
    converted with ``xp.asarray``: every process and every library gets the same
    directions for the same ``(seed, step)`` (LeJEPA resamples them every step).
    Draw them outside a jitted function (seed and step are Python ints) and pass
    them in. ``dtype`` defaults to float64 for numpy and to the namespace's
    default for ``xp.asarray`` otherwise; normalising in float64 first avoids the
    division by zero that normalising in bfloat16 can hit.

        >>> A = draw_directions(3, 5, seed=1, step=2)
        >>> A.shape, bool(np.allclose(np.linalg.norm(A, axis=0), 1.0))
        ((3, 5), True)
    """
    for name, value in (("dim", dim), ("num", num)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value}")
    for name, value in (("seed", seed), ("step", step)):
        if int(value) != value or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value}")
    rng = np.random.default_rng([int(seed), int(step)])
    A = rng.standard_normal((int(dim), int(num)))
    A /= np.linalg.norm(A, axis=0, keepdims=True)
    if xp is None or xp is np:
        return A if dtype is None else A.astype(dtype)
    return xp.asarray(A, dtype=dtype, device=device)


def _identity(cs: Any) -> Any:
    return cs


def epps_pulley(x: Any, *, n_total: int | None = None, reduce: Reduce | None = None,
                knots: int = KNOTS, t_max: float = T_MAX) -> Any:
    """The Epps–Pulley statistic T of each column of projections ``x`` (…, N, M) → (…, M).

    ``T = n_total · Σ_k w_k [(C_k − e^{−t_k²/2})² + S_k²]`` with ``C_k, S_k`` the
    means of ``cos(t_k x), sin(t_k x)`` over the N axis (docs/theory.md §7).

    Args:
        x: projected samples, N along axis −2 (one column per direction).
        n_total: the N that multiplies the statistic; defaults to the local N.
            A distributed caller passes the global batch size.
        reduce: applied to the stacked batch means ``(C, S)`` (shape (2, …, M, K))
            before the statistic; identity by default. A distributed caller passes
            an autograd-aware all-reduce *mean* across processes, so T is that of
            the global batch (a plain all-reduce leaves gradients 1/world_size too
            small): in torch ``lambda cs: torch.distributed.nn.functional.all_reduce(cs)
            / world_size``, in JAX ``lambda cs: jax.lax.pmean(cs, axis_name)``.
        knots, t_max: the quadrature (:func:`epps_pulley_quadrature`).

    16-bit float inputs are cast to float32 first, and the result is float32.
    """
    xp, x = upcast(x)
    dtype = x.dtype
    if x.ndim < 2:
        raise ValueError(f"projections must have shape (..., N, M), got {x.shape}")
    n = x.shape[-2] if n_total is None else n_total
    t, w = epps_pulley_quadrature(knots=knots, t_max=t_max, xp=xp, dtype=dtype, device=array_device(x))
    phase = x[..., None] * t  # (…, N, M, K)
    cs = xp.stack([xp.mean(xp.cos(phase), axis=-3), xp.mean(xp.sin(phase), axis=-3)])
    cs = (reduce or _identity)(cs)
    gauss = xp.exp(-(t * t) / 2)
    return n * xp.sum(w * ((cs[0] - gauss) ** 2 + cs[1] ** 2), axis=-1)


def project(embeddings: Any, directions: Any) -> Any:
    """``embeddings @ directions`` (…, N, D) × (D, M) → (…, N, M), in the statistic's compute dtype.

    16-bit inputs are cast to float32 before the product; ``directions`` are
    converted to the embeddings' library, device and compute dtype (a numpy
    array of directions may be used with any library).
    """
    _, embeddings = upcast(embeddings)
    A = like(directions, embeddings)
    if A.ndim != 2 or A.shape[0] != embeddings.shape[-1]:
        raise ValueError(f"directions must have shape ({embeddings.shape[-1]}, M), got {tuple(A.shape)}")
    return embeddings @ A


def pool_views(embeddings: Any, n_total: int | None = None) -> tuple[Any, int | None]:
    """The V views of ``embeddings`` (…, V, N, D) pooled into one sample (…, V·N, D), and the N that multiplies the
    statistic of the pooled sample (``V · n_total`` when a distributed caller gives its global N per view)."""
    xp = array_namespace(embeddings)
    if embeddings.ndim < 3:
        raise ValueError(f"pooled views need embeddings of shape (..., V, N, D), got {tuple(embeddings.shape)}")
    *lead, v, n, d = embeddings.shape
    pooled = xp.reshape(embeddings, (*lead, v * n, d))
    return pooled, None if n_total is None else v * n_total


def check_view_pooling(views: Any) -> str:
    """``views`` if it is one of :data:`VIEW_POOLINGS`, else a one-line ValueError."""
    if views not in VIEW_POOLINGS:
        raise ValueError(f"views must be one of {', '.join(VIEW_POOLINGS)}, got {views!r}")
    return views


def sigreg(embeddings: Any, directions: Any, *, n_total: int | None = None, reduce: Reduce | None = None,
           knots: int = KNOTS, t_max: float = T_MAX, views: ViewPooling = "per_view") -> Any:
    """SIGReg: ``mean`` over the M directions (and leading axes) of T of the projections.

    ``SIGReg(E, A) = mean_{…, j} T(E a_j)`` for embeddings (…, N, D) and unit
    directions A (D, M) (docs/theory.md §7); see :func:`epps_pulley` for T,
    ``n_total`` and ``reduce``. ``views="pooled"`` first pools axis −3 (V views of
    (…, V, N, D) embeddings) into one sample of V·N rows (:func:`pool_views`). Rotating both sides leaves it unchanged:
    ``sigreg(E Q, Qᵀ A) = sigreg(E, A)``; averaged over random directions it is
    O(D)-invariant.

        >>> rng = np.random.default_rng(0)
        >>> value = sigreg(rng.standard_normal((512, 8)), draw_directions(8, 64, seed=0))
        >>> 0.5 < float(value) < 2.0  # E[T] ≈ 1.05 for N(0, I) embeddings
        True
    """
    if check_view_pooling(views) == "pooled":
        embeddings, n_total = pool_views(embeddings, n_total)
    x = project(embeddings, directions)
    xp = array_namespace(x)
    return xp.mean(epps_pulley(x, n_total=n_total, reduce=reduce, knots=knots, t_max=t_max))
