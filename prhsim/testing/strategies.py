"""Hypothesis strategies that draw the theory's objects (docs/theory.md §0–§6; docs/testing.md).

In the style of ``hypothesis.extra.numpy``: each function returns a ``SearchStrategy`` (or is a
``@composite`` one), takes its size knobs as arguments and says what it draws and what it guarantees.

Every world is built by prhsim's own constructors, so it is valid by construction (p > 0, Π ≥ 0,
symmetric, both marginals p). Sizes stay small by default, so that independent references (a full
``eigh`` of a kernel built from Π, :func:`uncentred_spectrum`) cost milliseconds.

* Worlds (§0, §6): :func:`sinkhorn_worlds`, :func:`scaled_worlds`, :func:`named_worlds`,
  :func:`product_worlds`, and :func:`worlds` (any of them).
* Worlds with nuisance (§4): :func:`nuisance_laws`, :func:`modalities` (with a user's own
  ``renderer``), :func:`views`, :func:`modal_worlds`, :func:`nuisance_setups` (on a user's own
  ``base`` strategy, e.g. ``st.just(my_world)``).
* Perturbations of Π on the same p (§3): :func:`perturbed_pairs`, from :func:`mixed`,
  :func:`pair_swapped` and :func:`prhsim.worlds.same_sample`.
* Spectra and k at a gap (§1.2): :func:`dense_kernel`, :func:`centred_spectrum`,
  :func:`gapped_ks`, :func:`worlds_at_a_gap` (a clear gap ``margin``, :data:`CLEAR_GAP` by default).
* Feature tables (§1.1, §2): :func:`feasible_tables`, :func:`tables_at_known_angles`.
"""

from __future__ import annotations

import numpy as np
from hypothesis import reject, strategies as st

from prhsim.testing._tolerances import CLEAR_GAP
from prhsim.worlds import (
    FiniteWorld,
    Modality,
    ProductWorld,
    World,
    bad,
    codebook,
    good,
    grid,
    path,
    random_world,
    resampling,
    ring,
    same_sample,
    sinkhorn_world,
    torus,
    view_world,
)



def seeds() -> st.SearchStrategy[int]:
    """Seeds for numpy generators (every random choice below numpy's is driven by one of these)."""
    return st.integers(0, 2**32 - 1)


# --- worlds (docs/theory.md §0, §6) ---------------------------------------------------------------------------------


@st.composite
def sinkhorn_worlds(draw, min_n: int = 3, max_n: int = 14) -> FiniteWorld:
    """``random_world``: a drawn size, seed, Dirichlet concentration (0.3 gives some tiny p(z)) and self-loop weight
    (0: an indefinite kernel); for n > 3 sometimes a sparse random graph of drawn degree (possibly disconnected)."""
    n = draw(st.integers(min_n, max_n))
    degree = draw(st.one_of(st.none(), st.integers(1, n - 1))) if n > 3 else None
    try:
        return random_world(n, degree=degree, concentration=draw(st.sampled_from([0.3, 2.0, 20.0])),
                            self_loop=draw(st.sampled_from([0.0, 0.5, 3.0])), rng=draw(seeds()))
    except ValueError as exc:  # a rare affinity whose Sinkhorn scaling stalls just above its tolerance
        if "Sinkhorn" not in str(exc):
            raise
        reject()


