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

import numpy as np

from prhsim.experiments._caption_alignment import (
    CaptionAlignment,
    CaptionTarget,
    caption_alignment,
    evaluated_captions,
    one_caption_knn,
)
from prhsim.optima import (
    CaptionMoments,
    LinearOptimum,
    combine_moments,
    linear_optimum,
    next_token_moments,
    one_hot,
    pooled_prefixes,
    span_moments,
)
from prhsim.worlds import Records, SpanLaw, World


def task_moments(target: CaptionTarget, task: str, spans: SpanLaw, *, records: Records | None = None,
                 world: World | None = None) -> CaptionMoments:
    """The moments of ``task`` on ``records`` (or on the law, the views' states paired by ``world``)."""
    if task == "ntp":
        return next_token_moments(target.law, records=records)
    return span_moments(target.law, spans, task, records=records, world=world)


def linear_fit(target: CaptionTarget, task: str, spans: SpanLaw, k: int, *, records: Records | None = None,
               world: World | None = None, ridge: float = 0.0, moments: CaptionMoments | None = None
               ) -> LinearOptimum:
    """The linear class's optimum for ``task`` on ``records`` (or on the law, the views' states paired by ``world``;
    or on ``moments`` already found)."""
    if moments is None:
        moments = task_moments(target, task, spans, records=records, world=world)
    return linear_optimum(moments, k, ridge=ridge, fill=True)


def nested_scores(target: CaptionTarget, task: str, spans: SpanLaw, k: int, records: Records, budgets, *,
                  scorer: OneCaptionScorer, ridge: float = 0.0) -> list[float]:
    """The one-caption mutual k-NN of the linear class fitted on the first N records for every N of ``budgets``
    (increasing), the moments gathered in one pass over the records (:func:`prhsim.optima.combine_moments`)."""
    scores, moments, done = [], None, 0
    for n in budgets:
        part = Records(records.states[done:n], records.nuisance[done:n], records.tokens[done:n], records.pad)
        more = task_moments(target, task, spans, records=part)
        moments = more if moments is None else combine_moments(moments, more)
        done = n
        scores.append(scorer(linear_fit(target, task, spans, k, moments=moments, ridge=ridge)))
    return scores


class OneCaptionScorer:
    """The one-caption mutual k-NN of a linear optimum's representation, without embedding every caption.

    The representation of a caption is ``(φ − μ)W`` (φ its features, the pooled prefixes for "ntp"), so its
    covariance over every caption under ``p ⊗ q`` is ``Wᵀ S W`` with S the features' covariance, computed once;
    only the evaluated captions (one per state) are embedded. Equal to :func:`one_caption_knn` on every caption's
    row (tested).
    """

    def __init__(self, target: CaptionTarget, task: str) -> None:
        law = target.law
        V = law.vocab_size
        rows = target.captions
        embed = (lambda r: pooled_prefixes(r, law.pad, V)) if task == "ntp" else (lambda r: one_hot(r, V))
        every = embed(rows)
        w = (law.p[:, None] * law.q[None, :]).ravel()
        mean = np.asarray(every.T @ w)
        self.cov = np.asarray((every.T @ every.multiply(w[:, None]).tocsr()).todense()) - np.outer(mean, mean)
        self.one = embed(rows[evaluated_captions(target)])
        self.target = target

    def __call__(self, opt: LinearOptimum) -> float:
        W = opt.weights
        features = np.asarray(self.one @ W) - opt.mean @ W
        scale = float(np.linalg.eigvalsh(W.T @ self.cov @ W)[-1]) if W.size else 0.0
        return one_caption_knn(self.target, features, scale=max(scale, 0.0))


def predicted_alignment(target: CaptionTarget, task: str, spans: SpanLaw, k: int, records: Records, *,
                        ridge: float = 0.0, scorer: OneCaptionScorer | None = None) -> CaptionAlignment | float:
    """The alignment of the linear class fitted on ``records``: every score, or with ``scorer`` the one-caption
    mutual k-NN alone."""
    opt = linear_fit(target, task, spans, k, records=records, ridge=ridge)
    if scorer is not None:
        return scorer(opt)
    return caption_alignment(target, opt.captions(target.captions, target.law.pad))


def predicted_limit(target: CaptionTarget, task: str, spans: SpanLaw, k: int, *, world: World | None,
                    ridge: float = 0.0, scorer: OneCaptionScorer | None = None) -> CaptionAlignment | float:
    """The alignment of the linear class on the law itself: the limit of :func:`predicted_alignment` as N grows."""
    opt = linear_fit(target, task, spans, k, world=world, ridge=ridge)
    if scorer is not None:
        return scorer(opt)
    return caption_alignment(target, opt.captions(target.captions, target.law.pad))
