"""The cost of a run, from its settings alone: refuse what cannot fit before anything is allocated.

A run holds, per modality, a world over ``Z x N_m`` (``n_m = |Z|·|N_m|`` states); its
closed form works in factor space (vectors over Z at most), while the table path
(``tables``) and the SGD learners hold tables of ``k + 1`` eigenfunctions over
``Z x N_m``; it checks up to 400,000 observations per modality for
injectivity (hashed keys, rendered in chunks); and it builds the world over Z and
solves its spectrum. :func:`plan_run` estimates the peak memory of
each stage (measured constants: a stage's peak is a small multiple of its
largest array) and a rough time class, and raises :class:`ResourceError` naming
the stage, its estimate, the limit and the setting to lower.
"""

from __future__ import annotations

from dataclasses import dataclass

from prhsim._budget import (
    FLOAT,
    LONG_CLASSES as LONG_CLASSES,
    TIME_CLASSES as TIME_CLASSES,
    ResourceError,
    current_memory_limit,
    format_bytes,
    time_class,
)
from prhsim.config import ConfigError, GridSceneWorld, RandomWorld, RunConfig
from prhsim.experiments._pair_metrics import SAMPLES as PAIR_SAMPLES
from prhsim.learners import EVAL_SAMPLE, LEARNERS, TrainConfig
from prhsim.optima import AUTO_K_MAX, DENSE_UP_TO, FEATURE_LIMIT
from prhsim.worlds import FULL_CHECK_LIMIT

#: Peak of the per-modality stages (closed form, loss, comparison) in feature tables of n_m x (k+1) floats.
TABLE_COPIES = 10
#: Peak of the factor-space closed form in vectors over Z (p_Z, the sampling law of the PRH metrics, its copies).
FACTOR_SPACE_COPIES = 4
#: Peak of the factor-space comparisons in (2m x 2m) float tables (the union Gram, its factor products,
#: coefficients); beside them three (n_f x 2m) column tables of the largest factor.
GRAM_COPIES = 8
#: The injectivity check's bookkeeping per observation checked (index, key, sort order, sorted key) in bytes,
#: and its rendered chunks: two chunks of RENDER_CHUNK observations, each with its rounded copy and hash words.
KEY_BYTES = 32
RENDER_CHUNK = 65_536
RENDER_COPIES = 3
#: Peak of building a dense random world, in n x n float tables (affinity, scaling, validation).
DENSE_WORLD_COPIES = 8
#: Bytes per state of a sparse walk world (COO arrays, CSR copies, validation).
SPARSE_BYTES_PER_STATE = 400
#: Memory a run needs whatever its size (the interpreter, numpy, scipy, matplotlib), added to every stage.
BASELINE_BYTES = 150e6
#: Factors up to this size are diagonalised densely (4 n² floats of workspace); larger ones by Lanczos.
DENSE_FACTOR_UP_TO = 2_000
#: Float operations per second assumed for the time class (a rough figure for one core).
FLOPS = 1e9
#: Peak of the PRH sample metrics of a pair in N x N float tables (similarity blocks, selections, kernels).
PAIR_METRIC_COPIES = 4
#: Seconds of one permutation of one pair's calibrated metrics (mutual k-NN and linear CKA) per sample row, measured on
#: a shared 2-core CPU: the default run with --calibrate 3000 (3 pairs of 2,000 rows, k = 32) took 2.8 s beyond the
#: uncalibrated run (1.2 s).
CALIBRATION_ROW_SECONDS = 1.6e-7
#: Peak of an SGD learner in tables of seeds x n_m x k floats (params, Adam's moments, gradients, features, copies).
LEARNER_TABLE_COPIES = 12
#: Float operations per weight of an MLP on rendered minibatches, per pair and step (forward and backward), for the
#: time class; a table's step is its objective's own (``TrainingObjective.step_flops``).
MLP_FLOPS_PER_WEIGHT = 6


@dataclass(frozen=True)
class Stage:
    """One stage of a run and the peak memory it needs."""

    what: str
    nbytes: float
    hint: str


@dataclass(frozen=True)
class RunPlan:
    """What a run will hold, estimated from its settings.

    Attributes:
        n_states: |Z|.
        modal_states: per modality, ``|Z|·|N_m|``.
        k_max: k, or the largest k ``auto`` may pick.
        stages: the stages with their peak memory.
        seconds: a rough estimate of the run's time.
        limit: the memory limit in force (bytes).
    """

    n_states: int
    modal_states: dict[str, int]
    k_max: int
    stages: tuple[Stage, ...]
    seconds: float
    limit: int

    @property
    def peak(self) -> Stage:
        """The stage that needs the most memory."""
        return max(self.stages, key=lambda s: s.nbytes)

    @property
    def peak_bytes(self) -> float:
        """The run's estimated peak: its largest stage plus the baseline every run needs."""
        return BASELINE_BYTES + self.peak.nbytes

    @property
    def time_class(self) -> str:
        """The rough class of :attr:`seconds` (:func:`time_class`)."""
        return time_class(self.seconds)

    def summary(self) -> str:
        """One line: sizes, the peak stage, the limit and the time class."""
        largest = max(self.modal_states.values())
        return (f"{self.n_states:,} states, up to {largest:,} modal states, k <= {self.k_max}; "
                f"peak memory about {format_bytes(self.peak_bytes)} ({self.peak.what}; limit "
                f"{format_bytes(self.limit)}); time: {self.time_class} (a rough class)")