@st.composite
def scaled_worlds(draw, min_n: int = 3, max_n: int = 14) -> FiniteWorld:
    """``sinkhorn_world``: a drawn positive symmetric affinity ``U^power`` (heavy-tailed for large powers, with a
    drawn diagonal weight, 0 for an indefinite kernel) scaled to a drawn Dirichlet law p (floored at 1e-3/n so that
    p > 0; without self-pairs pulled towards uniform until p(z) ≤ 0.4, since a symmetric scaling needs p(z) < 1/2)."""
    n = draw(st.integers(min_n, max_n))
    rng = np.random.default_rng(draw(seeds()))
    p = rng.dirichlet(np.full(n, draw(st.sampled_from([0.5, 2.0, 10.0]))))
    p = np.maximum(p, 1e-3 / n)
    p /= p.sum()
    diagonal = draw(st.sampled_from([0.0, 1.0, 5.0]))
    while diagonal == 0.0 and p.max() > 0.4:  # no self-pairs: p(z) ≤ Σ_{z'≠z} π(z, z') needs p(z) < 1/2
        p = (p + 1.0 / n) / 2
    A = rng.uniform(size=(n, n)) ** draw(st.sampled_from([1, 3, 6]))
    A = (A + A.T) / 2
    np.fill_diagonal(A, np.diag(A) * diagonal)
    try:
        return sinkhorn_world(A, p)
    except ValueError as exc:  # a rare affinity whose Sinkhorn scaling stalls just above its tolerance
        if "Sinkhorn" not in str(exc):
            raise
        reject()


def _shapes(min_size: int, max_size: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(min_size, max_size), min_size=2, max_size=2)


def named_worlds(max_axis: int = 5, *, with_resampling: bool = True) -> st.SearchStrategy[World]:
    """Ring, path, torus and grid walks with drawn sizes (4–12 states; tori and grids with two axes of at most
    ``max_axis``) and drawn laziness (rings and tori are full of exact ties, §1.2), and a resampling world of
    4–6 values (spectrum ``{1, (1 − rate)^{×(|q|−1)}}``: one tied block, no k at a gap) unless ``with_resampling``
    is False."""
    laziness = st.floats(0.0, 0.95)
    move = st.floats(0.05, 1.0)
    walks = [
        st.builds(lambda n, lazy: ring(n, laziness=lazy), st.integers(4, 12), laziness),
        st.builds(lambda n, m: path(n, move=m), st.integers(4, 12), move),
        st.builds(lambda shape, lazy: torus(shape, laziness=lazy), _shapes(3, max_axis), laziness),
        st.builds(lambda shape, moves: grid(shape, move=moves), _shapes(2, max_axis), st.lists(move, min_size=2, max_size=2)),
    ]
    if with_resampling:
        walks.append(st.builds(lambda q, rate: resampling(q, rate), nuisance_laws(4, 6), st.floats(0.05, 1.0)))
    return st.one_of(*walks)


def small_factors() -> st.SearchStrategy[FiniteWorld]:
    """Factors of 2–4 states: Sinkhorn worlds, rings, paths and resampling worlds."""
    return st.one_of(
        sinkhorn_worlds(3, 4),
        st.builds(lambda n, lazy: ring(n, laziness=lazy), st.integers(3, 4), st.floats(0.0, 0.95)),
        st.builds(lambda n, m: path(n, move=m), st.integers(2, 4), st.floats(0.05, 1.0)),
        st.builds(lambda q, rate: resampling(q, rate), nuisance_laws(2, 3), st.floats(0.05, 1.0)),
    )


@st.composite
def product_worlds(draw, min_factors: int = 2, max_factors: int = 3) -> ProductWorld:
    """``ProductWorld`` of 2–3 small factors (at most 64 states); repeated factors give exact ties (§6)."""
    factors = draw(st.lists(small_factors(), min_size=min_factors, max_size=max_factors))
    if len(factors) < max_factors and draw(st.booleans()):
        factors.append(factors[0])  # an identical factor: λ_(i,0) = λ_(0,i)
    return ProductWorld(factors)


def worlds() -> st.SearchStrategy[World]:
    """Any valid world of the strategies above (finite, sparse or product), with at least 4 states."""
    return st.one_of(sinkhorn_worlds(4), scaled_worlds(4), named_worlds(), product_worlds())


def as_finite(world: World) -> FiniteWorld:
    """The world as a FiniteWorld (a product world through ``to_finite``)."""
    return world.to_finite() if isinstance(world, ProductWorld) else world


# --- spectra, computed here from Π (an independent route from prhsim's solvers) -------------------------------------


def _dense(matrix) -> np.ndarray:
    return np.asarray(matrix.toarray() if hasattr(matrix, "toarray") else matrix, dtype=float)


