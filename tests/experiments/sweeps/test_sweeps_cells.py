"""A sweep as cells: keys, the cell folder (a cut-short file is recomputed, another key is never read), the reduce,
and the same result whichever executor computed the cells."""

from __future__ import annotations

import json

import pytest

from support import untimed
from prhsim.experiments.sweeps import (
    SWEEPS,
    CellError,
    CellStore,
    SweepCell,
    cell_rows,
    csv_text,
    run_sweep,
    settings_document,
)
from prhsim.experiments.sweeps._cells import cell_key, sweep_cells

BAD_VIEW = SWEEPS["bad-view"]


def _settings(**values):
    return BAD_VIEW.settings_model().model_validate({"eps_grid": [0.2, 0.5, 1.0], **values})


def test_a_cell_key_changes_with_the_settings_the_cell_and_nothing_else():
    s = settings_document(_settings())
    key = cell_key("bad-view", s, SweepCell(0, {"eps": 0.2}))
    assert key == cell_key("bad-view", dict(s), SweepCell(5, {"eps": 0.2}))  # the place in the grid is not in the key
    assert key != cell_key("bad-view", s, SweepCell(0, {"eps": 0.5}))
    assert key != cell_key("bad-view", {**s, "seed": 1}, SweepCell(0, {"eps": 0.2}))
    assert key != cell_key("kernel-mismatch", s, SweepCell(0, {"eps": 0.2}))
    assert key != cell_key("bad-view", s, SweepCell(0, {"eps": 0.2}), revision="abc123")  # another commit


def test_the_cells_reduce_to_the_library_s_result_and_reuse_what_the_folder_holds(tmp_path):
    settings = _settings()
    library = BAD_VIEW.run(settings).model_dump(mode="json")
    store = CellStore(tmp_path / "cells", "bad-view", settings_document(settings))
    first = run_sweep(BAD_VIEW, settings, store)
    assert first.reused == 0 and len(first.cells) == 3 and untimed(first.result.model_dump(mode="json")) == \
        untimed(library)
    files = sorted(store.folder.glob("*.json"))
    assert len(files) == 3
    again = run_sweep(BAD_VIEW, settings, store)
    assert again.reused == 3 and again.result.model_dump(mode="json") == first.result.model_dump(mode="json")
    # a cell file cut short is recomputed, not read
    cut = store.path(first.cells[1])
    cut.write_text(cut.read_text()[:40])
    assert store.load(first.cells[1]) is None
    third = run_sweep(BAD_VIEW, settings, store)
    assert third.reused == 2 and untimed(third.result.model_dump(mode="json")) == untimed(library)
    assert untimed(json.loads(cut.read_text())["record"]) == untimed(first.records[1])
    # another seed: another key for every cell, nothing reused
    other = _settings(seed=1)
    assert run_sweep(BAD_VIEW, other, CellStore(store.folder, "bad-view", settings_document(other))).reused == 0


def test_a_file_under_a_cell_s_name_with_another_key_is_not_read(tmp_path):
    settings = _settings()
    store = CellStore(tmp_path / "cells", "bad-view", settings_document(settings))
    run_sweep(BAD_VIEW, settings, store)
    cell = sweep_cells(BAD_VIEW.module_object(), settings)[0]
    document = json.loads(store.path(cell).read_text())
    store.path(cell).write_text(json.dumps({**document, "key": "0" * 32}))
    assert store.load(cell) is None


def test_a_cell_that_raises_is_named_in_one_line_and_the_finished_cells_stay(tmp_path, monkeypatch):
    settings = _settings()
    module = BAD_VIEW.module_object()
    real = module.cell

    def failing(s, coordinates):
        if coordinates["eps"] == 0.5:
            raise ArithmeticError("no convergence\nsecond line")
        return real(s, coordinates)

    monkeypatch.setattr(module, "cell", failing)
    store = CellStore(tmp_path / "cells", "bad-view", settings_document(settings))
    with pytest.raises(CellError, match=r"^prhsim sweep bad-view: cell 1 \(eps=0\.5\) failed: no convergence$"):
        run_sweep(BAD_VIEW, settings, store)
    assert len(list(store.folder.glob("*.json"))) == 1  # eps 0.2 finished before the failure


@pytest.mark.parametrize("kwargs, message", [
    ({"workers": 0}, "workers must be a positive integer, got 0"),
    ({"executor": "slurm"}, "executor must be one of local, ray, got 'slurm'"),
    ({"address": "127.0.0.1:1"}, "address names a Ray cluster"),
])
def test_bad_executor_arguments_are_refused_before_any_work(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_sweep(BAD_VIEW, _settings(), **kwargs)


def test_the_tidy_table_has_one_row_per_cell_with_its_coordinates():
    run = run_sweep(BAD_VIEW, _settings())
    rows = cell_rows(run.cells, run.records)
    assert [r["cell"] for r in rows] == [0, 1, 2] and [r["eps"] for r in rows] == [0.2, 0.5, 1.0]
    assert rows[2]["pairs.pixels-caption.observed_rho_p"] == run.result.pairs[0].observed_rho_p[2]
    assert rows[0]["modalities.symbolic.observed_kz"] == run.result.modalities[2].observed_kz[0]
    text = csv_text(rows).splitlines()
    assert len(text) == 4 and text[0].startswith("cell,eps,")


def test_cells_compute_with_one_blas_thread_whatever_this_process_uses(monkeypatch):
    """In this process under two BLAS threads, the cells give the numbers two one-thread workers give (a product split
    over threads sums in another order: without the one-thread rule, kernel-mismatch at n = 400 differs in its last
    bits)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    sweep = SWEEPS["kernel-mismatch"]
    settings = sweep.settings_model().model_validate({"n": 400, "worlds": 2, "perturbations": [0.01, 0.1]})
    with threadpool_limits(limits=2):
        seen = []
        module = sweep.module_object()
        real = module.cell

        def watched(s, coordinates):
            seen.append({info["num_threads"] for info in threadpool_info()})
            return real(s, coordinates)

        monkeypatch.setattr(module, "cell", watched)
        here = run_sweep(sweep, settings)
        monkeypatch.undo()
    assert seen == [{1}, {1}]
    there = run_sweep(sweep, settings, workers=2)
    assert untimed(here.result.model_dump(mode="json")) == untimed(there.result.model_dump(mode="json"))
