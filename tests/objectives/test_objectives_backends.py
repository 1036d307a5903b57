"""Batch objectives written once against the array API: one value and one gradient on numpy, JAX and torch.

Every objective is evaluated in float64 on numpy (value), JAX (``jax.jit`` value,
``jax.grad``) and torch (autograd), and compared with a naive numpy twin written
from its definition (docs/theory.md §1.1, §1.3, §7). Array-valued objectives are
reduced to a scalar by a fixed random weighting so they have a gradient.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from array_api_compat import array_namespace

from support import assert_close
from prhsim.objectives import (
    covariance_penalty,
    epps_pulley,
    invariance,
    lejepa_loss,
    pairwise_invariance,
    population_epps_pulley,
    sigreg,
    spectral_contrastive,
    whiten_batch as whiten,
    whitened_alignment,
    whitened_invariance,
)

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture
def torch():
    """torch, for the tests that compare against it (the others run without it)."""
    return pytest.importorskip("torch")

# Named quadrature of the SIGReg twin, built here from the description (17 knots on [0, 3]).
T = np.linspace(0.0, 3.0, 17)
W = (3.0 / 16) * np.exp(-T**2 / 2) * np.r_[1.0, np.full(15, 2.0), 1.0]


def naive_sigreg(E, A, n_total=None):
    """Project, then cos/sin of an N x M x 17 array, then the weighted sum (LeJEPA's T, mean over M)."""
    x = E @ A
    n = x.shape[0] if n_total is None else n_total
    phase = x[:, :, None] * T[None, None, :]
    C, S = np.cos(phase).mean(axis=0), np.sin(phase).mean(axis=0)
    return float(np.mean(n * np.sum(W * ((C - np.exp(-T**2 / 2)) ** 2 + S**2), axis=1)))


def naive_invariance(e, n_global):
    V, N, _ = e.shape
    total = 0.0
    for v in range(V):
        for n in range(N):
            c = sum(e[g, n] for g in range(n_global)) / n_global
            total += float(np.sum((e[v, n] - c) ** 2))
    return total / (V * N)


def naive_pairwise(a, b):
    return float(np.mean([np.sum((a[n] - b[n]) ** 2) for n in range(a.shape[0])]))


def naive_population_ep(F, p, A):
    s = F @ A
    out = []
    for j in range(A.shape[1]):
        sj = s[:, j]
        pair = sum(p[z] * p[y] * np.exp(-(sj[z] - sj[y]) ** 2 / 2) for z in range(len(p)) for y in range(len(p)))
        single = sum(p[z] * np.exp(-sj[z] ** 2 / 4) for z in range(len(p)))
        out.append(np.sqrt(2 * np.pi) * pair - 2 * np.sqrt(np.pi) * single + np.sqrt(2 * np.pi / 3))
    return np.array(out)


def naive_whiten(x):
    xc = x - x.mean(axis=0)
    C = xc.T @ xc / x.shape[0]
    vals, vecs = np.linalg.eigh(C)  # the symmetric inverse square root, C^{-1/2} C C^{-1/2} = I
    return xc @ vecs @ np.diag(vals**-0.5) @ vecs.T


def naive_whitened_invariance(a, b):
    """Whiten the pooled 2N rows with the symmetric C^{-1/2}, split, then the pairwise invariance."""
    W = naive_whiten(np.concatenate([a, b]))
    return naive_pairwise(W[:len(a)], W[len(a):])


def naive_whitened_alignment(C, A):
    """``E_π‖C^{-1/2}(x − x')‖² = tr(C^{-1/2}(2C − A − Aᵀ)C^{-1/2})`` with the symmetric inverse root."""
    vals, vecs = np.linalg.eigh(C)
    R = vecs @ np.diag(vals**-0.5) @ vecs.T
    return float(np.trace(R @ (2 * C - A - A.T) @ R))


def naive_cov_penalty(x):
    return float(np.sum((np.cov(x, rowvar=False, bias=True) - np.eye(x.shape[1])) ** 2))


def naive_sc(a, b):
    N = a.shape[0]
    pos = -2.0 * np.mean([a[n] @ b[n] for n in range(N)])
    neg = np.mean([(a[n] @ b[m]) ** 2 for n in range(N) for m in range(N) if n != m])
    return float(pos + neg)


def weighted(fn, R):
    """A scalar from an array-valued objective: ``Σ fn(...) * R`` with R a fixed numpy array."""
    def scalar(*args):
        out = fn(*args)
        xp = array_namespace(out)
        return xp.sum(out * xp.asarray(R, dtype=out.dtype))
    return scalar


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable  # differentiable in every positional argument
    args: tuple
    naive: Callable[..., float]


def _cases() -> list[Case]:
    rng = np.random.default_rng(0)
    e = rng.standard_normal((3, 6, 4))
    A = rng.standard_normal((4, 5))
    A /= np.linalg.norm(A, axis=0)
    a, b = rng.standard_normal((6, 4)), rng.standard_normal((6, 4))
    x = rng.standard_normal((8, 3)) @ rng.standard_normal((3, 3))
    F, p, B = rng.standard_normal((5, 3)), rng.dirichlet(np.ones(5)), rng.standard_normal((3, 4))
    B /= np.linalg.norm(B, axis=0)
    R_pop, R_w, R_ep = rng.standard_normal(4), rng.standard_normal((8, 3)), rng.standard_normal(5)
    Pi = rng.dirichlet(np.ones(25)).reshape(5, 5)
    Pi = (Pi + Pi.T) / 2  # a symmetric pair law whose marginal is q
    q = Pi.sum(axis=1)
    Xq = F - q @ F
    C_pop, A_pop = Xq.T @ (q[:, None] * Xq), Xq.T @ Pi @ Xq
    return [
        Case("invariance", lambda e: invariance(e, n_global=2), (e,), lambda e: naive_invariance(e, 2)),
        Case("pairwise_invariance", pairwise_invariance, (a, b), naive_pairwise),
        Case("invariance_mean_dims", lambda e: invariance(e, n_global=2, dims="mean"), (e,),
             lambda e: naive_invariance(e, 2) / e.shape[-1]),
        Case("lejepa_loss_mean_dims", lambda e, A: lejepa_loss(e, A, n_global=2, dims="mean"), (e, A),
             lambda e, A: 0.02 * np.mean([naive_sigreg(v, A) for v in e]) + 0.98 * naive_invariance(e, 2) / 4),
        Case("sigreg", sigreg, (e[0], A), naive_sigreg),
        Case("epps_pulley", weighted(lambda x: epps_pulley(x, n_total=10), R_ep), (e[0] @ A,),
             lambda x: float(np.sum(R_ep * [naive_sigreg(x[:, [j]], np.eye(1), 10) for j in range(5)]))),
        Case("population_epps_pulley", weighted(population_epps_pulley, R_pop), (F, p, B),
             lambda F, p, B: float(np.sum(R_pop * naive_population_ep(F, p, B)))),
        Case("whiten", weighted(whiten, R_w), (x,), lambda x: float(np.sum(R_w * naive_whiten(x)))),
        Case("covariance_penalty", covariance_penalty, (x,), naive_cov_penalty),
        Case("whitened_invariance", whitened_invariance, (a, b), naive_whitened_invariance),
        Case("whitened_alignment", whitened_alignment, (C_pop, A_pop), naive_whitened_alignment),
        Case("spectral_contrastive", spectral_contrastive, (a, b), naive_sc),
        Case("lejepa_loss", lambda e, A: lejepa_loss(e, A, n_global=2), (e, A),
             lambda e, A: 0.02 * np.mean([naive_sigreg(v, A) for v in e]) + 0.98 * naive_invariance(e, 2)),
        Case("lejepa_loss_additive", lambda e, A: lejepa_loss(e, A, lam=0.5, convention="additive"), (e, A),
             lambda e, A: naive_invariance(e, 3) + 0.5 * np.mean([naive_sigreg(v, A) for v in e])),
        # SIGReg of the V views' rows pooled into one sample of V·N rows (its T multiplied by V·N)
        Case("sigreg_pooled", lambda e, A: sigreg(e, A, views="pooled"), (e, A),
             lambda e, A: naive_sigreg(np.concatenate(list(e)), A)),
        Case("lejepa_loss_pooled", lambda e, A: lejepa_loss(e, A, n_global=2, sigreg_views="pooled"), (e, A),
             lambda e, A: 0.02 * naive_sigreg(np.concatenate(list(e)), A) + 0.98 * naive_invariance(e, 2)),
        Case("sigreg_pooled_n_total", lambda e, A: sigreg(e, A, views="pooled", n_total=50), (e, A),
             lambda e, A: naive_sigreg(np.concatenate(list(e)), A, n_total=3 * 50)),
    ]


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_value_and_gradient_on_numpy_jax_torch(torch, case: Case) -> None:
    expected = case.naive(*case.args)
    assert_close(case.fn(*case.args), expected, what=f"{case.name}: numpy vs the naive twin")

    argnums = tuple(range(len(case.args)))
    jargs = tuple(jnp.asarray(a) for a in case.args)
    assert_close(jax.jit(case.fn)(*jargs), expected, what=f"{case.name}: jax.jit")
    jgrads = jax.jit(jax.grad(case.fn, argnums=argnums))(*jargs)

    targs = tuple(torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in case.args)
    value = case.fn(*targs)
    assert value.dtype == torch.float64
    value.backward()
    assert_close(value.detach().numpy(), expected, what=f"{case.name}: torch")
    for i, (jg, ta) in enumerate(zip(jgrads, targs)):
        assert np.all(np.isfinite(np.asarray(jg))), f"{case.name}: non-finite gradient"
        assert_close(ta.grad.numpy(), np.asarray(jg), what=f"{case.name}: d/d arg {i}, torch vs jax")


def test_gradient_matches_central_differences(torch) -> None:
    """Both autodiffs could share a mistake in the formula; check one against finite differences."""
    case = next(c for c in CASES if c.name == "lejepa_loss")
    e, A = case.args
    te = torch.tensor(e, requires_grad=True)
    case.fn(te, torch.tensor(A)).backward()
    g = te.grad.numpy()
    h, rng = 1e-6, np.random.default_rng(1)
    for _ in range(3):
        d = rng.standard_normal(e.shape)
        fd = (case.naive(e + h * d, A) - case.naive(e - h * d, A)) / (2 * h)
        assert_close(np.sum(g * d), fd, atol=1e-7, rtol=1e-7)


def test_vmap_over_a_seed_axis() -> None:
    """jax.vmap(sigreg) over stacked (embeddings, directions) of 3 seeds equals the per-seed loop."""
    rng = np.random.default_rng(2)
    E = rng.standard_normal((3, 6, 4))
    A = rng.standard_normal((3, 4, 5))
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    batched = jax.jit(jax.vmap(sigreg))(jnp.asarray(E), jnp.asarray(A))
    assert_close(batched, [naive_sigreg(E[s], A[s]) for s in range(3)])
    inv = jax.vmap(lambda e: invariance(e, n_global=1))(jnp.asarray(E.reshape(3, 2, 3, 4)))
    assert_close(inv, [naive_invariance(E[s].reshape(2, 3, 4), 1) for s in range(3)])


def test_import_pulls_in_neither_torch_nor_jax() -> None:
    code = "import sys, prhsim.objectives, prhsim.optima, prhsim.learners; print(sorted(m for m in ('torch', 'jax') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
