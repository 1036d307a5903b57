"""Encoders of the learners: a table (the universal encoder) and an MLP on observations (docs/theory.md §0).

An encoder is a pair of pure functions, ``init(key) -> params`` and
``apply(params, inputs) -> embeddings``, and the input of every state:

* ``tabular``: one learned vector per state, ``params = {"table": (n, k)}``;
  the input of state z is z itself and ``apply`` looks its row up. This is
  the universal encoder the theorem assumes (docs/theory.md §0: an encoder is a
  table ``F ∈ R^{n×k}``).
* ``mlp``: ``params = {"layers": ((W_1, b_1), …, (W_L, b_L))}``, GELU between
  layers, applied to the observation of the state (:func:`observation_inputs`):
  the modality's rendering ``g_m(z, n)`` flattened and standardised. A restricted
  encoder class solves a generalised eigenproblem that depends on the features
  (docs/theory.md §0); a wide enough MLP on injective observations can still
  fit any table.

The forward passes (:func:`tabular_apply`, :func:`mlp_apply`) are written once against the
array API, so the JAX loop and the torch loop run the same code on their own arrays; the
initialisations draw with JAX's random keys. Nothing here imports jax at module import:
jax is imported inside the functions that need it, so ``import prhsim.learners`` stays free of it.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, NamedTuple

import numpy as np
from array_api_compat import array_namespace

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RENDER_STANDARDISE
from prhsim.worlds import ModalWorld, Modality, World, pair_sampler

EncoderKind = Literal["tabular", "mlp"]
#: Observations are rendered in chunks of this many states.
CHUNK = 65_536
#: Below this p-weighted standard deviation an input coordinate counts as constant (it is centred, not scaled).
STD_FLOOR = 1e-12


class Encoder(NamedTuple):
    """An encoder and the input of every state.

    Attributes:
        kind: "tabular" or "mlp".
        k: number of output features.
        inputs: row z is the input of state z: ``arange(n)`` for a table, the
            standardised observation (n, d) for an MLP.
        init: ``init(key) -> params`` (a JAX key).
        apply: ``apply(params, inputs[states]) -> (…, k)`` embeddings; jit- and vmap-able.
        hidden: the MLP's hidden widths (empty for a table).
    """

    kind: EncoderKind
    k: int
    inputs: np.ndarray
    init: Callable[[Any], Any]
    apply: Callable[[Any, Any], Any]
    hidden: tuple[int, ...] = ()

    @property
    def n(self) -> int:
        return int(self.inputs.shape[0])


def tabular_apply(params: Any, states: Any) -> Any:
    """``f(z) = table[z]``: rows of the (n, k) table for integer states of any shape."""
    return params["table"][states]


def tabular_init(key: Any, n: int, k: int, *, scale: float = 1.0) -> dict[str, Any]:
    """A table of i.i.d. ``N(0, scale²)`` entries, shape (n, k), in JAX's default float dtype."""
    import jax

    return {"table": scale * jax.random.normal(key, (n, k))}


#: ``sqrt(2/π)``, the tanh approximation's constant.
SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


def gelu(x: Any) -> Any:
    """The tanh approximation of GELU, ``x · ½(1 + tanh(sqrt(2/π)(x + 0.044715 x³)))``, on any array library
    (the operations and their order of ``jax.nn.gelu``'s default, so JAX compiles the same program)."""
    xp = array_namespace(x)
    return x * (0.5 * (1.0 + xp.tanh(SQRT_2_OVER_PI * (x + 0.044715 * (x ** 3)))))


def mlp_apply(params: Any, x: Any) -> Any:
    """``W_L ᵀ gelu(… gelu(W_1ᵀ x + b_1) …) + b_L`` for inputs x (…, d) of any array library (JAX, torch,
    numpy); the architecture is read off params."""
    layers = params["layers"]
    for W, b in layers[:-1]:
        x = gelu(x @ W + b)
    W, b = layers[-1]
    return x @ W + b


def mlp_init(key: Any, d: int, k: int, hidden: tuple[int, ...]) -> dict[str, Any]:
    """LeCun-normal weights (variance 1/fan_in) and zero biases for widths ``d → hidden… → k``."""
    import jax
    import jax.numpy as jnp

    widths = (d, *hidden, k)
    keys = jax.random.split(key, len(widths) - 1)
    layers = []
    for sub, fan_in, fan_out in zip(keys, widths[:-1], widths[1:]):
        W = jax.random.normal(sub, (fan_in, fan_out)) / np.sqrt(fan_in)
        layers.append((W, jnp.zeros(fan_out, dtype=W.dtype)))
    return {"layers": tuple(layers)}


