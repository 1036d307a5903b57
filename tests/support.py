"""Shared tolerances and helpers of the test suite (imported by the tests as ``support``)."""

from __future__ import annotations

import numpy as np

from prhsim.testing import ATOL as ATOL, RTOL as RTOL, SOLVER_ATOL as SOLVER_ATOL  # the named tolerances, one place
from prhsim.worlds import FiniteWorld

def assert_close(actual, expected, *, atol: float = ATOL, rtol: float = RTOL, what: str = "") -> None:
    """One tolerance helper for arrays and scalars."""
    np.testing.assert_allclose(np.asarray(actual, dtype=float), np.asarray(expected, dtype=float),
                               atol=atol, rtol=rtol, err_msg=what)


def dense(matrix) -> np.ndarray:
    """A dense copy of a dense or sparse matrix."""
    return np.asarray(matrix.toarray() if hasattr(matrix, "toarray") else matrix, dtype=float)


def projector_distance(A: np.ndarray, B: np.ndarray) -> float:
    """``‖P_A − P_B‖_F / √2`` for orthonormal column bases A, B (the naive twin of sinΘ)."""
    return float(np.linalg.norm(A @ A.T - B @ B.T) / np.sqrt(2))


def negatives_above_positives() -> FiniteWorld:
    """30 states, uniform p: 20 eigenvalues −0.03 above 9 eigenvalues 0.02 (the heap walks past the negatives)."""
    n = 30
    rng = np.random.default_rng(0)
    s = np.full(n, 1 / np.sqrt(n))
    V, _ = np.linalg.qr(np.column_stack([s, rng.normal(size=(n, n - 1))]))
    lam = np.array([1.0] + [-0.03] * 20 + [0.02] * 9)
    K = (V * lam) @ V.T
    return FiniteWorld(np.full(n, 1 / n), np.maximum(K, 0) / n)


def real_task(task: str) -> dict[str, str]:
    """The ``prhsim real`` settings of a task: ``{"learner": "ntp"}`` for next-token prediction, else the views."""
    return {"learner": "ntp"} if task == "ntp" else {"views": task}


#: A refusal may allocate no more than this before it answers (it must come before any large allocation).
REFUSAL_PEAK_BYTES = 50e6


def refusal(args: list[str]):
    """Run ``prhsim ARGS`` in-process under tracemalloc: (the click result, the peak bytes Python allocated).

    Import what the command imports before calling, so the peak counts the command's own work, not imports."""
    import tracemalloc

    from click.testing import CliRunner

    from prhsim.cli import main

    tracemalloc.start()
    try:
        result = CliRunner().invoke(main, args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def assert_one_line_refusal(result, peak: float, names: list[str]) -> None:
    """Exit 2, one line ``Error: …`` naming every string of ``names``, no traceback, and a small peak."""
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for name in names:
        assert name in lines[0], lines[0]
    assert peak < REFUSAL_PEAK_BYTES, f"the refusal allocated {peak / 1e6:.0f} MB first"


def untimed(value):
    """A results document without its wall-clock entries ("seconds" at any depth): what two runs of one sweep share."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def assert_cells_reduce_to_run(module, settings, *, seed: int = 1) -> dict:
    """A sweep module's cells computed in a shuffled order (each record through JSON, as a worker sends it), put
    back in the order of ``cells`` and reduced, give ``run``'s result field by field (timings aside). Returns
    ``run``'s result as JSON values."""
    import json
    import random

    coordinates = module.cells(settings)
    order = list(range(len(coordinates)))
    random.Random(seed).shuffle(order)
    records = {i: json.loads(json.dumps(module.cell(settings, coordinates[i]))) for i in order}
    assert all(r.get("seconds", 0.0) >= 0 for r in records.values())
    reduced = module.reduce(settings, [records[i] for i in range(len(coordinates))]).model_dump(mode="json")
    run = module.run(settings).model_dump(mode="json")
    assert reduced.keys() == run.keys()
    for key in run:
        if key != "seconds":
            assert untimed(reduced[key]) == untimed(run[key]), key
    return run


def interrupt_once_ready(proc, ready, what: str = "the command") -> tuple[int, str]:
    """Send SIGINT to the subprocess ``proc`` once it has written the file ``ready``; its exit code and stderr."""
    import signal
    import time

    deadline = time.monotonic() + 300
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{what} never got ready"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, stderr
