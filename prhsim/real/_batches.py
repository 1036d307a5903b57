"""Training batches of ``prhsim real train``: a pure function of (seed, rank, step), so the data position is the step.

Every batch is the views of its images (:func:`._views.cut_views`, cut from the captions' tokens
without special tokens), each between the tokenizer's special tokens (``specials``, from
:func:`._tokenizer.special_tokens`: BERT's ``[CLS] … [SEP]``, as the checkpoint was trained to read
a text; none for a tokenizer without them; never masked), packed into rows as long as
its longest view (:func:`._packing.pack`, view-major: sequence ``v·B + b``): token ids,
position ids and segments, (R, L) each (L ≤ max_length), built in data-loader workers when
``num_workers > 0`` (pinned memory on CUDA). Two sources:

* :class:`EpochBatches`, a caption dataset held in memory (Karpathy JSON, JSON lines). Epoch e
  is the permutation ``default_rng([seed, ORDER, e])`` of the N training images, cut into
  ``S = N // G`` global batches of ``G = B · world_size`` images (the remainder is dropped);
  step t is batch ``t mod S`` of epoch ``t div S``, of which process r takes images
  ``[r·B, (r+1)·B)``. No image is seen twice in an epoch, and all processes agree on the
  permutation without talking.
* :class:`StreamBatches`, parquet shards read as a stream (:func:`.data.stream_records`).
  Each (process, worker) slot is a *role* with its own shards, read pass after pass; a pass goes
  through a shuffle buffer drawn from ``default_rng([seed, SHUFFLE, rank, role, pass])`` and is
  cut into batches of B images (the remainder of a pass is dropped: no record twice per pass).
  The process's batch g comes from role ``g mod W`` (its batch ``g div W``), W = max(1,
  num_workers); the loader's worker i plays role ``(i + start) mod W``, so a loader started at
  step ``start`` continues the same sequence. A role streams its shards only: no slot opens a
  shard another one reads.

The views of image i of the global batch of step t are drawn from ``default_rng([seed, VIEWS, t, i])``
(process r's images are i = r·B … r·B + B − 1): resuming at a step rebuilds exactly the batches an
uninterrupted run would have seen, with any number of workers, and for a dataset in memory the
global batch of a step is the same whatever the number of processes it is split over.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from prhsim._rng import REAL_ORDER, REAL_SHUFFLE, REAL_VIEWS
from prhsim.real._tokenizer import NO_SPECIALS, content_length, encode, special_tokens
from prhsim.real._packing import pack, row_length
from prhsim.real._views import TextTask, ViewLaw, cut_views
from prhsim.real.data import DataError, shard_slots, stream_records

#: Stream tags of the generators: ``default_rng([seed, TAG, ...])`` (:mod:`prhsim._rng`'s table).
ORDER, SHUFFLE, VIEWS = REAL_ORDER, REAL_SHUFFLE, REAL_VIEWS


def view_generators(seed: int, step: int, first: int, count: int) -> list[np.random.Generator]:
    """The generators of the views of images ``first … first + count − 1`` of the global batch of ``step``."""
    return [np.random.default_rng([seed, VIEWS, step, first + i]) for i in range(count)]


def _views(captions: Sequence[Sequence[np.ndarray]], kind: TextTask, *, pad: int, mask_id: int, max_length: int,
           row_multiple: int, seed: int, step: int, first: int,
           specials: tuple[np.ndarray, np.ndarray] = NO_SPECIALS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The packed views of a batch, each between ``specials`` (before, after) and ``max_length`` long at most:
    (ids, positions, segments)."""
    gens = view_generators(seed, step, first, len(captions))
    views = cut_views(captions, kind, ViewLaw(), mask_id=mask_id, gens=gens)
    before, after = specials
    room = max_length - before.size - after.size
    sequences = [np.concatenate([before, span[:room], after]) for row in views for span in row]
    packed = pack(sequences, row_length=row_length(sequences, max_length), pad=pad, row_multiple=row_multiple)
    return torch.from_numpy(packed.ids), torch.from_numpy(packed.positions), torch.from_numpy(packed.segments)