def pair_kernel(p: np.ndarray, Pi) -> np.ndarray:
    """``K = D^{-1/2} Π D^{-1/2}`` from p and Π, symmetrised for eigh."""
    s = np.sqrt(np.asarray(p, dtype=float))
    K = _dense(Pi) / np.outer(s, s)
    return (K + K.T) / 2


def dense_kernel(world: World) -> np.ndarray:
    """K from each factor's Π (``np.kron`` of the factor kernels for a product world, row-major, §6)."""
    K = np.ones((1, 1))
    for f in world.factors:
        K = np.kron(K, pair_kernel(f.p, f.Pi))
    return K


def uncentred_spectrum(world: World) -> np.ndarray:
    """``λ_1 = 1 ≥ λ_2 ≥ … ≥ λ_n`` by a full eigh (descending, §8.1)."""
    return np.linalg.eigvalsh(dense_kernel(world))[::-1]


def centred_spectrum(world: World) -> np.ndarray:
    """``μ_i = λ_{i+1}``: the spectrum without one copy of the trivial eigenvalue 1 (§1.1), n − 1 values."""
    return uncentred_spectrum(world)[1:]


def gapped_ks(mu: np.ndarray, margin: float = CLEAR_GAP, *, positive: bool = False, k_max: int | None = None) -> list[int]:
    """Every k in 1..min(len(mu) − 1, k_max) with ``μ_k − μ_{k+1} > margin``; with ``positive``, also
    ``μ_k > margin`` (the top k stays above the zeros a good view adds, §4)."""
    top = len(mu) - 1 if k_max is None else min(len(mu) - 1, k_max)
    return [k for k in range(1, top + 1)
            if mu[k - 1] - mu[k] > margin and (not positive or mu[k - 1] > margin)]


@st.composite
def worlds_at_a_gap(draw, world_strategy=None, margin: float = CLEAR_GAP, *, positive: bool = False,
                    k_max: int | None = None) -> tuple[World, int, np.ndarray]:
    """``(world, k, μ)`` with k drawn among the k at a gap of the centred spectrum μ (constructed from the
    spectrum; a world with no such k, e.g. a resampling world, is rejected)."""
    world = draw(worlds() if world_strategy is None else world_strategy)
    mu = centred_spectrum(world)
    ks = gapped_ks(mu, margin, positive=positive, k_max=k_max)
    if not ks:
        reject()
    return world, draw(st.sampled_from(ks)), mu


# --- worlds with nuisance (docs/theory.md §4) -----------------------------------------------------------------------


def nuisance_laws(min_size: int = 1, max_size: int = 4) -> st.SearchStrategy[np.ndarray]:
    """A positive law q over N (|N| drawn), from drawn weights in [0.05, 1], normalised."""
    weights = st.integers(min_size, max_size).flatmap(
        lambda size: st.lists(st.floats(0.05, 1.0), min_size=size, max_size=size))
    return weights.map(lambda w: np.asarray(w) / np.sum(w))


@st.composite
def modalities(draw, n_states: int, count: int, max_nuisance: int = 4, *, renderer=None) -> list[Modality]:
    """``count`` modalities with distinct names ``m0, m1, …`` for a base world of ``n_states`` states: a
    ``codebook`` (a Gaussian renderer, seeded Dirichlet q) or a renderer-free ``Modality(name, q)`` with a drawn
    law q over 1..``max_nuisance`` values. With ``renderer``, a user's own constructor
    ``renderer(n_states, n_nuisance, name, rng) -> Modality`` makes every modality (|N| drawn, rng a seeded
    numpy Generator); its modality must have ``n_nuisance`` values."""
    mods = []
    for i in range(count):
        name = f"m{i}"
        if renderer is not None:
            n_nuisance = draw(st.integers(1, max_nuisance))
            mod = renderer(n_states, n_nuisance, name, np.random.default_rng(draw(seeds())))
            if not isinstance(mod, Modality) or mod.n_nuisance != n_nuisance:
                raise ValueError(f"renderer must return a Modality with {n_nuisance} nuisance values, got {mod!r}")
            mods.append(mod)
        elif draw(st.booleans()):
            mods.append(codebook(n_states, draw(st.integers(1, max_nuisance)), name=name, rng=draw(seeds())))
        else:
            mods.append(Modality(name, draw(nuisance_laws(1, max_nuisance))))
    return mods


