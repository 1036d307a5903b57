"""Normalise the ``rng`` argument of every stochastic function, and the one table of prhsim's random-stream tags."""

from __future__ import annotations

import hashlib
import json

import numpy as np

RngLike = int | np.random.Generator | None


def check_rng(rng: RngLike) -> np.random.Generator:
    """Return a numpy Generator from an int seed, a Generator, or None (seed 0).

    None means seed 0, not entropy: prhsim is deterministic unless asked otherwise.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng(0)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise ValueError(f"rng must be an int seed or a numpy Generator, got {type(rng).__name__}")


# --------------------------------------------------------------------------------------------------------------------
# The random streams, in one table
# --------------------------------------------------------------------------------------------------------------------
# A stream is ``np.random.default_rng([seed, TAG, *coordinates])``: the user's seed first, the stream's tag second,
# then the coordinates of the draw (a step, a budget, a seed of a grid). Two draws are independent when their seed
# lists differ, so within one seed's namespace every stream has its own tag. The namespaces: the simulator's run
# (``prhsim run``'s seed and its learners' seeds), real training (``prhsim real train``'s seed), and each sweep's
# seed (a sweep's tags are its own). The values are those the numbers were first computed with.

# prhsim run and its learners
#: The minibatch pairs of an SGD learner's seed s: ``[s, SGD_PAIRS]`` (JAX and torch alike).
SGD_PAIRS = 1
#: The states whose observations standardise a rendered MLP's inputs: ``[seed, RENDER_STANDARDISE]``.
RENDER_STANDARDISE = 2
#: The sampled rows of the run's PRH pair metrics: ``[run seed, RUN_PAIR_METRICS]``, spawned once per pair. It shares
#: its value with RENDER_STANDARDISE (a run with seed s and a rendered learner standardised with seed s start from
#: one generator state); the two draws feed unrelated quantities, and the value is kept so the run's numbers stay.
RUN_PAIR_METRICS = 2
#: The states a learner on rendered observations is evaluated on: ``[SGD_EVAL]`` alone (one sample for every seed).
SGD_EVAL = 3
#: The step data of a text learner's seed s: ``[s, TEXT_PAIRS]``.
TEXT_PAIRS = 3

# prhsim real train
#: The epoch's order of the training images: ``[seed, REAL_ORDER, epoch]``.
REAL_ORDER = 11
#: A parquet stream's shuffle buffer: ``[seed, REAL_SHUFFLE, rank, role, pass]``.
REAL_SHUFFLE = 12
#: The views of image i of step t's global batch: ``[seed, REAL_VIEWS, t, i]``.
REAL_VIEWS = 13
#: The dropout seed of a rank at a step: ``SeedSequence([seed, REAL_DROPOUT, rank, step])``.
REAL_DROPOUT = 14

# the sweeps (each in its own seed's namespace)
#: A sweep cell's own stream: ``[seed, SWEEP_CELL, *words]``, the words a hash of the cell's coordinates
#: (:func:`cell_stream`), so a cell's draws do not depend on where, or in what order, the cells run.
SWEEP_CELL = 21
#: The caption target (image features and the fitting split) of the sample-efficiency and sample-ratio sweeps:
#: ``[seed, CAPTION_TARGET]``.
CAPTION_TARGET = 0
#: The records of a text task at a budget: ``[seed, CAPTION_RECORDS + task index, ...]`` (task index 0, 1, 2).
CAPTION_RECORDS = 1
#: The learner confirmation (sample-ratio) and the predicted curves' draws (sample-efficiency):
#: ``[seed, CAPTION_CHECK, task index, ...]``.
CAPTION_CHECK = 7
#: The captioning sweep's decoder: ``[seed, CAPTIONING_DECODER]``; each of its seeds s draws its split, held-out
#: images and chance from ``[s, CAPTIONING_SEED]`` (its fitted maps from :func:`cell_stream`).
CAPTIONING_DECODER, CAPTIONING_SEED = 1, 7
#: The calibration sweep's families: ``[seed, family, ..., draw]``.
CALIBRATION_NULL, CALIBRATION_VIEWS, CALIBRATION_WIDTH, CALIBRATION_DEPTH = 0, 1, 2, 3

# Streams whose second entry is a coordinate, not a tag (kept so their numbers stay): SIGReg's directions at step t,
# ``[seed, t]`` (prhsim.objectives.draw_directions; at steps 1 and 2 its seed lists equal SGD_PAIRS' and
# RENDER_STANDARDISE's for the same seed), a learned representation's bootstrap over m sampled states, ``[seed, m]``,
# and the pair-free sweep's ``[base seed, seed]``.


def spawned_stream(seed: int, index: int) -> np.random.Generator:
    """The ``index``-th child of the seed's generator (``check_rng(seed).spawn(count)[index]`` for any ``count`` above
    it): a sweep cell indexed by a whole number (a world) draws from it, the same wherever and in whatever order."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(int(index),)))


def cell_stream(seed: int, coordinates: dict) -> np.random.Generator:
    """A sweep cell's generator: ``default_rng([seed, SWEEP_CELL, *w])``, ``w`` four 32-bit words of the SHA-256 of
    the coordinates as sorted JSON (floats by their shortest repr), so equal coordinates give equal draws."""
    digest = hashlib.sha256(json.dumps(coordinates, sort_keys=True).encode()).digest()
    words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
    return np.random.default_rng([int(seed), SWEEP_CELL, *words])
