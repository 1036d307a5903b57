"""``prhsim prh``: the Platonic Representation Hypothesis protocol on feature files.

``prhsim prh score A B`` prints the protocol's best score of two feature files (clip at
the 95th percentile of |x|, L2-normalise, score every layer pair, keep the best), its
layer pair and the chance level; ``prhsim prh table DIR`` scores every pair of files in
a folder (or rows x columns chosen by glob patterns, e.g. language models against vision
models as the WIT-1024 table does) and writes results.json, table.csv and table.png; a
sub-folder holding a config.json is a checkpoint whose features are extracted over ``--data``
first, through a cache keyed by the model and the data (:func:`prhsim.real.cached_features`);
``prhsim prh extract`` writes such a file from a local Hugging Face checkpoint (:mod:`prhsim.real._extract`).
Feature formats: :mod:`prhsim.io._feature_files`. Every problem is one line naming the file.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

import click
import numpy as np
from rich.markup import escape
from rich.table import Table

from prhsim._budget import ResourceError, ensure_fits, format_bytes, time_notes
from prhsim.io import OutputError, check_out_file, check_out_folder, json_text, save_png
from prhsim.cli._console import UsageProblem, bar_reporter, console
from prhsim.io import SUFFIXES, FeatureFileError, load_features
from prhsim.cli._driver import drive, print_notes
from prhsim.cli._options import git_revision, memory_limit_option, new_run_folder, parse_out
from prhsim.metrics import CONVENTIONS, PRH_METRICS, entry_seconds, prh_table, protocol_entry, rejection_note


class RegistryChoice(click.Choice):
    """A choice among the names of the metric registry as it is when the command runs (a metric registered after
    this module was imported is offered too)."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(PRH_METRICS)

    @choices.setter
    def choices(self, value: object) -> None:  # click.Choice's constructor assigns; the registry is the source
        pass


METRIC_CHOICE = RegistryChoice()


#: The most permutations --calibrate takes.
MOST_PERMUTATIONS = 1_000_000


def _neighbours(metric: str) -> bool:
    """Whether the registered metric reads ``knn_k``."""
    return PRH_METRICS[metric].neighbours


Features = np.ndarray | list[np.ndarray]


def _samples(x: Features) -> int:
    return int(x[0].shape[0] if isinstance(x, list) else x.shape[0])


def _depth(x: Features) -> int:
    """The number of layers of a stack (N, L, D) or a per-layer list."""
    return len(x) if isinstance(x, list) else int(x.shape[1])


def _score(a: Features, b: Features, name_a: str, name_b: str, metric: str, knn_k: int, clip: float | None,
           clip_scope: str, permutations: int | None = None, alpha: float = 0.05, convention: str = "prhsim"):
    """:func:`prhsim.metrics.protocol_entry`, its one-line errors as usage problems."""
    try:
        return protocol_entry(a, b, name_a, name_b, metric=metric, knn_k=knn_k, clip_quantile=clip,
                              clip_scope=clip_scope, convention=convention, permutations=permutations, alpha=alpha)
    except ValueError as exc:
        raise UsageProblem(_in_flags(str(exc))) from None


def _in_flags(message: str) -> str:
    """A library error in the command line's words (the argument ``knn_k`` is the option ``--knn-k``)."""
    return message.replace("knn_k", "--knn-k") if message.startswith("knn_k must be ") else message


#: Peak memory of reading a feature file, in multiples of its size on disk (the reader's copy and the float32 array;
#: a float16 or bfloat16 file widens to twice its size).
READ_COPIES = 3.0


def _load(path: Path) -> Features:
    try:
        if path.is_file():
            size = path.stat().st_size
            ensure_fits(READ_COPIES * size, f"reading {path} ({format_bytes(size)} on disk)",
                        "use a smaller feature file (fewer samples or layers)")
        return load_features(path, layers=True)
    except (FeatureFileError, ResourceError) as exc:
        raise UsageProblem(str(exc)) from None


def _seconds(a: Features, b: Features, metric: str, knn_k: int, permutations: int | None) -> float:
    """The protocol's rough seconds on two loaded stacks (:func:`prhsim.metrics.entry_seconds`; 0 if unknown)."""

    return entry_seconds(a, b, metric=metric, knn_k=knn_k, permutations=permutations)


@click.group()
def prh() -> None:
    """The PRH alignment protocol on feature files (npy, safetensors, PRH-style .pt)."""


_metric = click.option("--metric", type=METRIC_CHOICE, default="mutual_knn", show_default=True,
                       help="Alignment metric scored on every layer pair.")
