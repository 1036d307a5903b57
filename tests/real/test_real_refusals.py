"""`prhsim real` as hard as `prhsim run`: what cannot fit is refused before any work in one line (exit 2, no folder,
a small tracemalloc peak), and a full disk while writing is one line naming the path, the previous checkpoint kept."""

from __future__ import annotations

import errno

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.real import RealTrainSettings, plan_training
from support import assert_one_line_refusal, refusal


@pytest.fixture(scope="module", autouse=True)
def _warm_imports():
    """What the commands import (torch, transformers' BERT), imported before any tracemalloc window opens."""
    import transformers.models.bert.modeling_bert  # noqa: F401

    import prhsim.cli._real  # noqa: F401


@pytest.mark.parametrize("args, names", [
    (["--set", "proj_dim=100000000"], ["100,000,000 x 256 directions", "proj_dim"]),
    (["--set", "num_directions=1000000000"], ["SIGReg's projections", "1,000,000,000 directions", "lower num_directions"]),
    (["--workers", "256"], ["256 data-loader worker processes", "lower --workers"]),
    (["--batch-size", "1000000"], ["activations", "lower --batch-size"]),
    (["--model", "bert-b", "--memory-limit", "0.5"], ["limit 500 MB"]),
])
def test_a_training_run_that_cannot_fit_is_refused_before_any_work(args, names, small_export, tmp_path):
    """proj_dim 1e8 and num_directions 1e9 used to be allocation tracebacks, --workers 256 the OOM killer."""
    out = tmp_path / "run"
    if "--memory-limit" not in args:
        args = [*args, "--memory-limit", "8"]
    result, peak = refusal(["real", "train", "--data", str(small_export), "--out", str(out), "--model", "tiny",
                            "--set", 'device="cpu"', *args])
    assert_one_line_refusal(result, peak, names)
    assert not out.exists()


def test_an_export_that_cannot_fit_is_refused_before_any_work(tmp_path):
    """--images 1e6 was killed after minutes of building its records."""
    out = tmp_path / "syn"
    result, peak = refusal(["real", "export-synthetic", "--images", "1000000", "--out", str(out), "--memory-limit", "8"])
    assert_one_line_refusal(result, peak, ["1,000,000 images x 5 captions", "limit 8 GB", "lower --images"])
    assert not out.exists()


def test_an_export_larger_than_the_free_disk_is_refused_before_any_work(tmp_path, monkeypatch):
    import prhsim.io._files as files

    monkeypatch.setattr(files, "free_bytes", lambda path: 10_000)
    out = tmp_path / "syn"
    result, peak = refusal(["real", "export-synthetic", "--images", "100", "--out", str(out)])
    assert_one_line_refusal(result, peak, ["the export of 100 images", "on the device of", "10 kB free"])
    assert not out.exists()


def test_the_training_plan_matches_its_definition():
    """A twin of the plan's arithmetic for the tiny BERT (hidden 64, 2 layers, 2 heads, intermediate 128), written
    from the module's formulas: the model's parameters x 4 float32 copies, the activations, SIGReg's projections."""
    s = RealTrainSettings(data="unused", model="tiny", batch_size=8, max_length=32, proj_dim=16, num_directions=64,
                          vocab_size=1000, device="cpu")
    plan = plan_training(s, cuda=False)
    h, L, heads, inter, V, P = 64, 2, 2, 128, 1000, 64
    params = V * h + P * h + L * (4 * h * h + 2 * h * inter + 9 * h) + h * h + h * 16
    views = 8  # good views: 2 global and 6 local per image
    bytes_of = {stage.what.split(" (")[0].split("'s")[0]: stage.nbytes for stage in plan.stages}
    assert plan.stages[0].nbytes == 16 * params
    assert plan.stages[1].nbytes == 4 * views * 8 * 32 * L * (3 * h + inter + heads * 32)
    assert plan.stages[2].nbytes == 3 * 4 * views * 8 * 64 * 17 + 4 * 16 * 64
    assert len(bytes_of) == 3
    # the time: 6 x the parameters outside the embeddings x every view's max_length tokens, a step, at the CPU rate
    blocks = L * (4 * h * h + 2 * h * inter + 9 * h) + h * h + h * 16
    assert plan.seconds == pytest.approx(s.steps * 6 * blocks * views * 8 * 32 / 2e11, rel=1e-12)
    assert plan_training(s, cuda=True).seconds == pytest.approx(plan.seconds * 2e11 / 3e14, rel=1e-12)


def test_a_long_training_run_says_its_time_class_before_it_starts(tmp_path):
    """The note comes before the first progress line, from the plan alone; a short run has none."""
    from prhsim.real import export_synthetic
    from prhsim.worlds import gridscene

    data = tmp_path / "syn"
    export_synthetic(gridscene(3, objects=1), data, images=24, captions=2, val=0.25, test=0.25, pixel_scale=1, rng=0)
    plan = plan_training(RealTrainSettings(data=str(data), model="tiny", batch_size=4, steps=10 ** 6, device="cpu"))
    assert plan.time_class in ("minutes", "hours") and plan.notes()[0].startswith(f"this run may take {plan.time_class}")
    long = CliRunner().invoke(main, ["real", "train", "--data", str(data), "--model", "tiny", "--batch-size", "4",
                                     "--steps", "1000000", "--stop-after", "1", "--set", "device=cpu",
                                     "--out", str(tmp_path / "long")])
    assert long.exit_code == 0, long.output
    lines = long.output.splitlines()
    assert lines[0].startswith(f"prhsim real train: note: this run may take {plan.time_class}: 1,000,000 steps of a "), lines
    assert "step 0/1000000" in lines[1]
    short = CliRunner().invoke(main, ["real", "train", "--data", str(data), "--model", "tiny", "--batch-size", "4",
                                      "--steps", "2", "--set", "device=cpu", "--out", str(tmp_path / "short")])
    assert short.exit_code == 0 and "may take" not in short.output, short.output


def test_a_full_disk_while_checkpointing_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    import torch
    from safetensors import SafetensorError

    import prhsim.io._files as files
    import prhsim.real._checkpoint as checkpoint
    from prhsim.io import OutputError
    from prhsim.real._checkpoint import load_checkpoint, save_checkpoint

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    save_checkpoint(tmp_path, model=model, optimizer=opt, scheduler=sched, generator=None, step=1)

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")

    monkeypatch.setattr(checkpoint, "save_file", full)
    monkeypatch.setattr(files, "free_bytes", lambda path: 0)
    with pytest.raises(OutputError, match=r"^no space left on the device of .*checkpoint: .*\(nothing was written\)$"):
        save_checkpoint(tmp_path, model=model, optimizer=opt, scheduler=sched, generator=None, step=2)
    assert load_checkpoint(tmp_path, model=model, optimizer=opt, scheduler=sched).step == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_a_full_disk_outside_the_writers_is_still_one_line(tmp_path, monkeypatch):
    """An ENOSPC that reaches the command line from any writer is one line naming the file, exit 2."""
    import prhsim.real._align as align

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "map.npz"))

    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.standard_normal((60, 4)))
    np.save(tmp_path / "b.npy", rng.standard_normal((60, 4)))
    monkeypatch.setattr(align, "pca_whitening", full)
    res = CliRunner().invoke(main, ["real", "align", "--unpaired", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                                    "--dim", "2", "--out", str(tmp_path / "map.npz")])
    assert res.exit_code == 2, res.output
    assert res.output.strip() == f"Error: no space left on the device writing {tmp_path / 'map.npz'}; free some space " \
                                 "or write elsewhere"
