"""What is checked and reported: theorem checks, the run, reports and figures."""

from prhsim.experiments._mismatch import KernelMismatch as KernelMismatch, kernel_mismatch as kernel_mismatch
from prhsim.experiments._rotation import (
    MergePrediction as MergePrediction,
    ModalityOutcome as ModalityOutcome,
    PairOutcome as PairOutcome,
    RotationUniqueness as RotationUniqueness,
    merge_rule as merge_rule,
    modality_outcome as modality_outcome,
    pair_outcome as pair_outcome,
    predicted_rho as predicted_rho,
    rotation_uniqueness as rotation_uniqueness,
)
from prhsim.experiments._plan import (
    LONG_CLASSES as LONG_CLASSES,
    RunPlan as RunPlan,
    Stage as Stage,
    plan_run as plan_run,
    time_class as time_class,
)
from prhsim.experiments.sweeps import SWEEPS
from prhsim.experiments.report import (
    render_report as render_report,
    results_document as results_document,
    write_outputs as write_outputs,
)
from prhsim.experiments._results import Check as Check, RunResult as RunResult, SweepResult as SweepResult
from prhsim.experiments._learning import LearnerError as LearnerError
from prhsim.experiments._run import (
    Setup as Setup,
    WorldBuildError as WorldBuildError,
    build as build,
    run as run_experiment,
    solve as solve,
)
from prhsim.experiments._caption_alignment import (
    CaptionAlignment as CaptionAlignment,
    CaptionTarget as CaptionTarget,
    caption_alignment as caption_alignment,
    caption_target as caption_target,
)

__all__ = [
    "bad_view_sweep",
    "LONG_CLASSES",
    "BadViewSweep",
    "build",
    "calibration_sweep",
    "CalibrationSweep",
    "caption_alignment",
    "caption_target",
    "CaptionAlignment",
    "captioning_curve",
    "captioning_setup",
    "CaptioningCurve",
    "CaptionScores",
    "CaptionTarget",
    "Check",
    "DEFAULT_LAMS",
    "designed_world",
    "gap_sensitivity",
    "GapSensitivity",
    "kernel_mismatch",
    "kernel_mismatch_sweep",
    "KernelMismatch",
    "KernelMismatchSweep",
    "LearnerError",
    "merge_rule",
    "MergePrediction",
    "modality_outcome",
    "ModalityOutcome",
    "metric_bridge",
    "MetricBridge",
    "ntp_ca_sweep",
    "NtpCaResult",
    "pair_free_sweep",
    "PairFreeResult",
    "PairFreeSample",
    "pair_outcome",
    "PairOutcome",
    "plan_run",
    "time_class",
    "predicted_rho",
    "render_report",
    "restricted_encoder",
    "RestrictedEncoder",
    "results_document",
    "rotation_uniqueness",
    "RotationUniqueness",
    "run_experiment",
    "RunPlan",
    "RunResult",
    "sample_efficiency",
    "SampleEfficiency",
    "sample_ratio_map",
    "SampleRatioMap",
    "Setup",
    "sigreg_weight_sweep",
    "solve",
    "Stage",
    "SweepResult",
    "WorldBuildError",
    "write_outputs",
]


#: The sweeps' library functions and results (each record's ``exports``), each imported from its sweep's module when
#: first used, so that a run (and ``import prhsim.experiments``) does not import every sweep.
_SWEEP_NAMES = {name: sweep.module for sweep in SWEEPS.values() for name in sweep.exports}


def __getattr__(name: str):
    module = _SWEEP_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'prhsim.experiments' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SWEEP_NAMES))
