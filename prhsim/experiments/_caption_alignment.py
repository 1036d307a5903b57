"""How well a caption representation aligns with the pixel modality's closed form (docs/theory.md §5.1, §10).

The target is the world's image side: the closed-form optimum of gridscene's ``pixels`` modality
under the good view (nuisance-free: ``f(z, n) = Q h*(z)``), one image of random lighting per state.
A caption representation is a table of every whole caption ``z·|N| + n`` (:func:`caption_alignment`
reads it), from a trained learner (:func:`prhsim.learners.embed_captions`) or a closed form
(:func:`prhsim.optima.span_optimum`, :func:`prhsim.optima.next_token_optimum`).

Scores, each against the image of the same state:

* ``mutual_knn``: mutual 10-NN (PRH protocol) between one caption per state (its wording drawn
  from q) and the image, over every state; ``mutual_knn_mean`` uses the q-mean over captions.
  The states are listed in a fixed random order (``CaptionTarget.order``): a representation with
  exact ties (one that reads the wording alone has |N| distinct rows) would otherwise have its ties
  broken by state index, which follows the world's factors and scores far above chance. A
  representation constant across states (the q-mean of one that reads the wording alone) scores
  the chance level;
* ``r1``, ``r5``: text → image recall after one orthogonal map fitted on ``n_fit`` paired states
  (:func:`prhsim.metrics.retrieval`), over the held-out states;
* ``rho_p``: ``ρ_P`` between the whitened q-mean caption representation and the pixel features
  (p-weighted, docs/theory.md §2); None when the q-mean has rank below k (nuisance features
  average to zero over the wording);
* ``rank``: the numerical rank of the caption representation's covariance under ``p ⊗ q``;
* ``nuisance_free``: how many of its whitened directions are functions of z alone
  (:func:`prhsim.metrics.nuisance_free_dimension`, on its rank-``rank`` whitened part).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import numpy as np

from prhsim._rng import RngLike, check_rng
from prhsim.experiments._record import Record
from prhsim.optima import closed_form
from prhsim.metrics import (
    chance_recall,
    knn_chance,
    knn_indices,
    shared_neighbours,
    nuisance_free_dimension,
    procrustes,
    retrieval,
    whiten,
)
from prhsim.worlds import CaptionLaw, CaptionStyle, GridScene, caption_law, good, pixels, view_world

#: Relative eigenvalue below which a covariance direction counts as absent (rank).
RANK_TOL = 1e-9


class CaptionAlignment(Record):
    """Alignment scores of one caption representation with the pixel closed form (module docstring)."""

    mutual_knn: float
    mutual_knn_mean: float
    r1: float
    r5: float
    rho_p: float | None
    rank: int
    nuisance_free: int


@dataclass(frozen=True)
class CaptionTarget:
    """The image side and the evaluation protocol of a gridscene's caption learners.

    Attributes:
        scene: the world.
        law: its caption law.
        k: the pixel optimum's number of features (the learners use the same k).
        image: the pixel features of one image per state, (|Z|, k).
        wording: the wording of the one caption per state the sample metrics use, (|Z|,).
        fit: the states the retrieval map is fitted on (boolean, (|Z|,)).
        captions: every whole caption ``z·|N| + n``, (|Z|·|N|, T).
        order: a random permutation of the states, the order the k-NN lists are taken in.
        knn_k: neighbours of the mutual k-NN.
    """

    scene: GridScene
    law: CaptionLaw
    k: int
    image: np.ndarray
    wording: np.ndarray
    fit: np.ndarray
    captions: np.ndarray
    order: np.ndarray
    knn_k: int = 10

    @property
    def knn_chance(self) -> float:
        return knn_chance(self.law.n_states, self.knn_k)

    @property
    def r1_chance(self) -> float:
        return chance_recall(int(np.sum(~self.fit)), 1)

    @functools.cached_property
    def image_lists(self) -> np.ndarray:
        """The image's k-NN lists over the states in :attr:`order` (found once, read by every score)."""
        return knn_indices(self.image[self.order], self.knn_k, screen=False, normalise=True)


