"""The host side of every JAX learner: seeds, initial parameters and the chunked step loop (docs/theory.md §7).

The SGD learner (:func:`prhsim.learners.train`), the text learners (:func:`prhsim.learners.train_text`) and
the caption decoder (:func:`prhsim.learners.train_caption_decoder`) compile different step functions
(:func:`prhsim.learners._optimiser.scan_steps`), and drive them the same way:

* the seeds are distinct non-negative integers (:func:`check_seeds`); seed s initialises from
  ``jax.random.key(s)`` (:func:`initial_params`, vmapped over the seeds);
* the steps are cut into chunks (:func:`step_chunks`); :func:`drive` draws a chunk's data on the host,
  runs the compiled chunk, draws the next chunk's data while the device works (JAX dispatches
  asynchronously), then checks that every loss is finite (:func:`check_losses`: one wording, naming the
  step, the seed and the learning rate) and logs the chunk's first step and its losses;
* after the last chunk it has drawn the data of one more step (``final``), which the learner evaluates
  its final loss on.

A learner adds its own rules through two hooks: ``before(step, params)`` (the SGD learner measures its
stopping rule there, and ends the loop by returning False) and ``after(step, losses)`` (its loss plateau),
and ``live()``/``hold`` (seeds that stopped keep their parameters, and their losses are not checked).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np


def check_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    """The seeds as a tuple of ints: at least one, each a non-negative integer, all distinct."""
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
            raise ValueError(f"seeds must be non-negative integers, got {s!r}")
    seeds = tuple(int(s) for s in seeds)
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    return seeds


def initial_params(init: Callable[[Any], Any], seeds: Sequence[int]) -> Any:
    """Every seed's initial parameters, ``init(jax.random.key(s))``, stacked on a leading seed axis."""
    import jax
    import jax.numpy as jnp

    return jax.vmap(init)(jnp.stack([jax.random.key(int(s)) for s in seeds]))


def step_chunks(steps: int, every: int) -> list[np.ndarray]:
    """Steps ``0 .. steps−1`` in consecutive chunks of ``every`` (the last one may be shorter)."""
    return [np.arange(first, min(steps, first + every)) for first in range(0, steps, every)]


def check_losses(values: np.ndarray, steps: np.ndarray, seeds: Sequence[int], lr: float, *,
                 what: str = "training") -> None:
    """Raise one line naming the earliest step (then the first seed) whose loss in ``values`` (S, L) is not finite."""
    bad = ~np.isfinite(values)
    if np.any(bad):
        cells = np.argwhere(bad)
        s, j = cells[np.argmin(cells[:, 1])]
        raise ValueError(f"{what} diverged: the loss is {values[s, j]} at step {int(steps[j])} "
                         f"for seed {seeds[s]} (lr={lr:g})")


@dataclass
class Drive:
    """What :func:`drive` leaves: the parameters and optimiser state, the logged first steps of the chunks run
    (each with its losses, (S, L)), the step the loop ended at, and the data drawn for that step."""

    params: Any
    state: Any
    ended_at: int
    upcoming: Any
    logged: list[int] = field(default_factory=list)
    losses: list[np.ndarray] = field(default_factory=list)


def drive(run: Callable[[Any, Any, Any], tuple[Any, Any, Any]], params: Any, state: Any,
          chunks: Sequence[np.ndarray], draw: Callable[[np.ndarray], Any], *, seeds: Sequence[int], lr: float,
          what: str = "training", before: Callable[[int, Any], bool] | None = None,
          after: Callable[[int, np.ndarray], None] | None = None, live: Callable[[], np.ndarray] | None = None,
          hold: Callable[[Any, Any], Any] | None = None) -> Drive:
    """Run ``run(params, state, data) -> (params, state, losses (S, L))`` over ``chunks`` (see the module docstring).

    ``draw(steps)`` gives the data of those steps; after the last chunk it is called once more with the
    step the loop ended at (``ended_at``), and :attr:`Drive.upcoming` holds that data. ``before(step,
    params)`` runs before each chunk and ends the loop (at that step) when it returns False; ``after(end,
    losses)`` runs after each chunk; ``live()`` masks the seeds whose losses are checked, and ``hold(new,
    old)`` chooses the (params, state) the loop goes on with.
    """
    steps = int(chunks[-1][-1]) + 1 if chunks else 0
    result = Drive(params, state, steps, None)
    data = draw(chunks[0]) if chunks else draw(np.array([steps]))
    for i, chunk in enumerate(chunks):
        if before is not None and not before(int(chunk[0]), result.params):
            result.ended_at = int(chunk[0])
            break
        new = run(result.params, result.state, data)
        result.params, result.state = new[:2] if hold is None else hold(new[:2], (result.params, result.state))
        data = draw(chunks[i + 1] if i + 1 < len(chunks) else np.array([steps]))  # while the chunk runs
        values = np.asarray(new[2])
        mask = np.ones(len(values), dtype=bool) if live is None else live()
        check_losses(values[mask], chunk, tuple(np.asarray(seeds)[mask]), lr, what=what)
        result.logged.append(int(chunk[0]))
        result.losses.append(values)
        if after is not None:
            after(int(chunk[-1]) + 1, values)
    result.upcoming = data
    return result