def views(good_only: bool = False):
    """A good view, or a bad(ε) view with ε in [0.02, 1], often ≤ 0.3 so that nuisance features enter the top k
    (bad(1) resamples the nuisance: a good view's law)."""
    if good_only:
        return st.just(good())
    return st.one_of(st.just(good()), st.one_of(st.floats(0.02, 0.3), st.floats(0.02, 1.0)).map(bad))


def base_worlds() -> st.SearchStrategy[World]:
    """Base worlds over Z for modal worlds: at most 16 states, so that Z × N stays small (no resampling world,
    which has no k at a gap)."""
    return st.one_of(sinkhorn_worlds(4, 10), scaled_worlds(4, 10), named_worlds(max_axis=4, with_resampling=False),
                     product_worlds(2, 2))


@st.composite
def modal_worlds(draw):
    """``view_world(base, modality, view)``: a product world ``π_Z ⊗ ρ_ε`` over ``Z × N`` (§4)."""
    base = draw(base_worlds())
    (modality,) = draw(modalities(base.n, 1))
    return view_world(base, modality, draw(views()))


@st.composite
def nuisance_setups(draw, min_modalities: int = 2, max_modalities: int = 3, *, good_only: bool = False,
                    margin: float = CLEAR_GAP, base=None, renderer=None):
    """``(base, k, modalities, views)``: k at a gap of the base world's centred spectrum (positive when
    ``good_only``, where every view is good), 2–3 modalities and one view each. ``base``: a strategy of base
    worlds (default :func:`base_worlds`; ``st.just(world)`` for one's own); ``renderer``: see :func:`modalities`."""
    base, k, _ = draw(worlds_at_a_gap(base_worlds() if base is None else base, margin, positive=good_only))
    count = draw(st.integers(min_modalities, max_modalities))
    mods = draw(modalities(base.n, count, renderer=renderer))
    return base, k, mods, [draw(views(good_only)) for _ in mods]


# --- perturbations of Π on the same p (docs/theory.md §3) -----------------------------------------------------------


def mixed(world: FiniteWorld, t: float, rng: np.random.Generator) -> FiniteWorld:
    """``Π₂ = (1 − t)Π + tΠ'`` with Π' a random Sinkhorn coupling of the same p."""
    A = rng.uniform(size=(world.n, world.n)) ** 3
    other = sinkhorn_world((A + A.T) / 2, world.p)
    return FiniteWorld(world.p, (1 - t) * _dense(world.Pi) + t * _dense(other.Pi))


def pair_swapped(world: FiniteWorld, moves: int, t: float, rng: np.random.Generator) -> FiniteWorld:
    """``Π₂ = Π + Σ δ((e_a − e_b)(e_c − e_d)ᵀ + transpose)`` over ``moves`` random moves.

    Each move has zero row and column sums and is symmetric, so p and symmetry are kept exactly (to rounding);
    (a, d) and (b, c) are positive entries of Π with a ≠ b, c ≠ d, and δ is t times the largest step that keeps
    Π ≥ 0: mass moves from the pairs (a, d), (b, c) to (a, c), (b, d)."""
    Pi = _dense(world.Pi).copy()
    for _ in range(moves):
        support = np.argwhere(Pi > 0)
        (a, d), (b, c) = support[rng.choice(len(support), size=2, replace=True)]
        if a == b or c == d:
            continue
        u, v = np.zeros(world.n), np.zeros(world.n)
        u[a], u[b], v[c], v[d] = 1.0, -1.0, 1.0, -1.0
        step = np.outer(u, v) + np.outer(v, u)
        down = step < 0
        delta = t * np.min(Pi[down] / -step[down])
        Pi = np.maximum(Pi + delta * step, 0.0)
    return FiniteWorld(world.p, (Pi + Pi.T) / 2)


