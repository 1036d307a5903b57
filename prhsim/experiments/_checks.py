"""Turn a rotation-uniqueness outcome into predictions-versus-observations (docs/theory.md §1, §2, §4).

Each :class:`Check` states what the theory predicts and what was measured;
PASS means they agree. Where the theory predicts that the Platonic conclusion
fails (bad views, ties), the check passes when it is observed to fail.
"""

from __future__ import annotations

import numpy as np

from prhsim.experiments._results import Check, LearnedModality, LearnerSummary, ModalitySummary, PairSummary
from prhsim.optima import GAP_TOL
from prhsim.learners import LEARNERS

#: ρ_P below this counts as "equal up to rotation"; predictions must match within it (closed forms).
RHO_ATOL = 1e-8
#: The same for representations from a learner other than the closed form (SGD stops short of rounding).
LEARNED_RHO_ATOL = 0.05


#: Hard whitening by SGD counts as having reached the closed form below this s_Θ (the issue's target 1e-2).
CONVERGED_S_THETA = 1e-2
#: A learned representation may undercut L* by rounding only (Ky Fan: no feasible F beats the optimum).
KY_FAN_RTOL = 1e-9


def _tol_text(tol: float) -> str:
    return "1e-8" if tol == RHO_ATOL else f"{tol:g}"


#: Eigenvalues, losses and whitening must match within this (relative to max(1, |x|)).
VALUE_RTOL = 1e-8


def _close(a: float, b: float, tol: float = VALUE_RTOL) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _rho(x: float) -> str:
    return f"{x:.6f}" if x >= 1e-6 else f"{x:.1e}"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _convergence_check(m: LearnedModality, claim: str, subject: str, encoder: str) -> Check:
    predicted = "yes (unique optimum at a gap)"
    premises = m.data == "exact" and encoder == "tabular"
    values = [v for v in m.s_theta if v is not None]
    if not values:
        return Check(claim=claim, subject=subject, predicted=predicted, observed="every seed collapsed",
                     verdict="FAIL")
    seeds = [(s, c, t, r, pr) for s, c, t, r, pr in zip(m.s_theta, m.converged, m.stopped_at, m.reason, m.progress)
             if s is not None]
    elsewhere = [(s, t, r) for s, c, t, r, _ in seeds if c and s >= CONVERGED_S_THETA]
    if elsewhere and not premises:  # a stall outside the theorem's premises contradicts nothing
        s, t, r = max(elsewhere)
        observed = (f"stalled at s_Theta {s:.2g} ({r} at step {t}); {m.data} data and a {encoder} encoder are "
                    "outside the theorem's premises (the population loss, a universal encoder)")
        return Check(claim=claim, subject=subject, predicted=predicted, observed=observed, verdict="UNCONVERGED")
    if elsewhere or len(values) < len(m.s_theta):
        worst = max(elsewhere) if elsewhere else None
        observed = ("a seed collapsed" if worst is None else
                    f"converged elsewhere: s_Theta {worst[0]:.2g} when it stopped at step {worst[1]} ({worst[2]})")
        return Check(claim=claim, subject=subject, predicted=predicted, observed=observed, verdict="FAIL")
    short = [(s, t, pr) for s, c, t, r, pr in seeds if not c and s >= CONVERGED_S_THETA]
    if short:
        s, t, pr = max(short, key=lambda item: item[0])
        observed = f"not converged in {t} steps (s_Theta {s:.2g}" + (f"; {pr})" if pr else ")")
        return Check(claim=claim, subject=subject, predicted=predicted, observed=observed, verdict="UNCONVERGED")
    stops = sorted({t for _, _, t, _, _ in seeds})
    observed = (f"max s_Theta {max(values):.2g} over {len(values)} seed(s), "
                f"stopped at step {stops[0]}" + (f"-{stops[-1]}" if len(stops) > 1 else ""))
    return Check(claim=claim, subject=subject, predicted=predicted, observed=observed, verdict="PASS")


