"""The exact finite next-token world: tokens emitted i.i.d. given a hidden state (docs/theory.md §5).

**The exact finite world** (:func:`emission_world`): states ``z ~ p_Z`` (uniform), an emission
table ``Em = (1 − a)/V + a·T`` with rows of T drawn from Dirichlet(1), tokens i.i.d. from
``Em(z, ·)`` given z, context = the first L tokens (``V^L`` contexts, row-major), target = token
L + 1, so ``P(c, y) = Σ_z p(z) Π_i Em(z, c_i) Em(z, y)``; ``a = 0`` is exact independence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim._tables import check_int


@dataclass(frozen=True)
class EmissionWorld:
    """The exact finite next-token world of docs/theory.md §5.

    Attributes:
        joint: (V^L, V) exact ``P(c, y) = Σ_z p(z) Π_i Em(z, c_i) Em(z, y)``; context index
            ``c = Σ_i c_i V^{L−1−i}`` (row-major over the L context tokens).
        a: the emission strength (0: tokens independent of z, hence of each other).
        p_z: (n_states,) the state law (uniform).
        emission: (n_states, V) ``Em = (1 − a)/V + a·T``, rows summing to 1.
        context: L, the number of context tokens.
    """

    joint: np.ndarray
    a: float
    p_z: np.ndarray
    emission: np.ndarray
    context: int

    @property
    def vocab(self) -> int:
        return int(self.emission.shape[1])

    def context_tokens(self) -> np.ndarray:
        """(V^L, L): the tokens of every context, row-major (row c holds ``c_1 … c_L``)."""
        grids = np.indices((self.vocab,) * self.context).reshape(self.context, -1)
        return grids.T.copy()


def emission_world(a: float, *, n_states: int = 5, vocab: int = 6, context: int = 2,
                   rng: RngLike = None) -> EmissionWorld:
    """The exact joint of (first ``context`` tokens, next token) under an emission model (module docstring).

    Args:
        a: emission strength in [0, 1]: ``Em = (1 − a)/V + a·T``.
        n_states: number of hidden states z (uniform law).
        vocab: V, the number of tokens (at least 2).
        context: L, the number of context tokens (``V^L`` contexts).
        rng: seed or Generator for T (rows Dirichlet(1)); the same seed gives the same T at every a.

    Raises:
        ValueError: on bad arguments, or a table above the memory limit.

    Example:
        >>> w = emission_world(0.0, vocab=3, context=1)
        >>> w.joint.shape, bool(abs(w.joint - 1 / 9).max() < 1e-15)
        ((3, 3), True)
    """
    a = float(a)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"the emission strength a must lie in [0, 1], got {a!r}")
    n_states = check_int("n_states", n_states, 1)
    vocab = check_int("vocab", vocab, 2)
    context = check_int("context", context, 1)
    contexts = float(vocab) ** context
    ensure_fits(FLOAT * contexts * (n_states + vocab), f"an emission world of {vocab}^{context} contexts",
                "lower vocab or context")
    T = check_rng(rng).dirichlet(np.ones(vocab), size=n_states)
    emission = (1.0 - a) / vocab + a * T
    emission /= emission.sum(axis=1, keepdims=True)
    p_z = np.full(n_states, 1.0 / n_states)
    prefix = np.ones((n_states, 1))
    for _ in range(context):  # P(c | z), row-major over the context tokens
        prefix = (prefix[:, :, None] * emission[:, None, :]).reshape(n_states, -1)
    joint = (p_z[:, None] * prefix).T @ emission
    return EmissionWorld(joint=joint / math.fsum(joint.ravel()), a=a, p_z=p_z, emission=emission, context=context)
