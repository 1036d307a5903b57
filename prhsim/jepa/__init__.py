"""What a learner converges to: closed-form optima of the second-order JEPA objectives,
and the batch objectives an SGD learner minimises (array-API: numpy, JAX, torch)."""

from prhsim.jepa._anticollapse import (
    covariance as covariance,
    covariance_penalty as covariance_penalty,
    spectral_contrastive as spectral_contrastive,
    whiten as whiten,
)
from prhsim.jepa._basis import EigenBasis as EigenBasis, VectorBasis as VectorBasis
from prhsim.jepa._closed_form import (
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
from prhsim.jepa._whitened_loss import (
    whitened_alignment as whitened_alignment,
    whitened_invariance as whitened_invariance,
)
from prhsim.jepa._invariance import invariance as invariance, pairwise_invariance as pairwise_invariance
from prhsim.jepa._encoders_jax import (
    Encoder as Encoder,
    mlp_encoder as mlp_encoder,
    observation_inputs as observation_inputs,
    tabular_encoder as tabular_encoder,
)
from prhsim.jepa._learn_jax import SGDLearner as SGDLearner, TrainConfig as TrainConfig, TrainResult as TrainResult
from prhsim.jepa._learn_jax import train as train
from prhsim.jepa._learned import (
    LearnedEvaluation as LearnedEvaluation,
    SeedSpread as SeedSpread,
    evaluate_learned as evaluate_learned,
    seed_spread as seed_spread,
)
from prhsim.jepa._learner import (
    ClosedFormLearner as ClosedFormLearner,
    Learner as Learner,
    Representation as Representation,
)
from prhsim.jepa._kronecker import (
    FactorSpectra as FactorSpectra,
    KroneckerBasis as KroneckerBasis,
    kronecker_top as kronecker_top,
)
from prhsim.jepa._lejepa import Convention as Convention, lejepa_loss as lejepa_loss
from prhsim.jepa._next_token import (
    CorrespondenceAnalysis as CorrespondenceAnalysis,
    EmissionWorld as EmissionWorld,
    LogBilinearFit as LogBilinearFit,
    correspondence_analysis as correspondence_analysis,
    emission_world as emission_world,
    fit_log_bilinear as fit_log_bilinear,
    next_token_cross_entropy as next_token_cross_entropy,
    pmi_proxy as pmi_proxy,
    whitened_deviation as whitened_deviation,
)
from prhsim.jepa._caption_optima import (
    SpanOptimum as SpanOptimum,
    next_token_optimum as next_token_optimum,
    span_optimum as span_optimum,
)
from prhsim.jepa._text_encoder import token_one_hot as token_one_hot
from prhsim.jepa._text_learners import (
    TEXT_LEARNERS as TEXT_LEARNERS,
    TextConfig as TextConfig,
    TextResult as TextResult,
    embed_captions as embed_captions,
    initial_text as initial_text,
    train_text as train_text,
)
from prhsim.jepa._objectives import (
    alignment_loss as alignment_loss,
    spectral_contrastive_loss as spectral_contrastive_loss,
    whitening_error as whitening_error,
)
from prhsim.jepa._population_sigreg import (
    COLLAPSE_EP as COLLAPSE_EP,
    population_epps_pulley as population_epps_pulley,
    population_sigreg as population_sigreg,
)
from prhsim.jepa._sigreg import (
    Quadrature as Quadrature,
    draw_directions as draw_directions,
    epps_pulley as epps_pulley,
    epps_pulley_quadrature as epps_pulley_quadrature,
    project as project,
    sigreg as sigreg,
)
from prhsim.jepa._sigreg_torch import epps_pulley_torch as epps_pulley_torch, sigreg_torch as sigreg_torch
from prhsim.jepa._train_torch import TorchLearner as TorchLearner, train_torch as train_torch
from prhsim.jepa._spectrum import (
    DENSE_UP_TO as DENSE_UP_TO,
    choose_backend as choose_backend,
    top_eigenpairs as top_eigenpairs,
)
