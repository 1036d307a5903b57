"""Data-parallel training: SIGReg over the global batch through the reduce hook (float64, gloo, 2 processes), and
``prhsim real train`` under torchrun on CPU ending where one process on the same global batch ends, and resuming."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from prhsim.real import RealTrainSettings  # noqa: E402
from support import real_task  # noqa: E402
from prhsim.real import train_real  # noqa: E402
from prhsim.real._distributed import global_mean  # noqa: E402
from prhsim.objectives import draw_directions, lejepa_loss, sigreg

WORLD = 2
V, N, D_IN, D = 3, 24, 5, 4
LAM = 0.3


def _plain_all_reduce_mean(cs):
    """The first bug: an all-reduce autograd does not see (the right value, 1/world_size of the gradient)."""
    cs = cs.clone()
    with torch.no_grad():  # as a hand-written all-reduce of the statistic's means would be
        dist.all_reduce(cs)
    return cs / dist.get_world_size()


def _loss(kind, x, w, directions, *, n_total, reduce):
    e = x @ w
    if kind == "sigreg":
        return sigreg(e, directions, n_total=n_total, reduce=reduce)
    return lejepa_loss(e, directions, lam=LAM, n_global=2, n_total=n_total, reduce=reduce, dims="mean")


def _inputs():
    gen = np.random.default_rng(5)
    x = torch.as_tensor(gen.standard_normal((V, N, D_IN)) * [1.0, 0.5, 2.0, 1.0, 0.3])
    w = torch.as_tensor(gen.standard_normal((D_IN, D)))
    return x, w, torch.as_tensor(draw_directions(D, 16, seed=1, step=0))


def _rank(rank, init, folder):
    """One process: each reduce on its half of the batch; the parameter gradient averaged as DDP averages it."""
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=WORLD)
    x, w0, directions = _inputs()
    half = x[:, rank * N // WORLD:(rank + 1) * N // WORLD]
    results = {}
    for kind in ("sigreg", "lejepa"):
        for name, reduce, n_total in (("global", global_mean, N), ("plain", _plain_all_reduce_mean, N),
                                      ("local", None, None)):
            w = w0.clone().requires_grad_(True)
            loss = _loss(kind, half, w, directions, n_total=n_total, reduce=reduce)
            loss.backward()
            grad, value = w.grad.clone(), loss.detach().clone()
            dist.all_reduce(grad)
            dist.all_reduce(value)
            results[kind, name] = (value / WORLD, grad / WORLD)
    torch.save(results, folder / f"rank{rank}.pt")
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def reduced(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ddp")
    torch.multiprocessing.start_processes(_rank, args=(folder / "init", folder), nprocs=WORLD, start_method="spawn")
    return [torch.load(folder / f"rank{r}.pt") for r in range(WORLD)]


@pytest.mark.parametrize("kind", ["sigreg", "lejepa"])
def test_the_reduce_hook_gives_the_full_batch_loss_and_gradient_in_float64(reduced, kind):
    x, w0, directions = _inputs()
    w = w0.clone().requires_grad_(True)
    full = _loss(kind, x, w, directions, n_total=None, reduce=None)
    full.backward()
    full = full.detach()
    for results in reduced:
        value, grad = results[kind, "global"]
        assert abs(float(value - full)) <= 1e-12 * max(1.0, abs(float(full)))
        assert torch.allclose(grad, w.grad, rtol=1e-11, atol=1e-13)


def test_both_known_bugs_are_caught(reduced):
    """A plain all-reduce: right value, half the gradient (λ divided by 2); a per-process statistic: wrong value."""
    x, w0, directions = _inputs()
    w = w0.clone().requires_grad_(True)
    full = _loss("sigreg", x, w, directions, n_total=None, reduce=None)
    full.backward()
    full = full.detach()
    value, grad = reduced[0]["sigreg", "plain"]
    assert abs(float(value - full)) <= 1e-12
    assert torch.allclose(grad, w.grad / WORLD, rtol=1e-11, atol=1e-13)
    assert not torch.allclose(grad, w.grad, rtol=1e-3)
    value, _ = reduced[0]["sigreg", "local"]
    assert abs(float(value - full)) > 1e-3 * abs(float(full))


# ------------------------------------------------------------------ prhsim real train under torchrun (gloo, CPU)


@pytest.fixture(scope="module")
def data(small_export):
    return small_export


SETTINGS = dict(model="tiny", steps=6, batch_size=8, vocab_size=64, max_length=16, num_directions=16, proj_dim=16,
                checkpoint_every=100, log_every=2, device="cpu", dropout=0.0, warmup=0.0, lr=2e-3)


def _torchrun(data, out, *extra, views="good"):
    sets = [f"--set={key}={json.dumps(value)}" for key, value in SETTINGS.items() if key not in ("steps",)]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={WORLD}",
               "-m", "prhsim", "real", "train", "--data", str(data), *(["--learner", "ntp"] if views == "ntp" else ["--views", views]),
               "--steps", str(SETTINGS["steps"]), *sets,
               "--out", str(out), "-q", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _parameters(run):
    from safetensors.torch import load_file

    return load_file(run / "checkpoint" / "model.safetensors")


@pytest.fixture(scope="module")
def two_processes(data, tmp_path_factory):
    runs = {}

    def run(views):
        if views not in runs:
            runs[views] = tmp_path_factory.mktemp("ddp-run") / views
            _torchrun(data, runs[views], views=views)
        return runs[views]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("views", ["good", "ntp"])
def test_two_processes_end_where_one_process_ends_on_the_same_global_batch(data, two_processes, tmp_path, views):
    """SIGReg over the global batch and the invariance averaged (JEPA), or every next token weighted alike (NTP)."""
    one = tmp_path / "one"
    train_real(RealTrainSettings(data=str(data), **real_task(views), **SETTINGS), one)
    a, b = _parameters(one), _parameters(two_processes(views))
    assert a.keys() == b.keys()
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst < 1e-5, worst
    print(f"{views}: largest parameter difference {worst:.1e}")
    lines = [json.loads(x) for x in (two_processes(views) / "metrics.jsonl").read_text().splitlines()]
    ones = [json.loads(x) for x in (one / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [2, 4, 6]
    assert np.allclose([x["loss"] for x in lines], [x["loss"] for x in ones], rtol=1e-5)


@pytest.mark.slow
def test_a_killed_two_process_run_resumes_to_the_same_parameters(data, two_processes, tmp_path):
    run = tmp_path / "killed"
    _torchrun(data, run, "--stop-after", "3")
    assert json.loads((run / "checkpoint" / "state.json").read_text())["step"] == 3
    _torchrun(data, run, "--resume")
    a, b = _parameters(two_processes("good")), _parameters(run)
    assert all(torch.equal(a[k], b[k]) for k in a)
