"""One predicate per universal claim of docs/theory.md: ``assert_...`` raises :class:`ClaimFailed`.

A failing predicate's message names the claim, its section, the predicted and observed values and the
tolerance, so that a shrunk hypothesis example reads as a counterexample. A predicate checks its claim's
premises first and raises ``ValueError`` (not a failure of the claim) when they do not hold: draw inputs
that satisfy them (the strategies of :mod:`prhsim.testing.strategies` do) or ``hypothesis.assume`` them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from prhsim.experiments import kernel_mismatch, rotation_uniqueness
from prhsim.metrics import principal_angles, procrustes
from prhsim.optima import GAP_TOL, TieWarning, alignment_loss, kronecker_top, whitened_optimum, whitening_error
from prhsim.testing._tolerances import ATOL, CLEAR_GAP, SLACK, SOLVER_ATOL, gap_atol
from prhsim.testing.strategies import pair_kernel, uncentred_spectrum
from prhsim.worlds import ProductWorld, World


class ClaimFailed(AssertionError):
    """A claim of the theory that did not hold; the message names it, its section and the numbers."""


def _fail(claim: str, section: str, predicted: Any, observed: Any, tolerance: float, context: str = "",
          off: float | None = None) -> None:
    """Raise :class:`ClaimFailed`: the claim, its section, both values, how far outside (``off``, where a number
    measures it) and the tolerance the comparison applied."""
    where = f" [{context}]" if context else ""
    beyond = "" if off is None else f", off by {off:.1e}"
    raise ClaimFailed(f"{claim} (docs/theory.md {section}){where}: predicted {_show(predicted)}, observed "
                      f"{_show(observed)}{beyond}, tolerance {tolerance:.1e}")


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return f"{float(arr):.12g}"
    return np.array2string(arr, precision=10, max_line_width=200, threshold=12)


def _close(claim: str, section: str, predicted: Any, observed: Any, tol: float, context: str = "") -> None:
    """``|predicted − observed| <= tol`` everywhere (same shapes), else :class:`ClaimFailed` naming the largest
    difference and ``tol``."""
    p, o = np.asarray(predicted, dtype=float), np.asarray(observed, dtype=float)
    if p.shape != o.shape:
        _fail(claim, section, p, o, tol, context)
    off = float(np.max(np.abs(p - o), initial=0.0))
    if not off <= tol:
        _fail(claim, section, p, o, tol, context, off)


def _at_most(claim: str, section: str, bound: float, observed: float, tol: float, context: str = "") -> None:
    """``observed <= bound + tol``, else :class:`ClaimFailed` naming the excess over the bound and ``tol``."""
    if not observed <= bound + tol:
        _fail(claim, section, f"at most {bound:.12g}", observed, tol, context, float(observed - bound))


def assert_ky_fan(world: World, k: int, *, centred: bool = True, tables: Sequence[np.ndarray] = ()) -> None:
    """§1.1 (Ky Fan): the whitened optimum's alignment loss is ``L* = 2 Σ_{i≤k} (1 − μ_i)`` (μ the uncentred
    spectrum, or without its trivial 1 when centred; ties included), its table is whitened (``FᵀDF = I``, and
    ``E_p f = 0`` when centred), and no feasible table in ``tables`` has a lower loss."""
    n = world.n
    if not 1 <= k <= (n - 2 if centred else n - 1):
        raise ValueError(f"k = {k} must lie in 1..{n - 2 if centred else n - 1} for {n} states")
    lam = uncentred_spectrum(world)
    mu = lam[1:] if centred else lam
    value = float(2 * np.sum(1 - mu[:k]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)  # Ky Fan's value holds at ties too (§1.2)
        opt = whitened_optimum(world, k, centred=centred)
    claim = "Ky Fan: the closed form attains L* = 2 Σ (1 − μ_i)"
    _close(claim, "§1.1", value, opt.value, ATOL, f"k = {k}, centred = {centred}")
    _close(claim + " through the kernel operator", "§1.1", value, alignment_loss(world, opt.F), ATOL, f"k = {k}")
    _at_most("the closed form is whitened: ‖FᵀDF − I‖", "§1.1", 0.0, whitening_error(world, opt.F), ATOL)
    if centred:
        _close("centred features have p-mean 0", "§1.1", np.zeros(k), np.asarray(world.p) @ opt.F, ATOL)
    for i, G in enumerate(tables):
        if whitening_error(world, G) > ATOL:
            raise ValueError(f"tables[{i}] is not whitened under p (‖GᵀDG − I‖ = {whitening_error(world, G):.3g})")
        loss = alignment_loss(world, G)
        if loss < value - ATOL:
            _fail("Ky Fan: no whitened table beats the closed form", "§1.1", f"at least {value:.12g}", loss, ATOL,
                  f"tables[{i}], k = {k}")


def assert_rotation_unique(base: World, modalities: Sequence[Any], views: Sequence[Any], k: int) -> None:
    """§2, §4 (rotation uniqueness): with good views of one π_Z and a positive centred top-k of K_Z at a gap,
    every modality's optimum is nuisance-free (``k_Z = k``) and every pair of modalities has ``ρ_P = s_Θ = 0``
    and canonical correlations 1 (within a tolerance scaled by the gap, :func:`gap_atol`)."""
    mu = uncentred_spectrum(base)[1:]
    gap = float(mu[k - 1] - mu[k]) if k < mu.size else float(mu[k - 1])
    if not all(v.label == "good" for v in views):
        raise ValueError("rotation uniqueness is claimed for good views only: "
                         f"got {', '.join(v.label for v in views)}")
    if not (gap > GAP_TOL and mu[k - 1] > GAP_TOL):
        raise ValueError(f"rotation uniqueness needs a gap at k = {k} and μ_k > 0: μ_k − μ_(k+1) = {gap:.3g}, "
                         f"μ_k = {mu[k - 1]:.3g}")
    tol = gap_atol(gap)
    out = rotation_uniqueness(base, modalities, views, k=k)
    for m in out.modalities:
        if m.nuisance_free != k:
            _fail("good views give nuisance-free features (k_Z = k)", "§4", k, m.nuisance_free, 0.0, m.name)
    for pair in out.pairs:
        where = f"{pair.a} vs {pair.b}, k = {k}, gap {gap:.3g}"
        _at_most("one representation up to rotation: ρ_P = 0", "§2", 0.0, pair.comparison.rho_p, tol, where)
        _at_most("one representation up to rotation: s_Θ = 0", "§2", 0.0, pair.comparison.s_theta, tol, where)
        _close("canonical correlations are 1", "§2", np.ones(k), pair.comparison.correlations, tol, where)


def _with_rule(out: Any, base: World, k: int, rule: Callable[..., Any]) -> Any:
    """``out`` with every modality's prediction (and every pair's predicted ρ_P) from a user's merge rule."""
    from dataclasses import replace

    lam = uncentred_spectrum(base)
    mods = tuple(replace(m, predicted=rule(lam, m.view, m.world.n_nuisance, k)) for m in out.modalities)
    kz = {m.name: m.predicted.nuisance_free for m in mods}
    pairs = tuple(replace(pair, predicted_rho=None if kz[pair.a] is None or kz[pair.b] is None
                          else float(np.sqrt(2 * (k - min(kz[pair.a], kz[pair.b])) / k))) for pair in out.pairs)
    return replace(out, modalities=mods, pairs=pairs)


