"""Packed training batches: the layout against a first-fit-decreasing twin, and the encoder reading packed rows
against reading each sequence alone (JEPA embeddings and the next-token loss), eager and compiled."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hypothesis import given, settings, strategies as st  # noqa: E402

from prhsim.real._packing import (attention_mask, next_token_targets, pack, row_length,  # noqa: E402
                                              segment_mean, unpack)
from prhsim.real._text_models import TextEncoder  # noqa: E402
from support import real_task  # noqa: E402


def naive_first_fit_decreasing(lengths, row_length):
    """Twin from the definition: longest first (ties by index), each into the first row with room; (row, start) each."""
    rows: list[int] = []  # tokens used per row
    place = {}
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        for r, used in enumerate(rows):
            if used + lengths[i] <= row_length:
                break
        else:
            r = len(rows)
            rows.append(0)
        place[i] = (r, rows[r])
        rows[r] += lengths[i]
    return place, len(rows)


sequences = st.integers(1, 12).flatmap(lambda L: st.tuples(
    st.just(L), st.lists(st.integers(1, L), min_size=1, max_size=40), st.integers(1, 5)))


@settings(max_examples=80, deadline=None)
@given(sequences)
def test_packing_is_first_fit_decreasing_and_unpacks_to_its_sequences(case):
    row_length, lengths, multiple = case
    seqs = [np.arange(100 * i + 1, 100 * i + 1 + n) for i, n in enumerate(lengths)]
    packed = pack(seqs, row_length=row_length, pad=0, row_multiple=multiple)
    place, rows = naive_first_fit_decreasing(lengths, row_length)
    R = -(-rows // multiple) * multiple
    assert packed.ids.shape == packed.positions.shape == packed.segments.shape == (R, row_length)
    for i, n in enumerate(lengths):
        r, t = place[i]
        assert np.array_equal(packed.segments[r, t:t + n], np.full(n, i))
        assert np.array_equal(packed.positions[r, t:t + n], np.arange(n))
        assert np.array_equal(packed.ids[r, t:t + n], seqs[i])
    assert (packed.segments >= 0).sum() == sum(lengths)
    assert np.all(packed.ids[packed.segments < 0] == 0) and np.all(packed.positions[packed.segments < 0] == 0)
    assert all(np.array_equal(a, b) for a, b in zip(unpack(packed.ids, packed.segments, len(seqs)), seqs))


def test_rows_are_as_long_as_the_longest_sequence_in_steps_of_eight_at_most_max_length():
    def seqs(*lengths):
        return [np.ones(n, int) for n in lengths]

    assert row_length(seqs(3, 1, 2), 64) == 8
    assert row_length(seqs(3, 8), 64) == 8 and row_length(seqs(9), 64) == 16 and row_length(seqs(33, 2), 64) == 40
    assert row_length(seqs(12), 12) == 12 and row_length(seqs(60), 64) == 64


def test_a_sequence_that_does_not_fit_a_row_is_an_error():
    with pytest.raises(ValueError, match="sequence 1 has 5 tokens; a packed sequence needs 1 to 4"):
        pack([np.ones(2, int), np.ones(5, int)], row_length=4, pad=0)
    with pytest.raises(ValueError, match="sequence 0 has 0 tokens"):
        pack([np.ones(0, int)], row_length=4, pad=0)
    with pytest.raises(ValueError, match="no sequences"):
        pack([], row_length=4, pad=0)


def test_the_mask_and_the_pooling_against_loops():
    segments = torch.tensor([[0, 0, 2, 2, 2, -1], [1, 3, 3, -1, -1, -1]])
    hidden = torch.randn(2, 6, 3, dtype=torch.float64)
    for causal in (False, True):
        mask = attention_mask(segments, causal=causal)
        assert mask.shape == (2, 1, 6, 6)
        for r in range(2):
            for i in range(6):
                for j in range(6):
                    want = bool(segments[r, i] == segments[r, j]) and (j <= i or not causal)
                    assert bool(mask[r, 0, i, j]) == want
        assert mask.any(-1).all()  # no query attends to nothing (padding attends to padding)
    pooled = segment_mean(hidden, segments, 4)
    for s in range(4):
        rows = [hidden[r, t] for r in range(2) for t in range(6) if segments[r, t] == s]
        assert torch.allclose(pooled[s], torch.stack(rows).mean(0), atol=1e-15, rtol=0)
    assert pooled.dtype == torch.float64
    targets = next_token_targets(segments)
    assert targets.tolist() == [[segments[r, t + 1] >= 0 and segments[r, t + 1] == segments[r, t] for t in range(5)]
                                for r in range(2)]
    assert segment_mean(hidden.to(torch.bfloat16), segments, 4).dtype == torch.float32


def _model(causal, seed=0):
    torch.manual_seed(seed)
    return TextEncoder("tiny", 60, 16, causal=causal, proj_dim=8, dropout=0.0).double().eval()


def _sequences(count, seed=0, longest=16):
    rng = np.random.default_rng(seed)
    return [rng.integers(5, 60, size=int(rng.integers(1, longest + 1))) for _ in range(count)]


def _packed(seqs, row_length=16, multiple=4):
    p = pack(seqs, row_length=row_length, pad=0, row_multiple=multiple)
    return [torch.from_numpy(a) for a in (p.ids, p.positions, p.segments)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_packed_embeddings_are_each_sequence_read_alone(seed):
    model, seqs = _model(False, seed), _sequences(30, seed)
    got = model(*_packed(seqs), len(seqs))
    with torch.no_grad():
        alone = torch.cat([model.embed(torch.from_numpy(s)[None], torch.ones(1, s.size, dtype=torch.int64))
                           for s in seqs])
    assert torch.allclose(got, alone, atol=1e-12, rtol=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_packed_next_token_loss_is_the_mean_over_every_next_token_read_alone(seed):
    model, seqs = _model(True, seed), _sequences(20, seed)
    got = model(*_packed(seqs), len(seqs))
    with torch.no_grad():  # each caption alone: its summed cross-entropy, over all next tokens of all captions
        total = sum(model.next_token_loss(torch.from_numpy(s)[None], torch.ones(1, s.size, dtype=torch.int64))
                    * (s.size - 1) for s in seqs if s.size > 1)
    assert torch.allclose(got, total / sum(s.size - 1 for s in seqs), atol=1e-12, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
def test_a_compiled_encoder_reads_packed_rows_as_the_eager_one(causal):
    """torch.compile on this CPU (inductor): the same embeddings (next-token loss) and gradients as eager, to float32
    rounding."""
    torch.manual_seed(0)
    model = TextEncoder("tiny", 60, 16, causal=causal, proj_dim=8, dropout=0.0)
    seqs = _sequences(24, 5)
    args = _packed(seqs)
    eager = model(*args, len(seqs))
    (eager ** 2).sum().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.compile_training("default")
    compiled = model(*args, len(seqs))
    (compiled ** 2).sum().backward()
    assert torch.allclose(compiled, eager, atol=1e-5, rtol=1e-5)
    for p, g in zip(model.parameters(), eager_grads):
        assert torch.allclose(p.grad, g, atol=1e-5, rtol=1e-4)
    assert not any(k.startswith("_orig_mod") for k in model.state_dict())  # checkpoints keep their keys


@pytest.mark.parametrize("views", ["good", "ntp"])
def test_the_training_objective_on_packed_views_is_the_objective_of_each_view_read_alone(views):
    """Twin: the views cut from the captions, each embedded alone, then prhsim.objectives.lejepa_loss (the next-token
    loss of each caption alone, averaged over all next tokens)."""
    from prhsim.real import RealTrainSettings
    from prhsim.real._batches import EpochBatches, view_generators
    from prhsim.real._train import _objective
    from prhsim.real._views import ViewLaw, cut_views
    from prhsim.objectives import draw_directions, lejepa_loss

    B, step = 6, 3
    rng = np.random.default_rng(1)
    captions = [[rng.integers(5, 60, size=int(rng.integers(3, 16))) for _ in range(3)] for _ in range(12)]
    settings = RealTrainSettings(data="unused", **real_task(views), model="tiny", batch_size=B, max_length=16,
                                 num_directions=32, proj_dim=8, dropout=0.0, seed=4, row_multiple=4)
    source = EpochBatches(captions, views, batch_size=B, pad=0, mask_id=4, max_length=16, seed=4, row_multiple=4)
    model = _model(views == "ntp", 2)
    got = _objective(model, source[step], settings, step, torch.device("cpu"))
    cut = cut_views([captions[i] for i in source.images(step)], views, ViewLaw(), mask_id=4,
                    gens=view_generators(4, step, 0, B))
    one = torch.ones(1, 1, dtype=torch.int64)
    with torch.no_grad():
        if views == "ntp":
            total = sum(model.next_token_loss(torch.from_numpy(s)[None], one.expand(1, s.size)) * (s.size - 1)
                        for s in cut[0] if s.size > 1)
            want = total / sum(s.size - 1 for s in cut[0])
        else:
            e = torch.stack([torch.cat([model.embed(torch.from_numpy(s)[None], one.expand(1, s.size)) for s in row])
                             for row in cut])
            want = lejepa_loss(e.float(), torch.as_tensor(draw_directions(8, 32, seed=4, step=step), dtype=torch.float32),
                               lam=settings.lam, n_global=2, dims="mean")
    assert float(got.detach()) == pytest.approx(float(want), rel=1e-5, abs=1e-7)


def test_packed_rows_need_sdpa_attention():
    model = TextEncoder("tiny", 60, 16, causal=False, proj_dim=8, dropout=0.0)
    assert model.model.config._attn_implementation == "sdpa"
    model.model.config._attn_implementation = "eager"  # would add the boolean mask as numbers: masks nothing
    with pytest.raises(ValueError, match="packed rows need 'sdpa' attention"):
        model(*_packed(_sequences(4)), 4)
