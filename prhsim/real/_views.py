"""Text views of ``prhsim real`` (docs/theory.md §4, §5.1): 2 global and 6 local contiguous spans with masked tokens.

For each image of a batch:

* ``good``: every view is a span of one of the image's captions, the two global views of two
  different captions (when it has two or more): the wording differs between views;
* ``bad``: every view is a span of one caption, drawn once per image: the wording is shared;
* a global span covers a fraction of its caption uniform on ``[global_min, 1]``, a local span
  ``[local_min, local_max]`` (at least one token); each kept token is replaced by ``[MASK]`` with
  probability ``mask_prob``;
* ``ntp`` reads whole captions: one per image, drawn at random.

Each image's views are drawn from its own generator, so an image's views do not depend on which
other images share its batch (a batch split over processes gets the views it would get whole).
:func:`cut_views` gives the spans; training packs them (:mod:`._packing`). :func:`batch_views`
writes them from position 0, padded with ``[PAD]`` (id ``pad``), with ``mask`` marking the real
tokens: the padded layout of earlier versions, which ``benchmarks/bench_real_step.py`` compares with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

#: The text task a batch is cut for, as in the simulator (``prhsim.learners.TEXT_TASKS``): good views, bad views, or
#: next-token prediction (whole captions, no views).
TextTask = Literal["good", "bad", "ntp"]


@dataclass(frozen=True)
class ViewLaw:
    """How views are cut: counts, span fractions and the masking probability."""

    n_global: int = 2
    n_local: int = 6
    global_min: float = 0.5
    local_min: float = 0.15
    local_max: float = 0.4
    mask_prob: float = 0.1

    @property
    def n_views(self) -> int:
        return self.n_global + self.n_local

    def views_per_image(self, kind: TextTask) -> int:
        """The views each image gives: all of them for JEPA views, its one caption for next-token prediction."""
        return 1 if kind == "ntp" else self.n_views


def _span(caption: np.ndarray, low: float, high: float, gen: np.random.Generator) -> np.ndarray:
    n = caption.size
    length = max(1, int(round(gen.uniform(low, high) * n)))
    start = int(gen.integers(0, n - length + 1))
    return caption[start:start + length]


def cut_views(captions: Sequence[Sequence[np.ndarray]], kind: TextTask, law: ViewLaw, *, mask_id: int,
              gens: Sequence[np.random.Generator]) -> list[list[np.ndarray]]:
    """Views of a batch of images (each a list of caption id arrays), image b's drawn from ``gens[b]``:
    ``views[v][b]``, V lists of B token arrays (V = 1 for ntp)."""
    B = len(captions)
    if len(gens) != B:
        raise ValueError(f"one generator per image: {len(gens)} generators for {B} images")
    views = law.views_per_image(kind)
    rows: list[list[np.ndarray]] = [[None] * B for _ in range(views)]  # type: ignore[list-item]
    for b, (image, gen) in enumerate(zip(captions, gens)):
        if kind == "ntp":
            rows[0][b] = image[int(gen.integers(len(image)))]
            continue
        if kind == "bad":
            source = [int(gen.integers(len(image)))] * views
        else:
            first = int(gen.integers(len(image)))
            second = (first + 1 + int(gen.integers(len(image) - 1))) % len(image) if len(image) > 1 else first
            source = [first, second] + [int(gen.integers(len(image))) for _ in range(views - 2)]
        for v in range(views):
            low, high = (law.global_min, 1.0) if v < law.n_global else (law.local_min, law.local_max)
            span = _span(image[source[v]], low, high, gen).copy()
            span[gen.random(span.size) < law.mask_prob] = mask_id
            rows[v][b] = span
    return rows


def batch_views(captions: Sequence[Sequence[np.ndarray]], kind: TextTask, law: ViewLaw, *, pad: int, mask_id: int,
                max_length: int, gens: Sequence[np.random.Generator]) -> tuple[np.ndarray, np.ndarray]:
    """The views of :func:`cut_views` padded to the longest (at most ``max_length``): ids and mask, (V, B, L)."""
    rows = cut_views(captions, kind, law, mask_id=mask_id, gens=gens)
    length = min(max_length, max(r.size for row in rows for r in row))
    ids = np.full((len(rows), len(captions), length), pad, dtype=np.int64)
    mask = np.zeros((len(rows), len(captions), length), dtype=np.int64)
    for v, row in enumerate(rows):
        for b, span in enumerate(row):
            span = span[:length]
            ids[v, b, :span.size] = span
            mask[v, b, :span.size] = 1
    return ids, mask
