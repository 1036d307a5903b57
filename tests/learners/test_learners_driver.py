"""The host-side driver every JAX learner runs on: chunks, data drawn one chunk ahead, hooks, and one divergence
message (checked with numpy stand-ins for the compiled chunk, against a plain loop written from the definition)."""

from __future__ import annotations

import numpy as np
import pytest

from prhsim.learners._driver import check_losses, check_seeds, drive, step_chunks


def _run(params, state, data):
    """A stand-in chunk: params += sum of the chunk's data, losses = params after each step, per seed (S, L)."""
    steps = np.cumsum(data, axis=1)
    return params + steps[:, -1], state + 1, params[:, None] + steps


def _draw_log():
    calls = []

    def draw(steps):
        calls.append(steps.tolist())
        return np.tile(steps.astype(float), (2, 1)) * np.array([[1.0], [2.0]])

    return calls, draw


def test_drive_equals_a_plain_loop():
    calls, draw = _draw_log()
    chunks = step_chunks(7, 3)
    assert [c.tolist() for c in chunks] == [[0, 1, 2], [3, 4, 5], [6]]
    out = drive(_run, np.zeros(2), 0, chunks, draw, seeds=(4, 9), lr=0.1)
    # the plain loop: each chunk's data, run in order, the next drawn after the run, the final step's last
    params, losses = np.zeros(2), []
    for chunk in chunks:
        params, _, values = _run(params, 0, np.tile(chunk.astype(float), (2, 1)) * np.array([[1.0], [2.0]]))
        losses.append(values)
    np.testing.assert_array_equal(out.params, params)
    assert out.state == 3 and out.logged == [0, 3, 6] and out.ended_at == 7
    assert calls == [[0, 1, 2], [3, 4, 5], [6], [7]]  # one chunk ahead, then the final step
    np.testing.assert_array_equal(out.upcoming, [[7.0], [14.0]])
    for got, want in zip(out.losses, losses):
        np.testing.assert_array_equal(got, want)


def test_before_ends_the_loop_and_hold_and_live_see_every_chunk():
    calls, draw = _draw_log()
    seen = []

    def before(step, params):
        seen.append((step, params.tolist()))
        return step < 4

    held = []

    def hold(new, old):
        held.append(True)
        return (np.where([True, False], new[0], old[0]), new[1])  # the second seed is frozen

    out = drive(_run, np.zeros(2), 0, step_chunks(9, 2), draw, seeds=(0, 1), lr=1.0, before=before, hold=hold,
                live=lambda: np.array([True, False]))
    assert out.ended_at == 4 and out.logged == [0, 2] and len(held) == 2
    assert [s for s, _ in seen] == [0, 2, 4] and out.params[1] == 0.0
    np.testing.assert_array_equal(out.upcoming, draw(np.array([4, 5])))  # the data of the chunk not run


def test_a_non_finite_loss_is_named_by_its_earliest_step_and_seed():
    values = np.array([[1.0, 2.0, np.inf], [1.0, np.nan, 3.0]])
    with pytest.raises(ValueError, match=r"^decoder training diverged: the loss is nan at step 11 for seed 7 "
                                         r"\(lr=0\.5\)$"):
        check_losses(values, np.array([10, 11, 12]), (5, 7), 0.5, what="decoder training")

    def bad(params, state, data):
        return params, state, np.where(data > 3, np.nan, data)

    with pytest.raises(ValueError, match=r"training diverged: the loss is nan at step 2 for seed 1 "):
        drive(bad, np.zeros(2), 0, step_chunks(6, 3), _draw_log()[1], seeds=(0, 1), lr=1.0)
    # a frozen seed's losses are not checked
    out = drive(bad, np.zeros(2), 0, step_chunks(6, 3), lambda s: np.tile(s.astype(float), (2, 1)) * [[0.0], [1.0]],
                seeds=(0, 1), lr=1.0, live=lambda: np.array([True, False]))
    assert out.ended_at == 6


@pytest.mark.parametrize("seeds, message", [((), "at least one seed"), ((1, -1), "non-negative integers, got -1"),
                                            ((True,), "non-negative integers, got True"), ((2, 2), "distinct")])
def test_seeds_are_checked_once_for_every_learner(seeds, message):
    with pytest.raises(ValueError, match=message):
        check_seeds(seeds)
    assert check_seeds([np.int64(3), 1]) == (3, 1)