def _kz_determined(base: World, view: Any, n_nuisance: int, k: int, values: np.ndarray) -> bool:
    """k_Z is determined unless the tied block at position k (within GAP_TOL) straddles k and mixes nuisance-free
    candidates ``λ_i(K_Z)``, i ≥ 2, with nuisance candidates ``(1 − ε)λ_i(K_Z)`` (§4; an independent eigh)."""
    level = values[k - 1]
    if level - values[k] > GAP_TOL or n_nuisance == 1:
        return True
    lam = uncentred_spectrum(base)
    eps = getattr(view, "eps", None) or 0.0
    return not (np.any(np.abs(lam[1:] - level) <= GAP_TOL) and np.any(np.abs((1 - eps) * lam - level) <= GAP_TOL))


def assert_merge_rule(base: World, modalities: Sequence[Any], views: Sequence[Any], k: int, *,
                      rule: Callable[..., Any] | None = None) -> None:
    """§4 (merge rule): each modal spectrum's top k + 1 is the merge of ``λ_i(K_Z)`` with ``(1 − ε)λ_i(K_Z)``
    (|N| − 1 copies); where k_Z is determined (no tie at k mixing the two kinds of candidate), the merge rule names
    it and it is the observed number of nuisance-free features; every pair of modalities with a prediction has
    ``ρ_P = √(2(k − min k_Z)/k)`` and ``s_Θ = √((k − min k_Z)/k)``.

    ``rule``: a merge rule of one's own with the signature of :func:`prhsim.experiments.merge_rule`
    (``rule(base_values, view, n_nuisance, k) -> MergePrediction``), checked in place of prhsim's."""
    out = rotation_uniqueness(base, modalities, views, k=k)
    if rule is not None:
        out = _with_rule(out, base, k, rule)
    kz = {}
    for m in out.modalities:
        where = f"{m.name}, {m.view.label}, k = {k}"
        _close("the modal spectrum is the merge of λ(K_Z) and (1 − ε)λ(K_Z)", "§4", m.predicted.values,
               m.optimum.eigenvalues, ATOL, where)
        if _kz_determined(base, m.view, m.world.n_nuisance, k, m.predicted.values):
            if m.predicted.nuisance_free is None:
                _fail("the merge rule names k_Z where it is determined", "§4", "a k_Z", "None", 0.0, where)
            if m.nuisance_free != m.predicted.nuisance_free:
                _fail("the merge rule's k_Z is the number of nuisance-free features", "§4",
                      m.predicted.nuisance_free, m.nuisance_free, 0.0, where)
        kz[m.name] = m.predicted.nuisance_free
    for pair in out.pairs:
        if pair.predicted_rho is None or kz[pair.a] is None or kz[pair.b] is None:
            continue
        free = min(kz[pair.a], kz[pair.b])
        where = f"{pair.a} vs {pair.b}, k = {k}, min k_Z = {free}"
        _close("the merge rule's ρ_P = √(2(k − min k_Z)/k)", "§4", np.sqrt(2 * (k - free) / k), pair.predicted_rho,
               ATOL, where + " (the prediction)")
        _close("the merge rule's ρ_P = √(2(k − min k_Z)/k)", "§4", pair.predicted_rho, pair.comparison.rho_p,
               SOLVER_ATOL, where)
        _close("the merge rule's s_Θ = √((k − min k_Z)/k)", "§4", np.sqrt((k - free) / k), pair.comparison.s_theta,
               SOLVER_ATOL, where)


