"""One route for a score and its permutation null: the registered score of float64 numpy rows is what the null
computes for the identity permutation, bit for bit, and a permuted score does not depend on the permutations
computed beside it (docs/prh.md, "Calibrated scores: a permutation null")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from prhsim._budget import memory_limit
from prhsim.metrics import _calibrate, _cka_permuted, calibrate
from prhsim.metrics._registry import METRICS

#: Every registered metric calibrate takes (not the fitted R@1) under every convention it has.
CASES = [(name, convention) for name, record in METRICS.items() if not record.fitted
         for convention in record.conventions]
CKA = [name for name in _cka_permuted.KINDS]


def _pair(rng: np.random.Generator, n: int, da: int, db: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Two related float64 representations; "copies": each row twice (ties in kernels and neighbour lists)."""
    z = rng.normal(size=(n, 2))
    a = z @ rng.normal(size=(2, da)) + 0.5 * rng.normal(size=(n, da))
    b = z @ rng.normal(size=(2, db)) + 0.5 * rng.normal(size=(n, db))
    if kind == "copies":
        a, b = np.repeat(a[: (n + 1) // 2], 2, axis=0)[:n], np.repeat(b[: (n + 1) // 2], 2, axis=0)[:n]
    return a, b


def _with_identity(rng: np.random.Generator, n: int, count: int) -> tuple[np.ndarray, int]:
    """``count`` random permutations of range(n) with the identity at a random position (returned)."""
    perms = np.array([rng.permutation(n) for _ in range(count)])
    at = int(rng.integers(count))
    perms[at] = np.arange(n)
    return perms, at


@pytest.mark.parametrize("name, convention", CASES)
@settings(max_examples=15, deadline=None)
@given(n=st.integers(6, 40), da=st.integers(1, 9), db=st.integers(1, 9), seed=st.integers(0, 2**16),
       kind=st.sampled_from(["gaussian", "copies"]), route=st.sampled_from(["gram", "features"]))
def test_the_identity_permutation_reproduces_the_registered_score_bit_for_bit(name, convention, n, da, db, seed,
                                                                              kind, route):
    rng = np.random.default_rng(seed)
    a, b = _pair(rng, n, da, db, kind)
    k = min(3, n - 1)
    perms, at = _with_identity(rng, n, 7)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_cka_permuted, "GATHER_COST", 0 if route == "gram" else 10**9)
        try:
            registered = METRICS[name](a, b, knn_k=k, convention=convention)
        except ValueError:  # the same refusal from the null (a self-HSIC zero up to rounding, ...)
            with pytest.raises(ValueError):
                calibrate(name, a, b, permutations=perms, knn_k=k, convention=convention)
            return
        cal = calibrate(name, a, b, permutations=perms, knn_k=k, convention=convention)
    assert cal.raw == registered, (cal.raw, registered)
    assert cal.null[at] == cal.raw  # the identity among the null permutations: the same number again


@pytest.mark.parametrize("name", CKA)
@pytest.mark.parametrize("route", ["gram", "features"])
@pytest.mark.parametrize("convention", ["prhsim", "prh"])
def test_a_permuted_cka_does_not_depend_on_its_batch(name, route, convention, monkeypatch):
    """Each permutation alone, in batches of 3 and all at once: the same scores, bit for bit."""
    monkeypatch.setattr(_cka_permuted, "GATHER_COST", 0 if route == "gram" else 10**9)
    rng = np.random.default_rng([len(name), len(route), len(convention)])
    a, b = _pair(rng, 50, 7, 11, "gaussian")
    perms = np.array([rng.permutation(50) for _ in range(10)])
    scorer = _cka_permuted.kernel_scorer(name, [("a", a), ("a2", 2.0 * a[:, :3])], [("b", b)], convention)
    whole = scorer(perms, perms)
    alone = np.concatenate([scorer(perms[j:j + 1], perms[j:j + 1]) for j in range(10)])
    threes = np.concatenate([scorer(perms[j:j + 3], perms[j:j + 3]) for j in range(0, 10, 3)])
    assert np.array_equal(whole, alone) and np.array_equal(whole, threes)
    monkeypatch.setattr(_cka_permuted, "BLOCK", 1)  # the feature route one permutation per product
    assert np.array_equal(scorer(perms, perms), whole)


@pytest.mark.parametrize("name, convention", CASES)
def test_the_null_does_not_depend_on_how_the_permutations_are_chunked(name, convention, monkeypatch):
    rng = np.random.default_rng(len(name))
    a, b = _pair(rng, 30, 12, 13, "gaussian")  # d >= 10: SVCCA under "prh" keeps 10 directions
    one = calibrate(name, a, b, permutations=25, knn_k=3, convention=convention, rng=4)
    monkeypatch.setattr(_calibrate, "CHUNK_ENTRIES", 60)  # chunks of 2 permutations, the first with the identity
    chunked = calibrate(name, a, b, permutations=25, knn_k=3, convention=convention, rng=4)
    assert chunked.raw == one.raw and np.array_equal(chunked.null, one.null)


@pytest.mark.parametrize("name", ["linear_cka", "unbiased_cka"])
def test_under_a_memory_limit_the_grams_give_way_to_the_features_for_score_and_null_alike(name):
    """Where the two N x N Grams do not fit half the limit, the cross term goes through the features: both the
    registered score and its null, so they still agree bit for bit (and with the Gram route's to rounding)."""
    rng = np.random.default_rng(11)
    a, b = _pair(rng, 200, 120, 120, "gaussian")  # N·GATHER_COST < d_a·d_b: the Grams, given memory
    assert _cka_permuted.gram_wanted(name, 200, 120, 120)
    by_gram = calibrate(name, a, b, permutations=9, rng=1)
    with memory_limit(2 * 8 * 3 * 200 * 200):  # the Grams need more than half of it
        assert not _cka_permuted.gram_wanted(name, 200, 120, 120)
        registered = METRICS[name](a, b, knn_k=3)
        by_features = calibrate(name, a, b, permutations=9, rng=1)
    assert by_features.raw == registered
    np.testing.assert_allclose(by_features.null, by_gram.null, rtol=0, atol=1e-13)
    assert abs(by_features.raw - by_gram.raw) <= 1e-13
