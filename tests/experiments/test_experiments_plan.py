"""The cost plan: exact sizes from the settings alone, refusals that name the stage, and estimates
that bound the memory a run really uses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from prhsim import ResourceError
from prhsim._budget import FLOAT
from prhsim.config import ConfigError, resolve_run_config
from prhsim.experiments import plan_run
from prhsim.experiments._plan import FACTOR_SPACE_COPIES, GRAM_COPIES, TABLE_COPIES


def config(*sets: str):
    return resolve_run_config({}, {"figures": False}, sets)


def test_sizes_of_the_default_run_from_settings_alone():
    plan = plan_run(config())
    assert plan.n_states == 20_736
    assert plan.modal_states == {"pixels": 82_944, "caption": 165_888, "symbolic": 62_208}
    assert plan.k_max == 32
    assert plan_run(config("centred=false")).k_max == 33
    assert plan_run(config("k=7")).k_max == 7


def test_stage_estimates_follow_their_formulas():
    plan = plan_run(config("k=7"))
    stages = {s.what: s.nbytes for s in plan.stages}
    # the closed form works in factor space: vectors over Z, no modal table
    assert stages["factor space: the law of Z (20,736 states) and Gram matrices of 8 features"] == (
        FACTOR_SPACE_COPIES * FLOAT * 20_736 + GRAM_COPIES * FLOAT * 16**2 + 3 * FLOAT * 4 * 16)
    assert not any(" F of " in what for what in stages)
    tables = {s.what: s.nbytes for s in plan_run(config("k=7", "tables=true")).stages}
    assert tables["caption: F of 165,888 states x 8 eigenfunctions"] == TABLE_COPIES * FLOAT * 165_888 * 8
    # pixels: a 16 x 16 RGB image per state, every state rendered (82,944 < 400,000)
    assert stages["pixels: injectivity check of 82,944 observations of 768 bytes"] == (
        32 * 82_944 + 2 * 65_536 * (3 * 768 + 8))
    # caption: 165,888 states, 9 tokens per object as int32
    assert stages["caption: injectivity check of 165,888 observations of 72 bytes"] == (
        32 * 165_888 + 2 * 65_536 * (3 * 72 + 8))


def test_refusal_names_the_largest_stage_and_the_setting():
    with pytest.raises(ResourceError, match=r"k = 400: caption: F of 165,888 states x 401 eigenfunctions would need "
                                            r"5\.47 GB \(limit 1 GB\); lower world\.size or world\.objects, or lower --k"):
        plan_run(config("k=400", "memory_limit_gb=1.0", "tables=true"))


def test_factor_space_admits_what_the_table_path_refuses():
    """A 3-object gridscene has up to 23,887,872 modal states: too many for tables, not for factor space."""
    plan = plan_run(config("world.objects=3"))
    assert plan.modal_states["caption"] == 23_887_872 and plan.peak_bytes < 2e9
    with pytest.raises(ResourceError, match=r"11,943,936 modal states for pixels: the table path and the SGD "
                                            r"learners materialise feature tables of at most 5,000,000 states"):
        plan_run(config("world.objects=3", "tables=true"))


def test_k_that_does_not_fit_is_a_config_error():
    with pytest.raises(ConfigError, match="k = 63 does not fit ring of 64 states: k must be at most 62"):
        plan_run(config("world.kind=ring", "k=63"))
    assert plan_run(config("world.kind=ring", "k=63", "centred=false")).k_max == 63


#: Runs the library's whole `prhsim run` (figures included) and prints its peak resident memory in bytes:
#: VmHWM, which starts afresh at exec (ru_maxrss would carry over the forking test process's own peak).
RSS_SCRIPT = """
import sys, tempfile, pathlib
from prhsim.config import resolve_run_config
from prhsim.experiments import run_experiment, write_outputs
config = resolve_run_config({}, {}, sys.argv[1:])
write_outputs(run_experiment(config), config, pathlib.Path(tempfile.mkdtemp()), git_revision=None)
status = pathlib.Path("/proc/self/status").read_text().splitlines()
print(next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:")))
"""


@pytest.mark.parametrize("sets", [
    (),
    ("world.kind=torus", "world.shape=[300,300]", "modalities=2", "k=10"),  # a tie, large factors
    ("world.kind=random", "world.n=3000", "world.degree=6", "modalities=2", "k=12"),
])
def test_the_plan_bounds_the_peak_resident_memory_of_the_run(sets):
    """Measured in a fresh process: the interpreter, imports and C allocations all count."""
    plan = plan_run(config(*sets))
    out = subprocess.run([sys.executable, "-c", RSS_SCRIPT, *sets], capture_output=True, text=True, check=True)
    peak = int(out.stdout.strip().splitlines()[-1])
    assert peak <= plan.peak_bytes, f"measured {peak / 1e6:.0f} MB > planned {plan.peak_bytes / 1e6:.0f} MB"


@pytest.mark.parametrize("sets, label", [
    (("world.kind=ring", "world.n=50", "modalities=1"), "under a second"),
    ((), "seconds"),
    (("world.kind=ring", "world.n=100000", "modalities=2", "k=30"), "hours"),
])
def test_time_classes(sets, label):
    # a ring of 10^5 states: Lanczos needs ~n iterations on its clustered top spectrum (gaps ~ 1/n^2)
    assert plan_run(config(*sets)).time_class == label


def test_the_plan_counts_the_calibration_of_every_pair():
    """--calibrate K adds K permutations of each pair's calibrated metrics on its sample rows (CALIBRATION_ROW_SECONDS
    per row): the default world's 3 pairs of 2,000 rows at K = 100,000 is minutes, not seconds."""
    from prhsim.config import RunConfig
    from prhsim.experiments._plan import CALIBRATION_ROW_SECONDS

    base = plan_run(RunConfig())
    for K in (1000, 100_000):
        plan = plan_run(RunConfig(calibrate=K))
        assert plan.seconds - base.seconds == pytest.approx(3 * K * CALIBRATION_ROW_SECONDS * 2000, rel=1e-12)
    assert plan_run(RunConfig(calibrate=100_000)).time_class == "minutes" and base.time_class == "seconds"
