"""Training batches of ``prhsim real train`` as a function of (seed, rank, step): epochs without repeats, parquet
streams read by role, and loaders started at any step (with or without workers) continuing one sequence."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from prhsim.real import RealTrainSettings  # noqa: E402
from prhsim.real import DataError, evaluate_run, read_captions, train_real  # noqa: E402
from prhsim.real._batches import VIEWS, EpochBatches, StreamBatches, batch_loader  # noqa: E402
from prhsim.real._tokenizer import encode, train_wordpiece  # noqa: E402
from prhsim.real._packing import pack, row_length, unpack  # noqa: E402
from prhsim.real._views import ViewLaw, cut_views  # noqa: E402

COLUMNS = ["org_caption", "re_caption"]


@pytest.fixture(scope="module")
def export(small_export):
    return small_export


@pytest.fixture(scope="module")
def shards(export, tmp_path_factory):
    """The export's training images as 4 parquet shards of unequal size (two captions each, ids in a column)."""
    records = read_captions(export / "dataset_synthetic.json").split("train")
    folder = tmp_path_factory.mktemp("shards")
    for s, chunk in enumerate(np.array_split(np.arange(len(records)), [7, 16, 27])):
        table = pa.table({"key": [int(records[i].id) for i in chunk],
                          "org_caption": [records[i].texts[0] for i in chunk],
                          "re_caption": [records[i].texts[1] for i in chunk]})
        pq.write_table(table, folder / f"part-{s:02d}.parquet", row_group_size=3)
    return folder


@pytest.fixture(scope="module")
def tokenizer(export):
    return train_wordpiece((t for r in read_captions(export / "dataset_synthetic.json").records for t in r.texts), 64)


def _stream(shards, tokenizer, *, start=0, num_workers=0, batch_size=4, rank=0, world_size=1, buffer=5):
    return StreamBatches(sorted(shards.glob("*.parquet")), COLUMNS, "good", tokenizer=tokenizer,
                         batch_size=batch_size, max_length=12, seed=3, start=start, num_workers=num_workers,
                         shuffle_buffer=buffer, id_column="key", rank=rank, world_size=world_size)


def _take(source, start, stop, num_workers):
    return [tuple(t.clone() for t in batch) for batch in
            batch_loader(source, start=start, stop=stop, num_workers=num_workers, pin_memory=False)]


def _same(a, b):
    """Two lists of batches (ids, positions, segments) hold the same tensors."""
    return len(a) == len(b) and all(len(x) == len(y) == 3 and all(torch.equal(s, t) for s, t in zip(x, y))
                                    for x, y in zip(a, b))


def test_an_epoch_reads_every_image_at_most_once_and_ranks_share_none():
    captions = [[np.array([i + 1])] for i in range(23)]
    sources = [EpochBatches(captions, "good", batch_size=3, pad=0, mask_id=99, max_length=4, seed=1, rank=r,
                            world_size=2) for r in range(2)]
    assert sources[0].per_epoch == 23 // 6
    for epoch in range(3):
        steps = range(epoch * 3, epoch * 3 + 3)
        seen = np.concatenate([s.images(t) for s in sources for t in steps])
        assert seen.size == 18 and np.unique(seen).size == 18
    assert not np.array_equal(sources[0].images(0), sources[0].images(3))  # each epoch its own order
    with pytest.raises(DataError, match="fewer than one global batch of 24"):
        EpochBatches(captions, "good", batch_size=12, pad=0, mask_id=99, max_length=4, seed=1, world_size=2)


