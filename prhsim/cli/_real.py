"""``prhsim real``: the bridge to real caption and image data. ``export-synthetic`` writes a Flickr-format dataset
from a prhsim world, with its known image representation, to test the real pipeline against."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape

from prhsim._budget import ResourceError
from prhsim._io import OutputError, check_out_folder
from prhsim.cli._console import UsageProblem, console, stage_reporter
from prhsim.cli._run import _parse_out, git_revision, read_own_config
from prhsim.config import ConfigError, ExportSettings, resolve_settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def real() -> None:
    """Real caption and image data: export a synthetic Flickr-format dataset from a prhsim world."""


@real.command("export-synthetic")
@click.option("--world", "world_kind", default=None, metavar="KIND",
              help="A world with pixel and caption renderers (gridscene). Shorthand for --set world=….")
@click.option("--out", callback=_parse_out, required=True, metavar="DIR", help="Output folder; must be new or empty.")
@click.option("--images", type=int, default=None, metavar="N", help="Images (records). Shorthand for --set images=N.")
@click.option("--captions", type=int, default=None, metavar="C", help="Captions per image. Shorthand for --set captions=C.")
@click.option("--seed", type=int, default=None, metavar="S", help="Seed. Shorthand for --set seed=S.")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSON or TOML file of these settings; --set and flags override it.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any setting (values as in TOML; repeatable).")
@click.option("--overwrite", is_flag=True, default=False, help="Replace an existing --out folder.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="Print nothing but errors.")
def export_synthetic_command(world_kind, out, images, captions, seed, config_file, sets, overwrite, quiet) -> None:
    """A Flickr-format dataset from a prhsim world: PNG images, Karpathy JSON with captions, and the pixel
    closed form as frozen image features (image_features.npy)."""
    flags = [f"{key}={value}" for key, value in (("images", images), ("captions", captions), ("seed", seed))
             if value is not None]
    if world_kind is not None and world_kind != "gridscene":
        flags.append(f"world={world_kind}")
    try:
        settings = resolve_settings(ExportSettings, read_own_config(config_file, None, []), [*sets, *flags])
        check_out_folder(out, overwrite=overwrite)
    except (ConfigError, OutputError) as exc:
        raise UsageProblem(str(exc)) from None
    from prhsim.experiments.real import export_synthetic

    try:
        with stage_reporter("prhsim real export-synthetic", quiet=quiet) as say:
            say(f"rendering {settings.images:,} images and {settings.images * settings.captions:,} captions")
            summary = export_synthetic(
                settings.world.build_scene(), out, images=settings.images, captions=settings.captions,
                val=settings.val, test=settings.test, pixel_scale=settings.pixel_scale, k=settings.k,
                overwrite=overwrite, rng=settings.seed,
                meta={"git_revision": git_revision(), "config": settings.model_dump(mode="json")})
    except (ResourceError, OutputError, ValueError) as exc:
        raise UsageProblem(str(exc).splitlines()[0]) from None
    except KeyboardInterrupt:
        click.echo("prhsim real export-synthetic: interrupted; nothing was written", err=True)
        sys.exit(130)
    if not quiet:
        console().print(escape(
            f"wrote {out}/: {summary.images:,} images of {summary.side} px ({json.dumps(summary.splits)}), "
            f"{summary.captions} captions each, image features of k = {summary.k}"), highlight=False)