class EpochBatches(Dataset):
    """Step-indexed batches of a caption dataset in memory (module docstring); ``batches[step]`` is (ids, positions,
    segments). ``captions``: each image's captions as token ids without special tokens; ``specials``: the ids put
    before and after every view."""

    def __init__(self, captions: Sequence[Sequence[np.ndarray]], kind: TextTask, *, batch_size: int, pad: int,
                 mask_id: int, max_length: int, seed: int, rank: int = 0, world_size: int = 1, row_multiple: int = 1,
                 specials: tuple[np.ndarray, np.ndarray] = NO_SPECIALS):
        self.captions, self.kind, self.batch_size, self.specials = captions, kind, batch_size, specials
        self.pad, self.mask_id, self.max_length, self.row_multiple = pad, mask_id, max_length, row_multiple
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.per_epoch = len(captions) // (batch_size * world_size)
        if self.per_epoch < 1:
            raise DataError(f"the train split has {len(captions)} images, fewer than one global batch of "
                            f"{batch_size * world_size} (batch size {batch_size} x {world_size} processes)")

    def images(self, step: int) -> np.ndarray:
        """Indices of the training images this process reads at ``step``."""
        epoch, t = divmod(step, self.per_epoch)
        if getattr(self, "_epoch", None) != epoch:  # one permutation per epoch, kept
            self._epoch, self._order = epoch, np.random.default_rng([self.seed, ORDER, epoch]).permutation(len(self.captions))
        order = self._order
        start = (t * self.world_size + self.rank) * self.batch_size
        return order[start:start + self.batch_size]

    def __getitem__(self, step: int):
        batch = [self.captions[i] for i in self.images(step)]
        return _views(batch, self.kind, pad=self.pad, mask_id=self.mask_id, max_length=self.max_length,
                      row_multiple=self.row_multiple, seed=self.seed, step=step, first=self.rank * self.batch_size,
                      specials=self.specials)


