"""The distance-agnostic and biased CKNNAs against twins written from their definitions (docs/theory.md §10)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from prhsim.metrics import calibrate, cknna_agnostic, cknna_biased, mutual_knn, prh_protocol
from prhsim.metrics._registry import METRICS


def _rows(x, convention):
    x = np.asarray(x, dtype=float)
    return x / np.linalg.norm(x, axis=1, keepdims=True) if convention == "prhsim" else x


def _neighbours(K, i, k, self_included):
    """Row i's k largest kernel values, ties to the smaller index (the row itself left out unless included)."""
    others = [j for j in range(len(K)) if self_included or j != i]
    return set(sorted(others, key=lambda j: (-K[i][j], j))[:k])


def _masks(K, L, k, self_included):
    n = len(K)
    na = [_neighbours(K, i, k, self_included) for i in range(n)]
    nb = [_neighbours(L, i, k, self_included) for i in range(n)]
    ab = [[1.0 if (j in na[i] and j in nb[i]) else 0.0 for j in range(n)] for i in range(n)]
    aa = [[1.0 if j in na[i] else 0.0 for j in range(n)] for i in range(n)]
    bb = [[1.0 if j in nb[i] else 0.0 for j in range(n)] for i in range(n)]
    return ab, aa, bb


def _hsic_b(X, Y):
    """tr(X H Y H) = Σ_ij (X_ij − row_i − col_j + all) Y_ji, by loops."""
    n = len(X)
    row = [sum(X[i]) / n for i in range(n)]
    col = [sum(X[i][j] for i in range(n)) / n for j in range(n)]
    grand = sum(row) / n
    return sum((X[i][j] - row[i] - col[j] + grand) * Y[j][i] for i in range(n) for j in range(n))


def twin(a, b, k, convention, kind):
    x, y = _rows(a, convention), _rows(b, convention)
    K, L = (x @ x.T).tolist(), (y @ y.T).tolist()
    n = len(K)
    eps = 1e-6 if convention == "prh" else 0.0
    if kind == "agnostic":
        ab, aa, bb = _masks(K, L, k, self_included=False)
        return sum(map(sum, ab)) / (math.sqrt(sum(map(sum, aa)) * sum(map(sum, bb))) + eps)
    ab, aa, bb = _masks(K, L, k, self_included=True)

    def masked(m, z):
        return [[m[i][j] * z[i][j] for j in range(n)] for i in range(n)]

    top = _hsic_b(masked(ab, K), masked(ab, L))
    return top / (math.sqrt(_hsic_b(masked(aa, K), masked(aa, K)) * _hsic_b(masked(bb, L), masked(bb, L))) + eps)


FUNCTIONS = {"agnostic": cknna_agnostic, "biased": cknna_biased}


@settings(max_examples=25, deadline=None)
@given(n=st.integers(5, 14), k=st.integers(1, 4), seed=st.integers(0, 2**32 - 1), tied=st.booleans(),
       convention=st.sampled_from(["prhsim", "prh"]), kind=st.sampled_from(["agnostic", "biased"]))
def test_each_variant_equals_its_twin_from_the_definition(n, k, seed, tied, convention, kind):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, 3))
    b = a @ rng.normal(size=(3, 4)) + rng.normal(size=(n, 4))
    if tied:  # integer rows: kernels full of exact ties, decided by the smaller index
        a, b = np.round(2 * a), np.round(2 * b)
        a[np.all(a == 0, axis=1)] = 1.0
        b[np.all(b == 0, axis=1)] = 1.0
    k = min(k, n - 1)
    got = FUNCTIONS[kind](a, b, knn_k=k, convention=convention)
    assert got == pytest.approx(twin(a, b, k, convention, kind), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("convention", ["prhsim", "prh"])
def test_the_distance_agnostic_cknna_is_mutual_knn_on_the_same_neighbour_lists(convention):
    rng = np.random.default_rng(4)
    a = rng.normal(size=(40, 5))
    b = np.round(a @ rng.normal(size=(5, 3)))  # ties included
    b[np.all(b == 0, axis=1)] = 1.0
    for k in (1, 3, 10):
        assert cknna_agnostic(a, b, knn_k=k, convention=convention) == pytest.approx(
            float(mutual_knn(a, b, knn_k=k, convention=convention)), rel=1e-6 if convention == "prh" else 1e-12)


@pytest.mark.parametrize("kind", ["agnostic", "biased"])
def test_registered_and_usable_by_every_consumer(kind):
    name = f"cknna_{kind}"
    rng = np.random.default_rng(5)
    a = rng.normal(size=(30, 4))
    b = a @ rng.normal(size=(4, 3)) + 0.3 * rng.normal(size=(30, 3))
    record = METRICS[name]
    assert record.neighbours and set(record.conventions) == {"prhsim", "prh"}
    assert record(a, b, knn_k=4) == FUNCTIONS[kind](a, b, knn_k=4)
    score = prh_protocol([a], [b], metric=name, knn_k=4, clip_quantile=None)
    assert score.best == pytest.approx(FUNCTIONS[kind](a, b, knn_k=4), rel=1e-6)  # the protocol's float32 rows
    cal = calibrate(name, a, b, permutations=9, knn_k=4)
    assert cal.raw == FUNCTIONS[kind](a, b, knn_k=4) and cal.p_value == 0.1  # a strong signal: no permutation reaches it


def test_bad_inputs_are_one_line_errors():
    a = np.ones((6, 3))
    with pytest.raises(ValueError, match="a has zero variance: biased CKNNA is undefined"):
        cknna_biased(a, np.random.default_rng(0).normal(size=(6, 2)))
    with pytest.raises(ValueError, match=r"knn_k must be an integer with 1 <= knn_k < N = 6, got 6"):
        cknna_agnostic(np.eye(6), np.eye(6)[::-1], knn_k=6)
    with pytest.raises(ValueError, match="a and b must have the same number of rows N, got 6 and 5"):
        cknna_agnostic(np.eye(6), np.eye(5))
