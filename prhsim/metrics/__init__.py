"""How two representations are compared.

Population metrics (p-weighted, the theory's): Procrustes ρ_P, principal angles s_Θ, CCA, the
coupled comparison of modal features. Sample metrics (unweighted over N rows, the PRH
literature's; numpy, torch or JAX inputs, computed where the data is): mutual and cycle
k-NN, CKNNA, linear / RBF / unbiased CKA, SVCCA, retrieval, and the PRH layer-pair protocol,
each under prhsim's definition or, with ``convention="prh"``, the PRH code's (``CONVENTIONS``), the PRH table of
many models (``prh_table``). Every sample metric is a record of one registry (``PRH_METRICS``, ``register_metric``)
that every consumer reads.
"""

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
from prhsim.metrics._convention import CONVENTIONS as CONVENTIONS
from prhsim.metrics._cknna import cknna as cknna
from prhsim.metrics._cknna_variants import cknna_agnostic as cknna_agnostic, cknna_biased as cknna_biased
from prhsim.metrics._knn import (
    cycle_knn as cycle_knn,
    knn_chance as knn_chance,
    knn_indices as knn_indices,
    mutual_knn as mutual_knn,
    shared_neighbours as shared_neighbours,
)
from prhsim.metrics._cka import linear_cka as linear_cka, rbf_cka as rbf_cka, unbiased_cka as unbiased_cka
from prhsim.metrics._registry import (
    METRICS as PRH_METRICS,
    Metric as Metric,
    metric_record as metric_record,
    register_metric as register_metric,
    reported_metrics as reported_metrics,
)
from prhsim.metrics._protocol import (
    ProtocolScore as ProtocolScore,
    clip_stack as clip_stack,
    prh_protocol as prh_protocol,
)
from prhsim.metrics._protocol_cost import protocol_seconds as protocol_seconds
from prhsim.metrics._retrieval import Retrieval as Retrieval, chance_recall as chance_recall, retrieval as retrieval
from prhsim.metrics._calibrate import (
    Calibration as Calibration,
    calibrate as calibrate,
    calibrated_protocol as calibrated_protocol,
    permutations_needed as permutations_needed,
    rejection_note as rejection_note,
    holm as holm,
)
from prhsim.metrics._svcca import svcca as svcca
from prhsim.metrics._prh_table import (
    PrhTable as PrhTable,
    TableCalibration as TableCalibration,
    entry_seconds as entry_seconds,
    prh_table as prh_table,
    protocol_entry as protocol_entry,
)
from prhsim.metrics._pair_free import (
    PairFreeMap as PairFreeMap,
    Whitening as Whitening,
    map_error as map_error,
    mapped_retrieval as mapped_retrieval,
    spectral_match as spectral_match,
)
from prhsim.metrics._pair_free_iterative import (
    IterativeMap as IterativeMap,
    chamfer_distance as chamfer_distance,
    haar_orthogonal as haar_orthogonal,
    iterative_match as iterative_match,
)

__all__ = [
    "CONVENTIONS",
    "canonical_correlations",
    "chamfer_distance",
    "chance_recall",
    "Calibration",
    "calibrate",
    "calibrated_protocol",
    "permutations_needed",
    "rejection_note",
    "holm",
    "cknna",
    "cknna_agnostic",
    "cknna_biased",
    "clip_stack",
    "Comparison",
    "conditional_moments",
    "coupled_comparison",
    "cycle_knn",
    "entry_seconds",
    "haar_orthogonal",
    "iterative_match",
    "IterativeMap",
    "knn_chance",
    "knn_indices",
    "linear_cka",
    "map_error",
    "Metric",
    "metric_record",
    "mapped_retrieval",
    "mutual_knn",
    "shared_neighbours",
    "nuisance_free_dimension",
    "orthogonal_map",
    "PairFreeMap",
    "PRH_METRICS",
    "prh_protocol",
    "prh_table",
    "PrhTable",
    "protocol_entry",
    "protocol_seconds",
    "principal_angles",
    "PrincipalAngles",
    "Procrustes",
    "procrustes",
    "ProtocolScore",
    "rbf_cka",
    "register_metric",
    "reported_metrics",
    "Retrieval",
    "retrieval",
    "spectral_match",
    "svcca",
    "TableCalibration",
    "unbiased_cka",
    "whiten",
    "Whitening",
]
