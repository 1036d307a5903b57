"""What a learner converges to: closed forms of the second-order JEPA objectives.

Eigenbases and eigen-backends (dense, sparse, Kronecker, Lanczos), the whitened
and spectral-contrastive optima with their gaps and ties, the population
losses of a feature table and their factor-space twins, the caption optima and correspondence analysis,
and the linear class on caption features on N records or on the law (docs/theory.md §1, §5, §6).
"""

from prhsim.optima._basis import EigenBasis as EigenBasis, VectorBasis as VectorBasis
from prhsim.optima._closed_form import (
    AUTO_K_MAX as AUTO_K_MAX,
    FEATURE_LIMIT as FEATURE_LIMIT,
    GAP_TOL as GAP_TOL,
    Optimum as Optimum,
    TieWarning as TieWarning,
    closed_form as closed_form,
    describe_tie as describe_tie,
    pick_k as pick_k,
    spectral_contrastive_optimum as spectral_contrastive_optimum,
    whitened_optimum as whitened_optimum,
)
from prhsim.optima._factor_space import FactorFeatures as FactorFeatures, factor_comparison as factor_comparison
from prhsim.optima._kronecker import (
    FactorSpectra as FactorSpectra,
    KroneckerBasis as KroneckerBasis,
    kronecker_top as kronecker_top,
)
from prhsim.optima._correspondence import (
    CorrespondenceAnalysis as CorrespondenceAnalysis,
    correspondence_analysis as correspondence_analysis,
    pmi_proxy as pmi_proxy,
)
from prhsim.optima._caption_optima import (
    SpanOptimum as SpanOptimum,
    next_token_optimum as next_token_optimum,
    span_optimum as span_optimum,
)
from prhsim.optima._linear_captions import (
    CaptionMoments as CaptionMoments,
    LinearOptimum as LinearOptimum,
    combine as combine_moments,
    linear_optimum as linear_optimum,
    next_token_moments as next_token_moments,
    one_hot as one_hot,
    pooled_prefixes as pooled_prefixes,
    span_moments as span_moments,
)
from prhsim.optima._table_losses import (
    alignment_loss as alignment_loss,
    spectral_contrastive_loss as spectral_contrastive_loss,
    whitening_error as whitening_error,
)
from prhsim.optima._spectrum import (
    DENSE_UP_TO as DENSE_UP_TO,
    choose_backend as choose_backend,
    top_eigenpairs as top_eigenpairs,
)
from prhsim.optima._basis import SOLVER_THREADS_FROM as SOLVER_THREADS_FROM, solver_threads as solver_threads

__all__ = [
    "SOLVER_THREADS_FROM",
    "solver_threads",
    "AUTO_K_MAX",
    "CaptionMoments",
    "CorrespondenceAnalysis",
    "DENSE_UP_TO",
    "EigenBasis",
    "FEATURE_LIMIT",
    "FactorFeatures",
    "FactorSpectra",
    "GAP_TOL",
    "KroneckerBasis",
    "LinearOptimum",
    "linear_optimum",
    "next_token_moments",
    "factor_comparison",
    "Optimum",
    "SpanOptimum",
    "TieWarning",
    "VectorBasis",
    "alignment_loss",
    "choose_backend",
    "closed_form",
    "combine_moments",
    "correspondence_analysis",
    "describe_tie",
    "kronecker_top",
    "next_token_optimum",
    "one_hot",
    "pick_k",
    "pmi_proxy",
    "pooled_prefixes",
    "span_moments",
    "span_optimum",
    "spectral_contrastive_loss",
    "spectral_contrastive_optimum",
    "top_eigenpairs",
    "whitened_optimum",
    "whitening_error",
]
