"""How it learns: the learner seam and the SGD learners that reach the closed forms.

The :class:`Learner` protocol and :class:`Representation`, the closed-form
learner, the JAX and torch learners on tables and MLPs, their evaluation
against the closed form, the text learners, the caption decoder and the exact
log-bilinear next-token fit (docs/theory.md §1, §5, §7).
"""

from prhsim.learners._encoders import (
    Encoder as Encoder,
    mlp_encoder as mlp_encoder,
    observation_inputs as observation_inputs,
    tabular_encoder as tabular_encoder,
)
from prhsim.learners._jax import SGDLearner as SGDLearner, train as train
from prhsim.learners._train_config import EVAL_SAMPLE as EVAL_SAMPLE, TrainConfig as TrainConfig
from prhsim.learners._train_parts import TrainResult as TrainResult
from prhsim.learners._evaluate import (
    LearnedEvaluation as LearnedEvaluation,
    SampledEvaluation as SampledEvaluation,
    SeedSpread as SeedSpread,
    evaluate_learned as evaluate_learned,
    evaluate_sampled as evaluate_sampled,
    seed_spread as seed_spread,
)
from prhsim.learners._optimiser import Optimiser as Optimiser
from prhsim.learners._convergence import (
    CurveRate as CurveRate,
    EigenResidual as EigenResidual,
    StopReport as StopReport,
    curve_rate as curve_rate,
    eigen_residual as eigen_residual,
    heavy_ball as heavy_ball,
)
from prhsim.learners._learner import (
    ClosedFormLearner as ClosedFormLearner,
    Learner as Learner,
    Representation as Representation,
)
from prhsim.learners._log_bilinear import (
    LogBilinearFit as LogBilinearFit,
    fit_log_bilinear as fit_log_bilinear,
    whitened_deviation as whitened_deviation,
)
from prhsim.learners._text_encoder import token_one_hot as token_one_hot
from prhsim.learners._text_learners import (
    TEXT_LEARNERS as TEXT_LEARNERS,
    TEXT_TASKS as TEXT_TASKS,
    TextConfig as TextConfig,
    TextResult as TextResult,
    check_text_batches as check_text_batches,
    embed_captions as embed_captions,
    initial_text as initial_text,
    train_text as train_text,
)
from prhsim.learners._torch import TorchLearner as TorchLearner, train_torch as train_torch
from prhsim.learners._exact_law import exact_law as exact_law
from prhsim.learners._caption_decoder import CaptionDecoder as CaptionDecoder, DecoderConfig as DecoderConfig, check_decoder as check_decoder, decode_captions as decode_captions, train_caption_decoder as train_caption_decoder

from prhsim.learners._registry import LEARNERS as LEARNERS, SGD_OBJECTIVES as SGD_OBJECTIVES, LearnerKind as LearnerKind
from prhsim.learners._objectives import TrainingObjective as TrainingObjective
__all__ = [
    "EVAL_SAMPLE",
    "LEARNERS",
    "SGD_OBJECTIVES",
    "LearnerKind",
    "CaptionDecoder",
    "DecoderConfig",
    "decode_captions",
    "train_caption_decoder",
    "exact_law",
    "ClosedFormLearner",
    "CurveRate",
    "EigenResidual",
    "StopReport",
    "curve_rate",
    "eigen_residual",
    "heavy_ball",
    "Encoder",
    "LearnedEvaluation",
    "SampledEvaluation",
    "evaluate_sampled",
    "Learner",
    "LogBilinearFit",
    "Optimiser",
    "Representation",
    "SGDLearner",
    "SeedSpread",
    "TEXT_LEARNERS",
    "TrainingObjective",
    "TEXT_TASKS",
    "TextConfig",
    "TextResult",
    "TorchLearner",
    "TrainConfig",
    "TrainResult",
    "check_text_batches",
    "check_decoder",
    "embed_captions",
    "evaluate_learned",
    "fit_log_bilinear",
    "initial_text",
    "mlp_encoder",
    "observation_inputs",
    "seed_spread",
    "tabular_encoder",
    "token_one_hot",
    "train",
    "train_text",
    "train_torch",
    "whitened_deviation",
]
