"""Where a sweep's cells run: this process, local worker processes, or a Ray cluster (the results do not depend on it).

:func:`run_sweep` reads the cells already in the sweep's cell folder, computes the missing ones on the
chosen executor, writes each as it finishes (:class:`prhsim.experiments.sweeps._cells.CellStore`),
and reduces the records into the sweep's result. Progress counts cells on every executor.

* ``executor="local"``, ``workers=1`` (the default): every cell in this process, in order (or on ``threads``
  threads of it).
* ``executor="local"``, ``workers=N``: N worker processes (the standard library's process pool, started
  by spawning, never forking a process that holds JAX's threads), each with one BLAS/OpenMP thread and
  JAX on one core, so N workers on N cores do not oversubscribe them. A worker computes JAX in float64
  when this process does (:func:`jax_x64`).
* ``executor="ray"``: a Ray task per cell (one CPU each, retried by Ray when its worker dies), on a
  local Ray started for the sweep (``workers`` CPUs) or on the running cluster at ``address``.

Every cell computes with one BLAS thread, whatever runs it: a matrix product split over more threads sums in
another order, and its last bits would depend on the executor (measured: kernel-mismatch at n = 600 differed
between this process with the default threads and two one-thread workers). Parallel work comes from cells.

Each running cell computes under its share of the memory limit (:mod:`prhsim.experiments.sweeps._cost`: the
limit over the cells that run at once), in this process, its threads and every worker; on a running Ray cluster
(``address``) each cell has its own machine's default limit.

A cell that raises stops the sweep with one line naming the cell and its coordinates; the cells
finished before it stay in the cell folder for a resume.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal

from pydantic import BaseModel
from threadpoolctl import threadpool_limits

from prhsim._budget import memory_limit

from prhsim.experiments.sweeps._cells import (
    CellStore,
    SweepCell,
    compute_cell,
    settings_document,
    sweep_cells,
)
from prhsim.experiments.sweeps._cost import settings_limit

Executor = Literal["local", "ray"]
#: The executors ``prhsim sweep --executor`` offers.
EXECUTORS: tuple[str, ...] = ("local", "ray")
#: The environment of a worker: one BLAS/OpenMP thread, and XLA's CPU client on one thread.
WORKER_ENVIRONMENT = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                      "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


class CellError(RuntimeError):
    """A cell raised: the message names the sweep, the cell and its coordinates, and what it raised (one line)."""


@dataclass(frozen=True)
class SweepRun:
    """What :func:`run_sweep` returns: the sweep's result, its cells and their records, and how many were reused."""

    result: Any
    cells: list[SweepCell]
    records: list[dict[str, Any]]
    reused: int


def run_sweep(sweep: Any, settings: BaseModel, store: CellStore | None = None, *, workers: int = 1,
              executor: Executor = "local", address: str | None = None, threads: int = 1,
              say: Callable[..., None] | None = None) -> SweepRun:
    """Every cell of ``sweep`` for ``settings``, reduced (module docstring): the library's road from a sweep's settings,
    the command's own, e.g. ``run_sweep(SWEEPS["bad-view"], settings, workers=2).result``.

    Args:
        sweep: the sweep's record in :data:`prhsim.experiments.sweeps.SWEEPS`.
        settings: its settings model (``SWEEPS[name].settings_model()(...)``).
        store: the cell folder to read finished cells from and write new ones to (None: keep nothing).
        workers: worker processes (local), or the CPUs of the Ray started for the sweep; at least 1.
        executor: "local" or "ray".
        address: ``HOST:PORT`` of a running Ray cluster (executor "ray" only).
        threads: with one local worker, cells computed at once on threads of this process (JAX and the BLAS
            release the interpreter while they compute; a sweep whose settings hold ``threads`` gets them). Only
            for cells that touch no process-wide state: ``warnings.catch_warnings`` in two threads at once, for
            one, restores the other's filters.
        say: ``say(message, done=None, total=None)``, counted in cells.

    Raises:
        CellError: a cell raised (the finished cells stay in ``store``).
        ValueError: bad arguments, or Ray missing for executor "ray" (before any work).
    """
    say = say or (lambda message, done=None, total=None: None)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if address is not None and executor != "ray":
        raise ValueError("address names a Ray cluster: use it with executor='ray'")
    if executor == "ray":
        from prhsim._extras import require

        require("prhsim sweep --executor ray", ("ray",), "ray")
    sweep.check_requirements()
    module = sweep.module_object()
    cells = sweep_cells(module, settings)
    records: dict[int, dict[str, Any]] = {}
    if store is not None:
        for cell in cells:
            record = store.load(cell)
            if record is not None:
                records[cell.index] = record
    reused = len(records)
    missing = [cell for cell in cells if cell.index not in records]
    total = len(cells)
    say(f"reused {reused} of {total} cells from {store.folder}" if reused else f"{total} cell(s) to compute",
        done=reused, total=total)

    def finished(cell: SweepCell, record: dict[str, Any]) -> None:
        records[cell.index] = record
        if store is not None:
            store.save(cell, record)
        say(f"{cell.describe()} done ({len(records)} of {total})", done=len(records), total=total)

    if missing:
        at_once = min(workers if executor == "ray" or workers > 1 else threads, len(missing))
        share = None if address is not None else settings_limit(settings) // at_once
        if executor == "ray":
            _on_ray(sweep, settings, missing, finished, workers, address, share)
        elif workers > 1 and len(missing) > 1:
            _on_processes(sweep, settings, missing, finished, workers, share)
        else:
            with threadpool_limits(limits=1), memory_limit(share):  # one BLAS thread, as in every worker
                if threads > 1 and len(missing) > 1:
                    _on_threads(sweep, module, settings, missing, finished, threads, share)
                else:
                    for cell in missing:
                        say(f"{cell.describe()} ({len(records) + 1} of {total})")
                        try:
                            record = compute_cell(module, settings, cell)
                        except Exception as exc:  # noqa: BLE001 - named in one line; finished cells stay
                            raise _cell_error(sweep, cell, exc) from exc
                        finished(cell, record)
    ordered = [records[cell.index] for cell in cells]
    return SweepRun(module.reduce(settings, ordered), cells, ordered, reused)


