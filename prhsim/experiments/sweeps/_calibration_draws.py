"""The calibration sweep's draws (docs/prh.md, "Calibrated scores"): the gridscene and its closed forms, and one
draw of each family (null, views, width, depth), each from its own generator ``default_rng([seed, family, ..., i])``
(:mod:`prhsim._rng`'s CALIBRATION tags), with the K permutations its metrics share."""

from __future__ import annotations

import math
import warnings

import numpy as np

from prhsim._rng import CALIBRATION_DEPTH, CALIBRATION_NULL, CALIBRATION_VIEWS, CALIBRATION_WIDTH
from prhsim.experiments._rotation import merge_rule
from prhsim.metrics import PRH_METRICS, haar_orthogonal, knn_indices
from prhsim.optima import Optimum, TieWarning, closed_form
from prhsim.worlds import Modality, bad, good, gridscene, view_world

#: Modality a (pixels; under bad(ε) in the bad-view family) and modality b (captions, always good).
MODALITIES = ("pixels", "caption")
#: The shared signal's rank in the width family: the top 4 good-view features (a gap follows the 4th).
SIGNAL_RANK = 4
#: The families' ids in the draws' seeds.
_NULL, _VIEWS, _WIDTH, _DEPTH = CALIBRATION_NULL, CALIBRATION_VIEWS, CALIBRATION_WIDTH, CALIBRATION_DEPTH


def signal_noise_variance(width: int, signal_cka: float, rank: int = SIGNAL_RANK) -> float:
    """v with ``rank/(rank(1 + v)² + (width − rank)v²) = signal_cka``: the population CKA of the embedded signal."""
    if not 0.0 < signal_cka <= 1.0:
        raise ValueError(f"signal_cka must lie in (0, 1], got {signal_cka}")
    if width < rank:
        raise ValueError(f"width {width} is below the signal's rank {rank}")
    r, d = float(rank), float(width)
    # d v² + 2 r v + r(1 − 1/c) = 0, the positive root written without cancellation
    c0 = r * (1.0 / signal_cka - 1.0)
    return 0.0 if c0 == 0.0 else float(c0 / (r + math.sqrt(r * r + d * c0)))


