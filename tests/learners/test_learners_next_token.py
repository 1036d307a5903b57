"""Next-token prediction against correspondence analysis (docs/theory.md §5).

* the batch cross-entropy: one value on numpy, JAX (jit, vmap) and torch, one gradient on JAX and torch,
  a naive twin with Python loops, exact at logits of 1e3;
* correspondence analysis against its definition: the constraints, the optimum value Σσ, eigh of MMᵀ,
  and (hypothesis) no feasible pair beats it; independence gives σ = 0;
* the exact emission world against a brute-force enumeration;
* the L-BFGS objective: the value against log_softmax, the gradient against finite differences;
* the theory's claim: the whitened optimum approaches CA as the dependence weakens, reproducibly;
* the sweep and its figure.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.special
from hypothesis import given, strategies as st

from support import assert_close, projector_distance
from prhsim.experiments.sweeps._ntp_ca import NtpCaCell, NtpCaResult, ntp_ca_sweep
from prhsim.experiments.sweeps._ntp_ca_figure import NTP_FIT, NTP_PMI, NTP_PMI_FIT, NTP_REFERENCE, ntp_ca_figure
from prhsim.learners._evaluate import subspace_distance
from prhsim.learners._log_bilinear import _Scaled, _Table, expected_cross_entropy, fit_log_bilinear, whitened_deviation
from prhsim.objectives import next_token_cross_entropy
from prhsim.optima import correspondence_analysis, pmi_proxy
from prhsim.worlds import emission_world

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture
def torch():
    """torch, for the tests that compare against it (the others run without it)."""
    return pytest.importorskip("torch")


# --------------------------------------------------------------------------- cross-entropy


def naive_cross_entropy(h, w, y, bias=None):
    """The definition with Python loops: mean_b [logsumexp_v(h_b·w_v + bias_v) − h_b·w_{y_b} − bias_{y_b}]."""
    total = 0.0
    for b in range(h.shape[0]):
        logits = [math.fsum(h[b, i] * w[v, i] for i in range(h.shape[1])) + (0.0 if bias is None else bias[v])
                  for v in range(w.shape[0])]
        top = max(logits)
        total += top + math.log(math.fsum(math.exp(l - top) for l in logits)) - logits[int(y[b])]
    return total / h.shape[0]


def _batch(seed=0, B=7, k=3, V=5, scale=1.0):
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal((B, k)), rng.standard_normal((V, k)), rng.integers(0, V, size=B),
            rng.standard_normal(V))


@pytest.mark.parametrize("with_bias", [True, False])
def test_cross_entropy_agrees_on_numpy_jax_torch_and_the_naive_twin(torch, with_bias):
    h, w, y, bias = _batch()
    bias = bias if with_bias else None
    expected = naive_cross_entropy(h, w, y, bias)
    assert_close(next_token_cross_entropy(h, w, y, bias), expected)

    jargs = [jnp.asarray(h), jnp.asarray(w), jnp.asarray(y), None if bias is None else jnp.asarray(bias)]
    fn = jax.jit(lambda a, b, c, d: next_token_cross_entropy(a, b, c, d))
    assert_close(fn(*jargs), expected, what="jax.jit")
    argnums = (0, 1, 3) if with_bias else (0, 1)
    jgrads = jax.grad(next_token_cross_entropy, argnums=argnums)(*jargs)

    t = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (h, w)]
    tb = None if bias is None else torch.tensor(bias, dtype=torch.float64, requires_grad=True)
    value = next_token_cross_entropy(t[0], t[1], torch.tensor(y), tb)
    assert value.dtype == torch.float64
    assert_close(value.detach().numpy(), expected, what="torch")
    value.backward()
    tgrads = [t[0].grad, t[1].grad] + ([tb.grad] if with_bias else [])
    for i, (jg, tg) in enumerate(zip(jgrads, tgrads)):
        assert_close(tg.numpy(), np.asarray(jg), what=f"d/d arg {argnums[i]}: torch vs jax")


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    """d/dh_b = (softmax_b − e_{y_b}) W / B, from the definition."""
    h, w, y, bias = _batch(1)
    logits = h @ w.T + bias
    r = scipy.special.softmax(logits, axis=1) - np.eye(w.shape[0])[y]
    g = jax.grad(next_token_cross_entropy)(jnp.asarray(h), jnp.asarray(w), jnp.asarray(y), jnp.asarray(bias))
    assert_close(g, r @ w / h.shape[0])


def test_cross_entropy_under_vmap_equals_the_loop():
    H = np.random.default_rng(2).standard_normal((3, 7, 3))
    _, w, y, bias = _batch(2)
    batched = jax.jit(jax.vmap(lambda hh: next_token_cross_entropy(hh, jnp.asarray(w), jnp.asarray(y),
                                                                   jnp.asarray(bias))))(jnp.asarray(H))
    assert_close(batched, [naive_cross_entropy(hh, w, y, bias) for hh in H])


def test_cross_entropy_is_exact_at_logits_of_1e3(torch):
    h, w, y, bias = _batch(3, scale=400.0)  # logits of order 1e3
    assert np.abs(h @ w.T).max() > 1e3
    value = next_token_cross_entropy(h, w, y, bias)
    assert np.isfinite(value)
    assert_close(value, naive_cross_entropy(h, w, y, bias), rtol=1e-12, atol=1e-10)
    # a constant shift of every logit (bias + 1e3) changes nothing
    small_h, small_w, _, _ = _batch(3)
    base = next_token_cross_entropy(small_h, small_w, y, bias)
    assert_close(next_token_cross_entropy(small_h, small_w, y, bias + 1e3), base, atol=1e-12)
    t = next_token_cross_entropy(torch.tensor(h), torch.tensor(w), torch.tensor(y), torch.tensor(bias))
    assert_close(t.numpy(), value, rtol=1e-12, atol=1e-10)


def test_cross_entropy_refuses_bad_inputs():
    h, w, y, bias = _batch()
    with pytest.raises(ValueError, match="shapes"):
        next_token_cross_entropy(h, w[:, :2], y)
    with pytest.raises(ValueError, match="y must have shape"):
        next_token_cross_entropy(h, w, y[:3])
    with pytest.raises(ValueError, match=r"tokens y must lie in 0..4, got 5"):
        next_token_cross_entropy(h, w, np.r_[y[:-1], 5])
    with pytest.raises(TypeError, match="integer tokens"):
        next_token_cross_entropy(h, w, y.astype(float))
    with pytest.raises(ValueError, match=r"bias must have shape \(5,\)"):
        next_token_cross_entropy(h, w, y, bias[:2])


# --------------------------------------------------------------------------- correspondence analysis


@st.composite
def joints(draw, max_side=5):
    """A small random joint table with positive marginals (some entries may be 0)."""
    C = draw(st.integers(2, max_side))
    V = draw(st.integers(2, max_side))
    cells = draw(st.lists(st.floats(0.0, 1.0), min_size=C * V, max_size=C * V))
    P = np.array(cells).reshape(C, V)
    P[np.arange(C), np.arange(C) % V] += 1e-3  # every row has mass
    P[np.arange(V) % C, np.arange(V)] += 1e-3  # every column has mass
    return P / P.sum()


def naive_ca_matrix(P):
    """``M[c, y] = P(c, y)/√(p_c p_y) − √(p_c p_y)``, entry by entry."""
    p_c, p_y = P.sum(axis=1), P.sum(axis=0)
    M = np.empty_like(P)
    for c, y in itertools.product(range(P.shape[0]), range(P.shape[1])):
        M[c, y] = P[c, y] / math.sqrt(p_c[c] * p_y[y]) - math.sqrt(p_c[c] * p_y[y])
    return M


def check_ca(P, k, ca):
    p_c, p_y = P.sum(axis=1), P.sum(axis=0)
    f, g = ca.contexts, ca.tokens
    assert_close(p_c @ f, np.zeros(k), atol=1e-10, what="E f = 0")
    assert_close(p_y @ g, np.zeros(k), atol=1e-10, what="E g = 0")
    assert_close(f.T @ (p_c[:, None] * f), np.eye(k), atol=1e-10, what="E f fᵀ = I")
    assert_close(g.T @ (p_y[:, None] * g), np.eye(k), atol=1e-10, what="E g gᵀ = I")
    assert_close(np.sum(P * (f @ g.T)), ca.value, atol=1e-10, what="E_P fᵀg = Σσ")
    M = naive_ca_matrix(P)
    eig = np.sort(np.linalg.eigvalsh(M @ M.T))[::-1]
    r = min(P.shape) - 1
    assert_close(ca.values ** 2, eig[:k], atol=1e-12, what="σ² = eigenvalues of MMᵀ")
    assert_close(ca.gap, ca.values[-1] - (math.sqrt(max(eig[k], 0.0)) if k < r else 0.0), atol=1e-7)
    assert np.all(np.diff(ca.values) <= 1e-15)


@given(P=joints(), data=st.data())
def test_ca_is_the_optimum_of_the_whitened_bilinear_problem(P, data):
    k = data.draw(st.integers(1, min(P.shape) - 1))
    ca = correspondence_analysis(P, k)
    check_ca(P, k, ca)
    # a random feasible pair (centred and whitened under p_c, p_y) never beats Σσ
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    p_c, p_y = P.sum(axis=1), P.sum(axis=0)
    for _ in range(5):
        f = _random_whitened(rng, p_c, k)
        g = _random_whitened(rng, p_y, k)
        assert np.sum(P * (f @ g.T)) <= ca.value + 1e-10


def _random_whitened(rng, p, k):
    """``D^{-1/2} Q`` with Q orthonormal and orthogonal to √p: centred and whitened under p."""
    s = np.sqrt(p)
    A = rng.standard_normal((p.shape[0], k))
    A -= s[:, None] * (s @ A)
    Q, _ = np.linalg.qr(A)
    return Q / s[:, None]


def test_ca_subspace_is_the_eigenspace_of_mmt():
    P = emission_world(0.8, rng=4).joint
    ca = correspondence_analysis(P, 2)
    assert ca.gap > 1e-3
    M = naive_ca_matrix(P)
    _, U = np.linalg.eigh(M @ M.T)
    sc = np.sqrt(ca.p_c)[:, None]
    assert projector_distance(U[:, -2:], ca.contexts * sc) < 1e-10


def test_independence_gives_zero_strength():
    rng = np.random.default_rng(5)
    p_c, p_y = rng.dirichlet(np.ones(7)), rng.dirichlet(np.ones(4))
    P = np.outer(p_c, p_y)
    ca = correspondence_analysis(P, 3)
    assert ca.strength < 1e-14
    check_ca(P, 3, ca)  # the features are still centred and whitened (the SVD avoids √p)
    world = emission_world(0.0, rng=1)
    assert correspondence_analysis(world.joint, 2).strength < 1e-14


def test_ca_refuses_bad_tables():
    P = np.full((3, 3), 1 / 9)
    with pytest.raises(ValueError, match=r"must sum to 1 \(within 1e-09\), got 1\.1"):
        correspondence_analysis(P * 1.1, 1)
    bad = P.copy()
    bad[0, 1] = -0.1
    bad[0, 2] += 0.1
    with pytest.raises(ValueError, match=r"nonnegative, got P\[0, 1\] = -0\.1"):
        correspondence_analysis(bad, 1)
    empty = P.copy()
    empty[:, 1] = 0.0
    empty[:, 0] *= 2
    with pytest.raises(ValueError, match="column 1 of P is empty"):
        correspondence_analysis(empty, 1)
    with pytest.raises(ValueError, match="row 2 of P is empty"):
        correspondence_analysis(np.vstack([P[:2] * 1.5, np.zeros(3)]), 1)
    for k in (0, 3, 1.5):
        with pytest.raises(ValueError, match=r"k must be an integer in 1\.\.2"):
            correspondence_analysis(P, k)
    with pytest.raises(ValueError, match=r"positive everywhere here .* P\[0, 0\] = 0"):
        pmi_proxy(np.array([[0.0, 0.5], [0.25, 0.25]]), 1)


# --------------------------------------------------------------------------- the emission world


def test_emission_world_matches_a_brute_force_enumeration():
    world = emission_world(0.7, n_states=3, vocab=3, context=2, rng=8)
    Em, p_z = world.emission, world.p_z
    assert_close(Em.sum(axis=1), np.ones(3))
    assert_close(p_z, np.full(3, 1 / 3))
    for c, (c1, c2) in enumerate(world.context_tokens()):
        for y in range(3):
            brute = math.fsum(p_z[z] * Em[z, c1] * Em[z, c2] * Em[z, y] for z in range(3))
            assert_close(world.joint[c, y], brute, atol=1e-16)
    assert world.joint.shape == (9, 3) and world.context == 2 and world.vocab == 3
    assert_close(world.context_tokens()[5], [1, 2])  # row-major: 5 = 1·3 + 2
    # one seed, one T: the emission moves linearly in a
    other = emission_world(0.35, n_states=3, vocab=3, context=2, rng=8)
    assert_close(other.emission - 1 / 3, (world.emission - 1 / 3) / 2, atol=1e-15)
    with pytest.raises(ValueError, match=r"a must lie in \[0, 1\], got 1\.5"):
        emission_world(1.5)
    with pytest.raises(ValueError, match="vocab must be an integer >= 2, got 1"):
        emission_world(0.5, vocab=1)


# --------------------------------------------------------------------------- the exact fit


def naive_expected_ce(P, h, W, b):
    return float(-np.sum(P * scipy.special.log_softmax(h @ W.T + b, axis=1)))


@pytest.mark.parametrize("a", [0.05, 1.0])
def test_expected_cross_entropy_value_and_gradient(a):
    P = emission_world(a, rng=3).joint
    rng = np.random.default_rng(0)
    C, V, d = P.shape[0], P.shape[1], 2
    h, W, b = rng.standard_normal((C, d)), rng.standard_normal((V, d)), rng.standard_normal(V)
    value, grads = expected_cross_entropy(P, h, W, b)
    assert_close(value, naive_expected_ce(P, h, W, b), rtol=1e-13)
    eps = 1e-6
    for arg, grad in zip(range(3), grads):
        params = [h, W, b]
        fd = np.zeros_like(params[arg])
        for idx in np.ndindex(fd.shape):
            plus = [x.copy() for x in params]
            minus = [x.copy() for x in params]
            plus[arg][idx] += eps
            minus[arg][idx] -= eps
            fd[idx] = (naive_expected_ce(P, *plus) - naive_expected_ce(P, *minus)) / (2 * eps)
        assert_close(grad, fd, atol=1e-8, rtol=1e-6, what=f"d/d arg {arg}")


@pytest.mark.parametrize("a", [0.03, 1.0])
def test_the_scaled_lbfgs_objective_gradient_matches_finite_differences(a):
    P = emission_world(a, rng=3).joint
    table = _Table(P, P.sum(axis=1), P.sum(axis=0))
    problem = _Scaled(table, 2)
    theta = np.random.default_rng(1).standard_normal(problem.C * 2 + problem.V * 2 + problem.V)
    value, grad = problem(theta)
    h, W, b = problem.unpack(theta)
    assert_close(value / problem.scale + table.entropy, naive_expected_ce(P, h, W, b), rtol=1e-13)
    eps = 1e-6
    fd = np.array([(problem(theta + eps * e)[0] - problem(theta - eps * e)[0]) / (2 * eps)
                   for e in np.eye(theta.size)])
    assert_close(grad, fd, atol=1e-7 * max(1.0, np.abs(grad).max()), rtol=1e-6)


def test_fit_reaches_the_entropy_bound_at_full_rank_and_never_below():
    P = emission_world(0.6, n_states=3, vocab=3, context=1, rng=2).joint  # 3 x 3: d = 2 is full rank
    fit = fit_log_bilinear(P, 2, rng=0)
    assert fit.converged and fit.loss >= fit.entropy
    assert fit.kl < 1e-12 * fit.information
    assert_close(fit.loss, naive_expected_ce(P, fit.h, fit.W, fit.b), rtol=1e-13)
    low = fit_log_bilinear(P, 1, rng=0)
    assert low.loss > fit.loss and low.kl > 0


def test_whitened_deviation_ignores_gl_and_shifts():
    P = emission_world(0.5, rng=6).joint
    ca = correspondence_analysis(P, 2)
    A = np.array([[2.0, 1.0], [-0.5, 3.0]])
    assert whitened_deviation(ca.contexts @ A + 7.0, ca) < 1e-12
    fit = fit_log_bilinear(P, 2, rng=0)
    assert_close(whitened_deviation(fit.h @ A - 1.0, ca), whitened_deviation(fit.h, ca), atol=1e-12)
    with pytest.raises(ValueError, match=r"must have shape \(36, 2\)"):
        whitened_deviation(fit.h[:, :1], ca)
    with pytest.raises(ValueError, match="singular"):
        whitened_deviation(np.ones((36, 2)), ca)


def test_the_whitened_optimum_approaches_ca_as_dependence_weakens():
    """docs/theory.md §5: s_Θ shrinks with σ_1 (first order), and the optimum is seed-reproducible.

    Only as σ_1 → 0: at strong dependence s_Θ need not grow with a (this world: 0.054 at a = 0.3,
    0.0535 at a = 1).
    """
    strengths = (0.03, 0.1, 0.3)
    sigma, s_theta, pmi = [], [], []
    for a in strengths:
        P = emission_world(a, rng=11).joint
        ca = correspondence_analysis(P, 2)
        first, second = (fit_log_bilinear(P, 2, rng=seed, restarts=2) for seed in (1, 2))
        assert first.converged and second.converged
        assert first.loss >= first.entropy
        assert subspace_distance(first.h, second.h - ca.p_c @ second.h, ca.p_c) < 1e-4  # seeds agree
        sigma.append(ca.strength)
        s_theta.append(whitened_deviation(first.h, ca))
        pmi.append(subspace_distance(first.h, pmi_proxy(P, 2), ca.p_c))
    assert np.all(np.diff(sigma) > 0)
    assert np.all(np.diff(s_theta) > 0), s_theta
    assert s_theta[0] < 0.01 and s_theta[0] < 2 * sigma[0]
    # the deviation is first order: s_Θ/σ_1 settles to a constant as σ_1 → 0
    assert abs(s_theta[0] / sigma[0] - s_theta[1] / sigma[1]) < 0.1 * s_theta[0] / sigma[0]
    # the PMI proxy is a closer proxy of the optimum than CA at weak dependence
    assert pmi[0] < 0.5 * s_theta[0]
    assert_close(pmi_proxy(P, 2).T @ (ca.p_c[:, None] * pmi_proxy(P, 2)), np.eye(2), atol=1e-10)


# --------------------------------------------------------------------------- the sweep and its figure


def test_sweep_and_figure_on_a_tiny_grid():
    result = ntp_ca_sweep((0.05, 1.0), worlds=2, restarts=1, rng=3)
    assert isinstance(result, NtpCaResult) and result.seed == 3 and result.k == 2
    assert [len(row) for row in result.cells] == [2, 2]
    cell = result.cells[1][0]
    assert isinstance(cell, NtpCaCell) and cell.world == 1 and cell.strength == 0.05
    for c in (c for row in result.cells for c in row):
        assert c.loss >= c.entropy and c.converged
        assert_close(c.ratio, c.s_theta / c.sigma_1)
    assert result.small_cells == 1
    smallest = min((c for row in result.cells for c in row), key=lambda c: c.sigma_1)
    assert_close(result.median_small_ratio, smallest.ratio)
    assert result.max_s_theta == max(c.s_theta for row in result.cells for c in row)
    assert result.all_converged and result.seconds > 0
    assert NtpCaResult.model_validate_json(result.model_dump_json()) == result
    again = ntp_ca_sweep((0.05, 1.0), worlds=2, restarts=1, rng=3)
    assert again.cells == result.cells
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\].*got 0\.0"):
        ntp_ca_sweep((0.0, 0.5))
    with pytest.raises(ValueError, match="k must be an integer in 1..5, got 6"):
        ntp_ca_sweep((0.5,), k=6)

    fig = ntp_ca_figure(result)
    gids = {line.get_gid() for ax in fig.axes for line in ax.get_lines()}
    assert {f"{NTP_FIT}-0", f"{NTP_PMI}-1", f"{NTP_PMI_FIT}-0", NTP_REFERENCE} <= gids
    fig.canvas.draw()
