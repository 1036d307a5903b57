"""The terminal report of a run: world, spectrum head, per-modality optima, the ρ_P matrix, every check."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from prhsim.experiments._results import RunResult

_VERDICT_STYLE = {"PASS": "bold green", "FAIL": "bold red", "N/A": "yellow"}


def _fmt(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}"


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
    console.print(f"{summary}; {sum(c.verdict == 'N/A' for c in result.checks)} without a prediction; "
                  f"{result.seconds:.2f} s")
