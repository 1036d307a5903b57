"""Kernel mismatch: how far two modalities' optima drift when their kernels differ (docs/theory.md §3).

For ``K_1, K_2`` on the same p, ``E = K_2 − K_1``, top-k eigenvectors ``U_1, U_2``
(of ``K_m − 3ssᵀ`` when centred; E is unchanged):

* Yu–Wang–Samworth (2015, Thm 2), with δ the gap of K_1 alone:
  ``‖sinΘ‖_F ≤ 2 min(√k‖E‖_op, ‖E‖_F)/δ`` and
  ``min_Q ‖U_1 − U_2 Q‖_F ≤ 2^{3/2} min(√k‖E‖_op, ‖E‖_F)/δ``.
* Davis–Kahan (1970), ``δ' = μ_k(K_2) − μ_{k+1}(K_1) > 0``: ``‖sinΘ‖_F ≤ ‖E U_2‖_F/δ'``;
  with Weyl, ``‖sinΘ‖_F ≤ min(√k‖E‖_op, ‖E‖_F)/(δ − ‖E‖_op)`` when ``‖E‖_op < δ``.
* Embedding: ``min_Q ‖F_1* − F_2* Q‖_D = min_Q ‖U_1 − U_2 Q‖_F ≤ √2 ‖sinΘ‖_F``.

A bound whose gap condition fails is reported as ``inf``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prhsim.optima import top_eigenpairs
from prhsim.metrics import principal_angles, procrustes
from prhsim.worlds import World

#: Largest world compared densely.
DENSE_LIMIT = 5_000
#: Observed drifts below this are rounding (e.g. the shared trivial eigenvector, uncentred k = 1).
ROUNDING = 1e-12


@dataclass(frozen=True)
class KernelMismatch:
    """Observed drift between two top-k optima and its bounds (docs/theory.md §3).

    Attributes:
        sin_theta: observed ``‖sinΘ‖_F`` (p-weighted principal angles of the optima).
        residual: observed ``min_Q ‖F_1* − F_2* Q‖_D``.
        e_op, e_fro: ``‖E‖_op`` and ``‖E‖_F``.
        delta: K_1's gap ``μ_k − μ_{k+1}``; delta_prime: ``μ_k(K_2) − μ_{k+1}(K_1)``.
        yws_sin, yws_residual: Yu–Wang–Samworth bounds on sinΘ and on the residual.
        dk_sin: classical Davis–Kahan bound ``‖E U_2‖_F/δ'``.
        weyl_sin: Davis–Kahan with Weyl, ``min(√k‖E‖_op, ‖E‖_F)/(δ − ‖E‖_op)``.
    """

    k: int
    centred: bool
    sin_theta: float
    residual: float
    e_op: float
    e_fro: float
    delta: float
    delta_prime: float
    yws_sin: float
    yws_residual: float
    dk_sin: float
    weyl_sin: float

    def ratios(self) -> dict[str, float]:
        """Observed / bound for each bound (0 where the bound is infinite or both are at rounding level)."""
        def r(obs: float, bound: float) -> float:
            if not np.isfinite(bound) or bound <= 0 or obs < ROUNDING:
                return 0.0
            return obs / bound
        return {"yws_sin": r(self.sin_theta, self.yws_sin), "yws_residual": r(self.residual, self.yws_residual),
                "dk_sin": r(self.sin_theta, self.dk_sin), "weyl_sin": r(self.sin_theta, self.weyl_sin),
                "sqrt2_translation": r(self.residual, np.sqrt(2) * self.sin_theta)}


def _dense_kernel(world: World) -> np.ndarray:
    if world.n > DENSE_LIMIT:
        raise ValueError(f"kernel_mismatch compares worlds densely, up to {DENSE_LIMIT} states; got {world.n}")
    return world.dense_kernel()


def kernel_mismatch(world_1: World, world_2: World, k: int, *, centred: bool = True) -> KernelMismatch:
    """Observed ``s_Θ`` and Procrustes residual between the two optima, beside the §3 bounds."""
    if world_1.n != world_2.n or not np.allclose(world_1.p, world_2.p, rtol=1e-10, atol=1e-14):
        raise ValueError("kernel_mismatch needs two worlds on the same states with the same p")
    p = np.asarray(world_1.p)
    E = _dense_kernel(world_2) - _dense_kernel(world_1)
    basis_1 = top_eigenpairs(world_1, k + 1, centred=centred, backend="dense")
    basis_2 = top_eigenpairs(world_2, k + 1, centred=centred, backend="dense")
    F1, F2 = basis_1.evaluate()[:, :k], basis_2.evaluate()[:, :k]
    U2 = np.sqrt(p)[:, None] * F2
    e_op = float(np.max(np.abs(np.linalg.eigvalsh(E))))
    e_fro = float(np.linalg.norm(E))
    size = min(np.sqrt(k) * e_op, e_fro)
    delta = float(basis_1.values[k - 1] - basis_1.values[k])
    delta_prime = float(basis_2.values[k - 1] - basis_1.values[k])
    return KernelMismatch(
        k=k, centred=centred,
        sin_theta=principal_angles(F1, F2, p).sin_theta,
        residual=procrustes(F1, F2, p).residual,
        e_op=e_op, e_fro=e_fro, delta=delta, delta_prime=delta_prime,
        yws_sin=float(2 * size / delta) if delta > 0 else np.inf,
        yws_residual=float(2 ** 1.5 * size / delta) if delta > 0 else np.inf,
        dk_sin=float(np.linalg.norm(E @ U2)) / delta_prime if delta_prime > 0 else np.inf,
        weyl_sin=float(size / (delta - e_op)) if e_op < delta else np.inf,
    )