def _k(fn):
    """``--knn-k``: neighbours of the kNN metrics."""
    return click.option("--knn-k", "knn_k", type=int, default=10, show_default=True,
                        help="Neighbours of the kNN metrics.")(fn)


def _clip(fn):
    fn = click.option("--clip", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.95, show_default=True,
                      help="Clip each stack at this quantile of |x| before scoring.")(fn)
    fn = click.option("--no-clip", is_flag=True, default=False, help="Score the features as they are.")(fn)
    fn = click.option("--clip-scope", type=click.Choice(["tensor", "sample_mean"]), default="tensor",
                      show_default=True, help="tensor: one quantile of the whole stack; sample_mean: the "
                                              "per-sample quantile averaged over samples (the PRH code's default).")(fn)
    return click.option("--convention", type=click.Choice(list(CONVENTIONS)), default="prhsim", show_default=True,
                        help="prhsim: prhsim's metric definitions; prh: the numbers the PRH code computes (its "
                             "CKNNA, SVCCA on 10 standardised directions, CKA's 1e-6, RBF bandwidth 1, the "
                             "tensor clip's order statistic); see docs/prh.md.")(fn)


def _calibration(fn):
    """``--calibrate K`` and ``--alpha``: the best layer pair against a permutation null."""
    fn = click.option("--alpha", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=0.05,
                      show_default=True, help="Level of the calibration's critical value (and of the table's "
                                              "Holm correction).")(fn)
    return click.option("--calibrate", "permutations", type=click.IntRange(1, MOST_PERMUTATIONS), default=None, metavar="K",
                        help="Also score the best layer pair against K row permutations of B (a permutation null "
                             "of the max over every layer pair): p-value, critical value and calibrated score.")(fn)


@prh.command()
@click.argument("a", type=click.Path(path_type=Path))  # a folder is refused by the reader, in one line
@click.argument("b", type=click.Path(path_type=Path))
@_metric
@_k
@_clip
@_calibration
@click.option("--json", "as_json", is_flag=True, default=False, help="Print the result as JSON.")
@memory_limit_option
def score(a: Path, b: Path, metric: str, knn_k: int, clip: float, no_clip: bool, clip_scope: str,
          convention: str, permutations: int | None, alpha: float, as_json: bool) -> None:
    """Best layer-pair score of two feature files, its layer pair and the chance level.

    \b
    Example:
      prhsim prh score llama.pt dinov2.npy --metric mutual_knn --knn-k 10 --calibrate 1000
    """
    fa, fb = _load(a), _load(b)
    seconds = _seconds(fa, fb, metric, knn_k, permutations)
    print_notes(time_notes("score", seconds, f"{metric} on N = {_samples(fa):,}, layers {_depth(fa)} x {_depth(fb)}"
                           + (f", {permutations:,} permutations" if permutations else "")), quiet=as_json)
    result = _score(fa, fb, str(a), str(b), metric, knn_k, None if no_clip else clip, clip_scope, permutations, alpha,
                    convention)
    cal = result.calibration
    table = np.asarray(result.table, dtype=float)
    constant = {"a": [int(i) for i in np.flatnonzero(np.isnan(table).all(axis=1))],
                "b": [int(j) for j in np.flatnonzero(np.isnan(table).all(axis=0))]}
    left = [f"layer{'s' if len(v) > 1 else ''} {', '.join(map(str, v))} of {side.upper()}"
            for side, v in constant.items() if v]
    notes = [f"left out {' and '.join(left)}: zero variance (all rows equal), so no metric of it is defined"
             ] if left else []
    if cal is not None:
        notes += [note for note in [rejection_note(cal.permutations, cal.alpha, most=MOST_PERMUTATIONS)] if note]
    doc = {"a": str(a), "b": str(b), "metric": metric, "convention": convention, "clip": None if no_clip else clip,
           "clip_scope": clip_scope, "knn_k": knn_k if _neighbours(metric) else None,
           "n": _samples(fa), "layers_a": _depth(fa), "layers_b": _depth(fb),
           "orientation": "table[i][j] = metric(layer i of a, layer j of b)",
           "best": float(result.best), "layer_pair": None if result.layers is None else [int(i) for i in result.layers],
           "chance": None if result.chance is None else float(result.chance),
           "table": [[None if math.isnan(v) else v for v in row] for row in np.asarray(result.table, float).tolist()],
           "constant_layers": constant,
           "calibration": None if cal is None else {
               "permutations": cal.permutations, "alpha": cal.alpha, "p_value": cal.p_value, "tau": cal.tau,
               "calibrated": cal.calibrated, "null_median": cal.quantile(0.5), "null_q95": cal.quantile(0.95),
               "aggregate": "max", "note": rejection_note(cal.permutations, cal.alpha, most=MOST_PERMUTATIONS)}}
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    out = console()
    chance = "" if result.chance is None else f" (chance {result.chance:.4g})"
    where = ("no layer pair above 0 (the PRH code reports 0)" if result.layers is None
             else f"at layers {result.layers[0]} (A) x {result.layers[1]} (B)")
    out.print(f"{escape(metric)} = {result.best:.4f}{chance} {where}; "
              f"N = {_samples(fa):,}, layers {_depth(fa)} x {_depth(fb)}"
              + ("" if convention == "prhsim" else f"; convention {convention}"), highlight=False)
    if cal is not None:
        out.print(f"calibrated {cal.calibrated:.4f} (raw {cal.raw:.4f}, critical value tau {cal.tau:.4f} at alpha "
                  f"{cal.alpha:g}, p = {cal.p_value:.3g} over {cal.permutations:,} permutations of B's rows; the null "
                  f"is the max over {_pairs(int(np.count_nonzero(~np.isnan(table))))})", highlight=False)
    print_notes(notes, quiet=False)


