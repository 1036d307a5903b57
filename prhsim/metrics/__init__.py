"""How two representations are compared: p-weighted Procrustes, principal angles, CCA, coupling."""

from prhsim.metrics._coupling import (
    Comparison as Comparison,
    conditional_moments as conditional_moments,
    coupled_comparison as coupled_comparison,
    nuisance_free_dimension as nuisance_free_dimension,
)
from prhsim.metrics._procrustes import (
    PrincipalAngles as PrincipalAngles,
    Procrustes as Procrustes,
    orthogonal_map as orthogonal_map,
    principal_angles as principal_angles,
    procrustes as procrustes,
)
from prhsim.metrics._whitening import canonical_correlations as canonical_correlations, whiten as whiten
