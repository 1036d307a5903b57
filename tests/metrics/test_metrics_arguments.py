"""The inputs prhsim refuses as its peers do (a non-positive number of permutations, alpha outside (0, 1), fewer than
2 rows, knn_k >= N) are refused in one wording wherever they enter: the argument's name, the allowed range as
docs/prh.md states it, and the value given."""

from __future__ import annotations

import numpy as np
import pytest

from prhsim.metrics import (
    calibrate,
    calibrated_protocol,
    cknna,
    cycle_knn,
    holm,
    knn_chance,
    knn_indices,
    linear_cka,
    mutual_knn,
    prh_protocol,
    prh_table,
    rbf_cka,
    unbiased_cka,
)
from prhsim.metrics._registry import METRICS

RNG = np.random.default_rng(0)
A, B = RNG.normal(size=(20, 4)), RNG.normal(size=(20, 3))
LAYERS_A, LAYERS_B = [A, A[:, :2]], [B]
KNN = r"^knn_k must be an integer with 1 <= knn_k < N = 20, got {}$"
ALPHA = r"^alpha must be a number in \(0, 1\), got {}$"
PERMUTATIONS = r"^permutations must be an integer of at least 1, got {}$"

CASES = [
    # knn_k outside 1..N-1
    ("mutual_knn", lambda: mutual_knn(A, B, knn_k=20), KNN.format(20)),
    ("cycle_knn", lambda: cycle_knn(A, B, knn_k=0), KNN.format(0)),
    ("cknna", lambda: cknna(A, B, knn_k=25), KNN.format(25)),
    ("knn_indices", lambda: knn_indices(A, 20), KNN.format(20)),
    ("knn_chance", lambda: knn_chance(20, 20), KNN.format(20)),
    ("calibrate", lambda: calibrate("mutual_knn", A, B, knn_k=20), KNN.format(20)),
    ("prh_protocol", lambda: prh_protocol(LAYERS_A, LAYERS_B, knn_k=20), KNN.format(20)),
    ("calibrated_protocol", lambda: calibrated_protocol(LAYERS_A, LAYERS_B, knn_k=20, permutations=9), KNN.format(20)),
    ("prh_table", lambda: prh_table({"a": LAYERS_A, "b": LAYERS_B}, ["a"], ["b"], knn_k=20), KNN.format(20)),
    # alpha outside (0, 1)
    ("calibrate", lambda: calibrate("linear_cka", A, B, alpha=0.0), ALPHA.format(0.0)),
    ("calibrate", lambda: calibrate("linear_cka", A, B, alpha=1.5), ALPHA.format(1.5)),
    ("calibrated_protocol", lambda: calibrated_protocol(LAYERS_A, LAYERS_B, alpha=1.0, permutations=9),
     ALPHA.format(1.0)),
    ("prh_table", lambda: prh_table({"a": LAYERS_A, "b": LAYERS_B}, ["a"], ["b"], permutations=9, alpha=-0.1),
     ALPHA.format(-0.1)),
    ("holm", lambda: holm(np.array([0.01, 0.2]), alpha=1.0), ALPHA.format(1.0)),
    # a non-positive number of permutations
    ("calibrate", lambda: calibrate("linear_cka", A, B, permutations=0), PERMUTATIONS.format(0)),
    ("calibrate", lambda: calibrate("linear_cka", A, B, permutations=-5), PERMUTATIONS.format(-5)),
    ("calibrated_protocol", lambda: calibrated_protocol(LAYERS_A, LAYERS_B, permutations=0), PERMUTATIONS.format(0)),
    # fewer than 2 rows
    ("calibrate", lambda: calibrate("linear_cka", A[:1], B[:1]), r"^calibrate needs at least 2 rows, got N = 1$"),
    ("linear_cka", lambda: linear_cka(A[:1], B[:1]), r"^CKA needs at least 2 rows, got N = 1$"),
    ("rbf_cka", lambda: rbf_cka(A[:1], B[:1]), r"^CKA needs at least 2 rows, got N = 1$"),
    ("unbiased_cka", lambda: unbiased_cka(A[:3], B[:3]), r"^unbiased CKA needs at least 4 rows, got N = 3$"),
]


@pytest.mark.parametrize("where, call, message", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_refused_input_names_the_argument_and_its_range_in_one_line(where, call, message):
    with pytest.raises(ValueError, match=message) as refused:
        call()
    assert "\n" not in str(refused.value)


def test_a_non_integer_knn_k_is_refused_in_the_same_words():
    with pytest.raises(ValueError, match=r"^knn_k must be an integer with 1 <= knn_k < N = 20, got 2\.5$"):
        mutual_knn(A, B, knn_k=2.5)


@pytest.mark.parametrize("name, convention", [(name, convention) for name, record in METRICS.items()
                                              for convention in record.conventions])
@pytest.mark.parametrize("side", ["a", "b"])
def test_a_constant_side_is_refused_by_every_metric_and_its_null(name, convention, side):
    """Every row equal: its kernels and neighbour lists are ties only. The k-NN metrics and CKNNA scored such a
    side by the index tie rule (mutual k-NN 1.0 for two constant sides); now they refuse it as CKA does, and so
    does the null. R@1 alone has a value: every query ties, and its tie rule (the expected rank under random
    tie-breaks) gives exactly the chance level."""
    x, constant = RNG.normal(size=(30, 12)), np.ones((30, 12))
    a, b = (constant, x) if side == "a" else (x, constant)
    if name == "retrieval_r1":
        fit = np.arange(15)
        assert METRICS[name](a, b, knn_k=3, fit=fit) == METRICS[name].chance_level(30, 3, fit=fit) == 1 / 15
        return
    refusal = rf"^{side} has zero variance: .+ is undefined$"
    with pytest.raises(ValueError, match=refusal):
        METRICS[name](a, b, knn_k=3, convention=convention, fit=np.arange(15))
    if not METRICS[name].fitted:
        with pytest.raises(ValueError, match=refusal):
            calibrate(name, a, b, permutations=5, knn_k=3, convention=convention)
