"""The whole tree's test processes: one BLAS/OpenMP thread each, and prhsim.real (its doctests, and tests/real/) left out
without torch."""

import importlib.util
import os

# One BLAS and OpenMP thread per test process, unless the environment chooses: `make test` runs one xdist
# worker per core, so more threads per worker only oversubscribe the cores (the suite: 340 s with each library's
# default, 290 s with one thread, on 2 cores). Set here, before numpy or torch loads; workers and subprocesses
# inherit it.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # hidden by an import hook, or a broken entry in sys.modules
        return False


collect_ignore_glob = [] if _installed("torch") else ["prhsim/real/*", "tests/real/*"]
