"""Population values of the second-order objectives for a feature table F (docs/theory.md §1).

These evaluate the losses through the kernel operator (``G = D^{1/2}F``), an
independent route from the eigenvalue formulas of :mod:`prhsim.optima._closed_form`:

* alignment ``L(F) = E_π‖f(z) − f(z')‖² = 2 tr(FᵀDF) − 2 tr(FᵀΠF) = 2 tr(GᵀG) − 2 tr(GᵀKG)``;
* spectral contrastive ``L_sc(F) = −2 E_π f(z)ᵀf(z') + E_{p⊗p}(f(z)ᵀf(z''))² = −2 tr(GᵀKG) + ‖GᵀG‖_F²``.
"""

from __future__ import annotations

import numpy as np

from prhsim.worlds import World


def _G_and_KG(world: World, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2 or F.shape[0] != world.n:
        raise ValueError(f"features must have shape ({world.n}, k), got {F.shape}")
    G = np.sqrt(world.p)[:, None] * F
    return G, world.kernel.matmat(G)


def alignment_loss(world: World, F: np.ndarray) -> float:
    """``E_π‖f(z) − f(z')‖² = 2 tr(GᵀG) − 2 tr(GᵀKG)`` (docs/theory.md §1.1)."""
    G, KG = _G_and_KG(world, F)
    return float(2.0 * np.sum(G * G) - 2.0 * np.sum(G * KG))


def spectral_contrastive_loss(world: World, F: np.ndarray) -> float:
    """``−2 tr(GᵀKG) + ‖GᵀG‖_F² = ‖K − GGᵀ‖_F² − ‖K‖_F²`` (docs/theory.md §1.3)."""
    G, KG = _G_and_KG(world, F)
    gram = G.T @ G
    return float(-2.0 * np.sum(G * KG) + np.sum(gram * gram))


def whitening_error(world: World, F: np.ndarray) -> float:
    """``‖FᵀDF − I‖_F``: how far F is from the constraint set."""
    F = np.asarray(F, dtype=np.float64)
    gram = F.T @ (np.asarray(world.p)[:, None] * F)
    return float(np.linalg.norm(gram - np.eye(F.shape[1])))