def _pairs(count: int) -> str:
    return "the one scored layer pair" if count == 1 else f"all {count} scored layer pairs"


def _is_model(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def _is_entry(path: Path) -> bool:
    """A feature file or a checkpoint directory (a folder holding config.json)."""
    return (path.is_file() and path.suffix.lower() in SUFFIXES) or _is_model(path)


def _model_features(models: list[Path], data: Path, cache: Path, *, batch_size: int, device: str,
                    shard_size: int | None, quiet: bool) -> dict[Path, Path]:
    """The cached feature file of every checkpoint directory, extracted first where the cache has none."""
    from prhsim.real import DataError, cached_features, check_extractable, data_digest

    found = {}
    try:
        if not data.exists():
            raise DataError(f"--data {data}: no such dataset file or image folder")
        for model in models:  # every model folder checked before the first extraction
            check_extractable(model, data)
        check_out_file(cache / ".prhsim-probe", overwrite=True, flag="--cache")  # the cache can take the files
        with bar_reporter("prhsim prh table", quiet=quiet) as say:
            digest = data_digest(data)
            for model in models:
                def progress(message, done=None, total=None, _name=model.name):
                    say(f"{_name}: extracting {message}", done, total)

                path, hit = cached_features(model, data, cache, batch_size=batch_size, device=device, digest=digest,
                                            shard_size=shard_size, progress=progress,
                                            notes=lambda line, _name=model.name: print_notes([f"{_name}: {line}"],
                                                                                             quiet=quiet))
                say(f"{model.name}: features {'cached' if hit else 'extracted'} ({path})")
                found[model] = path
    except (DataError, OutputError, ValueError) as exc:
        raise UsageProblem(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    return found


@prh.command()
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False))
@click.option("--rows", default=None, metavar="GLOB",
              help="Feature files or model folders for the rows (default: every one).")
@click.option("--cols", default=None, metavar="GLOB",
              help="Feature files or model folders for the columns (default: every one).")
@click.option("--data", type=click.Path(path_type=Path), default=None, metavar="DATA",
              help="Dataset the model folders' features are extracted over (as prhsim prh extract --data); "
                   "required when FOLDER holds a model folder.")
