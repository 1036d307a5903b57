"""The alignment a task reaches from N records, predicted without SGD: the linear class fitted exactly (docs/theory.md §5.4).

For a task (good views, bad views, next-token prediction) and a set of records, the optimum of the
task's objective within linear encoders of the learners' input features is computed exactly on those
records (:func:`prhsim.optima.span_moments` / :func:`prhsim.optima.next_token_moments`, then
:func:`prhsim.optima.linear_optimum`: a generalised eigenproblem or a CCA, no training) and scored
against the pixel closed form like a learner (:func:`prhsim.experiments._caption_alignment.caption_alignment`).
Its limit as N grows is the same optimum on the law (:func:`predicted_limit`). Where the records span
fewer than k + 1 directions (a handful of records), the optimum keeps the directions there are and the
representation has fewer than k features.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from prhsim.experiments._caption_alignment import CaptionAlignment, CaptionTarget, caption_alignment, one_caption_knn
from prhsim.optima import LinearOptimum, linear_optimum, next_token_moments, span_moments
from prhsim.worlds import Records, SpanLaw, World


def linear_fit(target: CaptionTarget, task: str, spans: SpanLaw, k: int, *, records: Records | None = None,
               world: World | None = None, ridge: float = 0.0) -> LinearOptimum:
    """The linear class's optimum for ``task`` on ``records`` (or on the law, views' states paired by ``world``)."""
    law = target.law
    if task == "ntp":
        moments = next_token_moments(law, records=records)
    else:
        moments = span_moments(law, spans, task, records=records, world=world)
    return linear_optimum(moments, k, ridge=ridge, fill=True)


def predicted_alignment(target: CaptionTarget, task: str, spans: SpanLaw, k: int, records: Records, *,
                        ridge: float = 0.0, scores: Literal["all", "mutual_knn"] = "all"
                        ) -> CaptionAlignment | float:
    """The alignment of the linear class fitted on ``records``: every score, or the one-caption mutual k-NN alone."""
    opt = linear_fit(target, task, spans, k, records=records, ridge=ridge)
    features = opt.captions(target.captions, target.law.pad)
    return caption_alignment(target, features) if scores == "all" else one_caption_knn(target, features)


def predicted_limit(target: CaptionTarget, task: str, spans: SpanLaw, k: int, *, world: World | None,
                    ridge: float = 0.0, scores: Literal["all", "mutual_knn"] = "all") -> CaptionAlignment | float:
    """The alignment of the linear class on the law itself: the limit of :func:`predicted_alignment` as N grows."""
    opt = linear_fit(target, task, spans, k, world=world, ridge=ridge)
    features = opt.captions(target.captions, target.law.pad)
    return caption_alignment(target, features) if scores == "all" else one_caption_knn(target, features)
