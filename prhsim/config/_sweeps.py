"""Settings of the theorem sweeps (``prhsim sweep NAME``): one strict pydantic model per sweep.

Each model mirrors its library function's arguments (``prhsim.experiments``); a config
file (``--config``) or ``--set key=value`` sets any of them, and unknown keys are errors.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from prhsim.config._worlds import GridSceneWorld, Settings, WorldConfig

#: The sample-efficiency sweep's default budgets (``prhsim.experiments`` keeps the same tuple; a test checks).
DEFAULT_BUDGETS = (300, 1000, 3000, 10000, 30000)


class BadViewSweepSettings(Settings):
    """``prhsim sweep bad-view``: every modality under bad(eps) for each eps of a grid (1 is the good view).

    Attributes:
        world: the world over Z (default gridscene, 3x3 grid, one object).
        modalities: how many modalities (gridscene: pixels, caption, symbolic).
        eps: the grid (default 25 points from 0.02 to 1).
        k: number of features, or "auto".
        seed: seeds the world, the modalities and one stream per eps.
    """

    world: WorldConfig = Field(default_factory=lambda: GridSceneWorld(size=3, objects=1))
    modalities: int = Field(3, ge=2, le=8)
    eps: list[float] | None = None
    k: int | Literal["auto"] = "auto"
    seed: int = Field(0, ge=0)


class KernelMismatchSweepSettings(Settings):
    """``prhsim sweep kernel-mismatch``: random worlds and a perturbation of each size against both bounds."""

    n: int = Field(30, ge=4, le=5000)
    sizes: list[float] | None = None
    k: int = Field(2, ge=1)
    worlds: int = Field(8, ge=1, le=1000)
    seed: int = Field(0, ge=0)


class GapSensitivitySettings(Settings):
    """``prhsim sweep gap-sensitivity``: path(n) x path(n) with the gap at k = 1 set to each value."""

    gaps: list[float] | None = None
    size: float = Field(1e-3, gt=0, le=1)
    n: int = Field(6, ge=3, le=200)
    move: float = Field(0.9, gt=0, le=1)
    seed: int = Field(0, ge=0)


class RestrictedEncoderSettings(Settings):
    """``prhsim sweep restricted-encoder``: encoders linear in each gridscene modality's rendering."""

    size: int = Field(3, ge=2, le=10)
    objects: int = Field(1, ge=1, le=3)
    k: int | Literal["auto"] = "auto"
    views: Literal["good", "bad"] = "good"
    eps: float = Field(0.1, gt=0, le=1)
    inputs: Literal["raw", "onehot", "state"] = "raw"
    seed: int = Field(0, ge=0)


class MetricBridgeSettings(Settings):
    """``prhsim sweep metric-bridge``: pairs at controlled misalignment scored by ρ_P and by the PRH metrics."""

    size: int = Field(4, ge=2, le=10)
    objects: int = Field(1, ge=1, le=2)
    levels: int = Field(16, ge=3, le=100)
    samples: int = Field(1000, ge=4, le=100_000)
    knn_k: int = Field(10, ge=1)
    k: int | Literal["auto"] = "auto"
    seed: int = Field(0, ge=0)


class SampleEfficiencySettings(Settings):
    """``prhsim sweep sample-efficiency``: good views, bad views and next-token prediction from finite samples.

    Attributes:
        world: a world with a caption renderer (gridscene; default 4x4 grid, 2 objects, 2 shapes, 2 colours).
        budgets: training samples (records) per run (default 300, 1000, 3000, 10000, 30000).
        seeds: seeds per budget (vmapped together).
        steps, batch_size, lr, hidden: the learners' optimisation (the same for every learner and budget).
        min_span: the shortest span a JEPA view cuts.
        pairs: "world" (views of a positive pair of states, the pixels' pair law) or "same" (one state).
        learners: which learners (good is required: the ratios are against it).
        metric: the alignment the curves and ratios use.
        reference_budget: the budget whose good-view alignment is the target (default: the first
            budget at which good views reach half their alignment at the largest budget).
        k: features (default: the pixel closed form's gap).
        n_fit: states the retrieval map is fitted on.
        closed_forms: also score each learner's closed form (enumerates every span and prefix).
        seed: seeds the records, the initialisations and the evaluation draws.
    """

    world: WorldConfig = Field(default_factory=lambda: GridSceneWorld(size=4, objects=2, shapes=2, colours=2))
    budgets: list[Annotated[int, Field(ge=2)]] = Field(default_factory=lambda: list(DEFAULT_BUDGETS), min_length=1)
    seeds: int = Field(3, ge=1, le=32)
    steps: int = Field(3000, ge=20)
    batch_size: int = Field(512, ge=2)
    lr: float = Field(1e-2, gt=0)
    hidden: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [128])
    min_span: int = Field(9, ge=1)
    pairs: Literal["world", "same"] = "world"
    learners: list[Literal["good", "bad", "ntp"]] = Field(default_factory=lambda: ["good", "bad", "ntp"])
    metric: Literal["mutual_knn", "mutual_knn_mean", "r1", "r5"] = "mutual_knn"
    reference_budget: int | None = Field(None, ge=2)
    k: int | Literal["auto"] = "auto"
    n_fit: int = Field(1000, ge=2)
    closed_forms: bool = True
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _captioned(self) -> "SampleEfficiencySettings":
        if self.world.kind != "gridscene":
            raise ValueError(f"sample-efficiency needs a world with a caption renderer (gridscene), got {self.world.kind}")
        if "good" not in self.learners:
            raise ValueError("learners must include good: the ratios are measured against good views")
        if self.reference_budget is not None and self.reference_budget not in self.budgets:
            raise ValueError(f"reference_budget {self.reference_budget} is not one of the budgets {self.budgets}")
        return self