@click.option("--cache", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Folder of the extracted features, reused on a rerun (default FOLDER/.prhsim-features).")
@click.option("--batch-size", type=click.IntRange(1), default=32, show_default=True,
              help="Inputs per forward pass when extracting.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Device the model folders are run on.")
@click.option("--shard-size", type=click.IntRange(1), default=None, metavar="S",
              help="Extract in shards of S rows (as prhsim prh extract --shard-size): an interrupted run resumes.")
@_metric
@_k
@_clip
@click.option("--out", callback=parse_out, default=None, metavar="DIR",
              help="Output folder (default runs/<time>-prh-table); must be new or empty.")
@click.option("--overwrite", is_flag=True, default=False, help="Replace an existing --out folder holding results.json.")
@click.option("--no-figures", is_flag=True, default=False, help="Skip the heatmap.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
@_calibration
@memory_limit_option
def table(folder: Path, rows: str | None, cols: str | None, data: Path | None, cache: Path | None, batch_size: int,
          device: str, shard_size: int | None, metric: str, knn_k: int, clip: float, no_clip: bool, clip_scope: str,
          convention: str, out: Path | None, overwrite: bool, no_figures: bool, quiet: bool,
          permutations: int | None, alpha: float) -> None:
    """Score every row against every column of FOLDER (feature files, and model folders extracted over --data);
    write results.json, table.csv, table.png.

    \b
    Examples:
      prhsim prh table features/
      prhsim prh table features/ --rows 'llm-*' --cols 'vit-*' --metric cknna
      prhsim prh table ckpt/ --data data/dataset_flickr30k.json --rows 'bert*' --cols 'dinov2*'
    """
    if not folder.is_dir():
        raise UsageProblem(f"{folder}: no such folder")
    files = sorted(p for p in folder.iterdir() if _is_entry(p))
    row_files = [p for p in sorted(folder.glob(rows)) if _is_entry(p)] if rows else files
    col_files = [p for p in sorted(folder.glob(cols)) if _is_entry(p)] if cols else files
    if not row_files or not col_files:
        which = "--rows" if not row_files else "--cols"
        raise UsageProblem(f"{folder}: no feature files ({', '.join(SUFFIXES)}) or model folders (config.json) "
                           f"match {which if rows or cols else 'the folder'}")
    models = [p for p in dict.fromkeys([*row_files, *col_files]) if _is_model(p)]
    if models and data is None:
        raise UsageProblem(f"{models[0]} is a model folder (config.json): pass --data DATA to extract its features")
    out_dir = out or new_run_folder("prh-table")
    try:
        check_out_folder(out_dir, overwrite=overwrite)
    except OutputError as exc:
        raise UsageProblem(str(exc)) from None
    extracted = _model_features(models, data, cache or folder / ".prhsim-features", batch_size=batch_size,
                                device=device, shard_size=shard_size, quiet=quiet) if models else {}
    features = {p: _load(extracted.get(p, p)) for p in dict.fromkeys([*row_files, *col_files])}
    names_r, names_c = [p.name for p in row_files], [p.name for p in col_files]
    revision = git_revision()

    total = sum(_seconds(features[r], features[c], metric, knn_k, permutations) for r in row_files for c in col_files)
    print_notes(time_notes("table", total, f"{len(row_files)} x {len(col_files)} entries, {metric}"
                           + (f", {permutations:,} permutations each" if permutations else "")), quiet=quiet)

    def compute(say):
        try:
            return prh_table({p.name: x for p, x in features.items()}, names_r, names_c, metric=metric, knn_k=knn_k,
                             clip_quantile=None if no_clip else clip, clip_scope=clip_scope, convention=convention,
                             permutations=permutations, alpha=alpha, progress=say)
        except ValueError as exc:
            raise UsageProblem(_in_flags(str(exc))) from None

    def write(result, stage):
        cal = result.calibration
        calibration = None if cal is None else {
            "permutations": cal.permutations, "alpha": cal.alpha, "aggregate": "max", "correction": "holm",
            "calibrated": cal.calibrated.tolist(), "p_values": cal.p_values.tolist(), "tau": cal.tau.tolist(),
            "significant": cal.significant.tolist()}
        scores = result.scores
        document = {"git_revision": revision, "folder": str(folder), "metric": metric, "convention": convention,
                    "knn_k": result.knn_k,
                    "clip": None if no_clip else clip, "clip_scope": clip_scope,
                    "rows": names_r, "cols": names_c,
                    "features": {p.name: str(extracted.get(p, p)) for p in features},
                    "data": None if not extracted else str(data), "orientation": "scores[i][j]: rows[i] is A, cols[j] is B; "
                    "layer_pairs[i][j] = (layer of rows[i], layer of cols[j]), (-1, -1) where no pair scores "
                    "above 0 under --convention prh",
                    "scores": scores.tolist(), "layer_pairs": result.layer_pairs.tolist(), "chance": result.chance,
                    "calibration": calibration}
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(["", *names_c])
        for name, values in zip(names_r, scores):
            writer.writerow([name, *[f"{v:.6f}" for v in values]])
        (stage / "results.json").write_text(json_text(document))
        (stage / "table.csv").write_text(text.getvalue())
        if not no_figures:
            from prhsim.experiments.report import prh_table_figure

            save_png(prh_table_figure(scores, names_r, names_c, metric=metric, chance=result.chance),
                     stage / "table.png")
        return document

    def report(result, out_console):
        scores, pairs, chance, cal = result.scores, result.layer_pairs, result.chance, result.calibration
        title = f"{metric}: best layer pair" + ("" if chance is None else f" (chance {chance:.3g})")
        if cal is not None:
            title += " / calibrated (n.s.: not significant)"
        view = Table(title=title, title_justify="left")
        view.add_column("rows: A \\ cols: B")
        for name in names_c:
            view.add_column(escape(name), justify="right")
        for i, (name, values, layer_pairs) in enumerate(zip(names_r, scores, pairs)):
            cells = []
            for j, (v, (a, b)) in enumerate(zip(values, layer_pairs)):
                cell = f"{v:.3f} ({a},{b})" if a >= 0 else f"{v:.3f} (none)"
                if cal is not None:
                    mark = "" if cal.significant[i, j] else " n.s."
                    cell += f" / {cal.calibrated[i, j]:.3f}{mark}"
                cells.append(cell)
            view.add_row(escape(name), *cells)
        out_console.print(view)
        if cal is not None:
            m = scores.size
            out_console.print(f"calibrated against {cal.permutations:,} permutations of B's rows (the null "
                              f"of the max over every layer pair); n.s.: the p-value does not reach alpha "
                              f"{cal.alpha:g} under Holm's correction for the {m} cells of the table",
                              highlight=False)
            note = rejection_note(cal.permutations, cal.alpha, m, most=MOST_PERMUTATIONS)
            if note:
                out_console.print(f"[yellow]note[/]: {escape(note)} (--calibrate)", highlight=False)

    drive("prhsim prh table", out_dir, overwrite=overwrite, quiet=quiet, as_json=False, compute=compute,
          write=write, report=report)


@prh.command()
@click.option("--model", required=True, type=click.Path(path_type=Path), metavar="DIR",
              help="A local Hugging Face checkpoint directory (config.json, weights, tokenizer or image processor).")
@click.option("--data", required=True, type=click.Path(path_type=Path), metavar="DATA",
              help="Captions (Karpathy JSON: first caption per image; .jsonl; .parquet) or a folder of images.")
@click.option("--out", required=True, type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Feature file to write: .pt (PRH layout), .npy or .safetensors.")
@click.option("--layers", default="all", show_default=True, metavar="all|last|i,j,...",
              help="Hidden-state indices to keep (0: the embeddings; negative: from the end).")
@click.option("--pool", type=click.Choice(["auto", "mean", "cls", "last-token"]), default="auto", show_default=True,
              help="auto: mean over the non-padding tokens for language models, the class token for vision models.")
@click.option("--batch-size", type=click.IntRange(1), default=32, show_default=True, help="Inputs per forward pass.")
@click.option("--max-length", type=click.IntRange(2), default=None,
              help="Truncate texts to this many tokens (default and most: the model's maximum).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--shard-size", type=click.IntRange(1), default=None, metavar="S",
              help="Keep every S rows as a shard in OUT.shards/ so an interrupted run resumes from the shards done.")
@click.option("--overwrite", is_flag=True, default=False, help="Replace an existing --out file.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
def extract(model: Path, data: Path, out: Path, layers: str, pool: str, batch_size: int, max_length: int | None,
            device: str, shard_size: int | None, overwrite: bool, quiet: bool) -> None:
    """Features of every input of DATA from every layer of a local checkpoint, as a PRH feature file (N x L x D).

    \b
    Examples:
      prhsim prh extract --model ckpt/bert --data data/dataset_flickr30k.json --out features/bert.pt
      prhsim prh extract --model ckpt/dinov2 --data data/ --out features/dinov2.pt
      prhsim prh extract --model ckpt/gpt2 --data data/captions.jsonl --out features/gpt2.pt --shard-size 1000
    """
    if out.exists() and not overwrite:
        raise UsageProblem(f"--out {out} exists; pass --overwrite to replace it")
    from prhsim.real import DataError, extract_features, shard_folder

    try:
        with bar_reporter("prhsim prh extract", quiet=quiet) as say:
            summary = extract_features(model, data, out, layers=layers, pool=pool, batch_size=batch_size,
                                       max_length=max_length, device=device, overwrite=overwrite,
                                       shard_size=shard_size, progress=say,
                                       notes=lambda line: print_notes([line], quiet=quiet))
    except (DataError, ValueError) as exc:
        raise UsageProblem(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    except KeyboardInterrupt:
        shards = shard_folder(out)
        kept = any(shards.glob("*.pt")) if shards.is_dir() else False
        click.echo(f"prhsim prh extract: interrupted; {out} was not written"
                   + (f"; the finished shards stay in {shards}: the same command resumes from them" if kept else ""),
                   err=True)
        sys.exit(130)
    if not quiet:
        n, depth, width = summary.shape
        console().print(escape(f"wrote {out}: {n:,} inputs x {depth} layers x {width} features ({summary.kind} model "
                               f"{summary.model_type}, pool {summary.pool}, {summary.num_params:,} parameters, "
                               f"{summary.seconds:.1f} s)"), highlight=False)
