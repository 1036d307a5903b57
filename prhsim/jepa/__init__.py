"""Deprecated: ``prhsim.jepa`` was split into :mod:`prhsim.objectives`, :mod:`prhsim.optima` and
:mod:`prhsim.learners` (and the emission world into :mod:`prhsim.worlds`).

Every name it exported still resolves here for one release, with a ``DeprecationWarning``
that names its new home.
"""

from __future__ import annotations

from prhsim._moved import forwarder

#: Old name -> (new package, name there).
MOVED: dict[str, tuple[str, str]] = {
    "AUTO_K_MAX": ("prhsim.optima", "AUTO_K_MAX"),
    "COLLAPSE_EP": ("prhsim.objectives", "COLLAPSE_EP"),
    "ClosedFormLearner": ("prhsim.learners", "ClosedFormLearner"),
    "Convention": ("prhsim.objectives", "Convention"),
    "CorrespondenceAnalysis": ("prhsim.optima", "CorrespondenceAnalysis"),
    "DENSE_UP_TO": ("prhsim.optima", "DENSE_UP_TO"),
    "EigenBasis": ("prhsim.optima", "EigenBasis"),
    "EmissionWorld": ("prhsim.worlds", "EmissionWorld"),
    "Encoder": ("prhsim.learners", "Encoder"),
    "FEATURE_LIMIT": ("prhsim.optima", "FEATURE_LIMIT"),
    "FactorSpectra": ("prhsim.optima", "FactorSpectra"),
    "GAP_TOL": ("prhsim.optima", "GAP_TOL"),
    "KroneckerBasis": ("prhsim.optima", "KroneckerBasis"),
    "LearnedEvaluation": ("prhsim.learners", "LearnedEvaluation"),
    "Learner": ("prhsim.learners", "Learner"),
    "LogBilinearFit": ("prhsim.learners", "LogBilinearFit"),
    "Optimum": ("prhsim.optima", "Optimum"),
    "Quadrature": ("prhsim.objectives", "Quadrature"),
    "Representation": ("prhsim.learners", "Representation"),
    "SGDLearner": ("prhsim.learners", "SGDLearner"),
    "SeedSpread": ("prhsim.learners", "SeedSpread"),
    "SpanOptimum": ("prhsim.optima", "SpanOptimum"),
    "TEXT_LEARNERS": ("prhsim.learners", "TEXT_TASKS"),  # good, bad, ntp: what it listed
    "TextConfig": ("prhsim.learners", "TextConfig"),
    "TextResult": ("prhsim.learners", "TextResult"),
    "TieWarning": ("prhsim.optima", "TieWarning"),
    "TorchLearner": ("prhsim.learners", "TorchLearner"),
    "TrainConfig": ("prhsim.learners", "TrainConfig"),
    "TrainResult": ("prhsim.learners", "TrainResult"),
    "VectorBasis": ("prhsim.optima", "VectorBasis"),
    "alignment_loss": ("prhsim.optima", "alignment_loss"),
    "choose_backend": ("prhsim.optima", "choose_backend"),
    "closed_form": ("prhsim.optima", "closed_form"),
    "correspondence_analysis": ("prhsim.optima", "correspondence_analysis"),
    "covariance": ("prhsim.objectives", "covariance"),
    "covariance_penalty": ("prhsim.objectives", "covariance_penalty"),
    "describe_tie": ("prhsim.optima", "describe_tie"),
    "draw_directions": ("prhsim.objectives", "draw_directions"),
    "embed_captions": ("prhsim.learners", "embed_captions"),
    "emission_world": ("prhsim.worlds", "emission_world"),
    "epps_pulley": ("prhsim.objectives", "epps_pulley"),
    "epps_pulley_quadrature": ("prhsim.objectives", "epps_pulley_quadrature"),
    "epps_pulley_torch": ("prhsim.objectives", "epps_pulley_torch"),
    "evaluate_learned": ("prhsim.learners", "evaluate_learned"),
    "fit_log_bilinear": ("prhsim.learners", "fit_log_bilinear"),
    "initial_text": ("prhsim.learners", "initial_text"),
    "invariance": ("prhsim.objectives", "invariance"),
    "kronecker_top": ("prhsim.optima", "kronecker_top"),
    "lejepa_loss": ("prhsim.objectives", "lejepa_loss"),
    "mlp_encoder": ("prhsim.learners", "mlp_encoder"),
    "next_token_cross_entropy": ("prhsim.objectives", "next_token_cross_entropy"),
    "next_token_optimum": ("prhsim.optima", "next_token_optimum"),
    "observation_inputs": ("prhsim.learners", "observation_inputs"),
    "pairwise_invariance": ("prhsim.objectives", "pairwise_invariance"),
    "pick_k": ("prhsim.optima", "pick_k"),
    "pmi_proxy": ("prhsim.optima", "pmi_proxy"),
    "population_epps_pulley": ("prhsim.objectives", "population_epps_pulley"),
    "population_sigreg": ("prhsim.objectives", "population_sigreg"),
    "project": ("prhsim.objectives", "project"),
    "seed_spread": ("prhsim.learners", "seed_spread"),
    "sigreg": ("prhsim.objectives", "sigreg"),
    "sigreg_torch": ("prhsim.objectives", "sigreg_torch"),
    "span_optimum": ("prhsim.optima", "span_optimum"),
    "spectral_contrastive": ("prhsim.objectives", "spectral_contrastive"),
    "spectral_contrastive_loss": ("prhsim.optima", "spectral_contrastive_loss"),
    "spectral_contrastive_optimum": ("prhsim.optima", "spectral_contrastive_optimum"),
    "tabular_encoder": ("prhsim.learners", "tabular_encoder"),
    "token_one_hot": ("prhsim.learners", "token_one_hot"),
    "top_eigenpairs": ("prhsim.optima", "top_eigenpairs"),
    "train": ("prhsim.learners", "train"),
    "train_text": ("prhsim.learners", "train_text"),
    "train_torch": ("prhsim.learners", "train_torch"),
    "whiten": ("prhsim.objectives", "whiten_batch"),
    "whitened_alignment": ("prhsim.objectives", "whitened_alignment"),
    "whitened_deviation": ("prhsim.learners", "whitened_deviation"),
    "whitened_invariance": ("prhsim.objectives", "whitened_invariance"),
    "whitened_optimum": ("prhsim.optima", "whitened_optimum"),
    "whitening_error": ("prhsim.optima", "whitening_error"),
}


__getattr__ = forwarder("prhsim.jepa", MOVED.get)


def __dir__() -> list[str]:
    return sorted(MOVED)