@pytest.mark.parametrize("kind", ["good", "bad", "ntp"])
def test_a_global_batch_split_over_processes_holds_the_views_it_holds_whole(kind):
    captions = [[np.arange(1, 4 + i % 5) + 10 * j for j in range(3)] for i in range(30)]
    whole = EpochBatches(captions, kind, batch_size=8, pad=0, mask_id=99, max_length=9, seed=4)
    halves = [EpochBatches(captions, kind, batch_size=4, pad=0, mask_id=99, max_length=9, seed=4, rank=r,
                           world_size=2) for r in range(2)]
    for step in (0, 2, 5):  # epochs of 3 steps
        assert np.array_equal(whole.images(step), np.concatenate([h.images(step) for h in halves]))
        V = 1 if kind == "ntp" else ViewLaw().n_views
        ids, _, segments = whole[step]
        views = unpack(ids.numpy(), segments.numpy(), V * 8)
        parts = [unpack(h[step][0].numpy(), h[step][2].numpy(), V * 4) for h in halves]
        for v in range(V):
            for b in range(8):
                assert np.array_equal(views[v * 8 + b], parts[b // 4][v * 4 + b % 4])


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_loader_over_an_epoch_source_yields_its_steps_in_order(num_workers):
    captions = [[np.arange(1, 3 + i % 5), np.arange(2, 4 + i % 3)] for i in range(20)]
    source = EpochBatches(captions, "bad", batch_size=4, pad=0, mask_id=99, max_length=6, seed=2)
    expected = [source[t] for t in range(3, 9)]
    assert _same(_take(source, 3, 9, num_workers), expected)


def test_a_stream_role_reads_each_record_once_per_pass_in_a_new_order(shards, tokenizer):
    source = _stream(shards, tokenizer, num_workers=2, batch_size=3)
    ids = {}
    for role in range(2):
        batches = list(itertools.islice(source.role_batches(role, 0), 12))
        ids[role] = [[int(r.id) for r in b] for b in batches]
    # the shards hold 7, 9, 11, 9 rows: role 0 reads shards 0 and 2, role 1 shards 1 and 3
    per_pass = {0: (7 + 11) // 3, 1: (9 + 9) // 3}
    for role, batches in ids.items():
        first, second = batches[:per_pass[role]], batches[per_pass[role]:2 * per_pass[role]]
        flat = [i for b in first for i in b]
        assert len(set(flat)) == len(flat) == 3 * per_pass[role]
        assert sorted(i for b in second for i in b) != [i for b in second for i in b]  # shuffled
        assert [i for b in first for i in b] != [i for b in second for i in b]
    assert not {i for b in ids[0] for i in b} & {i for b in ids[1] for i in b}


def test_a_stream_batch_is_the_views_of_its_roles_records(shards, tokenizer):
    """Twin from the definition: global batch g is batch g div W of role g mod W, image i's views drawn from (seed, g, i)."""
    source = _stream(shards, tokenizer, num_workers=2)
    got = _take(source, 0, 7, 2)
    roles = [list(itertools.islice(source.role_batches(r, 0), 4)) for r in range(2)]
    for g, (ids, positions, segments) in enumerate(got):
        records = roles[g % 2][g // 2]
        captions = [encode(tokenizer, list(r.texts), 12) for r in records]
        views = cut_views(captions, "good", ViewLaw(), mask_id=tokenizer.token_to_id("[MASK]"),
                          gens=[np.random.default_rng([3, VIEWS, g, i]) for i in range(len(records))])
        sequences = [span for row in views for span in row]
        want = pack(sequences, row_length=row_length(sequences, 12), pad=tokenizer.token_to_id("[PAD]"))
        assert np.array_equal(ids.numpy(), want.ids) and np.array_equal(positions.numpy(), want.positions)
        assert np.array_equal(segments.numpy(), want.segments)


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("start", [1, 4, 9])
def test_a_stream_loader_started_at_a_step_continues_the_same_sequence(shards, tokenizer, num_workers, start):
    whole = _take(_stream(shards, tokenizer, num_workers=num_workers), 0, 12, num_workers)
    tail = _take(_stream(shards, tokenizer, start=start, num_workers=num_workers), start, 12, num_workers)
    assert _same(tail, whole[start:])  # 12 steps cross passes (9 or 2 x 4 batches each)


def test_streams_too_small_for_their_readers_are_errors(shards, tokenizer):
    with pytest.raises(DataError, match="4 parquet shards cannot feed 6 readers"):
        _stream(shards, tokenizer, num_workers=3, world_size=2)
    source = _stream(shards, tokenizer, num_workers=2, batch_size=20)
    with pytest.raises(DataError, match=r"part-00.parquet, .*part-02.parquet: fewer records with captions than one batch of 20"):
        next(source.role_batches(0, 0))
    with pytest.raises(ValueError, match="made for start 0"):
        batch_loader(source, start=2, stop=4, num_workers=2, pin_memory=False)


def _settings(data, **kw):
    base = dict(data=str(data), model="tiny", steps=6, batch_size=4, vocab_size=64, max_length=16,
                num_directions=16, proj_dim=16, checkpoint_every=100, log_every=2, device="cpu", id_column="key",
                shuffle_buffer=5)
    return RealTrainSettings(**{**base, **kw})


def test_a_run_on_parquet_shards_trains_resumes_with_workers_and_evaluates_on_a_caption_dataset(shards, export,
                                                                                                tmp_path):
    from safetensors.torch import load_file

    straight, killed = tmp_path / "straight", tmp_path / "killed"
    train_real(_settings(shards, num_workers=2, steps=8), straight)
    train_real(_settings(shards, num_workers=2, steps=8), killed, stop_after=5)
    train_real(_settings(shards, num_workers=2, steps=8), killed, resume=True)
    a, b = (load_file(run / "checkpoint" / "model.safetensors") for run in (straight, killed))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(DataError, match="trained on parquet shards .* pass the caption dataset"):
        evaluate_run(straight, n_fit=10)
    result = evaluate_run(straight, data=export, n_fit=10)
    assert result["n_test"] == 12 and result["data"].endswith("dataset_synthetic.json")
    assert 0 <= result["metrics"]["mutual_knn"] <= 1


def test_tensorboard_holds_the_logged_metrics(export, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "board"
    train_real(_settings(export, id_column=None, steps=4, checkpoint_every=2), run, stop_after=2)
    train_real(_settings(export, id_column=None, steps=4, checkpoint_every=2), run, resume=True)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    events = EventAccumulator(str(run / "tensorboard")).Reload()
    scalars = events.Scalars("train/loss")
    assert [e.step for e in scalars] == [x["step"] for x in lines] == [2, 4]
    assert np.allclose([e.value for e in scalars], [x["loss"] for x in lines], rtol=1e-6)
    quiet = tmp_path / "quiet"
    train_real(_settings(export, id_column=None, steps=2, tensorboard=False), quiet)
    assert not (quiet / "tensorboard").exists()


def test_the_command_line_trains_on_shards_with_workers_and_evaluates_on_a_dataset(shards, export, tmp_path):
    from click.testing import CliRunner

    from prhsim.cli import main

    runner = CliRunner()
    run = tmp_path / "cli"
    args = ["real", "train", "--data", str(shards), "--model", "tiny", "--steps", "4", "--batch-size", "4",
            "--workers", "2", "--set", "vocab_size=64", "--set", "proj_dim=16", "--set", "num_directions=16",
            "--set", 'device="cpu"', "--set", "log_every=1", "--set", 'id_column="key"', "--out", str(run)]
    trained = runner.invoke(main, args)
    assert trained.exit_code == 0, trained.output
    assert "step 4/4 loss" in trained.output and "samples/s" in trained.output and "ETA 0 s" in trained.output
    assert json.loads((run / "config.json").read_text())["num_workers"] == 2
    changed = runner.invoke(main, ["real", "train", "--out", str(run), "--resume", "--steps", "6", "--workers", "1"])
    assert changed.exit_code == 2 and "not num_workers" in changed.output
    no_data = runner.invoke(main, ["real", "eval", str(run)])
    assert no_data.exit_code == 2 and "pass the caption dataset" in no_data.output
    scored = runner.invoke(main, ["real", "eval", str(run), "--data", str(export), "--n-fit", "10", "--json"])
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.output)["n_test"] == 12


def test_a_readers_error_reaches_the_command_line_from_a_worker_as_one_line(shards, tmp_path):
    from click.testing import CliRunner

    from prhsim.cli import main

    run = tmp_path / "small"
    result = CliRunner().invoke(main, ["real", "train", "--data", str(shards), "--model", "tiny", "--steps", "2",
                                       "--batch-size", "20", "--workers", "2", "--set", "vocab_size=64",
                                       "--set", 'device="cpu"', "--out", str(run), "-q"])
    assert result.exit_code == 2
    assert "part-00.parquet, " in result.output and "fewer records with captions than one batch of 20" in result.output
    assert not run.exists()


@pytest.fixture(scope="module")
def bert_tokenizer(export):
    """The export's WordPiece vocabulary with BERT's post-processor: a text reads as [CLS] … [SEP]."""
    from tokenizers import processors

    tok = train_wordpiece((t for r in read_captions(export / "dataset_synthetic.json").records for t in r.texts), 64)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def test_encode_gives_each_text_as_transformers_tokenizes_it_specials_included(export, tokenizer, bert_tokenizer,
                                                                               tmp_path):
    from transformers import PreTrainedTokenizerFast

    from prhsim.real._tokenizer import load_tokenizer, special_tokens

    texts = [t for r in read_captions(export / "dataset_synthetic.json").records[:10] for t in r.texts] + [""]
    reference = PreTrainedTokenizerFast(tokenizer_object=bert_tokenizer)
    for length in (5, 64):  # cut (the specials kept) and whole
        got = encode(bert_tokenizer, texts, length)
        want = reference(texts, truncation=True, max_length=length)["input_ids"]
        assert [g.tolist() for g in got] == want
    cls, sep = bert_tokenizer.token_to_id("[CLS]"), bert_tokenizer.token_to_id("[SEP]")
    assert [a.tolist() for a in special_tokens(bert_tokenizer)] == [[cls], [sep]]
    # the vocabulary built here has no post-processor: nothing is added, with or without `specials`
    assert [a.size for a in special_tokens(tokenizer)] == [0, 0]
    assert all(np.array_equal(a, b) for a, b in zip(encode(tokenizer, texts, 12),
                                                    encode(tokenizer, texts, 12, specials=False)))
    vocab = tmp_path / "vocab.txt"  # a BERT vocabulary is read as BERT's tokenizer: [CLS] … [SEP]
    vocab.write_text("".join(f"{token}\n" for token, _ in sorted(bert_tokenizer.get_vocab().items(),
                                                                 key=lambda item: item[1])))
    assert [a.tolist() for a in special_tokens(load_tokenizer(vocab))] == [[cls], [sep]]


def _wrapped(plain, wrapped, before, after, count):
    """Every sequence of the ``wrapped`` batch is ``before + the same sequence of plain + after``, its positions
    restarting from 0, no special token masked."""
    ids, positions, segments = (t.numpy() for t in wrapped)
    got, want = unpack(ids, segments, count), unpack(plain[0].numpy(), plain[2].numpy(), count)
    assert all(np.array_equal(g, np.concatenate([before, w, after])) for g, w in zip(got, want))
    for i in range(count):
        assert np.array_equal(positions[segments == i], np.arange(want[i].size + before.size + after.size))


@pytest.mark.parametrize("kind", ["good", "ntp"])
def test_every_view_of_a_batch_is_between_the_tokenizers_special_tokens(export, bert_tokenizer, kind):
    """Twin: the views are those of the captions' own tokens (the same draws), each put between [CLS] and [SEP]."""
    from prhsim.real._tokenizer import special_tokens

    records = read_captions(export / "dataset_synthetic.json").split("train")
    before, after = special_tokens(bert_tokenizer)
    captions = [encode(bert_tokenizer, list(r.texts), 10, specials=False) for r in records]
    options = dict(batch_size=4, pad=bert_tokenizer.token_to_id("[PAD]"),
                   mask_id=bert_tokenizer.token_to_id("[MASK]"), seed=5)
    plain = EpochBatches(captions, kind, max_length=10, **options)
    wrapped = EpochBatches(captions, kind, max_length=12, specials=(before, after), **options)
    count = 4 * ViewLaw().views_per_image(kind)
    for step in range(3):
        _wrapped(plain[step], wrapped[step], before, after, count)


def test_a_stream_batch_puts_the_special_tokens_around_every_view(shards, bert_tokenizer):
    """Twin from the definition, for a tokenizer with special tokens: the views of the captions' own tokens (cut to
    leave room for the specials), each between [CLS] and [SEP]."""
    from prhsim.real._tokenizer import special_tokens

    before, after = special_tokens(bert_tokenizer)
    source = _stream(shards, bert_tokenizer)
    got = _take(source, 0, 3, 0)
    for g, (ids, positions, segments) in enumerate(got):
        records = list(itertools.islice(source.role_batches(0, 0), 3))[g]
        captions = [encode(bert_tokenizer, list(r.texts), 10, specials=False) for r in records]
        views = cut_views(captions, "good", ViewLaw(), mask_id=bert_tokenizer.token_to_id("[MASK]"),
                          gens=[np.random.default_rng([3, VIEWS, g, i]) for i in range(len(records))])
        sequences = [np.concatenate([before, span, after]) for row in views for span in row]
        want = pack(sequences, row_length=row_length(sequences, 12), pad=bert_tokenizer.token_to_id("[PAD]"))
        assert np.array_equal(ids.numpy(), want.ids) and np.array_equal(positions.numpy(), want.positions)
        assert np.array_equal(segments.numpy(), want.segments)
