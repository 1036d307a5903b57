"""``prhsim real``: the bridge to real caption and image data. ``export-synthetic`` writes a Flickr-format dataset
from a prhsim world, with its known image representation, to test the real pipeline against; ``features``,
``train``, ``eval``, ``align`` and ``smoke`` run the pipeline (docs/real.md)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click
from rich.markup import escape

from prhsim._budget import ResourceError
from prhsim.io import OutputError, check_out_file, check_out_folder
from prhsim.cli._console import UsageProblem, bar_reporter, console
from prhsim.cli._driver import drive, print_notes
from prhsim.cli._options import git_revision, memory_limit_option, parse_out, read_own_config
from pydantic import ValidationError

from prhsim.config import ConfigError, format_validation_error, resolve_settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def real() -> None:
    """Real caption and image data: export a synthetic dataset, extract image features, train text encoders (one GPU
    or many under torchrun), evaluate them, align two encoders without pairs, and smoke-test the whole pipeline."""


@real.command("export-synthetic")
@click.option("--world", "world_kind", default=None, metavar="KIND",
              help="A world with pixel and caption renderers (gridscene). Shorthand for --set world=….")
@click.option("--out", callback=parse_out, required=True, metavar="DIR", help="Output folder; must be new or empty.")
@click.option("--images", type=int, default=None, metavar="N", help="Images (records). Shorthand for --set images=N.")
@click.option("--captions", type=int, default=None, metavar="C", help="Captions per image. Shorthand for --set captions=C.")
@click.option("--seed", type=int, default=None, metavar="S", help="Seed. Shorthand for --set seed=S.")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSON or TOML file of these settings; --set and flags override it.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any setting (values as in TOML; repeatable).")
@click.option("--overwrite", is_flag=True, default=False, help="Replace an existing --out folder.")
@click.option("--json", "as_json", is_flag=True, default=False, help="Print the export's summary as JSON.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
@memory_limit_option
def export_synthetic_command(world_kind, out, images, captions, seed, config_file, sets, overwrite, as_json,
                             quiet) -> None:
    """A Flickr-format dataset from a prhsim world: PNG images, Karpathy JSON with captions, and the pixel
    closed form as frozen image features (image_features.npy)."""
    from prhsim.real import ExportSettings

    flags = [f"{key}={value}" for key, value in (("images", images), ("captions", captions), ("seed", seed))
             if value is not None]
    if world_kind is not None and world_kind != "gridscene":
        flags.append(f"world={world_kind}")
    try:
        settings = resolve_settings(ExportSettings, read_own_config(config_file, None, []), [*sets, *flags])
        check_out_folder(out, overwrite=overwrite)
        from prhsim.real import check_export, plan_export, write_export

        check_export(settings.images, settings.captions, out)
    except (ConfigError, OutputError, ResourceError) as exc:
        raise UsageProblem(str(exc)) from None

    def compute(say):
        say(f"planning {settings.images:,} images and {settings.images * settings.captions:,} captions")
        return plan_export(settings.world.build_scene(), images=settings.images, captions=settings.captions,
                           val=settings.val, test=settings.test, pixel_scale=settings.pixel_scale, k=settings.k,
                           rng=settings.seed,
                           meta={"git_revision": git_revision(), "config": settings.model_dump(mode="json")})

    def write(plan, stage):
        write_export(plan, stage)
        return dataclasses.asdict(plan.summary(out))

    def report(plan, out_console):
        summary = plan.summary(out)
        out_console.print(escape(f"{summary.images:,} images of {summary.side} px ({json.dumps(summary.splits)}), "
                                 f"{summary.captions} captions each, image features of k = {summary.k}"),
                          highlight=False)

    drive("prhsim real export-synthetic", out, overwrite=overwrite, quiet=quiet, as_json=as_json, compute=compute,
          write=write, report=report, errors=(ValueError,))


#: Settings ``--resume`` may change: the number of steps (the schedule is rebuilt for the new total), what is
#: logged and where, and (for a dataset in memory, whose batches do not depend on it) the number of workers.
RESUMABLE = ("steps", "checkpoint_every", "log_every", "device", "tensorboard", "features")


def learner_and_views_options(default: str | None):
    """``--learner jepa|ntp`` and ``--views good|bad`` (``--views ntp`` is refused, naming ``--learner ntp``)."""
    def decorate(fn):
        fn = click.option("--views", default=default, type=click.Choice(["good", "bad", "ntp"]),
                          help="The jepa learner's views: good (two captions of an image) or bad (two spans of one "
                               "caption); default good.")(fn)
        return click.option("--learner", default=None, type=click.Choice(["jepa", "ntp"]),
                            help="jepa (the JEPA objective on two views) or ntp (next-token prediction); "
                                 "default jepa.")(fn)
    return decorate


def check_views(views: str | None) -> None:
    """Refuse ``--views ntp`` in one line: next-token prediction is a learner, not a view."""
    if views == "ntp":
        raise UsageProblem("--views ntp: next-token prediction is a learner, not a view; use --learner ntp")


@real.command("train")
@click.option("--data", default=None, metavar="DIR",
              help="Dataset: a folder with one dataset_*.json (Karpathy split) or *.jsonl, the file, or parquet shards.")
@learner_and_views_options(default=None)
@click.option("--model", default=None, type=click.Choice(["tiny", "bert-s", "bert-b"]),
              help="Model size of a randomly initialised encoder (default bert-s); with --weights the checkpoint sets it.")
@click.option("--weights", default=None, metavar="DIR",
              help="Start from a local Hugging Face BERT checkpoint (or sentence-transformers) directory; its "
                   "config.json sets the model. Shorthand for --set weights=DIR.")
@click.option("--tokenizer", default=None, metavar="FILE",
              help="A tokenizer.json or vocab.txt (default: DIR/tokenizer.json of --weights when present, else "
                   "WordPiece built from the captions). Shorthand for --set tokenizer=FILE.")
@click.option("--steps", type=int, default=None, metavar="N", help="Optimiser steps.")
@click.option("--batch-size", type=int, default=None, metavar="B", help="Images per step.")
@click.option("--features", default=None, metavar="FILE", help="Image features for evaluation (default: the dataset's).")
@click.option("--workers", type=int, default=None, metavar="W", help="Data-loader workers building the batches (default 0).")
@click.option("--out", callback=parse_out, required=True, metavar="RUN", help="The run folder (new, or the one to resume).")
@click.option("--resume", is_flag=True, default=False, help="Continue the run in --out from its checkpoint.")
@click.option("--stop-after", type=click.IntRange(min=1), default=None, metavar="S",
              help="Stop after step S with a checkpoint, keeping the schedule of --steps (resume with --resume).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSON or TOML file of these settings; --set and flags override it.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any setting (values as in TOML; repeatable).")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
@memory_limit_option
def train_command(data, learner, views, model, weights, tokenizer, steps, batch_size, features, workers, out, resume,
                  stop_after, config_file, sets, quiet) -> None:
    """Train a text encoder on a caption dataset with the objectives of prhsim.objectives (the jepa learner on good or
    bad views: LeJEPA's invariance + SIGReg; the ntp learner: next-token cross-entropy), with checkpoints a killed run resumes from. Under
    torchrun, the processes split each global batch (--batch-size) and the first one writes the run."""
    from prhsim.real import RealTrainSettings
    from prhsim.real import DataError, TrainingDiverged, train_real
    from prhsim.real import launched

    main = launched().main
    quiet = quiet or not main

    check_views(views)
    flags = [f"{key}={json.dumps(value)}" for key, value in (
        ("data", data), ("learner", learner), ("views", views), ("model", model), ("weights", weights),
        ("tokenizer", tokenizer), ("steps", steps), ("batch_size", batch_size),
        ("features", features), ("num_workers", workers)) if value is not None]
    try:
        base = read_own_config(config_file, None, [])
        if resume:
            saved = out / "config.json"
            if not saved.is_file():
                raise ConfigError(f"--resume: {out} holds no config.json (not a prhsim real run folder)")
            base = {**_saved_config(saved), **base}
        elif out.exists() and not out.is_dir():
            raise OutputError(f"--out {out} exists and is not a folder")
        elif main and not out.exists():
            check_out_folder(out)  # a path under a file, or in a folder that cannot be written: refused now
        elif main and any(out.iterdir()):  # the other processes start when the first may have written
            from prhsim.real import has_checkpoint

            if (out / "config.json").is_file() and not has_checkpoint(out):
                raise OutputError(f"--out {out} holds a run that stopped before its first checkpoint (nothing to "
                                  "resume); delete the folder to start it again")
            raise OutputError(f"--out {out} exists and is not empty; pass --resume to continue that run, or choose another folder")
        settings = _absolute_paths(resolve_settings(RealTrainSettings, base, [*sets, *flags]))
        if resume:
            old = _absolute_paths(RealTrainSettings.model_validate(_saved_config(out / "config.json"))).model_dump()
        if resume:
            from prhsim.real import parquet_shards

            free = (*RESUMABLE, *(() if parquet_shards(settings.data) else ("num_workers",)))
            changed = sorted(k for k, v in settings.model_dump().items() if old[k] != v and k not in free)
            if changed:
                raise ConfigError(f"--resume continues the run as it was set up; only {', '.join(free)} may "
                                  f"change, not {', '.join(changed)}")
        from prhsim.real import plan_training

        plan = plan_training(settings)  # what cannot fit is refused before the data or the model is read
    except ValidationError as exc:
        raise UsageProblem(format_validation_error(exc)) from None
    except (ConfigError, OutputError, ResourceError, DataError) as exc:
        raise UsageProblem(str(exc).splitlines()[0]) from None
    if model is not None and settings.weights and not resume and not quiet:
        click.echo(f"prhsim real train: note: --model {model} is not used: the checkpoint {settings.weights} sets "
                   "the model's size", err=True)
    if not quiet:
        for note in plan.notes():
            click.echo(f"prhsim real train: note: {note}", err=True)
    try:
        with bar_reporter("prhsim real train", quiet=quiet) as say:
            summary = train_real(settings, out, resume=resume, stop_after=stop_after, progress=say)
    except (DataError, TrainingDiverged, ResourceError, ValueError) as exc:
        raise UsageProblem(str(exc).splitlines()[0]) from None
    except KeyboardInterrupt:
        from prhsim.real import has_checkpoint

        tail = f"resume with --resume --out {out}" if has_checkpoint(out) else "no checkpoint was written; nothing was kept"
        click.echo(f"prhsim real train: interrupted; {tail}", err=True)
        sys.exit(130)
    if not quiet:
        console().print(escape(f"{summary.steps} steps (from {summary.resumed_from}), final loss {summary.loss:.4f}, "
                               f"{summary.seconds:.1f} s; wrote {out}/"), highlight=False)


@real.command("eval")
@click.argument("run", type=click.Path(path_type=Path, file_okay=False))
@click.option("--features", default=None, metavar="FILE", help="Image features (default: the run's, or the dataset's).")
@click.option("--data", default=None, metavar="DIR",
              help="Caption dataset to score on (default: the run's; needed for a run trained on parquet shards).")
@click.option("--n-fit", type=click.IntRange(min=2), default=1000, show_default=True,
              help="Validation pairs the rotation is fitted on.")
@click.option("--calibrate", "permutations", type=click.IntRange(min=0, max=1_000_000), default=1000,
              show_default=True, metavar="K",
              help="Score mutual k-NN and linear CKA against K re-pairings of the test rows (a permutation null: "
                   "p-value, critical value, calibrated score); 0 skips it.")
@click.option("--alpha", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Level of the calibration's critical value.")
@click.option("--json", "as_json", is_flag=True, default=False, help="Print eval.json to stdout instead of a table.")
def eval_command(run, features, data, n_fit, permutations, alpha, as_json) -> None:
    """Score a run's text encoder against the image features: R@1/R@5 both ways after one rotation fitted on
    validation pairs, the reported PRH metrics (mutual k-NN, linear CKA, R@1) on the test split, each beside its
    chance level and calibrated against a permutation null."""
    from prhsim.real import DataError, evaluate_run

    try:
        result = evaluate_run(run, features=features, data=data, n_fit=n_fit, permutations=permutations, alpha=alpha)
    except (DataError, ValueError) as exc:
        raise UsageProblem(str(exc).splitlines()[0]) from None
    except OSError as exc:  # eval.json could not be written (a read-only or full filesystem): nothing half-written
        raise UsageProblem(f"{run}: eval.json cannot be written: {exc.strerror or exc}") from None
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    out = console()
    out.print(escape(f"{run} ({result['label']}, {result['model']}, step {result['step']}): {result['n_test']} test "
                     f"images, rotation fitted on {result['n_fit']} validation pairs"), highlight=False)
    from prhsim.metrics import PRH_METRICS

    chance = result["chance"]
    recall = [("r1_text_to_image", "R@1 text -> image", chance["r1"]),
              ("r5_text_to_image", "R@5 text -> image", chance["r5"]),
              ("r1_image_to_text", "R@1 image -> text", chance["r1"]),
              ("r5_image_to_text", "R@5 image -> text", chance["r5"])]
    lines = [(result[key], label, level, None) for key, label, level in recall]
    for name, value in result["metrics"].items():
        record = PRH_METRICS.get(name)
        label = name if record is None else record.heading + (f" (k={result['knn_k']})" if record.neighbours else "")
        lines.append((value, label, chance.get(name), (result.get("calibration") or {}).get(name)))
    for value, label, level, cal in lines:
        tail = "" if level is None else f"   (chance {level:.4f})"
        if cal is not None:
            tail += (f"   calibrated {cal['calibrated']:.4f} (tau {cal['tau']:.4f}, p = {cal['p_value']:.3g} over "
                     f"{result['calibration']['permutations']:,} permutations)")
        out.print(escape(f"  {label:<20s} {value:.4f}{tail}"), highlight=False)
    calibration = result.get("calibration") or {}
    if calibration.get("permutations"):
        from prhsim.metrics import rejection_note

        note = rejection_note(calibration["permutations"], calibration["alpha"])
        print_notes([note] if note else [], quiet=False)


@real.command("features")
@click.option("--data", required=True, metavar="DIR", help="Dataset folder (one dataset_*.json) or the JSON.")
@click.option("--weights", required=True, metavar="DIR", help="A local DINOv2 checkpoint directory (Hugging Face format).")
@click.option("--out", required=True, metavar="FILE", help="Features file to write (.npy or .safetensors).")
@click.option("--images", default=None, metavar="DIR", help="The image folder (default: images/ beside the JSON, else its folder).")
@click.option("--image-size", type=int, default=224, show_default=True, help="Side of the centre crop the model reads.")
@click.option("--batch-size", type=int, default=64, show_default=True, help="Images per forward pass.")
@click.option("--workers", type=int, default=0, show_default=True,
              help="Data-loader workers decoding and resizing the images (0: in this process).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--overwrite", is_flag=True, default=False, help="Replace an existing features file.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
def features_command(data, weights, out, images, image_size, batch_size, workers, device, overwrite, quiet) -> None:
    """Frozen image features of every image of a caption dataset (DINOv2's pooled class token), one row per
    image in the dataset JSON's order: the image side of prhsim real eval."""
    from prhsim.real import DataError, encode_images


    try:  # before any image is encoded: a file that cannot be written must not cost the work
        check_out_file(Path(out), overwrite=overwrite)
    except OutputError as exc:
        raise UsageProblem(str(exc)) from None
    if image_size < 14 or batch_size < 1 or workers < 0:
        raise UsageProblem(f"--image-size must be at least 14, --batch-size at least 1 and --workers at least 0, "
                           f"got {image_size}, {batch_size}, {workers}")
    try:
        with bar_reporter("prhsim real features", quiet=quiet) as say:
            feats = encode_images(data, weights, out, images=images, image_size=image_size, batch_size=batch_size,
                                  num_workers=workers, device=device, progress=say,
                                  notes=lambda line: print_notes([line], quiet=quiet))
    except (DataError, ValueError) as exc:
        raise UsageProblem(str(exc).splitlines()[0]) from None
    if not quiet:
        console().print(escape(f"wrote {out}: {feats.shape[0]:,} images x {feats.shape[1]} features"), highlight=False)


#: The settings of ``prhsim real train`` that name files: stored resolved, so that a run folder works from anywhere.
PATH_SETTINGS = ("data", "features", "tokenizer", "weights")


def _saved_config(path: Path) -> dict:
    """A run folder's config.json, or a one-line ConfigError naming it when it cannot be read or holds settings that
    are not valid (each key that is wrong, with pydantic's message)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--resume: {path} cannot be read ({str(exc).splitlines()[0]}); the run folder is "
                          "damaged") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--resume: {path} does not hold the run's settings")
    from prhsim.real import RealTrainSettings
    from prhsim.config import format_validation_error

    try:
        RealTrainSettings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"--resume: {path} cannot be read ({format_validation_error(exc)}); the run folder is "
                          "damaged") from None
    return data


def _absolute_paths(settings):
    """``settings`` with every path setting resolved against the current folder (None stays None)."""
    return settings.model_copy(update={key: str(Path(getattr(settings, key)).expanduser().resolve())
                                       for key in PATH_SETTINGS if getattr(settings, key)})


#: ``prhsim real smoke --device cpu``: the sizes that replace the GPU defaults a user did not set.
CPU_SMOKE = {"images": 200, "captions": 3, "batch_size": 16, "model": "tiny", "image_size": 56}


@real.command("smoke")
@click.option("--out", default="prhsim-smoke", show_default=True, metavar="DIR",
              help="Folder for the export, features and run (an export of the same size there is reused).")
@click.option("--images", type=click.IntRange(min=10), default=29_000, show_default=True, help="Images to export.")
@click.option("--captions", type=click.IntRange(min=2), default=5, show_default=True, help="Captions per image.")
@click.option("--model", default="bert-s", type=click.Choice(["tiny", "bert-s", "bert-b"]), show_default=True)
@learner_and_views_options(default="good")
@click.option("--batch-size", type=click.IntRange(min=2), default=256, show_default=True)
@click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--weights", default=None, metavar="DIR",
              help="A local DINOv2 checkpoint directory (default: a randomly initialised ViT-S/14, for throughput).")
@click.option("--image-size", type=click.IntRange(min=14), default=224, show_default=True)
@click.option("--workers", type=click.IntRange(min=0), default=None,
              help="Data-loader workers decoding images and building batches (default: the CPUs less one, at most 16).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="auto: CUDA, refused without it; cpu: a CPU-sized smoke (200 images, tiny model, unless set).")
@click.option("--compile", "compile_mode", type=click.Choice(["none", "default", "reduce-overhead", "max-autotune"]),
              default="none", show_default=True, help="torch.compile mode of the text encoder.")
@click.option("--json", "as_json", is_flag=True, default=False, help="Print smoke.json to stdout instead of a table.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors and the result.")
def smoke_command(out, images, captions, model, learner, views, batch_size, epochs, weights, image_size, workers, device,
                  compile_mode, as_json, quiet) -> None:
    """The whole pipeline once at Flickr30k's size (export, DINOv2 features, one epoch of training, evaluation),
    printing samples/s, tokens/s, MFU and peak GPU memory."""
    import torch

    from prhsim.real import DataError, TrainingDiverged
    from prhsim.real import smoke

    if device == "auto" and not torch.cuda.is_available():
        raise UsageProblem(f"prhsim real smoke is the GPU smoke test ({images:,} images, Flickr30k's size) and this "
                           "machine has no CUDA device; --device cpu runs a CPU-sized version (under a minute)")
    if device == "cpu":  # the CPU-sized smoke: every size left at its GPU default is scaled down
        ctx = click.get_current_context()
        for name, value in CPU_SMOKE.items():
            if ctx.get_parameter_source(name) is click.core.ParameterSource.DEFAULT:
                ctx.params[name] = value
        images, batch_size, model, image_size, captions = (ctx.params[n] for n in
                                                           ("images", "batch_size", "model", "image_size", "captions"))
    check_views(views)
    try:
        with bar_reporter("prhsim real smoke", quiet=quiet or as_json) as say:
            report = smoke(out, images=images, captions=captions, model=model, learner=learner or "jepa",
                           views=views or "good", batch_size=batch_size,
                           epochs=epochs, weights=weights, image_size=image_size, workers=workers, device=device,
                           compile=compile_mode, progress=say)
    except (DataError, TrainingDiverged, ResourceError, OutputError, ValueError) as exc:
        raise UsageProblem(str(exc).splitlines()[0]) from None
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    features, train, scores = report["features"], report["train"], report["eval"]
    mfu = "n/a (no known peak for this device)" if train["mfu"] is None else f"{100 * train['mfu']:.1f} %"
    memory = "n/a" if train["peak_memory_gib"] is None else f"{train['peak_memory_gib']:.2f} GiB"
    rows = [
        ("device", report["device"]),
        ("export", f"{report['images']:,} images x {report['captions']} captions, {report['export_s']:.1f} s"),
        ("image features", f"{features['images_per_s']:,.0f} images/s with {features['workers']} workers; model alone "
                           f"{features['model_alone_images_per_s']:,.0f} images/s ({100 * features['share']:.0f} %)"),
        ("training", f"{report['steps']} steps of {report['batch_size']} ({report['label']}, {report['model']}), "
                     f"{train['seconds']:.1f} s"),
        ("samples/s", f"{train['samples_per_s']:,.0f} images ({train['sequences_per_s']:,.0f} sequences)"),
        ("tokens/s", f"{train['tokens_per_s']:,.0f} real tokens"
                     + ("" if train["real_token_share"] is None
                        else f" ({100 * train['real_token_share']:.0f} % of the packed positions)")),
        ("MFU", mfu),
        ("peak GPU memory", memory),
        ("R@1 text -> image", f"{scores['r1_text_to_image']:.4f} (chance {scores['chance_r1']:.4f})"),
        ("mutual k-NN", f"{scores['mutual_knn']:.4f}"),
        ("total", f"{report['total_s']:.1f} s; wrote {out}/smoke.json"),
    ]
    console().print(escape("\n".join(f"  {name:<18s} {value}" for name, value in rows)), highlight=False)


@real.command("align")
@click.option("--unpaired", nargs=2, required=True, metavar="A B",
              help="Two feature files (npy, safetensors or a PRH .pt dict); no row of A is paired with a row of B.")
@click.option("--dim", type=click.IntRange(min=1), default=16, show_default=True,
              help="Principal components of each file the map acts on.")
@click.option("--method", type=click.Choice(["iterative", "spectral"]), default="iterative", show_default=True,
              help="iterative: features alone; spectral: each encoder's own positive pairs too (--pairs-a, --pairs-b).")
@click.option("--pairs-a", default=None, metavar="FILE", help="(P, 2, D) .npy features of positive pairs of A's encoder.")
@click.option("--pairs-b", default=None, metavar="FILE", help="(P, 2, D) .npy features of positive pairs of B's encoder.")
@click.option("--paired", is_flag=True, default=False,
              help="For evaluation only: row i of A and of B are one input; report top-1/top-5 retrieval.")
@click.option("--labels-a", default=None, metavar="FILE", help="For evaluation only: .npy integer label per row of A.")
@click.option("--labels-b", default=None, metavar="FILE", help="For evaluation only: .npy integer label per row of B.")
@click.option("--starts", type=click.IntRange(min=1), default=16, show_default=True, help="Starts of the iterative method.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random starts.")
@click.option("--out", default=None, metavar="FILE.npz", help="Write the map (and each file's PCA whitening) here.")
@click.option("--overwrite", is_flag=True, default=False, help="Replace an existing --out file.")
@click.option("--json", "as_json", is_flag=True, default=False, help="Print the report as JSON.")
def align_command(unpaired, dim, method, pairs_a, pairs_b, paired, labels_a, labels_b, starts, seed, out,
                  overwrite, as_json) -> None:
    """The map between two encoders' features found without any pair (docs/theory.md §9); pairs or labels,
    when given, only score it. The iterative search says each start on stderr, after a note when it may take
    minutes; the map is written whole or not at all."""
    from prhsim.real import DataError
    from prhsim.real import align_unpaired

    if out is not None and not str(out).endswith(".npz"):
        raise UsageProblem(f"--out {out}: the map is written as .npz")
    if out is not None:

        try:
            check_out_file(Path(out), overwrite=overwrite)
        except OutputError as exc:
            raise UsageProblem(str(exc)) from None
    try:
        with bar_reporter("prhsim real align", quiet=as_json) as say:
            report = align_unpaired(unpaired[0], unpaired[1], dim=dim, method=method, pairs_a=pairs_a,
                                    pairs_b=pairs_b, paired=paired, labels_a=labels_a, labels_b=labels_b,
                                    starts=starts, out=out, seed=seed, progress=say,
                                    notes=lambda line: print_notes([line], quiet=as_json))
    except (DataError, ValueError) as exc:
        raise UsageProblem(str(exc).splitlines()[0]) from None
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    lines = [f"{report['method']} map between {report['features_a']} ({report['rows_a']:,} rows) and "
             f"{report['features_b']} ({report['rows_b']:,} rows) on {report['dim']} principal components"]
    if "criterion" in report:
        lines.append(f"  chamfer distance {report['criterion']:.4f} (start {report['chosen_start']})")
    if "identifiable" in report:
        lines.append(f"  identifiable: {report['identifiable']}" + "".join(f"\n  {a}" for a in report["ambiguities"]))
    if "r1_a_to_b" in report:
        lines.append(f"  R@1 A -> B {report['r1_a_to_b']:.4f}, R@5 {report['r5_a_to_b']:.4f}; B -> A R@1 "
                     f"{report['r1_b_to_a']:.4f}, R@5 {report['r5_b_to_a']:.4f} (chance {report['chance_r1']:.4f})")
    if "top1_accuracy" in report:
        lines.append(f"  label accuracy top-1 {report['top1_accuracy']:.4f}, top-5 {report['top5_accuracy']:.4f}")
    if out is not None:
        lines.append(f"  wrote {out}")
    console().print(escape("\n".join(lines)), highlight=False)