class Scene:
    """The gridscene, its two modalities and their closed forms (good views; bad(ε) pixels)."""

    def __init__(self, eps: float) -> None:
        scene = gridscene()
        self.base = scene.world
        self.p = np.asarray(self.base.p, dtype=np.float64)
        mods = {m.name: m for m in scene.modalities(rng=0)}
        self.a: Modality = mods[MODALITIES[0]]
        self.b: Modality = mods[MODALITIES[1]]
        self.good_a = closed_form(view_world(self.base, self.a, good()), "auto")
        self.k = self.good_a.k
        self.good_b = closed_form(view_world(self.base, self.b, good()), self.k)
        with warnings.catch_warnings():  # a bad view's tie at k is measured, not a problem of the sweep
            warnings.simplefilter("ignore", TieWarning)
            self.bad_a = closed_form(view_world(self.base, self.a, bad(eps)), self.k)
            self.nuisance_free = merge_rule(self.base, bad(eps), self.a.n_nuisance, self.k).nuisance_free

    def states(self, gen: np.random.Generator, samples: int) -> np.ndarray:
        """N distinct states drawn from p, in a uniformly random order (an exchangeable sequence)."""
        z = gen.choice(self.p.size, size=samples, replace=False, p=self.p)
        return gen.permutation(z)

    @staticmethod
    def features(opt: Optimum, modality: Modality, z: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """The optimum at (z, n) with n drawn from the modality's nuisance law (modal index z·|N| + n)."""
        n = gen.choice(modality.n_nuisance, size=z.size, p=modality.nuisance)
        return opt.features(z * modality.n_nuisance + n)


def _permutations(gen: np.random.Generator, count: int, samples: int) -> np.ndarray:
    return np.stack([gen.permutation(samples) for _ in range(count)])


def null_draw(scene: Scene, seed: int, draw: int, samples: int, permutations: int) -> tuple[np.ndarray, ...]:
    """(A, B, perms): modality a and modality b on two independent samples of states, each turned by a Haar rotation."""
    gen = np.random.default_rng([seed, _NULL, draw])
    A = scene.features(scene.good_a, scene.a, scene.states(gen, samples), gen) @ haar_orthogonal(scene.k, gen)
    B = scene.features(scene.good_b, scene.b, scene.states(gen, samples), gen) @ haar_orthogonal(scene.k, gen)
    return A, B, _permutations(gen, permutations, samples)


def view_draw(scene: Scene, seed: int, draw: int, samples: int, permutations: int) -> tuple[np.ndarray, ...]:
    """(A_good, A_bad, B, perms) on one sample of states: a under the good and the bad view (same nuisances), b good."""
    gen = np.random.default_rng([seed, _VIEWS, draw])
    z = scene.states(gen, samples)
    rows = z * scene.a.n_nuisance + gen.choice(scene.a.n_nuisance, size=samples, p=scene.a.nuisance)
    Qa = haar_orthogonal(scene.k, gen)
    B = scene.features(scene.good_b, scene.b, z, gen) @ haar_orthogonal(scene.k, gen)
    return (scene.good_a.features(rows) @ Qa, scene.bad_a.features(rows) @ Qa, B,
            _permutations(gen, permutations, samples))


def width_draw(scene: Scene, seed: int, width: int, draw: int, samples: int, permutations: int,
               signal_cka: float) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], np.ndarray]:
    """((A, B) noise, (A, B) signal, perms) at one width: isotropic noise; the top SIGNAL_RANK good-view features of
    a and b on one sample of states, each through a random isometry into width d, plus noise of variance v_d."""
    gen = np.random.default_rng([seed, _WIDTH, width, draw])
    null = (gen.standard_normal((samples, width)), gen.standard_normal((samples, width)))
    z = scene.states(gen, samples)
    sd = math.sqrt(signal_noise_variance(width, signal_cka))
    sa, sb = (scene.features(opt, mod, z, gen)[:, :SIGNAL_RANK] @ _isometry(gen, SIGNAL_RANK, width)
              + sd * gen.standard_normal((samples, width))
              for opt, mod in ((scene.good_a, scene.a), (scene.good_b, scene.b)))
    return null, (sa, sb), _permutations(gen, permutations, samples)


def depth_draw(seed: int, depth: int, draw: int, samples: int, permutations: int,
               depth_width: int) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """(layers of A, layers of B, perms): 2·L independent isotropic noise layers of width depth_width."""
    gen = np.random.default_rng([seed, _DEPTH, depth, draw])
    As = [gen.standard_normal((samples, depth_width)) for _ in range(depth)]
    Bs = [gen.standard_normal((samples, depth_width)) for _ in range(depth)]
    return As, Bs, _permutations(gen, permutations, samples)


def _isometry(gen: np.random.Generator, rank: int, width: int) -> np.ndarray:
    """A random (rank, width) matrix with orthonormal rows."""
    q, r = np.linalg.qr(gen.standard_normal((width, rank)))
    return (q * np.sign(np.diag(r))).T


def pair_table(metric: str, layers_a: list[np.ndarray], layers_b: list[np.ndarray], knn_k: int) -> np.ndarray:
    """``metric(A_l, B_m)`` for every layer pair, (L_a, L_b); mutual k-NN from one neighbour search per layer.

    Mutual k-NN is ``mean_i |S_a(i) ∩ S_b(i)|/k`` over the k-NN sets of the L2-normalised rows
    (:func:`prhsim.metrics.knn_indices`), so the sets of each layer serve every pair it is in.
    """
    if metric != "mutual_knn":
        return np.array([[PRH_METRICS[metric](a, b, knn_k=knn_k) for b in layers_b] for a in layers_a])
    lists_a, lists_b = ([np.asarray(knn_indices(x / np.linalg.norm(x, axis=1, keepdims=True), knn_k)) for x in layers]
                        for layers in (layers_a, layers_b))
    return np.array([[np.sum(la[:, :, None] == lb[:, None, :]) / la.size for lb in lists_b] for la in lists_a])
