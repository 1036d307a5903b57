"""Caption data in parquet: Recap-DataComp-style shards read as a stream, and a file's texts read whole.

A shard is a parquet file with one row per image and several text columns (for Recap-DataComp:
the alt-text ``org_caption`` and the recaption ``re_caption``); the columns named by
``text_columns`` are an image's captions, the views a good-view JEPA pairs. :func:`stream_records`
yields :class:`prhsim.real.Record` objects without loading a shard whole (pyarrow
record batches), for one (process, worker) slot of ``world_size · num_workers``:

* shards are dealt round-robin over the slots (shard i goes to slot ``i mod slots``), so every
  row is read by exactly one slot per pass and no slot opens a shard another reads;
* a row with no non-empty text in the chosen columns is skipped (counted in ``skipped``);
* the record id is the row's value in ``id_column`` when given (an integer), else
  ``shard_index · 2^32 + row``, unique over the shards.

:func:`parquet_shards` names the shards of a path (a file, or a folder's ``*.parquet``). :func:`parquet_texts`
reads one text per row, as ``prhsim prh extract`` does: the first of the columns ``text``, ``caption``, ``texts``,
``captions`` the file has (of a list, its first item), every row in order, none empty.

Every problem is a :class:`DataError` naming the file: a missing shard, a file that is not
parquet, a text or id column the shard lacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from prhsim.real.data._records import TEXT_FIELDS, DataError, Record, first_text

#: Rows per pyarrow record batch.
BATCH_ROWS = 4096


@dataclass
class StreamStats:
    """What a stream read: rows yielded and rows skipped (no caption in the chosen columns), per shard read."""

    yielded: int = 0
    skipped: int = 0
    shards: list[str] = field(default_factory=list)


def parquet_shards(data: Path | str) -> list[Path]:
    """The parquet shards ``data`` names (one ``.parquet`` file, or a folder's ``*.parquet`` in name order), else []."""
    data = Path(data)
    if data.is_file():
        return [data] if data.suffix == ".parquet" else []
    return sorted(data.glob("*.parquet")) if data.is_dir() else []


def shard_slots(shards: Sequence[Path | str], *, rank: int = 0, world_size: int = 1, worker: int = 0,
                num_workers: int = 1) -> list[tuple[int, Path]]:
    """The (index, path) of the shards one (process, worker) slot reads: index ≡ slot (mod world_size · num_workers)."""
    for name, value, low in (("world_size", world_size, 1), ("num_workers", num_workers, 1), ("rank", rank, 0),
                             ("worker", worker, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer of at least {low}, got {value!r}")
    if rank >= world_size or worker >= num_workers:
        raise ValueError(f"rank {rank} and worker {worker} must be below world_size {world_size} and "
                         f"num_workers {num_workers}")
    slots = world_size * num_workers
    slot = rank * num_workers + worker
    return [(i, Path(p)) for i, p in enumerate(shards) if i % slots == slot]


def stream_records(shards: Sequence[Path | str], text_columns: Sequence[str], *, id_column: str | None = None,
                   rank: int = 0, world_size: int = 1, worker: int = 0, num_workers: int = 1,
                   stats: StreamStats | None = None) -> Iterator[Record]:
    """Records of this slot's shards, streamed in shard and row order (module docstring); split "train"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not text_columns:
        raise ValueError("text_columns must name at least one column")
    stats = stats if stats is not None else StreamStats()
    for index, path in shard_slots(shards, rank=rank, world_size=world_size, worker=worker, num_workers=num_workers):
        if not path.is_file():
            raise DataError(f"{path}: no such parquet shard")
        try:
            shard = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"{path}: not a parquet file ({str(exc).splitlines()[0]})") from None
        names = set(shard.schema_arrow.names)
        wanted = [*text_columns, *([id_column] if id_column else [])]
        missing = [c for c in wanted if c not in names]
        if missing:
            raise DataError(f"{path}: no column {missing[0]!r} (the shard has {sorted(names)})")
        stats.shards.append(str(path))
        row = 0
        # one thread: a data-loader worker that exits while pyarrow's decoding threads are alive aborts
        # ("terminate called without an active exception", seen when a loader is dropped mid-stream)
        for batch in shard.iter_batches(batch_size=BATCH_ROWS, columns=wanted, use_threads=False):
            columns = {name: batch.column(name).to_pylist() for name in wanted}
            for i in range(batch.num_rows):
                texts = tuple(t.strip() for t in (columns[c][i] for c in text_columns) if isinstance(t, str) and t.strip())
                ident = columns[id_column][i] if id_column else (index << 32) + row + i
                if not texts:
                    stats.skipped += 1
                    continue
                if isinstance(ident, bool) or not isinstance(ident, int):
                    raise DataError(f"{path}: row {row + i}: {id_column} must be an integer, got {ident!r}")
                stats.yielded += 1
                yield Record(ident, "", "train", texts)
            row += batch.num_rows


def parquet_texts(path: Path) -> list[str]:
    """One text per row of a parquet file, read whole (module docstring), or a DataError naming the first row
    without one."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # any pyarrow failure is the file's problem, in one line
        raise DataError(f"{path}: not a parquet file pyarrow can read ({type(exc).__name__})") from None
    column = next((c for c in TEXT_FIELDS if c in table.column_names), None)
    if column is None:
        raise DataError(f"{path}: no text or caption column (columns: {', '.join(table.column_names) or 'none'})")
    texts = []
    for row, value in enumerate(table.column(column).to_pylist()):
        text = first_text(value)
        if text is None:
            raise DataError(f"{path}: row {row} has no {column}")
        texts.append(text)
    if not texts:
        raise DataError(f"{path}: no rows")
    return texts