@st.composite
def perturbed_pairs(draw, world_strategy=None) -> tuple[FiniteWorld, FiniteWorld, str]:
    """``(world_1, world_2, kind)`` on the same p: world_2 is world_1 ``mixed`` with another coupling,
    ``pair_swapped``, or ``same_sample(world_1, ε)`` (same eigenvectors, every gap times ε, §4 bad view B)."""
    w1 = as_finite(draw(worlds() if world_strategy is None else world_strategy))
    kind = draw(st.sampled_from(["mix", "swap", "same_sample"]))
    rng = np.random.default_rng(draw(seeds()))
    if kind == "mix":
        w2 = mixed(w1, draw(st.floats(0.001, 1.0)), rng)
    elif kind == "swap":
        w2 = pair_swapped(w1, draw(st.integers(1, 4)), draw(st.floats(0.01, 1.0)), rng)
    else:
        w2 = same_sample(w1, draw(st.floats(0.05, 1.0)))
    return w1, w2, kind


# --- feature tables (docs/theory.md §1.1, §2) -----------------------------------------------------------------------


def _orthonormal(n: int, columns: int, p: np.ndarray, centred: bool, rng: np.random.Generator) -> np.ndarray:
    """``columns`` orthonormal vectors of Rⁿ, orthogonal to s = √p when centred."""
    s = np.sqrt(p)
    X = rng.standard_normal((n, columns))
    if centred:
        X = X - np.outer(s, s @ X)
    return np.linalg.qr(X)[0]


def _orthogonal(k: int, rng: np.random.Generator) -> np.ndarray:
    """A random element of O(k) (rotation or reflection)."""
    return np.linalg.qr(rng.standard_normal((k, k)))[0]


@st.composite
def feasible_tables(draw, p: np.ndarray, k: int, centred: bool, near: np.ndarray | None = None) -> np.ndarray:
    """A table F with ``FᵀDF = I_k`` (and ``E_p f = 0`` when centred), the constraint set of §1.1: uniformly
    random, or (``near`` given) a tilt of ``near`` by a drawn amount, so that it competes with the optimum."""
    p = np.asarray(p, dtype=float)
    s = np.sqrt(p)
    rng = np.random.default_rng(draw(seeds()))
    X = rng.standard_normal((p.size, k))
    if near is not None:
        X = s[:, None] * near + draw(st.sampled_from([1e-4, 1e-2, 0.3])) * X
    if centred:
        X = X - np.outer(s, s @ X)
    return np.linalg.qr(X)[0] / s[:, None]


@st.composite
def tables_at_known_angles(draw, p: np.ndarray, k: int, centred: bool):
    """``(F1, F2, θ)``: whitened tables (centred when asked) whose p-weighted principal angles are exactly θ
    (drawn in [0, π/2], with 0, tiny angles and π/2 among them), each hidden behind a random O(k) map.

    ``G1 = [e_1..e_k] Q1``, ``G2 = [cos θ_j e_j + sin θ_j e_{k+j}] Q2`` with e orthonormal (⟂ √p when centred),
    ``F_i = D^{-1/2} G_i``. Needs ``2k ≤ n`` (``2k ≤ n − 1`` centred)."""
    p = np.asarray(p, dtype=float)
    angle = st.one_of(st.floats(0.0, np.pi / 2), st.sampled_from([0.0, 1e-9, 1e-6, np.pi / 2]))
    theta = np.asarray(draw(st.lists(angle, min_size=k, max_size=k)))
    rng = np.random.default_rng(draw(seeds()))
    E = _orthonormal(p.size, 2 * k, p, centred, rng)
    G1 = E[:, :k] @ _orthogonal(k, rng)
    G2 = (np.cos(theta) * E[:, :k] + np.sin(theta) * E[:, k:]) @ _orthogonal(k, rng)
    s = np.sqrt(p)[:, None]
    return G1 / s, G2 / s, theta