def modality_checks(m: ModalitySummary, k: int) -> list[Check]:
    """Ky Fan value, whitening, merge-rule spectrum, uniqueness and nuisance-free dimension of one modality.

    A representation from a learner other than the closed form has no eigenvalues of
    its own: only its nuisance-free dimension is checked here (and its pairs by :func:`pair_checks`).
    """
    if m.collapsed:
        return [Check(claim="nuisance-free k_Z (merge rule)", subject=m.name,
                      predicted="none: the representation collapsed", observed="collapsed", verdict="N/A")]
    if m.value is None or m.eigenvalues is None or m.gap is None:
        return [_nuisance_check(m, k)]
    checks = [
        Check(claim="Ky Fan: L(F*) = 2 sum(1 - mu)", subject=m.name,
              predicted=f"{m.value:.10f}",
              observed=f"{m.loss_via_operator:.10f} (|F'DF-I| {m.whitening_error:.0e})",
              verdict=_verdict(_close(m.value, m.loss_via_operator) and m.whitening_error <= VALUE_RTOL)),
    ]
    pred, obs = np.array(m.predicted_eigenvalues), np.array(m.eigenvalues)
    err = float(np.max(np.abs(pred - obs)))
    checks.append(Check(claim="spectrum = merge rule", subject=m.name,
                        predicted=f"mu_k, mu_k+1: {pred[k - 1]:.4f}, {pred[k]:.4f}",
                        observed=f"max error {err:.0e}", verdict=_verdict(err <= VALUE_RTOL)))
    pred_gap = float(pred[k - 1] - pred[k])
    pred_unique = pred_gap > GAP_TOL
    checks.append(Check(claim="unique: gap mu_k - mu_k+1 > 0", subject=m.name,
                        predicted=("unique" if pred_unique else "tie at k") + f", gap {pred_gap:.3g}",
                        observed=("unique" if m.unique else "tie at k") + f", gap {m.gap:.3g}",
                        verdict=_verdict(pred_unique == m.unique)))
    checks.append(_nuisance_check(m, k))
    return checks


def _nuisance_check(m: ModalitySummary, k: int) -> Check:
    if m.nuisance_free_predicted is None:
        return Check(claim="nuisance-free k_Z (merge rule)", subject=m.name,
                     predicted="undetermined (slow/nuisance tie at k)",
                     observed=f"k_Z = {m.nuisance_free_observed}", verdict="N/A")
    return Check(claim="nuisance-free k_Z (merge rule)", subject=m.name,
                 predicted=f"k_Z = {m.nuisance_free_predicted} of {k}",
                 observed=f"k_Z = {m.nuisance_free_observed} of {k}",
                 verdict=_verdict(m.nuisance_free_predicted == m.nuisance_free_observed))


def pair_checks(pair: PairSummary, k: int, tol: float = RHO_ATOL, *, whitened: bool = True) -> list[Check]:
    """Predicted ρ_P (within ``tol``) and the sandwich ``‖sinΘ‖ ≤ res ≤ √2‖sinΘ‖`` for one pair.

    ``whitened=False`` (a collapsed representation could not be whitened): the sandwich,
    which holds for whitened features only, has no prediction.
    """
    subject = f"{pair.a} ~ {pair.b}"
    if pair.predicted_rho_p is None:
        rotation = Check(claim="rho_P = sqrt(2(k - min k_Z)/k)", subject=subject,
                         predicted="none: an optimum is not unique, or a representation collapsed",
                         observed=f"{pair.rho_p:.3g}", verdict="N/A")
    else:
        rotation = Check(claim="rho_P = sqrt(2(k - min k_Z)/k)", subject=subject,
                         predicted=f"{pair.predicted_rho_p:.6f}", observed=_rho(pair.rho_p),
                         verdict=_verdict(abs(pair.rho_p - pair.predicted_rho_p) <= tol))
    sqrt_k = np.sqrt(k)
    sin_f, res = pair.s_theta * sqrt_k, pair.rho_p * sqrt_k
    ok = sin_f <= res + 1e-12 and res <= np.sqrt(2) * sin_f + 1e-12
    if res < RHO_ATOL and sin_f < RHO_ATOL:
        observed = f"both at rounding level ({max(sin_f, res):.0e})"
    else:
        observed = f"{sin_f:.3g} <= {res:.3g} <= {np.sqrt(2) * sin_f:.3g}"
    sandwich = Check(claim="sinT <= residual <= sqrt2 sinT", subject=subject,
                     predicted="holds (whitened)" if whitened else "none: a representation collapsed",
                     observed=observed, verdict=_verdict(ok) if whitened else "N/A")
    return [rotation, sandwich]