def assert_mismatch_bounds(world_1: World, world_2: World, k: int, *, centred: bool = True,
                           bound_scale: float = 1.0) -> None:
    """§3 (kernel mismatch): on two worlds over the same p, the observed ``‖sinΘ‖_F`` between their optima is at
    most the Yu–Wang–Samworth bound (gap δ of K_1 alone), Davis–Kahan with Weyl (when δ > ‖E‖_op) and classical
    Davis–Kahan (gap δ' = μ_k(K_2) − μ_{k+1}(K_1)); the residual is at most its Yu–Wang–Samworth bound; and
    ``‖sinΘ‖_F ≤ residual ≤ √2‖sinΘ‖_F`` (§2). A bound whose gap is at rounding level is not checked.
    ``bound_scale`` multiplies the three perturbation bounds (a conjectured tighter constant: 0.5 halves them)."""
    r = kernel_mismatch(world_1, world_2, k, centred=centred)
    c = float(bound_scale)
    where = f"k = {k}, centred = {centred}, δ = {r.delta:.3g}, δ' = {r.delta_prime:.3g}"
    _at_most("sinΘ sandwich: ‖sinΘ‖_F ≤ min_Q ‖F1 − F2 Q‖_D", "§2", r.residual, r.sin_theta, SLACK, where)
    _at_most("sinΘ sandwich: min_Q ‖F1 − F2 Q‖_D ≤ √2 ‖sinΘ‖_F", "§2", np.sqrt(2) * r.sin_theta, r.residual, SLACK,
             where)
    if r.delta > GAP_TOL:
        _at_most("Yu–Wang–Samworth bounds ‖sinΘ‖_F", "§3", c * r.yws_sin, r.sin_theta, SLACK, where)
        _at_most("Yu–Wang–Samworth bounds the residual", "§3", c * r.yws_residual, r.residual, SLACK, where)
        if r.delta - r.e_op > GAP_TOL:
            _at_most("Davis–Kahan with Weyl bounds ‖sinΘ‖_F", "§3", c * r.weyl_sin, r.sin_theta, SLACK, where)
    if r.delta_prime > GAP_TOL:
        _at_most("classical Davis–Kahan bounds ‖sinΘ‖_F", "§3", c * r.dk_sin, r.sin_theta, SLACK, where)


