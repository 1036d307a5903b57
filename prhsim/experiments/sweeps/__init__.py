"""The sweeps of ``prhsim sweep``: one module per sweep, one registry.

Each ``_x.py`` holds the sweep's library function and result, its ``Settings`` model,
``run(settings, say)`` (``say(message, done=None, total=None)``: its progress, counted in work
units where it loops over a grid), ``estimate(settings)`` (its rough time, before any work) and
``summary(result)``; each ``_x_figure.py`` draws its result.
:data:`SWEEPS` lists them: the command line, the CLI test and the docs' list come from it, so
a new sweep is its two modules and one line here. A record names its modules, which are
imported only when the sweep runs or draws. ``_caption_scores`` (the captioning sweep's scores)
and ``_sample_ratios`` (the sample-ratio reading of alignment curves) are libraries of sweeps,
not sweeps.

A sweep runs as the cells it declares (:mod:`._cells`) on an executor
(:mod:`._executors`: this process, local worker processes, or Ray), each finished cell kept in the
cell folder for a resume, under the cost plan of :mod:`._cost` (each running cell's share of the memory
limit); :mod:`._cell_table` writes one row per cell (``cells.csv``, ``cells.parquet``).
"""

from prhsim._extras import JAX_MODULES
from prhsim.experiments.sweeps._registry import (
    Estimate as Estimate,
    Flag as Flag,
    Sweep as Sweep,
    comma_list,
)
from prhsim.experiments.sweeps._cells import (
    SweepCell as SweepCell,
    CellStore as CellStore,
    resumed_settings as resumed_settings,
    settings_document as settings_document,
)
from prhsim.experiments.sweeps._cell_table import (
    cell_rows as cell_rows,
    csv_text as csv_text,
    write_parquet as write_parquet,
)
from prhsim.experiments.sweeps._cost import (
    SweepPlan as SweepPlan,
    plan_sweep as plan_sweep,
)
from prhsim.experiments.sweeps._executors import (
    EXECUTORS as EXECUTORS,
    CellError as CellError,
    SweepRun as SweepRun,
    run_sweep as run_sweep,
)

_S = "prhsim.experiments.sweeps."


