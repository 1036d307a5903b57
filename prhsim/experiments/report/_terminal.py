"""The terminal report of a run: world, spectrum head, per-modality optima, the ρ_P matrix, every check."""

from __future__ import annotations

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from prhsim.experiments._pair_metrics import CALIBRATION_ALPHA
from prhsim.experiments._results import RunResult
from prhsim.learners import LEARNERS
from prhsim.metrics import PRH_METRICS, rejection_note

_VERDICT_STYLE = {"PASS": "bold green", "FAIL": "bold red", "N/A": "yellow", "UNCONVERGED": "bold magenta"}


def _fmt(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}"


def seed_spread_text(values: list[float | None], digits: int = 3) -> str:
    """``median [min, max]`` over seeds, or "collapsed" when no seed has a value."""
    have = sorted(v for v in values if v is not None)
    if not have:
        return "[red]collapsed[/]"
    missing = len(values) - len(have)
    median = float(np.median(have))
    text = f"{median:.{digits}g}" if len(have) == 1 else \
        f"{median:.{digits}g} \\[{have[0]:.{digits}g}, {have[-1]:.{digits}g}]"
    return text + (f" [red]({missing} collapsed)[/]" if missing else "")


def _stops(m) -> str:
    """The steps the seeds stopped at, and how many ran out of their budget."""
    stops = sorted(set(m.stopped_at))
    text = str(stops[0]) if len(stops) == 1 else f"{stops[0]}-{stops[-1]}"
    short = sum(not c for c in m.converged)
    return text + (f" [magenta]({short} unconverged)[/]" if short else "")


def unchecked_learners(result) -> list[str]:
    """One line per learner whose representation no check compares with the closed form (SIGReg: its optimum is
    not the whitened one), so that "all checks agree" is not read as its pass."""
    lines = []
    for run in result.learned or ():
        if any(c.claim.startswith("SGD reaches the closed form") and c.subject.startswith(f"{run.learner}:")
               for c in result.checks):
            continue
        s = [v for m in run.modalities for v in m.s_theta if v is not None]
        far = f"; its s_Theta to the closed form is {min(s):.3g} to {max(s):.3g}" if s else ""
        lines.append(f"{run.learner} is not checked against the closed form (its optimum is not the whitened "
                     f"one), only against Ky Fan's lower bound{far}: see the learned-representations table")
    return lines


def render_learned(result: RunResult, console: Console) -> None:
    """The "learned vs closed form" section: per learner and modality, medians [min, max] over seeds."""
    table = Table(title="learned vs closed form (median \\[min, max] over seeds)", title_justify="left")
    for col in ("learner", "modality", "data", "s_Theta", "rho_P", "||Cov - I||", "loss / L*", "seed rho_P",
                "stopped at", "time"):
        table.add_column(col, justify="left" if col in ("learner", "modality", "data") else "right")
    for summary in result.learned:
        label = summary.learner if summary.lam is None else f"{summary.learner} (lam {summary.lam:g})"
        for m in summary.modalities:
            affine_blind = summary.learner in LEARNERS and LEARNERS[summary.learner].objective.affine_blind
            cov = "n/a" if affine_blind else seed_spread_text(m.cov_error)  # e.g. whitening: blind to the covariance
            data = f"{m.data}" + (f" (B = {m.batch_size})" if m.batch_size else "") + f", {summary.encoder}, {m.method}"
            s_theta = seed_spread_text(m.s_theta)
            if m.evaluated_on is not None:  # sampled: the largest bootstrap error of a seed
                errors = [e for e in (m.s_theta_se or []) if e is not None]
                s_theta += f" ± {max(errors):.2g}" if errors else ""
            ratio = "n/a (sample)" if m.evaluated_on is not None else seed_spread_text(m.alignment_ratio, 5)
            table.add_row(label, escape(m.name), data, s_theta, seed_spread_text(m.rho_p), cov, ratio,
                          _fmt(m.seed_rho_p_max, 3), _stops(m), f"{m.seconds:.1f} s")
    console.print(table)
    pairs = Table(title="learned cross-modal rho_P (median \\[min, max] over seeds)", title_justify="left")
    for col in ("learner", "pair", "learned", "closed form", "predicted"):
        pairs.add_column(col, justify="left" if col in ("learner", "pair") else "right")
    for summary in result.learned:
        for p in summary.pairs:
            pairs.add_row(summary.learner, escape(f"{p.a} vs {p.b}"), seed_spread_text(p.rho_p), f"{p.closed_form_rho_p:.3g}",
                          _fmt(p.predicted_rho_p, 3))
    if any(summary.pairs for summary in result.learned):
        console.print(pairs)
    steps = {s.steps for s in result.learned}
    sampled = sorted({m.evaluated_on for s in result.learned for m in s.modalities if m.evaluated_on})
    note = (f"; rendered minibatches evaluated on {sampled[0]:,} states drawn from p (± the largest bootstrap "
            "standard error of a seed)" if sampled else "")
    console.print(f"budget {'/'.join(map(str, sorted(steps)))} steps (a seed stops once converged: its bound on "
                  "s_Theta, or its loss's plateau); s_Theta and rho_P after whitening under p; "
                  f"loss / L* >= 1 by Ky Fan, = 1 on the optimal orbit{note}\n", highlight=False)


