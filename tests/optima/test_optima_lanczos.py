"""Lanczos completed by deflation: every copy of a repeated eigenvalue, against dense eigh."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.linalg import aslinearoperator

from support import assert_close
from prhsim.optima._lanczos import lanczos_top


@pytest.mark.parametrize("multiplicity", [1, 3, 7])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lanczos_top_keeps_every_copy(multiplicity, seed):
    rng = np.random.default_rng(seed)
    n = 300
    spectrum = np.concatenate([[1.0], np.full(multiplicity, 0.8), [0.7, 0.7], rng.uniform(-0.5, 0.6, n - 3 - multiplicity)])
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    A = (Q * spectrum) @ Q.T
    m = multiplicity + 2
    vals, vecs = lanczos_top(aslinearoperator(A), m, v0=rng.normal(size=n))
    assert_close(vals, np.sort(spectrum)[::-1][:m], atol=1e-10)
    assert_close(A @ vecs, vecs * vals, atol=1e-8)  # eigenpairs
    assert_close(vecs.T @ vecs, np.eye(m), atol=1e-8)


def test_a_single_start_vector_in_an_invariant_subspace_would_miss_copies():
    """The case deflation exists for: with v0 orthogonal to all but one copy, plain Lanczos sees one copy."""
    n = 200
    spectrum = np.concatenate([np.full(4, 1.0), np.linspace(0.5, -0.5, n - 4)])
    A = np.diag(spectrum)
    v0 = np.ones(n)
    v0[1:4] = 0.0  # no component on three of the four copies
    vals, _ = lanczos_top(aslinearoperator(A), 5, v0=v0)
    assert_close(vals, [1.0, 1.0, 1.0, 1.0, 0.5], atol=1e-10)
