"""SIGReg in torch without the (…, N, M, K) phase array: the same value and gradient as :func:`sigreg`.

The array-API :func:`prhsim.objectives.sigreg` forms the phases ``t_k x`` of every
projection at every knot, an ``(…, N, M, K)`` array, and autograd keeps several
arrays of that size for the backward pass. Only the per-direction means

    C_k = mean_n cos(t_k x_n),   S_k = mean_n sin(t_k x_n)      (shape (…, M, K))

enter the statistic (docs/theory.md §7), and on LeJEPA's equispaced knots
``t_k = kΔ`` they follow from one complex exponential per sample,
``z_n = e^{iΔx_n}``, by the rotation ``e^{i t_{k+1} x} = e^{i t_k x}·z`` (the
angle-addition recurrence ``cos((k+1)θ) = cos kθ cos θ − sin kθ sin θ``,
``sin((k+1)θ) = sin kθ cos θ + cos kθ sin θ``). :func:`sigreg_torch` accumulates
``C_k + iS_k`` knot by knot, so only arrays of the projections' size (…, N, M)
are alive at once, and nothing of size N·M·K is stored.

The backward pass is closed-form. For the means of one direction,

    ∂C_k/∂x_n = −t_k sin(t_k x_n)/N,     ∂S_k/∂x_n = t_k cos(t_k x_n)/N,

so, given the gradients ``G^C_k, G^S_k`` of the loss with respect to
``C_k, S_k``,

    ∂L/∂x_n = (1/N) Σ_k t_k [G^S_k cos(t_k x_n) − G^C_k sin(t_k x_n)]
            = Re Σ_k q_k z_n^k,   q_k = (t_k/N)(G^S_k + i G^C_k),

a polynomial in ``z_n`` evaluated by Horner's rule (again only (…, N, M)
arrays). For the statistic itself, ``T = n_total Σ_k w_k [(C̄_k − e^{−t_k²/2})²
+ S̄_k²]`` with ``(C̄, S̄) = reduce(C, S)``, the gradients at the reduced means are
``2 n_total w_k (C̄_k − e^{−t_k²/2})`` and ``2 n_total w_k S̄_k`` (times the
upstream gradient over the number of averaged statistics); with the identity
reduce this is

    ∂T/∂x_n = (2 n_total / N) Σ_k w_k t_k [S_k cos(t_k x_n) − (C_k − e^{−t_k²/2}) sin(t_k x_n)].

In the backward pass the reduced means enter only through these gradients
at ``(C̄, S̄)``; the local means are not needed, and the local projections
(saved, O(N·M)) give the ``z_n`` again. Only the map from projections to
``(C, S)`` is a custom :class:`torch.autograd.Function`; the projection
``E @ A`` before it and the
reduce hook and the (…, M, K)-sized statistic after it are ordinary torch
autograd. So the gradient is that of :func:`sigreg` for *any* reduce hook: the
hook's own backward carries the gradient at the reduced means ``(C̄, S̄)`` back
to the local ``(C, S)``, and the closed form above turns it into the gradient of
the local projections.

Distributed use (docs/theory.md §7). Each process passes its local batch,
``n_total`` = the global batch size, and a reduce that returns the mean of
``(C, S)`` over processes. When every process adds the same SIGReg term to its
loss, the gradient at ``(C̄, S̄)`` depends on the reduced means only, so it is
the same on every process; what the reduce's backward must do is decide how
much of it reaches the local means:

* an autograd-aware all-reduce mean, as for :func:`sigreg`
  (``lambda cs: torch.distributed.nn.functional.all_reduce(cs) / world_size``):
  its backward sums the (equal) gradients of all processes and divides by
  world_size, which hands the full gradient at ``(C̄, S̄)`` to every process
  (that function warns that it is deprecated in recent torch);
* the same without any communication in the backward pass, because that
  gradient is already known everywhere: a reduce whose value is the mean and
  whose gradient is the identity,
  ``lambda cs: cs + (mean_over_processes(cs.detach()) - cs).detach()`` with
  any non-differentiable mean (e.g. ``torch.distributed.all_reduce`` of a copy,
  divided by world_size).

Either way each process gets world_size times its share of ∂T/∂x of the
global batch, and data-parallel training, which averages the parameter
gradients over processes, gets exactly the global gradient. A plain
(non-differentiable) all-reduce applied to ``cs.detach()`` gives zero gradient;
a reduce that differentiates as the mean (``(cs + others) / world_size`` with
``others`` detached: the test double in the tests) gives each process exactly
its share, so that the shares *sum* to the global gradient (and averaging them
over processes would be world_size times too small).

Numerics. ``Δ·x`` is rounded once; the rotation adds ≈ k rounding errors to
``e^{i t_k x}`` (magnitude and phase, no growth beyond linear since |z| = 1),
comparable to the rounding of ``t_k·x`` in the direct evaluation; Horner's rule
in the backward pass is likewise stable for |z| = 1. Measured on N = 64…4096,
D = 8…64, M = 16…256, Gaussian, skewed and nearly collapsed batches: float64
agrees with :func:`sigreg` to ≲ 5e-15 relative in value and gradient (the tests
ask 1e-10); float32 differs from the float64 value by ≲ 1e-7 relative and from
the float64 gradients by ≲ 2e-6 of their largest entry, the same as
:func:`sigreg` evaluated in float32 (the tests accept 1e-4). 16-bit inputs are
cast to float32 before the projection, and the result is float32, as in
:func:`sigreg`. Only first derivatives are available: the backward pass is not
itself differentiable, and the torch.func transforms (``vmap``, ``grad``) are
not supported (use :func:`sigreg` for those).

On CPU the recurrence runs over blocks of about :data:`BLOCK_ELEMENTS`
projections: the two complex working arrays of a block stay in cache, and each
operation on a block is below torch's parallel grain (32768 elements), so it
runs on the calling thread without an OpenMP region. (On a shared machine a
parallel region per operation, 2·K of them per pass and block, costs a
scheduler time slice whenever another process holds a core.) The recurrence
thus uses one core; the projection ``E @ A`` and its backward use torch's
threads. On other devices it runs over all projections at once (2·K kernels
per pass).

This module imports torch only when called, so ``prhsim`` imports without it.

    >>> import torch
    >>> from prhsim.objectives import draw_directions, sigreg
    >>> E = torch.randn(256, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> A = draw_directions(8, 16, seed=0)
    >>> abs(float(sigreg_torch(E, A)) - float(sigreg(E, A))) < 1e-12
    True
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from prhsim.objectives._sigreg import KNOTS, T_MAX, Reduce, epps_pulley_quadrature

#: Projections per block of the CPU recurrence: in cache, and below torch's parallel grain (see above).
BLOCK_ELEMENTS = 2**14


@functools.cache
def _characteristic_function() -> Any:
    """The autograd Function ``x (R, N) ↦ (C, S) (2, R, K)``, built on first use (imports torch)."""
    import torch
    from torch.autograd.function import once_differentiable

    def blocks(x: Any, delta: float) -> Any:
        """``(j, z)`` per block of rows ``j:j+len(z)`` of x, with ``z = e^{iΔx}`` of the block."""
        rows, n = x.shape
        step = max(1, BLOCK_ELEMENTS // max(n, 1)) if x.device.type == "cpu" else max(rows, 1)
        ones = torch.ones((min(step, rows), n), dtype=x.dtype, device=x.device)
        for j in range(0, rows, step):
            xb = x[j : j + step]
            yield j, torch.polar(ones[: xb.shape[0]], xb * delta)

    class EmpiricalCharacteristicFunction(torch.autograd.Function):
        """Means of ``cos(t_k x)``, ``sin(t_k x)`` over the last axis on the knots ``t_k = kΔ``."""

        @staticmethod
        def forward(ctx: Any, x: Any, delta: float, t: tuple[float, ...]) -> Any:
            rows, n = x.shape
            knots = len(t)
            sums = torch.empty((knots, rows), dtype=torch.complex128 if x.dtype == torch.float64
                               else torch.complex64, device=x.device)
            sums[0] = n
            for j, z in blocks(x, delta):
                w = z.clone()
                rows_j = slice(j, j + len(z))
                torch.sum(w, dim=-1, out=sums[1, rows_j])
                for k in range(2, knots):
                    w.mul_(z)
                    torch.sum(w, dim=-1, out=sums[k, rows_j])
            sums /= n
            ctx.save_for_backward(x)
            ctx.delta, ctx.t = delta, t
            return torch.stack([sums.real, sums.imag]).transpose(1, 2).contiguous()

        @staticmethod
        @once_differentiable
        def backward(ctx: Any, grad: Any) -> Any:
            (x,) = ctx.saved_tensors
            if not ctx.needs_input_grad[0]:
                return None, None, None
            rows, n = x.shape
            knots = len(ctx.t)
            t = torch.as_tensor(ctx.t, dtype=x.dtype, device=x.device)
            # q_k = (t_k / N)(G^S_k + i G^C_k), one row per knot: (K, R)
            q = (torch.complex(grad[1], grad[0]) * (t / n)).transpose(0, 1).contiguous()
            out = torch.empty_like(x)
            for j, z in blocks(x, ctx.delta):
                rows_j = slice(j, j + len(z))
                p = z * q[knots - 1, rows_j, None]
                for k in range(knots - 2, 0, -1):  # Horner: Σ_{k≥1} q_k z^k (t_0 = 0)
                    p.add_(q[k, rows_j, None])
                    p.mul_(z)
                out[rows_j] = p.real
            return out, None, None

    return EmpiricalCharacteristicFunction


def _compute_dtype(dtype: Any) -> Any:
    import torch

    if not dtype.is_floating_point:
        raise TypeError(f"expected real floating inputs, got {dtype}")
    return torch.float32 if torch.finfo(dtype).bits < 32 else dtype


def _statistic(xt: Any, lead: tuple[int, ...], *, n_total: int | None, reduce: Reduce | None,
               knots: int, t_max: float) -> Any:
    """T per direction, (…, M), from projections laid out (…, M, N) (contiguous)."""
    import torch

    m, n = xt.shape[-2], xt.shape[-1]
    t, w = epps_pulley_quadrature(knots=knots, t_max=t_max)
    delta = float(t_max) / (int(knots) - 1)
    cs = _characteristic_function().apply(xt.reshape(-1, n), delta, tuple(float(v) for v in t))
    cs = cs.reshape((2, *lead, m, int(knots)))
    if reduce is not None:
        cs = reduce(cs)
    w_ = torch.as_tensor(w, dtype=xt.dtype, device=xt.device)
    gauss = torch.as_tensor(np.exp(-(t * t) / 2), dtype=xt.dtype, device=xt.device)
    scale = n if n_total is None else n_total
    return scale * torch.sum(w_ * ((cs[0] - gauss) ** 2 + cs[1] ** 2), dim=-1)


def epps_pulley_torch(x: Any, *, n_total: int | None = None, reduce: Reduce | None = None,
                      knots: int = KNOTS, t_max: float = T_MAX) -> Any:
    """:func:`epps_pulley` of torch projections ``x`` (…, N, M) → (…, M), without the (…, N, M, K) array.

    Same arguments and value as :func:`prhsim.objectives.epps_pulley`; see the module
    docstring for the recurrence, the closed-form backward and ``reduce``.
    """
    x = x.to(_compute_dtype(x.dtype))
    if x.ndim < 2:
        raise ValueError(f"projections must have shape (..., N, M), got {tuple(x.shape)}")
    return _statistic(x.transpose(-1, -2).contiguous(), tuple(x.shape[:-2]), n_total=n_total,
                      reduce=reduce, knots=knots, t_max=t_max)


def sigreg_torch(embeddings: Any, directions: Any, *, n_total: int | None = None,
                 reduce: Reduce | None = None, knots: int = KNOTS, t_max: float = T_MAX) -> Any:
    """:func:`sigreg` for torch embeddings (…, N, D) and directions (D, M): same value and gradient, less memory.

    ``mean`` over the M directions (and leading axes, e.g. views) of the
    Epps–Pulley statistic T of the projections (docs/theory.md §7). Memory is
    O(N·M) per leading index instead of the O(N·M·K) of :func:`sigreg`; the
    backward pass is the closed form of the module docstring.

    Args:
        embeddings: a torch tensor (…, N, D); 16-bit floats are cast to float32.
        directions: (D, M) unit directions, a torch tensor (gradients flow to it
            if it requires them) or anything numpy can read (e.g.
            :func:`draw_directions`); converted to the embeddings' device and
            compute dtype.
        n_total: the N that multiplies the statistic; defaults to the local N.
        reduce: applied to the stacked means ``(C, S)`` of shape (2, …, M, K)
            before the statistic, with ordinary autograd through it; see the
            module docstring for what a distributed reduce must do.
        knots, t_max: the equispaced quadrature of :func:`epps_pulley_quadrature`.

    Returns:
        A 0-d tensor in the compute dtype (float32 for 16-bit inputs).
    """
    import torch

    dtype = _compute_dtype(embeddings.dtype)
    E = embeddings.to(dtype)
    if E.ndim < 2:
        raise ValueError(f"embeddings must have shape (..., N, D), got {tuple(E.shape)}")
    if isinstance(directions, torch.Tensor):
        A = directions.to(device=E.device, dtype=dtype)
    else:
        A = torch.as_tensor(np.asarray(directions), dtype=dtype, device=E.device)
    if A.ndim != 2 or A.shape[0] != E.shape[-1]:
        raise ValueError(f"directions must have shape ({E.shape[-1]}, M), got {tuple(A.shape)}")
    xt = torch.matmul(A.mT, E.mT)  # (…, M, N): one row of projections per direction
    return torch.mean(_statistic(xt, tuple(E.shape[:-2]), n_total=n_total, reduce=reduce,
                                 knots=knots, t_max=t_max))