def tabular_encoder(n: int, k: int, *, scale: float = 1.0) -> Encoder:
    """One learned vector per state: params ``{"table": (n, k)}``, initialised ``N(0, scale²)``.

    Example:
        >>> enc = tabular_encoder(5, 2)
        >>> enc.kind, enc.inputs.tolist()
        ('tabular', [0, 1, 2, 3, 4])
    """
    n, k = _positive("n", n), _positive("k", k)
    if not scale > 0:
        raise ValueError(f"the table's init scale must be positive, got {scale}")
    ensure_fits(3 * FLOAT * float(n) * k, f"a table of {n:,} states x {k} features", "lower k or use a smaller world")

    def init(key: Any) -> Any:
        return tabular_init(key, n, k, scale=scale)

    return Encoder("tabular", k, np.arange(n), init, tabular_apply)


def mlp_encoder(inputs: np.ndarray, k: int, *, hidden: tuple[int, ...] = (128, 128)) -> Encoder:
    """An MLP ``d → hidden… → k`` (GELU) on the given per-state inputs (n, d), e.g. :func:`observation_inputs`."""
    inputs = np.asarray(inputs, dtype=np.float64)
    if inputs.ndim != 2 or inputs.shape[0] < 1:
        raise ValueError(f"MLP inputs must be a table (states x d), got shape {inputs.shape}")
    if not np.all(np.isfinite(inputs)):
        raise ValueError("MLP inputs contain NaN or inf")
    k = _positive("k", k)
    hidden = tuple(_positive("hidden width", h) for h in hidden)
    d = int(inputs.shape[1])

    def init(key: Any) -> Any:
        return mlp_init(key, d, k, hidden)

    return Encoder("mlp", k, inputs, init, mlp_apply, hidden)


def observation_inputs(world: World, modality: Modality | None = None) -> np.ndarray:
    """The MLP input of every state, shape (n, d), float64.

    * A modality with a renderer (``world.modality`` for a :class:`~prhsim.worlds.ModalWorld`,
      or the one given): ``modality.render_states(z)`` of every modal state ``z·|N| + n``,
      flattened and standardised per coordinate with the p-weighted mean and standard
      deviation (constant coordinates are only centred).
    * A renderer-free modality (its observation is (z, n)): the one-hot of z next to the one-hot of n.
    * No modality (a plain world): the one-hot of the state.

    Rendered in chunks of 65,536 states, and standardised as :func:`rendered_inputs` does (the same
    chunked sums); the table is guarded by the memory limit.
    """
    if modality is None and isinstance(world, ModalWorld):
        modality = world.modality
    n = world.n
    if modality is None:
        ensure_fits(2 * FLOAT * float(n) ** 2, f"one-hot inputs of {n:,} states", "use a modality or a smaller world")
        return np.eye(n)
    n_nuisance = modality.n_nuisance
    if n % n_nuisance:
        raise ValueError(f"a world of {n:,} states is not Z x N for modality {modality.name!r} (|N| = {n_nuisance})")
    n_z = n // n_nuisance
    raw = RenderedInputs(modality, n, np.zeros(1), np.ones(1), True).raw
    if modality.renderer_free:
        ensure_fits(2 * FLOAT * float(n) * (n_z + n_nuisance), f"one-hot (z, n) inputs of {n:,} states",
                    "use a smaller world")
        return raw(np.arange(n))
    d = int(np.prod(modality.render_states(np.zeros(1, dtype=np.int64)).shape[1:], dtype=np.int64))
    ensure_fits(3 * FLOAT * float(n) * d, f"the observations of {n:,} states x {d} values ({modality.name!r})",
                "use a smaller world, or the tabular encoder")
    X = np.empty((n, d))
    for c in _chunks(n):
        X[c] = raw(c)
    mean, scale = _standardisation(np.asarray(world.p, dtype=np.float64), n, lambda c: X[c])
    X -= mean
    X /= scale
    return X


def _chunks(n: int) -> list[np.ndarray]:
    """The states 0..n-1 in chunks of :data:`CHUNK`."""
    return [np.arange(start, min(n, start + CHUNK)) for start in range(0, n, CHUNK)]


