"""A rough time of the PRH protocol from its sizes alone, for the time class of ``prhsim prh score`` and ``table``.

For stacks A (N x L_a layers of widths d_a,l) and B (N x L_b, widths d_b,m), a metric whose registry record
(:data:`prhsim.metrics._registry.METRICS`) gives ``(pair, permutation)`` seconds, and K permutations::

    seconds = LAYER · N² · (Σ_l d_a,l + Σ_m d_b,m)  +  Σ_{l,m} (pair(N, d_a,l, d_b,m) + K · permutation(N, d_a,l, d_b,m))

The first term is each layer's own work, done once (its k-NN search or its Gram matrix, O(N²·d)); the second
couples every layer pair, once for the score and once per permutation of the null (docs/theory.md §10). The
constants are rough rates of this project's 2-core CPU: a class (seconds, minutes, hours), not a promise.
"""

from __future__ import annotations

from collections.abc import Sequence

from prhsim.metrics._registry import METRICS

#: Seconds per N² x width of one layer's own work (its k-NN search or Gram matrix), measured as above.
LAYER = 7e-10


def protocol_seconds(metric: str, n: int, widths_a: Sequence[int], widths_b: Sequence[int], *, knn_k: int = 10,
                     permutations: int = 0) -> float | None:
    """The protocol's rough seconds (module docstring); None for a metric without a cost in its record.

    Raises:
        ValueError: an unknown metric.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose from {', '.join(METRICS)}")
    cost = METRICS[metric].cost
    if cost is None:
        return None
    seconds = LAYER * float(n) * float(n) * float(sum(widths_a) + sum(widths_b))
    for da in widths_a:
        for db in widths_b:
            pair, permutation = cost(n, da, db, knn_k)
            seconds += pair + permutations * permutation
    return seconds
