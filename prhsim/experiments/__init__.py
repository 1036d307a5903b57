"""What is checked and reported: theorem checks, the run, reports and figures."""

from prhsim.experiments._mismatch import KernelMismatch as KernelMismatch, kernel_mismatch as kernel_mismatch
from prhsim.experiments._rotation import (
    MergePrediction as MergePrediction,
    RotationUniqueness as RotationUniqueness,
    merge_rule as merge_rule,
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
from prhsim.experiments.report import (
    render_report as render_report,
    results_document as results_document,
    write_outputs as write_outputs,
)
from prhsim.experiments._results import Check as Check, RunResult as RunResult, SweepResult as SweepResult
from prhsim.experiments.sweeps._sigreg_weight import DEFAULT_LAMS as DEFAULT_LAMS, sigreg_weight_sweep as sigreg_weight_sweep
from prhsim.experiments._learning import LearnerError as LearnerError
from prhsim.experiments._run import (
    Setup as Setup,
    WorldBuildError as WorldBuildError,
    build as build,
    run as run_experiment,
    solve as solve,
)
from prhsim.experiments.sweeps._metric_bridge import MetricBridge as MetricBridge, metric_bridge as metric_bridge
from prhsim.experiments.sweeps._calibration import (
    CalibrationSweep as CalibrationSweep,
    calibration_sweep as calibration_sweep,
)
from prhsim.experiments.sweeps._bad_view import BadViewSweep as BadViewSweep, bad_view_sweep as bad_view_sweep
from prhsim.experiments.sweeps._gap_sensitivity import GapSensitivity as GapSensitivity, gap_sensitivity as gap_sensitivity
from prhsim.experiments.sweeps._kernel_mismatch import (
    KernelMismatchSweep as KernelMismatchSweep,
    kernel_mismatch_sweep as kernel_mismatch_sweep,
)
from prhsim.experiments.sweeps._restricted_encoder import (
    RestrictedEncoder as RestrictedEncoder,
    restricted_encoder as restricted_encoder,
)
from prhsim.experiments._caption_alignment import (
    CaptionAlignment as CaptionAlignment,
    CaptionTarget as CaptionTarget,
    caption_alignment as caption_alignment,
    caption_target as caption_target,
)
from prhsim.experiments.sweeps._ntp_ca import NtpCaResult as NtpCaResult, ntp_ca_sweep as ntp_ca_sweep
from prhsim.experiments.sweeps._sample_efficiency import (
    SampleEfficiency as SampleEfficiency,
    sample_efficiency as sample_efficiency,
)
from prhsim.experiments.sweeps._pair_free import (
    PairFreeResult as PairFreeResult,
    designed_world as designed_world,
    pair_free_sweep as pair_free_sweep,
)
from prhsim.experiments.sweeps._captioning import (
    CaptioningCurve as CaptioningCurve,
    CaptionScores as CaptionScores,
    PairFreeSample as PairFreeSample,
    captioning_curve as captioning_curve,
    captioning_setup as captioning_setup,
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
    "metric_bridge",
    "MetricBridge",
    "ntp_ca_sweep",
    "NtpCaResult",
    "pair_free_sweep",
    "PairFreeResult",
    "PairFreeSample",
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
    "Setup",
    "sigreg_weight_sweep",
    "solve",
    "Stage",
    "SweepResult",
    "WorldBuildError",
    "write_outputs",
]