def assert_sin_theta_sandwich(F1: np.ndarray, F2: np.ndarray, p: np.ndarray, theta: np.ndarray | None = None) -> None:
    """§2: for tables whitened under p, ``‖sinΘ‖_F ≤ min_Q ‖F1 − F2 Q‖_D ≤ √2 ‖sinΘ‖_F``; with their principal
    angles θ known, ``‖sinΘ‖_F = √(Σ sin²θ_j)``, the residual is ``√(Σ 2(1 − cos θ_j))`` and Procrustes'
    singular values are cos θ."""
    p = np.asarray(p, dtype=float)
    pa, pr = principal_angles(F1, F2, p), procrustes(F1, F2, p)
    if theta is not None:
        theta = np.asarray(theta, dtype=float)
        _close("‖sinΘ‖_F = √(Σ sin²θ)", "§2", np.sqrt(np.sum(np.sin(theta) ** 2)), pa.sin_theta, ATOL)
        _close("the Procrustes residual is √(Σ 2(1 − cos θ))", "§2", np.sqrt(np.sum((2 * np.sin(theta / 2)) ** 2)),
               pr.residual, ATOL)
        _close("Procrustes' singular values are cos θ", "§2", np.sort(np.cos(theta)), np.sort(pr.singular_values),
               ATOL)
    _at_most("sinΘ sandwich: ‖sinΘ‖_F ≤ min_Q ‖F1 − F2 Q‖_D", "§2", pr.residual, pa.sin_theta, SLACK)
    _at_most("sinΘ sandwich: min_Q ‖F1 − F2 Q‖_D ≤ √2 ‖sinΘ‖_F", "§2", np.sqrt(2) * pa.sin_theta, pr.residual, SLACK)


def assert_factor_space_equals_table(base: World, modalities: Sequence[Any], views: Sequence[Any], k: int) -> None:
    """§6 (factor space): rotation uniqueness computed in factor space (no table over Z × N) gives the numbers of
    the full feature tables: every modality's loss, k_Z and every pair's ρ_P, s_Θ and canonical correlations."""
    fast = rotation_uniqueness(base, modalities, views, k=k)
    slow = rotation_uniqueness(base, modalities, views, k=k, tables=True)
    for mf, ms in zip(fast.modalities, slow.modalities, strict=True):
        _close("factor space = table: the modality's loss", "§6", ms.loss, mf.loss, ATOL, mf.name)
        if mf.nuisance_free != ms.nuisance_free:
            _fail("factor space = table: k_Z", "§6", ms.nuisance_free, mf.nuisance_free, 0.0, mf.name)
    for pf, ps in zip(fast.pairs, slow.pairs, strict=True):
        where = f"{pf.a} vs {pf.b}, k = {k}"
        _close("factor space = table: ρ_P", "§6", ps.comparison.rho_p, pf.comparison.rho_p, SOLVER_ATOL, where)
        _close("factor space = table: s_Θ", "§6", ps.comparison.s_theta, pf.comparison.s_theta, SOLVER_ATOL, where)
        _close("factor space = table: canonical correlations", "§6", ps.comparison.correlations,
               pf.comparison.correlations, SOLVER_ATOL, where)


def assert_kronecker_top(world: ProductWorld, m: int, *, centred: bool = False) -> None:
    """§6: the top-m eigenpairs of ``⊗K_f`` from the factors are those of the dense world: the same eigenvalues,
    eigenfunctions orthonormal in L²(p) that solve ``K g = λ g`` (orthogonal to √p when centred), and the same
    top-j subspace at every clear gap."""
    if not isinstance(world, ProductWorld):
        raise ValueError(f"assert_kronecker_top needs a ProductWorld, got {type(world).__name__}")
    finite = world.to_finite()
    p = np.asarray(finite.p)
    s = np.sqrt(p)
    K = pair_kernel(p, finite.Pi)
    vals, vecs = np.linalg.eigh(K - 3 * np.outer(s, s) if centred else K)
    vals, vecs = vals[::-1][: world.n - centred], vecs[:, ::-1][:, : world.n - centred]
    basis = kronecker_top(world, m, centred=centred)
    _close("Kronecker top-m eigenvalues = the dense ones", "§6", vals[:m], basis.values, ATOL, f"m = {m}")
    G = s[:, None] * basis.evaluate()
    _close("Kronecker eigenfunctions are orthonormal in L²(p)", "§6", np.eye(m), G.T @ G, ATOL)
    _close("Kronecker eigenfunctions solve K g = λ g", "§6", G * basis.values, K @ G, ATOL)
    if centred:
        _close("centred eigenfunctions are orthogonal to √p", "§6", np.zeros(m), s @ G, ATOL)
    for j in range(1, min(m, vals.size - 1) + 1):
        if vals[j - 1] - vals[j] > CLEAR_GAP:
            s_theta = principal_angles(vecs[:, :j] / s[:, None], G[:, :j] / s[:, None], p).s_theta
            _at_most("Kronecker top-j subspace = the dense one", "§6", 0.0, s_theta, SOLVER_ATOL, f"j = {j}")
