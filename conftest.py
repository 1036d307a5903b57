"""The whole tree's test processes: one BLAS/OpenMP thread each, prhsim.real (its doctests, and tests/real/) left out
without torch, and a doctest that imports a missing optional package skipped (`make test-core` runs without them)."""

import importlib.util
import os
import re

import pytest

# One BLAS and OpenMP thread per test process, unless the environment chooses: `make test` runs one xdist
# worker per core, so more threads per worker only oversubscribe the cores (the suite: 340 s with each library's
# default, 290 s with one thread, on 2 cores). Set here, before numpy or torch loads; workers and subprocesses
# inherit it.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

# The suite's processes (xdist workers, the sweeps' spawned workers, the commands run as subprocesses) compile the
# same JAX programs many times over: they share a persistent compilation cache (a cached program is the one XLA would
# compile, keyed by its computation, options and XLA_FLAGS, so no number changes): a rerun compiles almost nothing
# (two sweep commands on two workers: 25 s without it, 23 s on a first run, 10 s on a rerun). Set before JAX loads;
# every process the suite starts inherits it.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                ".pytest_cache", "jax-compilation"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # hidden by an import hook, or a broken entry in sys.modules
        return False


collect_ignore_glob = [] if _installed("torch") else ["prhsim/real/*", "tests/real/*"]

#: The optional packages (the extras of pyproject.toml, by import name): `make test-core` runs without them.
OPTIONAL = ("jax", "optax", "torch", "transformers", "tokenizers", "safetensors", "pyarrow", "sacrebleu",
            "pycocoevalcap", "tensorboard", "calibrated_similarity")
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(\w+)", flags=re.MULTILINE)


def pytest_collection_modifyitems(config, items):
    """A doctest of prhsim/ that imports an optional package is skipped where that package is missing (the tests
    skip themselves)."""
    for item in items:
        examples = getattr(getattr(item, "dtest", None), "examples", ())
        imported = {name for example in examples for name in _IMPORT.findall(example.source)}
        missing = sorted(name for name in imported & set(OPTIONAL) if not _installed(name))
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"the doctest imports {', '.join(missing)}, not installed"))
