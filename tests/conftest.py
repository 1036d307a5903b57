"""Shared tolerances, helpers and hypothesis profiles for the test suite."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from prhsim.worlds import FiniteWorld

#: Named tolerances: exact identities (rounding only) and iterative solvers.
ATOL = 1e-10
RTOL = 1e-10
SOLVER_ATOL = 1e-8

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# PRHSIM_HYPOTHESIS names a profile ("thorough": ten times the examples); otherwise CI=true selects "ci"
settings.load_profile(os.environ.get("PRHSIM_HYPOTHESIS") or ("ci" if os.environ.get("CI") else "default"))


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


# JAX computes in float32 unless told otherwise; the cross-library tests compare
# float64 values and gradients to 1e-10, so enable float64 at import (when JAX is installed).
try:
    import jax as _jax
except ImportError:  # pragma: no cover - the suite runs without jax
    _jax = None
else:
    _jax.config.update("jax_enable_x64", True)


def negatives_above_positives() -> FiniteWorld:
    """30 states, uniform p: 20 eigenvalues −0.03 above 9 eigenvalues 0.02 (the heap walks past the negatives)."""
    n = 30
    rng = np.random.default_rng(0)
    s = np.full(n, 1 / np.sqrt(n))
    V, _ = np.linalg.qr(np.column_stack([s, rng.normal(size=(n, n - 1))]))
    lam = np.array([1.0] + [-0.03] * 20 + [0.02] * 9)
    K = (V * lam) @ V.T
    return FiniteWorld(np.full(n, 1 / n), np.maximum(K, 0) / n)


@pytest.fixture(scope="session")
def small_export(tmp_path_factory):
    """A 60-image synthetic Flickr-format export of a 3x3 one-object gridscene (3 captions each, 12 px images,
    36/12/12 train/val/test), made once per session; tests read it and write their runs elsewhere."""
    from prhsim.experiments.real import export_synthetic
    from prhsim.worlds import gridscene

    out = tmp_path_factory.mktemp("real") / "syn"
    export_synthetic(gridscene(3, objects=1), out, images=60, captions=3, val=0.2, test=0.2, pixel_scale=1, rng=0)
    return out