class NtpCaSettings(Settings):
    """``prhsim sweep ntp-ca``: the whitened next-token optimum against correspondence analysis over dependence strengths.

    Attributes:
        strengths: emission strengths a in (0, 1] (default 12 from 0.02 to 1).
        d: embedding dimension (1..5).
        worlds: random emission tables.
        restarts: initialisations per fit.
        seed: seeds the tables and the fits.
    """

    strengths: list[Annotated[float, Field(gt=0, le=1)]] | None = Field(None, min_length=1)
    d: int = Field(2, ge=1, le=5)
    worlds: int = Field(3, ge=1, le=100)
    restarts: int = Field(3, ge=1, le=20)
    seed: int = Field(0, ge=0)


class PairFreeSettings(Settings):
    """``prhsim sweep pair-free``: the map between two modalities from unpaired samples, against the gap, S and eps.

    Attributes:
        gaps: gaps μ_1 − μ_2 of the designed world (default 0 to 0.07), at ``base_samples``.
        samples: states and pairs drawn per modality (default 300 to 100,000), at ``base_gap``.
        eps: bad-view eps of modality b (1 is the good view; default 0.5 to 1), at both bases.
        base_gap, base_samples: the other axes' fixed values.
        n_states, n_nuisance: the designed world's states and each modality's nuisance values.
        mu_2, mu_3: the second and third eigenvalues (μ_1 = μ_2 + gap; the designed features must keep Π ≥ 0).
        seeds: draws (renderers, rotations and samples) per cell.
        seed: seeds the world and every draw.
    """

    gaps: list[Annotated[float, Field(ge=0, le=0.5)]] | None = Field(None, min_length=1)
    samples: list[Annotated[int, Field(ge=10, le=10_000_000)]] | None = Field(None, min_length=1)
    eps: list[Annotated[float, Field(gt=0, le=1)]] | None = Field(None, min_length=1)
    base_gap: float = Field(0.07, ge=0, le=0.5)
    base_samples: int = Field(30_000, ge=10, le=10_000_000)
    n_states: int = Field(200, ge=10, le=5000)
    n_nuisance: int = Field(3, ge=2, le=50)
    mu_2: float = Field(0.08, gt=0, lt=1)
    mu_3: float = Field(0.02, gt=0, lt=1)
    seeds: int = Field(30, ge=1, le=1000)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> "PairFreeSettings":
        if not self.mu_3 < self.mu_2:
            raise ValueError(f"mu_3 must be below mu_2 (k = 2 needs a gap after mu_2), got {self.mu_3} and {self.mu_2}")
        return self


class CaptioningSettings(Settings):
    """``prhsim sweep captioning``: caption held-out images through one rotation fitted on N_fit (image, caption) pairs.

    Attributes:
        world: a gridscene (default 4x4 grid, one object: 144 states).
        n_fits: numbers of pairs the rotation is fitted on (default around and past k); 0 is added for the pair-free map.
        seeds: draws of the held-in states, the pairs, the lightings and the noise.
        k: features (default: the pixel closed form's gap).
        text: the caption representation: "spans" (the text JEPA's closed form on spans) or "view" (the
            caption modality's view-world closed form).
        noise: σ of Gaussian noise on every image feature (0: the closed form).
        pair_free: the map at N_fit = 0: "iterative" (features alone), "spectral" (each modality's own pairs) or "none".
        pair_free_samples: unpaired images, captions and pairs of each modality the pair-free map reads.
        held_in: the fraction of states whose images may be paired; the others are captioned.
        images: at most this many held-out images per seed.
        decoder_steps, decoder_batch: the caption decoder's training (on captions alone).
        seed: seeds the decoder and the draws.
    """

    world: WorldConfig = Field(default_factory=lambda: GridSceneWorld(size=4, objects=1))
    n_fits: list[Annotated[int, Field(ge=1)]] | None = Field(None, min_length=1)
    seeds: int = Field(10, ge=1, le=100)
    k: int | Literal["auto"] = "auto"
    text: Literal["spans", "view"] = "spans"
    noise: float = Field(0.0, ge=0)
    pair_free: Literal["iterative", "spectral", "none"] = "iterative"
    pair_free_samples: int = Field(2000, ge=10)
    held_in: float = Field(0.5, gt=0, lt=1)
    images: int = Field(1000, ge=2)
    decoder_steps: int = Field(1000, ge=1)
    decoder_batch: int = Field(64, ge=1)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _gridscene(self) -> "CaptioningSettings":
        if self.world.kind != "gridscene":
            raise ValueError(f"captioning needs a world with pixel and caption renderers (gridscene), got {self.world.kind}")
        return self
