"""What is minimised: the JEPA objectives on a batch, written once against the array API.

The same functions run on numpy arrays, JAX arrays (inside ``jit``, ``grad`` and
``vmap``) and torch tensors (autograd): invariance, batch whitening and the
whitened losses, SIGReg (with a torch kernel and the population statistic of a
finite law), the LeJEPA combination and next-token cross-entropy
(docs/theory.md §1, §5, §7). Nothing here knows about worlds, optima or learners.
"""

from prhsim.objectives._anticollapse import (
    covariance as covariance,
    covariance_penalty as covariance_penalty,
    spectral_contrastive as spectral_contrastive,
    whiten_batch as whiten_batch,
)
from prhsim.objectives._whitened_loss import (
    whitened_alignment as whitened_alignment,
    whitened_invariance as whitened_invariance,
)
from prhsim.objectives._invariance import invariance as invariance, pairwise_invariance as pairwise_invariance
from prhsim.objectives._lejepa import Convention as Convention, lejepa_loss as lejepa_loss
from prhsim.objectives._next_token import next_token_cross_entropy as next_token_cross_entropy
from prhsim.objectives._population_sigreg import (
    COLLAPSE_EP as COLLAPSE_EP,
    population_epps_pulley as population_epps_pulley,
    population_sigreg as population_sigreg,
)
from prhsim.objectives._sigreg import (
    Quadrature as Quadrature,
    draw_directions as draw_directions,
    epps_pulley as epps_pulley,
    epps_pulley_quadrature as epps_pulley_quadrature,
    pool_views as pool_views,
    project as project,
    sigreg as sigreg,
    VIEW_POOLINGS as VIEW_POOLINGS,
    ViewPooling as ViewPooling,
)
from prhsim.objectives._sigreg_torch import epps_pulley_torch as epps_pulley_torch, sigreg_torch as sigreg_torch
from prhsim.objectives._lejepa import LAMBDA as LAMBDA
from prhsim.objectives._invariance import Dims as Dims

__all__ = [
    "Dims",
    "LAMBDA",
    "COLLAPSE_EP",
    "Convention",
    "Quadrature",
    "VIEW_POOLINGS",
    "ViewPooling",
    "covariance",
    "covariance_penalty",
    "draw_directions",
    "epps_pulley",
    "epps_pulley_quadrature",
    "epps_pulley_torch",
    "invariance",
    "lejepa_loss",
    "next_token_cross_entropy",
    "pairwise_invariance",
    "population_epps_pulley",
    "pool_views",
    "population_sigreg",
    "project",
    "sigreg",
    "sigreg_torch",
    "spectral_contrastive",
    "whiten_batch",
    "whitened_alignment",
    "whitened_invariance",
]
