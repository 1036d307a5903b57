"""What the world is: states, p(z), positive-pair laws, modalities and views."""

from prhsim.worlds._captions import (
    CaptionLaw as CaptionLaw,
    Records as Records,
    SpanLaw as SpanLaw,
    caption_law as caption_law,
    spans_of as spans_of,
)
from prhsim.worlds._emission import EmissionWorld as EmissionWorld, emission_world as emission_world
from prhsim.worlds._finite import FiniteWorld as FiniteWorld, World as World
from prhsim.worlds._gridscene import (
    GridScene as GridScene,
    gridscene as gridscene,
    pixels as pixels,
    symbolic as symbolic,
)
from prhsim.worlds._injectivity import (
    FULL_CHECK_LIMIT as FULL_CHECK_LIMIT,
    InjectivityReport as InjectivityReport,
    injectivity_check as injectivity_check,
)
from prhsim.worlds._modality import Modality as Modality, Part as Part, Parts as Parts, codebook as codebook
from prhsim.worlds._named import (
    grid as grid,
    metropolis as metropolis,
    path as path,
    resampling as resampling,
    ring as ring,
    torus as torus,
)
from prhsim.worlds._product import ProductWorld as ProductWorld
from prhsim.worlds._random import random_world as random_world, sinkhorn_world as sinkhorn_world
from prhsim.worlds._scene_captions import (
    WORDING_FACTORS as WORDING_FACTORS,
    CaptionStyle as CaptionStyle,
    caption as caption,
    caption_vocabulary as caption_vocabulary,
)
from prhsim.worlds._sampling import (
    ModalPairs as ModalPairs,
    PairSampler as PairSampler,
    pair_sampler as pair_sampler,
    sample_modal_pairs as sample_modal_pairs,
    sample_pairs as sample_pairs,
    split_modal as split_modal,
)
from prhsim.worlds._span_worlds import (
    NextTokenLaw as NextTokenLaw,
    SpanEmission as SpanEmission,
    SpanWorld as SpanWorld,
    TooManySpans as TooManySpans,
    next_token_law as next_token_law,
    span_emission as span_emission,
    span_world as span_world,
)
from prhsim.worlds._views import (
    ModalWorld as ModalWorld,
    View as View,
    bad as bad,
    good as good,
    same_sample as same_sample,
    view_world as view_world,
)

__all__ = [
    "bad",
    "caption",
    "caption_law",
    "caption_vocabulary",
    "CaptionLaw",
    "CaptionStyle",
    "codebook",
    "emission_world",
    "EmissionWorld",
    "FiniteWorld",
    "FULL_CHECK_LIMIT",
    "good",
    "grid",
    "GridScene",
    "gridscene",
    "injectivity_check",
    "InjectivityReport",
    "metropolis",
    "Modality",
    "ModalPairs",
    "ModalWorld",
    "next_token_law",
    "NextTokenLaw",
    "pair_sampler",
    "PairSampler",
    "Part",
    "Parts",
    "path",
    "pixels",
    "ProductWorld",
    "random_world",
    "Records",
    "resampling",
    "ring",
    "same_sample",
    "sample_modal_pairs",
    "sample_pairs",
    "sinkhorn_world",
    "span_emission",
    "span_world",
    "SpanEmission",
    "SpanLaw",
    "spans_of",
    "SpanWorld",
    "split_modal",
    "symbolic",
    "TooManySpans",
    "torus",
    "View",
    "view_world",
    "WORDING_FACTORS",
    "World",
]