def injectivity_bytes(rows: int, size: int) -> float:
    """Peak of the hashed injectivity check of ``rows`` observations of ``size`` bytes (a decision by
    parts, where the renderer declares them, needs less)."""
    return KEY_BYTES * float(rows) + 2.0 * min(RENDER_CHUNK, rows) * (RENDER_COPIES * size + FLOAT)


def _k_limit(config: RunConfig, n: int) -> int:
    return n - 2 if config.centred else n - 1


def _lanczos_bytes(n: float, m: int) -> float:
    """A Lanczos solve of m pairs: about 3 blocks of n x (4m + 24) floats (basis, matvecs, start)."""
    return 3 * FLOAT * n * (4 * m + 24)


def _world_stage(config: RunConfig, n: int, m: int) -> Stage:
    """Building the world over Z and solving its spectrum (and each modal world's factor spectra)."""
    w = config.world
    if isinstance(w, RandomWorld) and w.degree is None:
        return Stage(f"building a dense random world of {n:,} states", DENSE_WORLD_COPIES * FLOAT * float(n) ** 2,
                     w.hint())
    if isinstance(w, RandomWorld):
        return Stage(f"building a random world of {n:,} states",
                     SPARSE_BYTES_PER_STATE * float(n) * w.degree + _lanczos_bytes(n, m), w.hint())
    total = 0.0
    for size in w.factor_sizes:
        if size <= DENSE_FACTOR_UP_TO:
            total += 4 * FLOAT * float(size) ** 2
        else:
            total += SPARSE_BYTES_PER_STATE * float(size) + _lanczos_bytes(size, 2 * m)
    return Stage(f"building and diagonalising {w.describe()}", total, w.hint())


def _solve_seconds(config: RunConfig, n: int, m: int) -> float:
    """Building and diagonalising the world: Sinkhorn sweeps, dense eigh, or Lanczos.

    Lanczos needs about ``1/sqrt(relative gap)`` iterations; the walk worlds (ring, path,
    torus, grid) have gaps of order ``1/s²`` at the top of a factor of s states, so about
    s iterations; random worlds are well separated (a few hundred).
    """
    w = config.world
    if isinstance(w, RandomWorld):
        nnz = float(n) ** 2 if w.degree is None else float(n) * w.degree
        lanczos = 0.0 if n <= DENSE_UP_TO else 10.0 * (nnz + n * (4 * m + 24)) * 300
        return (50.0 * 10 * nnz + (float(n) ** 3 if n <= DENSE_UP_TO else 0.0) + lanczos) / FLOPS
    total = 0.0
    for size in w.factor_sizes:
        if size <= DENSE_FACTOR_UP_TO:
            total += 4.0 * float(size) ** 3
        else:
            total += 10.0 * float(size) * (4 * (2 * m) + 24) * size
    return total / FLOPS