def render_report(result: RunResult, console: Console) -> None:
    """Print world, spectrum, per-modality optima, the ρ_P matrix and every check."""
    w = result.world
    console.print(f"[bold]prhsim run[/] {w.name}: {w.n_states:,} states "
                  f"(factors {' x '.join(map(str, w.factor_sizes))}), "
                  f"{'centred' if result.centred else 'uncentred'} whitened objective")
    head = ", ".join(f"{v:.4f}" for v in w.spectrum_head[: min(len(w.spectrum_head), w.k + 4)])
    console.print(f"spectrum head mu_1..: {head}")
    how = "auto: largest relative gap" if w.k_auto else "given"
    console.print(f"k = {w.k} ({how}), mu_k = {w.spectrum_head[w.k - 1]:.4f}, gap mu_k - mu_k+1 = {w.gap:.4g}\n")

    table = Table(title="closed-form optimum per modality", title_justify="left")
    for col in ("modality", "view", "|N|", "states", "L*", "gap", "k_Z pred/obs", "injective"):
        table.add_column(col, justify="left" if col in ("modality", "view") else "right", no_wrap=col == "modality")
    for m in result.modalities:
        inj = m.injectivity
        gap = "n/a" if m.gap is None else f"{m.gap:.3g}" if m.unique else f"[red]{m.gap:.1e} tie[/]"
        table.add_row(escape(m.name) + (" [red](collapsed)[/]" if m.collapsed else ""), m.view, str(m.n_nuisance), str(m.n_states),
                      "n/a" if m.value is None else f"{m.value:.4f}", gap,
                      f"{_fmt(m.nuisance_free_predicted)}/{m.nuisance_free_observed}",
                      ("yes" if inj.injective else "[red]no[/]") + ("" if inj.exhaustive else f" ({inj.checked:,} sampled)"))
    console.print(table)

    if result.pairs:
        names = [m.name for m in result.modalities]
        rho = {(p.a, p.b): p for p in result.pairs}
        matrix = Table(title="cross-modal rho_P (predicted)", title_justify="left")
        matrix.add_column("")
        for n in names:
            matrix.add_column(n, justify="right")
        for a in names:
            cells = []
            for b in names:
                p = rho.get((a, b)) or rho.get((b, a))
                cells.append("-" if p is None else f"{p.rho_p:.3g} ({_fmt(p.predicted_rho_p, 3)})")
            matrix.add_row(a, *cells)
        console.print(matrix)
        sampled = [p for p in result.pairs if p.metrics]
        if sampled:
            prh = Table(title="PRH sample metrics (paired observations of sampled states)", title_justify="left")
            shown = list(dict.fromkeys(name for p in sampled for name in p.metrics))
            records = {name: PRH_METRICS.get(name) for name in shown}
            prh.add_column("pair")
            prh.add_column("states", justify="right")
            for name in shown:
                heading = name if records[name] is None else records[name].heading
                prh.add_column(heading + (" (chance)" if any(name in p.chance for p in sampled) else ""),
                               justify="right")
            prh.add_column("rho_P", justify="right")
            for p in sampled:
                cells = []
                for name in shown:
                    if name not in p.metrics:
                        cells.append("-")
                        continue
                    cell = f"{p.metrics[name]:.3f}"
                    if name in p.chance:
                        neighbours = records[name] is not None and records[name].neighbours
                        cell += f" ({p.chance[name]:.3f}" + (f", k={p.knn_k})" if neighbours else ")")
                    if name in p.calibrated:
                        cell += f" / {p.calibrated[name]:.3f}, p {p.p_values[name]:.2g}"
                    cells.append(cell)
                prh.add_row(escape(f"{p.a} vs {p.b}"), f"{p.samples:,}", *cells, f"{p.rho_p:.3g}")
            console.print(prh)
            permutations = {p.permutations for p in sampled if p.permutations}
            if permutations:
                console.print(f"raw / calibrated against {min(permutations):,} row permutations (p: the add-one "
                              "permutation p-value)", highlight=False)
                note = rejection_note(min(permutations), CALIBRATION_ALPHA)
                if note:
                    console.print(f"note: {note}", style="yellow", highlight=False)

    if result.learned:
        render_learned(result, console)

    checks = Table(title="theory vs observation", title_justify="left")
    checks.add_column("check / subject", overflow="fold")
    checks.add_column("predicted", overflow="fold")
    checks.add_column("observed", overflow="fold")
    checks.add_column("", no_wrap=True)
    claims = list(dict.fromkeys(c.claim for c in result.checks))
    for claim in claims:
        checks.add_row(f"[bold]{claim}[/]", "", "", "")
        for c in result.checks:
            if c.claim == claim:
                checks.add_row(f"  {c.subject}", c.predicted, c.observed, f"[{_VERDICT_STYLE[c.verdict]}]{c.verdict}[/]")
    console.print(checks)
    for m in result.modalities:
        if m.tie:
            console.print(f"[yellow]tie[/] {escape(m.name)}: {escape(m.tie)}", highlight=False)
    n_fail = len(result.failures)
    n_pass = sum(c.verdict == "PASS" for c in result.checks)
    summary = (f"[bold green]all {n_pass} checks agree with the theory[/]" if not n_fail
               else f"[bold red]{n_fail} check(s) disagree with the theory[/] ({n_pass} agree)")
    n_short = sum(c.verdict == "UNCONVERGED" for c in result.checks)
    short = (f"; [bold magenta]{n_short} learned modality(ies) did not reach the closed form[/] (unconverged in "
             "the budget, or stalled outside the theorem's premises: see the checks)" if n_short else "")
    console.print(f"{summary}{short}; {sum(c.verdict == 'N/A' for c in result.checks)} without a prediction; "
                  f"{result.seconds:.2f} s")
    for line in unchecked_learners(result):
        console.print(f"[yellow]note[/]: {escape(line)}", highlight=False)