def platonic_check(pairs: list[PairSummary], tol: float = RHO_ATOL) -> Check:
    """The headline: every pair equal up to rotation (ρ_P < ``tol``), predicted exactly when every pair is predicted 0."""
    claim = f"platonic: every rho_P < {_tol_text(tol)}"
    if not pairs:
        return Check(claim=claim, subject="all modalities",
                     predicted="needs two modalities", observed="one modality", verdict="N/A")
    worst = max(pairs, key=lambda x: x.rho_p)
    observed = worst.rho_p < tol
    if any(p.predicted_rho_p is None for p in pairs):
        return Check(claim=claim, subject="all modalities",
                     predicted="no guarantee (tie at k, or a collapsed representation)",
                     observed=f"{'yes' if observed else 'no'} (max {worst.rho_p:.3g})",
                     verdict="N/A")
    predicted = all(p.predicted_rho_p == 0.0 for p in pairs)
    return Check(claim=claim, subject="all modalities",
                 predicted="yes" if predicted else "no (nuisance features)",
                 observed=f"{'yes' if observed else 'no'} (max {worst.rho_p:.3g})",
                 verdict=_verdict(predicted == observed))


def learned_checks(summary: LearnerSummary, unique: dict[str, bool] | None = None) -> list[Check]:
    """Per learned modality: Ky Fan (the whitened alignment loss of every seed is at least L*), and, for
    hard whitening (the objective the theorem covers), whether SGD reached the closed form.

    The convergence verdict tells apart the two ways of missing the optimum: PASS when every seed
    converged (its own stopping rule, :class:`prhsim.learners.StopReport`) with s_Θ below
    :data:`CONVERGED_S_THETA`; FAIL when a table on exact data (the theorem's premises) converged
    somewhere else (what would contradict the theorem); UNCONVERGED when a seed ran out of its
    budget first (the observation says how fast its s_Θ still falls and how many steps it would
    still need), or stalled on minibatches or with an MLP, outside the premises.
    A seed that collapsed has no whitened loss; a modality whose seeds all collapsed gets N/A, and
    so does convergence where the closed form is not unique (``unique[name]`` False: a tie at k).
    """
    checks = []
    if summary.learner in LEARNERS and LEARNERS[summary.learner].covered:
        for m in summary.modalities:
            claim = f"SGD reaches the closed form (s_Theta < {CONVERGED_S_THETA:g})"
            subject = f"whiten: {m.name}"
            if unique is not None and not unique.get(m.name, True):
                checks.append(Check(claim=claim, subject=subject, predicted="no unique optimum (tie at k)",
                                    observed="not compared", verdict="N/A"))
                continue
            checks.append(_convergence_check(m, claim, subject, summary.encoder))
    for m in summary.modalities:
        ratios = [r for r in m.alignment_ratio if r is not None]
        subject = f"{summary.learner}: {m.name}"
        claim = "Ky Fan: learned loss >= L*"
        if m.evaluated_on is not None:
            checks.append(Check(claim=claim, subject=subject, predicted="ratio >= 1",
                                observed=f"not measured (evaluated on {m.evaluated_on:,} sampled states)",
                                verdict="N/A"))
            continue
        if not ratios:
            checks.append(Check(claim=claim, subject=subject, predicted="ratio >= 1",
                                observed="every seed collapsed", verdict="N/A"))
            continue
        low = min(ratios)
        checks.append(Check(claim=claim, subject=subject, predicted="ratio >= 1",
                            observed=f"min ratio {low:.6f} over {len(ratios)} seed(s)",
                            verdict=_verdict(low >= 1.0 - KY_FAN_RTOL)))
    return checks
