"""Parquet shards streamed and sharded by process and worker: every row read once per pass, bad shards named."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from prhsim.real import DataError, StreamStats, stream_records  # noqa: E402


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recap")
    paths = []
    for s in range(5):
        n = 3 + s
        table = pa.table({
            "key": list(range(100 * s, 100 * s + n)),
            "org_caption": [f"alt {s}-{i}" if i != 1 else "" for i in range(n)],
            "re_caption": [f"recap {s}-{i}" if i != 1 or s % 2 else None for i in range(n)],
        })
        path = folder / f"shard-{s:03d}.parquet"
        pq.write_table(table, path, row_group_size=2)
        paths.append(path)
    return paths


@pytest.mark.parametrize("world_size, num_workers", [(1, 1), (2, 1), (2, 3), (3, 2)])
def test_every_row_is_read_by_exactly_one_slot(shards, world_size, num_workers):
    seen, skipped = [], 0
    for rank in range(world_size):
        for worker in range(num_workers):
            stats = StreamStats()
            seen += [r.id for r in stream_records(shards, ["org_caption", "re_caption"], id_column="key", rank=rank,
                                                   world_size=world_size, worker=worker, num_workers=num_workers,
                                                   stats=stats)]
            skipped += stats.skipped
    # row 1 of the even shards has neither caption: skipped; every other row once
    expected = [100 * s + i for s in range(5) for i in range(3 + s) if not (i == 1 and s % 2 == 0)]
    assert sorted(seen) == expected and skipped == 3


def test_records_hold_the_chosen_columns_as_views(shards):
    records = list(stream_records(shards[:1], ["org_caption", "re_caption"]))
    assert records[0].texts == ("alt 0-0", "recap 0-0") and records[0].split == "train"
    assert [r.id for r in records] == [0, 2]  # shard 0, rows 0 and 2 (row 1 has no caption)
    only_alt = list(stream_records(shards[:2], ["org_caption"]))  # shard index i: ids from i << 32
    assert all(len(r.texts) == 1 for r in only_alt)
    assert [r.id for r in only_alt] == [0, 2, 1 << 32, (1 << 32) + 2, (1 << 32) + 3]


def test_bad_shards_are_one_line_errors(shards, tmp_path):
    with pytest.raises(DataError, match="no column 'caption'"):
        list(stream_records(shards, ["caption"]))
    broken = tmp_path / "broken.parquet"
    broken.write_text("not parquet")
    with pytest.raises(DataError, match="broken.parquet: not a parquet file"):
        list(stream_records([broken], ["org_caption"]))
    with pytest.raises(DataError, match="no such parquet shard"):
        list(stream_records([tmp_path / "gone.parquet"], ["org_caption"]))
    with pytest.raises(ValueError, match="must be below"):
        list(stream_records(shards, ["org_caption"], rank=2, world_size=2))