#: Every sweep, in the order ``prhsim sweep --help`` lists them.
SWEEPS: dict[str, Sweep] = {s.name: s for s in (
    Sweep("bad-view", _S + "_bad_view", "BadViewSweepSettings", _S + "_bad_view_figure:bad_view_figure",
          "Bad views: the merge rule's predicted k_Z and rho_P against the closed form's, over eps.",
          smoke=('--set', 'eps_grid=[0.1, 0.5, 1.0]'),
          exports=('BadViewSweep', 'bad_view_sweep'),
          long=('world.size=4', 'world.objects=2')),
    Sweep("kernel-mismatch", _S + "_kernel_mismatch", "KernelMismatchSweepSettings",
          _S + "_kernel_mismatch_figure:kernel_mismatch_figure",
          "Kernel mismatch: observed drift against the Yu-Wang-Samworth and Davis-Kahan bounds.",
          smoke=('--set', 'worlds=2', '--set', 'perturbations=[1e-3, 1e-2]'),
          exports=('KernelMismatchSweep', 'kernel_mismatch_sweep'),
          long=('n=2000',)),
    Sweep("gap-sensitivity", _S + "_gap_sensitivity", "GapSensitivitySettings",
          _S + "_gap_sensitivity_figure:gap_figure",
          "Alignment error against the spectral gap; solvers disagree only at a tie.",
          smoke=('--set', 'gaps=[0.0, 0.01]'),
          exports=('GapSensitivity', 'gap_sensitivity'),
          long=('n=60', 'gaps=[0.0, 0.0005]')),
    Sweep("restricted-encoder", _S + "_restricted_encoder", "RestrictedEncoderSettings",
          _S + "_restricted_encoder_figure:restricted_figure",
          "Encoders linear in each rendering: how much Platonic alignment survives.",
          smoke=('--set', 'size=2'),
          exports=('RestrictedEncoder', 'restricted_encoder'),
          long=('size=4', 'objects=2')),
    Sweep("metric-bridge", _S + "_metric_bridge", "MetricBridgeSettings",
          _S + "_metric_bridge_figure:metric_bridge_figure",
          "The theory's rho_P against mutual k-NN, CKA, CKNNA and R@1 over controlled misalignment.",
          smoke=('--set', 'levels=4', '--set', 'samples=200'),
          exports=('MetricBridge', 'metric_bridge'),
          long=('size=4', 'objects=2')),
    Sweep("calibration", _S + "_calibration", "CalibrationSettings", _S + "_calibration_figure:calibration_figure",
          "Raw against permutation-calibrated alignment scores where the answer is known: uniform null "
          "p-values, good and bad views, and the width and layer-search confounders.",
          smoke=('--set', 'samples=64', '--set', 'permutations=19', '--set', 'n_seeds=6',
                 '--set', 'n_seeds_views=1', '--set', 'n_seeds_confounders=2', '--set', 'widths=[4, 16]',
                 '--set', 'depths=[1, 2]', '--set', 'knn_k=5', '--set', 'depth_width=4'),
          exports=('CalibrationSweep', 'calibration_sweep'),
          long=()),
    Sweep("sigreg-weight", _S + "_sigreg_weight", "SigregWeightSettings", _S + "_sigreg_weight_figure:sweep_figure",
          "SIGReg at every weight lam: collapse, distance to the closed form, cross-modal alignment. Any "
          "setting of prhsim run (world, modalities, views, training) applies; the default world is the "
          "30-state random world with two modalities and k = 2.",
          flags=(Flag("lam", "lams", "Weights lam to train at (default: 9 log-spaced from 1e-4 to 0.5).", comma_list,
                      "A,B,.."),),
          run_flags=("world", "modalities", "views", "eps", "k", "seed", "size", "objects", "n", "shape", "steps",
                     "seeds", "encoder", "memory-limit"),
          figure_file="sigreg_weight.png",
          requires=JAX_MODULES, extra="jax",
          smoke=('--lam', '0.01,0.1', '--steps', '50', '--seeds', '1', '--n', '12'),
          exports=('DEFAULT_LAMS', 'sigreg_weight_sweep'),
          long=()),
    Sweep("sample-efficiency", _S + "_sample_efficiency", "SampleEfficiencySettings",
          _S + "_sample_efficiency_figure:sample_efficiency_figure",
          "Good views, bad views and next-token prediction from finite samples: alignment with the pixel "
          "closed form against samples and tokens, and the sample ratios.",
          flags=(Flag("preset", "preset", "A named setting: paper-proportions (the world where the closed forms "
                      "stand nearest the paper's proportions); --set keys override it.", lambda value: f'"{value}"',
                      "NAME"),
                 Flag("seeds", "n_seeds", "Seeds per budget.", metavar="S"),
                 Flag("budgets", "budgets", "Training samples per run, comma-separated (e.g. 300,1000,3000).",
                      lambda value: "[" + value + "]", "N,N,..."),
                 Flag("world", "world.kind", "The world; only gridscene has a caption renderer. 'gridscene' keeps "
                      "the sweep's scene (4x4 grid, 2 objects, 2 shapes, 2 colours; --set world.size=… "
                      "changes it); any other kind is refused.",
                      lambda value: None if value == "gridscene" else f'"{value}"', "KIND")),
          requires=JAX_MODULES, extra="jax",
          smoke=('--budgets', '100,300', '--seeds', '1', '--set', 'steps=40', '--set', 'batch_size=64',
                 '--set', 'hidden=[16]', '--set', 'world.size=2', '--set', 'world.objects=1'),
          exports=('SampleEfficiency', 'sample_efficiency'),
          long=()),
    Sweep("sample-ratio", _S + "_sample_ratio", "SampleRatioSettings", _S + "_sample_ratio_figure:sample_ratio_figure",
          "A map of the predicted sample ratios (bad views and next-token prediction against good views) and of "
          "the closed forms' alignment over good views', over two properties of the captions (dependence, "
          "omission, redundancy); learners confirm chosen cells.",
          smoke=('--set', 'x_values=[0.0, 0.5]', '--set', 'y_values=[0.0, 1.0]', '--set', 'budgets=[20, 60]',
                 '--set', 'n_draws=2', '--set', 'k=4', '--set', 'world.size=2', '--set', 'world.objects=1',
                 '--set', 'min_span=5'),
          exports=('SampleRatioMap', 'sample_ratio_map'),
          long=('world.size=4', 'n_draws=20')),
    Sweep("ntp-ca", _S + "_ntp_ca", "NtpCaSettings", _S + "_ntp_ca_figure:ntp_ca_figure",
          "Next-token prediction: the whitened softmax optimum against correspondence analysis as the "
          "dependence strength sigma_1 shrinks.",
          smoke=('--set', 'strengths=[0.1, 1.0]', '--set', 'worlds=1'),
          exports=('NtpCaResult', 'ntp_ca_sweep'),
          long=('worlds=100', 'restarts=20')),
    Sweep("pair-free", _S + "_pair_free", "PairFreeSettings", _S + "_pair_free_figure:pair_free_figure",
          "Alignment without cross-modal pairs: the map between two modalities from unpaired samples "
          "(spectral matching with each modality's own pairs, iterative matching on features alone) "
          "against the gap, the sample size and eps.",
          smoke=('--set', 'gaps=[0.0, 0.07]', '--set', 'sample_sizes=[1000]', '--set', 'eps_grid=[1.0]',
                 '--set', 'n_seeds=1', '--set', 'n=50', '--set', 'base_samples=2000'),
          exports=('PairFreeResult', 'designed_world', 'pair_free_sweep'),
          long=()),
    Sweep("captioning", _S + "_captioning", "CaptioningSettings", _S + "_captioning_figure:captioning_figure",
          "Captioning through one rotation: a decoder trained on captions alone, the image side carried "
          "over by a rotation fitted on N_fit pairs (or none: the pair-free map).",
          requires=("jax", "optax", "sacrebleu", "pycocoevalcap"), extra="captioning",
          smoke=('--set', 'n_fits=[1, 5]', '--set', 'n_seeds=1', '--set', 'decoder_steps=50', '--set', 'images=20',
                 '--set', 'pair_free_samples=200', '--set', 'text="view"', '--set', 'world.size=3'),
          exports=('CaptioningCurve', 'CaptionScores', 'PairFreeSample', 'captioning_curve', 'captioning_setup'),
          long=('n_seeds=100', 'decoder_steps=20000')),
)}

__all__ = ["SWEEPS", "CellError", "CellStore", "EXECUTORS", "Estimate", "Flag", "Sweep", "SweepCell", "SweepPlan",
           "SweepRun", "cell_rows", "csv_text", "plan_sweep", "resumed_settings", "run_sweep", "settings_document",
           "write_parquet"]