def _standardisation(p: np.ndarray, n: int, rows: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The p-weighted mean and scale (standard deviation, 1 for a constant coordinate) of the observations
    ``rows(chunk)``, summed chunk by chunk in one fixed order: the table of :func:`observation_inputs` and
    :func:`rendered_inputs` standardise by exactly the same numbers."""
    chunks = _chunks(n)
    mean = sum(p[c] @ rows(c) for c in chunks)
    std = np.sqrt(sum(p[c] @ (rows(c) - mean) ** 2 for c in chunks))
    return mean, np.where(std > STD_FLOOR, std, 1.0)


def rendered_encoder(rendered: "RenderedInputs", k: int, *, hidden: tuple[int, ...] = (128, 128)) -> Encoder:
    """:func:`mlp_encoder` on inputs rendered batch by batch (:class:`RenderedInputs`): no table of every
    state; ``inputs`` is empty (0, d) and the learner renders what each step needs."""
    k = _positive("k", k)
    hidden = tuple(_positive("hidden width", h) for h in hidden)
    d = rendered.d

    def init(key: Any) -> Any:
        return mlp_init(key, d, k, hidden)

    return Encoder("mlp", k, np.zeros((0, d)), init, mlp_apply, hidden)


class RenderedInputs:
    """The MLP inputs of a modal world rendered on demand: ``inputs(states)`` -> standardised observations (s, d).

    The same inputs :func:`observation_inputs` tabulates, for worlds whose table would not fit:
    each batch of modal states is rendered (``modality.render_states``, or the one-hots of (z, n)
    for a renderer-free modality, left unstandardised), flattened, centred by ``mean`` and divided by ``scale``.
    """

    def __init__(self, modality: Modality, n_states: int, mean: np.ndarray, scale: np.ndarray, exact: bool) -> None:
        self.modality, self.n_states, self.mean, self.scale, self.exact = modality, n_states, mean, scale, exact
        self.d = int(mean.size)

    def raw(self, states: np.ndarray) -> np.ndarray:
        """The flattened, unstandardised observations of modal states, float64 (s, d)."""
        states = np.asarray(states, dtype=np.int64).ravel()
        m = self.modality
        if m.renderer_free:
            n_z = self.n_states // m.n_nuisance
            out = np.zeros((states.size, n_z + m.n_nuisance))
            z, nu = np.divmod(states, m.n_nuisance)
            out[np.arange(states.size), z] = 1.0
            out[np.arange(states.size), n_z + nu] = 1.0
            return out
        return np.asarray(m.render_states(states), dtype=np.float64).reshape(states.size, -1)

    def __call__(self, states: np.ndarray) -> np.ndarray:
        shape = np.shape(states)
        X = self.raw(states)
        X -= self.mean
        X /= self.scale
        return X.reshape(*shape, self.d)


#: States drawn from p to standardise rendered inputs of a world above :data:`prhsim.optima.FEATURE_LIMIT` states.
STANDARDISE_SAMPLE = 65_536


def rendered_inputs(world: ModalWorld, *, exact: bool | None = None, rng: int = 0) -> RenderedInputs:
    """:class:`RenderedInputs` of a modal world, standardised by the p-weighted moments of every state
    (``exact``; the default up to :data:`prhsim.optima.FEATURE_LIMIT` states, chunk by chunk) or by the
    moments of :data:`STANDARDISE_SAMPLE` states drawn from p (seeded by ``rng``; above it)."""
    from prhsim.optima import FEATURE_LIMIT

    if not isinstance(world, ModalWorld):
        raise ValueError(f"rendered inputs need a modal world (from view_world), got {type(world).__name__}")
    modality = world.modality
    exact = world.n <= FEATURE_LIMIT if exact is None else exact
    probe = RenderedInputs(modality, world.n, np.zeros(1), np.ones(1), exact)
    if modality.renderer_free:  # the one-hots of (z, n), unstandardised (as observation_inputs gives them)
        d = world.n // modality.n_nuisance + modality.n_nuisance
        return RenderedInputs(modality, world.n, np.zeros(d), np.ones(d), exact)
    if exact:  # every state, rendered twice (the mean, then the spread about it) rather than stored
        mean, scale = _standardisation(np.asarray(world.p, dtype=np.float64), world.n, probe.raw)
    else:
        states = pair_sampler(world).pairs(STANDARDISE_SAMPLE, rng=np.random.default_rng([rng, RENDER_STANDARDISE]))[0]
        X = probe.raw(states)
        mean = X.mean(axis=0)
        std = np.sqrt(((X - mean) ** 2).mean(axis=0))
        scale = np.where(std > STD_FLOOR, std, 1.0)
    return RenderedInputs(modality, world.n, mean, scale, exact)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
