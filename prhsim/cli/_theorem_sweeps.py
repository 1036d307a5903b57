"""``prhsim sweep NAME`` for the theorem experiments: settings from --config / --set, one folder per sweep.

Every sweep here follows one pattern: resolve its settings model (``prhsim.config``:
defaults <- file <- ``--set``), check the output folder, run the library function,
write results.json, config.json and ``NAME.png`` into a staged folder renamed whole into
place, and print a few summary lines (or the results document with ``--json``).
Usage errors are one line and exit 2, before any work.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import click
import numpy as np
from pydantic import BaseModel, ValidationError
from rich.markup import escape

from prhsim._budget import ResourceError
from prhsim.io import OutputError, check_out_folder, json_text, staged_folder
from prhsim.cli._console import UsageProblem, console, stage_reporter
from prhsim.cli._run import _parse_out, git_revision, read_own_config
from prhsim.config import (
    BadViewSweepSettings,
    CaptioningSettings,
    ConfigError,
    GapSensitivitySettings,
    KernelMismatchSweepSettings,
    MetricBridgeSettings,
    NtpCaSettings,
    PairFreeSettings,
    RestrictedEncoderSettings,
    SampleEfficiencySettings,
    format_validation_error,
    resolve_settings,
)


@dataclass(frozen=True)
class Flag:
    """A shorthand option of one sweep: ``--name VALUE`` is ``--set key=<to_set(VALUE)>``, applied after every --set."""

    name: str
    key: str
    help: str
    to_set: Callable[[str], str | None] = lambda value: value
    metavar: str = "VALUE"


@dataclass(frozen=True)
class TheoremSweep:
    """One sweep: its settings model, how to run it (``run(settings, say)``), draw it and summarise it."""

    name: str
    settings: type[BaseModel]
    run: Callable[[Any, Callable[[str], None]], Any]
    figure: Callable[[Any], Any]
    summary: Callable[[Any], list[str]]
    help: str
    flags: tuple[Flag, ...] = ()


def _bad_view(s: BadViewSweepSettings, say: Callable[[str], None] = lambda message: None):
    from prhsim.config import RunConfig
    from prhsim.experiments import build, plan_run
    from prhsim.experiments._sweep_bad_view import DEFAULT_EPS, bad_view_sweep

    config = RunConfig(world=s.world, modalities=s.modalities, seed=s.seed, figures=False)
    plan_run(config)
    setup = build(config)
    return bad_view_sweep(setup.base, setup.modalities, eps=s.eps or DEFAULT_EPS, k=s.k, rng=s.seed,
                          name=s.world.describe())


def _bad_view_summary(r) -> list[str]:
    lines = [f"{r.world}: {r.n_states:,} states, k = {r.k}, {len(r.eps)} values of eps from {r.eps[0]:g} to {r.eps[-1]:g}"]
    for p in r.pairs:
        determined = sum(x is not None for x in p.predicted_rho_p)
        lines.append(f"{p.a} vs {p.b}: rho_P from {p.observed_rho_p[0]:.4f} (eps {r.eps[0]:g}) to "
                     f"{p.observed_rho_p[-1]:.2g} (eps {r.eps[-1]:g}); predicted in {determined}/{len(r.eps)} cells")
    err = "n/a" if r.max_error is None else f"{r.max_error:.1e}"
    lines.append(f"largest |observed - predicted| rho_P: {err}")
    return lines


def _kernel_mismatch(s: KernelMismatchSweepSettings, say: Callable[[str], None] = lambda message: None):
    from prhsim.experiments._sweep_kernel_mismatch import DEFAULT_SIZES, kernel_mismatch_sweep

    return kernel_mismatch_sweep(n=s.n, sizes=s.sizes or DEFAULT_SIZES, k=s.k, worlds=s.worlds, rng=s.seed)


def _kernel_mismatch_summary(r) -> list[str]:
    lines = [f"{r.worlds} random worlds of {r.n} states, k = {r.k}, {len(r.sizes)} perturbation sizes"]
    for bound, worst in r.worst_ratio.items():
        median = r.median_ratio.get(bound)
        lines.append(f"{bound}: worst observed/bound {'n/a' if worst is None else f'{worst:.3g}'}, median "
                     f"{'n/a' if median is None else f'{median:.3g}'} (a bound holds when the worst is <= 1)")
    return lines


def _gap(s: GapSensitivitySettings, say: Callable[[str], None] = lambda message: None):
    from prhsim.experiments._sweep_gap import DEFAULT_GAPS, gap_sensitivity

    return gap_sensitivity(gaps=s.gaps or DEFAULT_GAPS, size=s.size, n=s.n, move=s.move, rng=s.seed)


def _gap_summary(r) -> list[str]:
    lines = [f"path({r.n}) x path({r.n}), k = {r.k}, perturbation t = {r.size:g}, {len(r.gaps)} gaps"]
    for c in r.cells:
        lines.append(f"gap {c.gap:.2e}{' (tie)' if c.tie else ''}: perturbed s_Theta {c.perturbed_s_theta:.3g}, "
                     f"solver vs solver {c.solver_s_theta:.2g}, start vs start {c.start_s_theta:.2g}")
    return lines


def _restricted(s: RestrictedEncoderSettings, say: Callable[[str], None] = lambda message: None):
    from prhsim.experiments._sweep_restricted import restricted_encoder
    from prhsim.worlds import bad, good, gridscene

    try:
        scene = gridscene(s.size, objects=s.objects)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    view = good() if s.views == "good" else bad(s.eps)
    return restricted_encoder(scene, s.k, views=[view] * 3, inputs=s.inputs, rng=s.seed)


def _restricted_summary(r) -> list[str]:
    lines = [f"{r.world}: {r.n_states:,} states, k = {r.k}"]
    for m in r.modalities:
        fraction = "n/a" if m.ky_fan_fraction is None else f"{m.ky_fan_fraction:.3f}"
        lines.append(f"{m.name} ({m.inputs}, rank {m.rank}): Ky Fan fraction {fraction}, "
                     f"s_Theta to the unrestricted optimum {m.s_theta:.3g}")
    for p in r.pairs:
        lines.append(f"{p.a} vs {p.b}: rho_P {p.rho_p:.3g} restricted, {p.unrestricted_rho_p:.2g} unrestricted")
    return lines


def _bridge(s: MetricBridgeSettings, say: Callable[[str], None] = lambda message: None):
    from prhsim.experiments._metric_bridge import metric_bridge

    return metric_bridge(s.size, s.objects, levels=s.levels, samples=s.samples, knn_k=s.knn_k, k=s.k, rng=s.seed)


def _bridge_summary(r) -> list[str]:
    rows = ", ".join(f"{f}: {n} states, chance {r.knn_chance[f]:.3g}" for f, n in r.rows.items())
    lines = [f"{r.world}, k = {r.k}: mutual k-NN with k = {r.knn_k} ({rows})",
             "rho_P where mutual k-NN equals (-: outside the path, or across a jump the grid does not resolve):"]
    for family, table in r.rho_at_mutual_knn.items():
        cells = ", ".join(f"{x}: {'-' if v is None else f'{v:.3f}'}" for x, v in table.items())
        lines.append(f"  {family}: {cells}")
    return lines


def _sample_efficiency_figure(result):
    from prhsim.experiments.report._sample_efficiency_figure import sample_efficiency_figure

    return sample_efficiency_figure(result)


def _bridge_figure(result):
    from prhsim.experiments.report._bridge_figure import metric_bridge_figure

    return metric_bridge_figure(result)


def _ntp_ca(s: NtpCaSettings, say: Callable[[str], None] = lambda message: None):
    from prhsim.experiments._ntp_ca import DEFAULT_STRENGTHS, ntp_ca_sweep

    return ntp_ca_sweep(s.strengths or DEFAULT_STRENGTHS, d=s.d, worlds=s.worlds, restarts=s.restarts, rng=s.seed)


def _ntp_ca_summary(r) -> list[str]:
    return [f"{r.worlds} emission worlds ({r.n_states} states, {r.vocab} tokens, contexts of {r.context}), d = {r.d}, "
            f"{len(r.strengths)} strengths",
            f"s_Theta(whitened next-token optimum, CA) / sigma_1 at the {r.small_cells} weakest dependences: "
            f"median {r.median_small_ratio:.3g}; PMI proxy vs CA {r.median_small_pmi_ratio:.3g}, "
            f"PMI proxy vs the optimum {r.median_small_pmi_fit_ratio:.3g}",
            f"largest s_Theta to CA: {r.max_s_theta:.3g} (sigma_1 = {r.max_sigma_1:.3g}); "
            f"every fit converged: {r.all_converged}"]


def _ntp_ca_figure(result):
    from prhsim.experiments.report._ntp_figure import ntp_ca_figure

    return ntp_ca_figure(result)


def _sample_efficiency(s: SampleEfficiencySettings, say: Callable[[str], None] = lambda message: None):
    from prhsim.experiments._sweep_sample_efficiency import sample_efficiency

    scene = s.world.build_scene()
    return sample_efficiency(scene, budgets=s.budgets, seeds=s.seeds, steps=s.steps,
                             batch_size=s.batch_size, lr=s.lr, hidden=s.hidden, min_span=s.min_span, pairs=s.pairs,
                             learners=s.learners, metric=s.metric, reference_budget=s.reference_budget, k=s.k,
                             n_fit=s.n_fit, closed_forms=s.closed_forms, name=s.world.describe(), rng=s.seed,
                             progress=say)


def _sample_efficiency_summary(r) -> list[str]:
    from prhsim.experiments.report._sample_efficiency_figure import chance_level, ratio_lines

    lines = [f"{r.world}: {r.n_states:,} states, k = {r.k}, {r.pairs} pairs; {r.metric} (chance {chance_level(r):.3g}) "
             f"at {', '.join(f'{b:,}' for b in r.budgets)} samples, mean over {len(r.seeds)} seeds:"]
    for c in r.curves:
        closed = r.closed_forms.get(c.learner)
        tail = "" if closed is None else (f"; closed form {getattr(closed.alignment, r.metric):.3f}"
                                          + ("" if closed.unique else " (k splits a tie)"))
        lines.append(f"  {c.label} ({c.tokens_per_sample} tokens/sample): "
                     f"{', '.join(f'{m:.3f}' for m in c.mean)}{tail}; untrained {getattr(r.untrained[c.learner], r.metric):.3f}")
    return lines + ratio_lines(r)


def _pair_free(s: PairFreeSettings, say: Callable[[str], None] = lambda message: None):
    from prhsim.experiments._sweep_pair_free import DEFAULT_EPS, DEFAULT_GAPS, DEFAULT_SAMPLES, pair_free_sweep

    return pair_free_sweep(s.gaps or DEFAULT_GAPS, s.samples or DEFAULT_SAMPLES, s.eps or DEFAULT_EPS,
                           base_gap=s.base_gap, base_samples=s.base_samples, n_states=s.n_states,
                           n_nuisance=s.n_nuisance, mu_2=s.mu_2, mu_3=s.mu_3, seeds=s.seeds, rng=s.seed, progress=say)


def _pair_free_summary(r) -> list[str]:
    lines = [f"{r.n_states} states, k = {r.k}, mu_2 = {r.mu_2:g}, mu_3 = {r.mu_3:g}, {r.seeds} seeds; "
             f"recovered = map error below {r.success_threshold:g}; fraction of seeds, spectral / iterative:"]
    for axis, values, fixed in (("gap", r.gaps, f"S = {r.base_samples:,}"), ("samples", r.samples, f"gap {r.base_gap:g}"),
                                ("eps", r.eps, f"gap {r.base_gap:g}, S = {r.base_samples:,}")):
        cells = ", ".join(f"{v:g}: {r.rate(axis, 'spectral', v):.1f} / {r.rate(axis, 'iterative', v):.1f}" for v in values)
        lines.append(f"  {axis} ({fixed}): {cells}")
    lines.append(f"  bad views: b holds nuisance no map aligns for eps below 1 - mu_2 = {r.eps_threshold:g}")
    return lines


def _pair_free_figure(result):
    from prhsim.experiments.report._pair_free_figure import pair_free_figure

    return pair_free_figure(result)


def _captioning(s: CaptioningSettings, say: Callable[[str], None] = lambda message: None):
    import importlib.util

    missing = [name for name in ("jax", "optax", "sacrebleu", "pycocoevalcap") if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"prhsim sweep captioning needs {', '.join(missing)}: pip install 'prhsim[captioning]'")
    from prhsim.experiments._captioning import captioning_curve
    from prhsim.learners import DecoderConfig
    from prhsim.metrics import iterative_match, spectral_match

    def linear(result):  # the estimate acts on each sample's whitened coordinates; x ↦ x M reads raw features
        return result.whitening_a.whitener @ result.map @ result.whitening_b.colourer

    pair_free = {"iterative": lambda sample: linear(iterative_match(sample.image, sample.caption, rng=s.seed)),
                 "spectral": lambda sample: linear(spectral_match(sample.image, sample.image_pairs, sample.caption,
                                                                  sample.caption_pairs)),
                 "none": None}[s.pair_free]
    n_fits = None if s.n_fits is None else ([0] if pair_free is not None else []) + list(s.n_fits)
    say("training the caption decoder on captions alone, then fitting one rotation per N_fit and seed")
    return captioning_curve(s.world.build_scene(), n_fits=n_fits, seeds=s.seeds, k=s.k, text=s.text,
                            pair_free=pair_free, pair_free_samples=s.pair_free_samples, noise=s.noise,
                            held_in=s.held_in, images=s.images,
                            decoder=DecoderConfig(steps=s.decoder_steps, batch_size=s.decoder_batch),
                            name=s.world.describe(), rng=s.seed)


def _captioning_summary(r) -> list[str]:
    from prhsim.experiments._captioning import curve_summary

    lines = [f"{r.world}: {r.n_states} states, k = {r.k}, {r.text} captions, noise {r.noise:g}, {len(r.seeds)} seeds, "
             f"{r.images} held-out images; decoder on captions alone: loss {r.decoder.final_loss:.4f} "
             f"(floor {r.decoder.loss_floor:.4f}), exact {r.decoder.exact:.3f} on its own representations"]
    for metric in ("exact", "attribute_mean", "cider"):
        s = curve_summary(r, metric)
        cells = ", ".join(f"{'pair-free' if n == 0 else n}: {m:.3f}" for n, m in zip(s["n_fits"], s["mean"]))
        lines.append(f"  {metric} by N_fit: {cells}; true map {s['true_map']:.3f}, chance {s['chance']:.3f}")
    free = [p for p in r.points if p.n_fit == 0]
    if free:
        kinds = sorted(free[0].scores.attributes)
        per = ", ".join(f"{a} {np.mean([p.scores.attributes[a] for p in free]):.2f}" for a in kinds)
        lines.append(f"  pair-free map: distance to the true map {np.mean([p.map_distance for p in free]):.3f}; "
                     f"per attribute {per}")
    return lines


def _captioning_figure(result):
    from prhsim.experiments.report._captioning_figure import captioning_figure

    return captioning_figure(result)


def _figure(name: str) -> Callable[[Any], Any]:
    def draw(result: Any) -> Any:
        from prhsim.experiments.report import _theorem_figures

        return getattr(_theorem_figures, name)(result)
    return draw


SWEEPS: dict[str, TheoremSweep] = {s.name: s for s in (
    TheoremSweep("bad-view", BadViewSweepSettings, _bad_view, _figure("bad_view_figure"), _bad_view_summary,
                 "Bad views: the merge rule's predicted k_Z and rho_P against the closed form's, over eps."),
    TheoremSweep("kernel-mismatch", KernelMismatchSweepSettings, _kernel_mismatch, _figure("kernel_mismatch_figure"),
                 _kernel_mismatch_summary,
                 "Kernel mismatch: observed drift against the Yu-Wang-Samworth and Davis-Kahan bounds."),
    TheoremSweep("gap-sensitivity", GapSensitivitySettings, _gap, _figure("gap_figure"), _gap_summary,
                 "Alignment error against the spectral gap; solvers disagree only at a tie."),
    TheoremSweep("restricted-encoder", RestrictedEncoderSettings, _restricted, _figure("restricted_figure"),
                 _restricted_summary,
                 "Encoders linear in each rendering: how much Platonic alignment survives."),
    TheoremSweep("metric-bridge", MetricBridgeSettings, _bridge, _bridge_figure, _bridge_summary,
                 "The theory's rho_P against mutual k-NN, CKA, CKNNA and R@1 over controlled misalignment."),
    TheoremSweep("ntp-ca", NtpCaSettings, _ntp_ca, _ntp_ca_figure, _ntp_ca_summary,
                 "Next-token prediction: the whitened softmax optimum against correspondence analysis as "
                 "the dependence strength sigma_1 shrinks."),
    TheoremSweep("captioning", CaptioningSettings, _captioning, _captioning_figure, _captioning_summary,
                 "Captioning through one rotation: a decoder trained on captions alone, the image side carried "
                 "over by a rotation fitted on N_fit pairs (or none: the pair-free map)."),
    TheoremSweep("pair-free", PairFreeSettings, _pair_free, _pair_free_figure, _pair_free_summary,
                 "Alignment without cross-modal pairs: the map between two modalities from unpaired samples "
                 "(spectral matching with each modality's own pairs, iterative matching on features alone) "
                 "against the gap, the sample size and eps."),
    TheoremSweep("sample-efficiency", SampleEfficiencySettings, _sample_efficiency, _sample_efficiency_figure,
                 _sample_efficiency_summary,
                 "Good views, bad views and next-token prediction from finite samples: alignment with the "
                 "pixel closed form against samples and tokens, and the sample ratios.",
                 flags=(Flag("seeds", "seeds", "Seeds per budget.", metavar="S"),
                        Flag("budgets", "budgets", "Training samples per run, comma-separated (e.g. 300,1000,3000).",
                             lambda value: "[" + value + "]", "N,N,..."),
                        Flag("world", "world", "The world; only gridscene has a caption renderer. 'gridscene' keeps "
                             "the sweep's scene (4x4 grid, 2 objects, 2 shapes, 2 colours; --set world.size=… "
                             "changes it); any other kind is refused.",
                             lambda value: None if value == "gridscene" else value, "KIND"))),
)}


def _command(sweep: TheoremSweep) -> click.Command:
    @click.command(sweep.name, help=f"{sweep.help}\n\nSettings: {', '.join(sweep.settings.model_fields)} "
                                    "(--config FILE, --set key=value).")
    @click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
                  help="JSON or TOML file of this sweep's settings; --set overrides it.")
    @click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any setting (values as in TOML; repeatable).")
    @click.option("--out", callback=_parse_out, default=None, metavar="DIR",
                  help=f"Output folder (default runs/<time>-{sweep.name}); must be new or empty.")
    @click.option("--overwrite", is_flag=True, default=False, help="Replace an existing --out folder holding results.json.")
    @click.option("--no-figures", is_flag=True, default=False, help="Skip the PNG figure.")
    @click.option("--json", "as_json", is_flag=True, default=False, help="Print results.json to stdout instead.")
    @click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
    def command(config_file, sets, out, overwrite, no_figures, as_json, quiet, **flags) -> None:
        shorthand = []
        for flag in sweep.flags:
            value = flags.get(flag.name)
            if value is not None and flag.to_set(value) is not None:
                shorthand.append(f"{flag.key}={flag.to_set(value)}")
            elif value is not None and flag.to_set(value) is None:
                continue  # the flag's value is the default: nothing to set
        try:
            settings = resolve_settings(sweep.settings, read_own_config(config_file, None, []), [*sets, *shorthand])
            out_dir = out or Path(f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{sweep.name}")
            check_out_folder(out_dir, overwrite=overwrite)
        except (ConfigError, OutputError) as exc:
            raise UsageProblem(str(exc)) from None
        try:
            with stage_reporter(f"prhsim sweep {sweep.name}", quiet=quiet) as say:
                say("computing")
                result = sweep.run(settings, say)
                say(f"writing {out_dir}")
                document = {"git_revision": git_revision(), **result.model_dump(mode="json")}
                with staged_folder(out_dir, overwrite=overwrite) as stage:
                    (stage / "results.json").write_text(json_text(document))
                    (stage / "config.json").write_text(json_text({**settings.model_dump(mode="json"),
                                                                  "out": str(out_dir)}))
                    if not no_figures:
                        from prhsim.io import save_png

                        save_png(sweep.figure(result), stage / f"{sweep.name}.png")
        except ValidationError as exc:  # settings a world model refuses (e.g. too many modalities)
            raise UsageProblem(format_validation_error(exc)) from None
        except (ConfigError, ResourceError, OutputError, ValueError) as exc:  # the library's argument checks
            raise UsageProblem(str(exc).splitlines()[0]) from None
        except KeyboardInterrupt:
            click.echo(f"prhsim sweep {sweep.name}: interrupted; nothing was written", err=True)
            sys.exit(130)
        if as_json:
            click.echo(json.dumps(document, indent=2))
        elif not quiet:
            out_console = console()
            for line in sweep.summary(result):
                out_console.print(escape(line), highlight=False)
            files = ", ".join(p.name for p in sorted(Path(out_dir).iterdir()))
            out_console.print(escape(f"{result.seconds:.2f} s; wrote {out_dir}/ ({files})"), highlight=False)

    for flag in sweep.flags:
        command = click.option(f"--{flag.name}", flag.name, default=None, metavar=flag.metavar,
                               help=f"{flag.help} Shorthand for --set {flag.key}=….")(command)
    return command


def add_theorem_sweeps(group: click.Group) -> None:
    """Register every theorem sweep as a subcommand of ``group``."""
    for sweep in SWEEPS.values():
        group.add_command(_command(sweep))