def _learner_cost(config: RunConfig, objective: str, n_m: int, k: int, obs_bytes: int,
                  factors: int) -> tuple[float, float]:
    """Peak bytes and float operations of one SGD learner on one modal world (rough, for refusals and the time class)."""
    t = config.training
    if _renders(config, n_m):  # an MLP on rendered minibatches, evaluated on a sample: no table of every state
        chunk = max(1, t.steps // 50)  # the steps whose minibatches are rendered at once (the run's log_every)
        nbytes = 3 * FLOAT * float(EVAL_SAMPLE) * (obs_bytes + k * (t.n_seeds + 1)) \
            + 3 * FLOAT * float(t.n_seeds) * chunk * t.batch_size * 2 * obs_bytes
        widths = (obs_bytes, *TrainConfig.hidden, k)  # the MLP's layers (TrainConfig's default widths)
        per_step = MLP_FLOPS_PER_WEIGHT * 2.0 * t.batch_size * sum(a * b for a, b in zip(widths, widths[1:]))
        return nbytes, per_step * t.steps * t.n_seeds
    nbytes = LEARNER_TABLE_COPIES * FLOAT * float(t.n_seeds) * n_m * k
    if t.encoder == "mlp":
        nbytes += 3 * FLOAT * float(n_m) * obs_bytes
    record = LEARNERS[objective].objective
    exact = t.data == "exact" or (t.data == "auto" and record.auto_exact(n_m, t))
    per_step = record.step_flops("exact" if exact else "minibatch", n_m, k, factors, t.batch_size, t.num_directions)
    return nbytes, per_step * t.steps * t.n_seeds


def _renders(config: RunConfig, n_m: int) -> bool:
    """Whether the learners on a modal world of ``n_m`` states render minibatches of observations
    (an MLP above a feature table's size, :func:`prhsim.experiments._learning.encoder_for`)."""
    t = config.training
    return t.encoder in ("auto", "mlp") and n_m > FEATURE_LIMIT and t.data != "exact"


def plan_run(config: RunConfig) -> RunPlan:
    """Cost ``config`` before running it.

    Raises:
        ConfigError: k does not fit the world.
        ResourceError: a stage would need more memory than the limit, or a feature
            table more states than a run materialises; the message names the setting to lower.
    """
    w = config.world
    n = w.n_states
    limit = int(config.memory_limit_gb * 1e9) if config.memory_limit_gb else current_memory_limit()
    k_limit = _k_limit(config, n)
    if k_limit < 1:
        raise ConfigError(f"{w.describe()} has too few states for any k")
    if config.k == "auto":
        k_max = min(AUTO_K_MAX, k_limit) + (0 if config.centred else 1)
    else:
        if config.k > k_limit:
            raise ConfigError(f"k = {config.k} does not fit {w.describe()}: k must be at most {k_limit:,} "
                              f"({'centred' if config.centred else 'uncentred'}; one more eigenvalue is needed "
                              "for the gap); lower --k")
        k_max = config.k
    names = config.modality_names
    nuisance = w.nuisance_sizes(config.modalities)
    obs = w.observation_bytes(config.modalities)
    modal = {name: n * size for name, size in zip(names, nuisance)}
    m = k_max + 1
    drop = " or use fewer modalities (--modalities)" if isinstance(w, GridSceneWorld) and config.modalities > 1 else ""
    table_hint = f"{w.hint()}, or lower --k" if config.k != "auto" else w.hint()
    stages = [_world_stage(config, n, m)]
    seconds = 0.0
    rendering = bool(config.sgd_learners) and any(_renders(config, n_m) for n_m in modal.values())
    tables = config.tables or (bool(config.sgd_learners) and not rendering)
    if not tables:  # factor space: p_Z and the sampled rows of the PRH metrics, never a modal table
        stages.append(Stage(f"factor space: the law of Z ({n:,} states) and Gram matrices of {m} features",
                            FACTOR_SPACE_COPIES * FLOAT * float(n) + GRAM_COPIES * FLOAT * (2.0 * m) ** 2
                            + 3 * FLOAT * max(w.factor_sizes) * 2.0 * m,
                            table_hint))
    for name, n_m, size in zip(names, modal.values(), obs):
        if tables and n_m > FEATURE_LIMIT:
            raise ResourceError(f"{w.describe()} has {n_m:,} modal states for {name}: the table path and the SGD "
                                f"learners materialise feature tables of at most {FEATURE_LIMIT:,} states; "
                                f"{w.hint()}{drop}")
        if tables:
            stages.append(Stage(f"{name}: F of {n_m:,} states x {m} eigenfunctions",
                                TABLE_COPIES * FLOAT * float(n_m) * m, table_hint + drop))
        rows = min(n_m, FULL_CHECK_LIMIT)
        stages.append(Stage(f"{name}: injectivity check of {rows:,} observations of {size:,} bytes",
                            injectivity_bytes(rows, size), w.hint() + drop))
        factors = len(w.factor_sizes) + 1
        # tables: O(n_m·m) per pass over a few dozen passes, and O(n_m·m²) for QR/SVD-like products
        work = float(n_m) * m * (factors + 20 + 2 * m) if tables else float(m) ** 2 * sum(w.factor_sizes) * factors
        seconds += (work + float(rows) * size * 20) / FLOPS
    seconds += _solve_seconds(config, n, m)
    if len(names) > 1:  # the PRH sample metrics of each pair: N x N similarity blocks, N = min(2000, |Z|)
        rows = min(PAIR_SAMPLES, n)
        stages.append(Stage(f"PRH sample metrics of {rows:,} paired observations",
                            PAIR_METRIC_COPIES * FLOAT * float(rows) ** 2, "use fewer modalities"))
        seconds += len(names) * (len(names) - 1) / 2 * 20.0 * float(rows) ** 2 * k_max / FLOPS
        if config.calibrate:  # K permuted scores of each pair's calibrated metrics, O(rows) each
            seconds += len(names) * (len(names) - 1) / 2 * config.calibrate * CALIBRATION_ROW_SECONDS * rows
    for objective in config.sgd_learners:
        for name, n_m, size in zip(names, modal.values(), obs):
            nbytes, work = _learner_cost(config, objective, n_m, k_max, size, len(w.factor_sizes) + 1)
            stages.append(Stage(f"{name}: learner {objective} ({config.training.n_seeds} seed(s) x {n_m:,} states)",
                                nbytes, "lower training.n_seeds, or use a smaller world"))
            seconds += work / FLOPS
    plan = RunPlan(n, modal, k_max, tuple(stages), seconds, limit)
    worst = plan.peak
    if plan.peak_bytes > limit:
        raise ResourceError(f"{w.describe()}, k {'<= ' if config.k == 'auto' else '= '}{k_max}: {worst.what} "
                            f"would need {format_bytes(plan.peak_bytes)} (limit {format_bytes(limit)}); {worst.hint}")
    return plan