def _cell_error(sweep: Any, cell: SweepCell, exc: BaseException) -> CellError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return CellError(f"prhsim sweep {sweep.name}: {cell.describe()} failed: {first}")


def jax_x64() -> bool | None:
    """Whether this process computes JAX in float64 (``jax_enable_x64``), or None when it has not imported JAX: a
    worker is set the same way, so its cells are computed in the precision this process would use."""
    jax = sys.modules.get("jax")
    return None if jax is None else bool(jax.config.jax_enable_x64)


def cell_task(module: str, settings_model: str, settings: dict[str, Any], index: int,
              coordinates: dict[str, Any], x64: bool | None = None, share: int | None = None) -> dict[str, Any]:
    """One cell computed from plain values (what a worker process or a Ray task receives): the sweep's module and
    the name of its settings model, the settings as JSON values, the cell, the caller's :func:`jax_x64`, and the
    cell's memory share in bytes (None: the worker's default limit). Returns the cell's record."""
    if x64:
        import jax

        jax.config.update("jax_enable_x64", True)
    sweep_module = importlib.import_module(module)
    model = getattr(sweep_module, settings_model).model_validate(settings)
    with threadpool_limits(limits=1), (memory_limit(share) if share else contextlib.nullcontext()):
        return compute_cell(sweep_module, model, SweepCell(index, coordinates))


@contextlib.contextmanager
def _worker_environment() -> Iterator[None]:
    """:data:`WORKER_ENVIRONMENT` in ``os.environ`` while workers start (they inherit it); restored after."""
    saved = {name: os.environ.get(name) for name in WORKER_ENVIRONMENT}
    os.environ.update(WORKER_ENVIRONMENT)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _collect(sweep: Any, pending: dict[Any, SweepCell], finished: Callable[..., None]) -> None:
    """Hand each cell's record to ``finished`` as its future completes (``pending`` maps futures to cells and is
    emptied as they complete); a cell that raised stops the collection with one line naming it."""
    from concurrent.futures import FIRST_COMPLETED, wait

    while pending:
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            cell = pending.pop(future)
            try:
                record = future.result()
            except Exception as exc:  # noqa: BLE001 - named in one line; finished cells stay
                raise _cell_error(sweep, cell, exc) from exc
            finished(cell, record)


def _on_processes(sweep: Any, settings: BaseModel, cells: list[SweepCell], finished: Callable[..., None],
                  workers: int, share: int | None) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    document = settings_document(settings)
    with _worker_environment():
        pool = ProcessPoolExecutor(max_workers=min(workers, len(cells)),
                                   mp_context=multiprocessing.get_context("spawn"))
        pending = {pool.submit(cell_task, sweep.module, sweep.settings, document, cell.index,
                               dict(cell.coordinates), jax_x64(), share): cell for cell in cells}
    try:
        _collect(sweep, pending, finished)
    finally:
        pool.shutdown(wait=not pending, cancel_futures=True)


def _on_threads(sweep: Any, module: Any, settings: BaseModel, cells: list[SweepCell], finished: Callable[..., None],
                threads: int, share: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def compute(cell: SweepCell) -> dict[str, Any]:  # a thread does not inherit the caller's limit: set it
        with memory_limit(share):
            return compute_cell(module, settings, cell)

    with ThreadPoolExecutor(max_workers=min(threads, len(cells))) as pool:
        pending = {pool.submit(compute, cell): cell for cell in cells}
        try:
            _collect(sweep, pending, finished)
        finally:
            for future in pending:
                future.cancel()


def _on_ray(sweep: Any, settings: BaseModel, cells: list[SweepCell], finished: Callable[..., None], workers: int,
            address: str | None, share: int | None) -> None:
    import ray

    started = not ray.is_initialized()
    if started:
        options = dict(log_to_driver=False, logging_level="warning", runtime_env={"env_vars": dict(WORKER_ENVIRONMENT)})
        try:
            if address is None:
                ray.init(address="local", num_cpus=workers, include_dashboard=False, **options)
            else:
                ray.init(address=address, **options)
        except (ConnectionError, RuntimeError) as exc:  # no cluster there, or one that refuses this client
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise ValueError(f"cannot start or reach {where}: {str(exc).splitlines()[0]}") from None
    try:
        task = ray.remote(num_cpus=1, max_retries=3)(cell_task)
        document = settings_document(settings)
        pending = {task.remote(sweep.module, sweep.settings, document, cell.index, dict(cell.coordinates),
                               jax_x64(), share): cell for cell in cells}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                cell = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - named in one line; finished cells stay
                    raise _cell_error(sweep, cell, getattr(exc, "cause", None) or exc) from exc
                finished(cell, record)
    finally:
        if started:
            ray.shutdown()