class StreamBatches(IterableDataset):
    """Batches of parquet shards streamed by role (module docstring); iterate from ``start``, ``num_workers`` roles."""

    def __init__(self, shards: Sequence[Path], text_columns: Sequence[str], kind: TextTask, *, tokenizer,
                 batch_size: int, max_length: int, seed: int, start: int, num_workers: int, shuffle_buffer: int,
                 id_column: str | None = None, rank: int = 0, world_size: int = 1, row_multiple: int = 1):
        self.shards, self.text_columns, self.id_column = list(shards), list(text_columns), id_column
        self.row_multiple = row_multiple
        self.kind, self.tokenizer, self.batch_size, self.max_length = kind, tokenizer, batch_size, max_length
        self.seed, self.start, self.roles, self.shuffle_buffer = seed, start, max(1, num_workers), shuffle_buffer
        self.rank, self.world_size = rank, world_size
        slots = world_size * self.roles
        if len(self.shards) < slots:
            raise DataError(f"{len(self.shards)} parquet shards cannot feed {slots} readers ({world_size} processes x "
                            f"{self.roles} workers): each reader streams shards of its own; use fewer workers")

    def _records(self, role: int) -> Iterator:
        return stream_records(self.shards, self.text_columns, id_column=self.id_column, rank=self.rank,
                              world_size=self.world_size, worker=role, num_workers=self.roles)

    def _pass(self, role: int, number: int) -> Iterator:
        """One pass of the role's records through the shuffle buffer."""
        gen = np.random.default_rng([self.seed, SHUFFLE, self.rank, role, number])
        buffer: list = []
        for record in self._records(role):
            if len(buffer) < self.shuffle_buffer:
                buffer.append(record)
                continue
            j = int(gen.integers(len(buffer)))
            buffer[j], record = record, buffer[j]
            yield record
        gen.shuffle(buffer)
        yield from buffer

    def role_batches(self, role: int, first: int) -> Iterator[list]:
        """The role's batches of records (lists of B records), from its batch ``first`` on, pass after pass.

        Skipped batches are read (a stream cannot seek into a shuffled pass) but not tokenised;
        once a pass has been counted, whole passes are skipped without reading.
        """
        per_pass, number, skip = None, 0, first
        while True:
            if per_pass is not None:
                number, skip = number + skip // per_pass, skip % per_pass
            records, made = self._pass(role, number), 0
            while len(batch := list(itertools.islice(records, self.batch_size))) == self.batch_size:
                made += 1
                if skip:
                    skip -= 1
                    continue
                yield batch
            if made == 0:
                where = ", ".join(str(p) for _, p in shard_slots(
                    self.shards, rank=self.rank, world_size=self.world_size, worker=role, num_workers=self.roles))
                raise DataError(f"{where}: fewer records with captions than one batch of {self.batch_size} for this "
                                "reader (use fewer workers or processes, or a smaller batch)")
            per_pass, number = made, number + 1

    def __iter__(self):
        try:
            yield from self._batches()
        except DataError as exc:  # crosses a worker process as its one-line message (batch_loader raises it)
            yield str(exc)

    def _batches(self):
        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        role = (worker + self.start) % self.roles
        step = self.start + worker  # this worker's first global batch
        pad, mask_id = self.tokenizer.token_to_id("[PAD]"), self.tokenizer.token_to_id("[MASK]")
        specials, room = special_tokens(self.tokenizer), content_length(self.tokenizer, self.max_length)
        for records in self.role_batches(role, step // self.roles):
            texts = [t for r in records for t in r.texts]
            ids = encode(self.tokenizer, texts, room, specials=False)  # the views are cut from the text's own tokens
            bounds = np.cumsum([0, *(len(r.texts) for r in records)])
            captions = [ids[bounds[i]:bounds[i + 1]] for i in range(len(records))]
            yield _views(captions, self.kind, pad=pad, mask_id=mask_id, max_length=self.max_length,
                         row_multiple=self.row_multiple, seed=self.seed, step=step, first=self.rank * self.batch_size,
                         specials=specials)
            step += self.roles


def worker_context() -> str | None:
    """How data-loader workers start: forked, the platform default (measured here: spawned workers torn down
    mid-stream abort at exit, "terminate called without an active exception"; forked ones do not). JAX, when loaded,
    warns at a fork that its threads are not forked; the workers never call JAX."""
    return None


def batch_loader(source: EpochBatches | StreamBatches, *, start: int, stop: int, num_workers: int,
                 pin_memory: bool) -> Iterator:
    """The batches (ids, positions, segments) of steps ``start, start + 1, …, stop − 1`` from ``source``, built by
    ``num_workers`` workers.

    A stream source must have been made with this ``start`` and ``num_workers``.
    """

    if num_workers:  # the workers tokenise; the tokenizers library's own threads do not survive a fork
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # a loader draws its workers' base seed from the generator it is given (else from torch's global one,
    # which would shift the dropout of a resumed run); the batches use no torch randomness
    options = dict(batch_size=None, num_workers=num_workers, pin_memory=pin_memory,
                   prefetch_factor=4 if num_workers else None, generator=torch.Generator().manual_seed(0),
                   multiprocessing_context=worker_context() if num_workers else None)
    if isinstance(source, StreamBatches):
        if (source.start, source.roles) != (start, max(1, num_workers)):
            raise ValueError(f"the stream was made for start {source.start} and {source.roles} workers, "
                             f"not {start} and {num_workers}")
        return _stream(iter(DataLoader(source, **options)), stop - start, num_workers)
    return iter(DataLoader(source, sampler=range(start, stop), **options))


def _stream(batches: Iterator, count: int, workers: int) -> Iterator:
    """``count`` batches of an endless stream loader, a reader's one-line error (a message where a batch was due)
    raised as a DataError.

    A spawned worker that the loader shuts down before it has started fails to unpickle its queues (a race in
    multiprocessing: "exited unexpectedly"), so before the loader goes every worker delivers once: the loader
    hands out items round-robin, and ``workers`` items come from every worker.
    """
    delivered = 0
    try:
        for _ in range(count):
            batch = next(batches)
            delivered += 1
            if isinstance(batch, str):
                raise DataError(batch)
            yield batch
    finally:
        for _ in range(max(0, workers - delivered)):
            if next(batches, None) is None:
                break