def caption_target(scene: GridScene, *, k: int | Literal["auto"] = "auto", n_fit: int = 1000, knn_k: int = 10,
                   style: CaptionStyle | None = None, rng: RngLike = None) -> CaptionTarget:
    """The pixel closed form of ``scene`` and the evaluation draws (image nuisance, caption wording, fit set).

    ``n_fit`` is capped at half the states, so at least half are held out; ``style`` words the captions.
    """
    gen = check_rng(rng)
    law = caption_law(scene, style)
    modality = pixels(scene)
    optimum = closed_form(view_world(scene.world, modality, good()), k)
    n_z = law.n_states
    lighting = gen.choice(modality.n_nuisance, size=n_z, p=modality.nuisance)
    image = optimum.features(np.arange(n_z) * modality.n_nuisance + lighting)
    wording = gen.choice(law.modality.n_nuisance, size=n_z, p=law.q)
    fit = np.zeros(n_z, dtype=bool)
    fit[gen.choice(n_z, size=min(int(n_fit), n_z // 2), replace=False)] = True
    units = np.arange(n_z * law.modality.n_nuisance)
    captions = law.captions(units // law.modality.n_nuisance, units % law.modality.n_nuisance)
    return CaptionTarget(scene, law, optimum.k, image, wording, fit, captions, gen.permutation(n_z), knn_k)


def whiten_rank(F: np.ndarray, w: np.ndarray, scale: float | None = None) -> np.ndarray:
    """Centre F under the weights w and whiten it on its covariance's eigenvectors above ``RANK_TOL · scale``: (n, rank).

    ``scale`` defaults to the covariance's largest eigenvalue; pass another table's (e.g. the
    whole representation's when F is its mean over the wording) so that a table that is constant
    up to rounding has rank 0.
    """
    F = F - w @ F
    C = F.T @ (F * w[:, None])
    vals, vecs = np.linalg.eigh((C + C.T) / 2)
    top = max(float(vals[-1]), 0.0) if scale is None else float(scale)
    keep = vals > RANK_TOL * top
    if not np.any(keep):
        return np.zeros((F.shape[0], 0))
    return F @ (vecs[:, keep] / np.sqrt(vals[keep]))


def _top_variance(F: np.ndarray, w: np.ndarray) -> float:
    F = F - w @ F
    return float(np.linalg.eigvalsh(F.T @ (F * w[:, None]))[-1])


def caption_alignment(target: CaptionTarget, features: np.ndarray) -> CaptionAlignment:
    """Score a representation of every whole caption, (|Z|·|N|, k), against the pixel closed form."""
    law = target.law
    n_z, n_n = law.n_states, law.modality.n_nuisance
    F = np.asarray(features, dtype=np.float64)
    if F.shape[0] != n_z * n_n or F.ndim != 2:
        raise ValueError(f"a caption representation has one row per caption ({n_z * n_n:,}), got shape {F.shape}")
    if not np.all(np.isfinite(F)):
        raise ValueError("the caption representation is not finite")
    table = F.reshape(n_z, n_n, -1)
    one = table[np.arange(n_z), target.wording]
    mean = np.einsum("znk,n->zk", table, law.q)
    weights = (law.p[:, None] * law.q[None, :]).ravel()
    scale = _top_variance(F, weights)
    W = whiten_rank(F, weights, scale)
    rank = W.shape[1]
    rho = None
    if F.shape[1] == target.k and whiten_rank(mean, law.p, scale).shape[1] == target.k:
        rho = procrustes(whiten(mean, law.p), whiten(target.image, law.p), law.p).rho
    recall = retrieval(one, target.image, fit=target.fit, ks=(1, 5)).a_to_b
    return CaptionAlignment(
        mutual_knn=_knn(one, target, scale), mutual_knn_mean=_knn(mean, target, scale), r1=recall[1], r5=recall[5],
        rho_p=None if rho is None else float(rho), rank=rank,
        nuisance_free=nuisance_free_dimension(W, law.q, law.p) if rank else 0)


def one_caption_knn(target: CaptionTarget, features: np.ndarray, *, scale: float | None = None) -> float:
    """``mutual_knn`` of :func:`caption_alignment` alone: one caption per state against the image (the curves' metric).

    ``features``: every caption's row (|Z|·|N|, k); or, with ``scale`` (the largest variance of the representation
    over every caption under ``p ⊗ q``), the rows of the evaluated captions alone, one per state (|Z|, k)."""
    law = target.law
    F = np.asarray(features, dtype=np.float64)
    n_z, n_n = law.n_states, law.modality.n_nuisance
    if scale is not None:
        if F.shape[0] != n_z or F.ndim != 2:
            raise ValueError(f"with a scale, one row per state ({n_z:,}), got shape {F.shape}")
        return _knn(F, target, float(scale))
    if F.shape[0] != n_z * n_n or F.ndim != 2:
        raise ValueError(f"a caption representation has one row per caption ({n_z * n_n:,}), got shape {F.shape}")
    one = F.reshape(n_z, n_n, -1)[np.arange(n_z), target.wording]
    return _knn(one, target, _top_variance(F, (law.p[:, None] * law.q[None, :]).ravel()))


def evaluated_captions(target: CaptionTarget) -> np.ndarray:
    """The index of the one caption per state the sample metrics read, ``z·|N| + wording[z]`` (|Z|,)."""
    return np.arange(target.law.n_states) * target.law.modality.n_nuisance + target.wording


def _knn(a: np.ndarray, target: CaptionTarget, scale: float) -> float:
    """Mutual k-NN over the states in ``target.order``.

    A representation constant across states up to rounding (rank 0 against ``scale``, the caption
    table's variance) scores the chance level: its neighbours are ties, and rounding would otherwise
    pick them. One with a zero row (no direction to compare) scores 0.
    """
    if whiten_rank(a, target.law.p, scale).shape[1] == 0:
        return target.knn_chance
    if np.any(np.all(a == 0, axis=1)):
        return 0.0
    mine = knn_indices(a[target.order], target.knn_k, screen=False, normalise=True)
    return shared_neighbours(mine, target.image_lists)  # mutual_knn(a, image), the image's lists found once
