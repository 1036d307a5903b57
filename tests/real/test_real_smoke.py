"""``prhsim real smoke`` on CPU at a tiny size (the figures it prints, each against its definition)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from prhsim.cli import main  # noqa: E402
from prhsim.real._smoke import model_flops_utilisation, steady_rates  # noqa: E402


def test_steady_rates_leave_out_the_first_interval_and_weight_the_rest_by_time(tmp_path):
    lines = [{"step": 10, "samples_per_s": 1.0, "tokens_per_s": 9.0, "real_token_share": 0.1},  # start-up: left out
             {"step": 20, "samples_per_s": 40.0, "tokens_per_s": 400.0, "real_token_share": 0.8},  # 10 steps of 4 in 1 s
             {"step": 25, "samples_per_s": 10.0, "tokens_per_s": 50.0, "real_token_share": 0.5}]  # 5 steps of 4 in 2 s
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    samples, tokens, share = steady_rates(path, batch_size=4)
    assert samples == pytest.approx(60 / 3) and tokens == pytest.approx((400 * 1 + 50 * 2) / 3)
    assert share == pytest.approx((400 + 100) / (400 / 0.8 + 100 / 0.5))  # real tokens over packed positions
    path.write_text(json.dumps(lines[0]) + "\n")
    assert steady_rates(path, batch_size=4) == pytest.approx((1.0, 9.0, 0.1))
    path.write_text(json.dumps({k: v for k, v in lines[0].items() if k != "real_token_share"}) + "\n")
    assert steady_rates(path, batch_size=4)[2] is None  # a run logged before packing


def test_mfu_is_six_flops_per_parameter_and_token_over_the_peak():
    assert model_flops_utilisation(21_000_000, 500_000.0, 989.4) == pytest.approx(6 * 21e6 * 5e5 / 989.4e12)
    assert model_flops_utilisation(10, 1.0, None) is None


def test_the_smoke_command_runs_the_pipeline_and_reports_every_figure(tmp_path):
    from prhsim.real._smoke import _non_embedding_parameters
    from prhsim.real._text_models import TextEncoder

    out = tmp_path / "smoke"
    args = ["real", "smoke", "--out", str(out), "--images", "40", "--captions", "3", "--model", "tiny",
            "--batch-size", "8", "--image-size", "28", "--workers", "0", "--device", "cpu"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report == json.loads((out / "smoke.json").read_text())
    assert report["steps"] == 32 // 8 and report["device"] == "cpu" and report["export_s"] > 0
    assert report["features"]["images_per_s"] > 0 and report["features"]["model_alone_images_per_s"] > 0
    assert np.load(out / "dinov2.npy").shape == (40, 384)  # the random ViT-S/14
    train = report["train"]
    assert train["samples_per_s"] > 0 and train["tokens_per_s"] > 0 and 0 < train["real_token_share"] <= 1
    assert train["sequences_per_s"] == pytest.approx(8 * train["samples_per_s"]) and train["compile"] == "none"
    assert train["mfu"] is None and train["peak_memory_gib"] is None  # no peak and no GPU memory on a CPU
    model = TextEncoder("tiny", json.loads((out / "run" / "model_config.json").read_text())["vocab_size"], 16,
                        causal=False)
    twin = sum(p.numel() for name, p in model.named_parameters() if ".embeddings." not in name)
    assert train["parameters_outside_embeddings"] == _non_embedding_parameters(out / "run") == twin
    assert 0 <= report["eval"]["r1_text_to_image"] <= 1 and report["eval"]["n_test"] == 4
    table = CliRunner().invoke(main, args)  # the export is reused, and the table printed
    assert table.exit_code == 0, table.output
    assert "reusing the export" in table.output and "samples/s" in table.output and "MFU" in table.output
    assert json.loads((out / "smoke.json").read_text())["export_s"] == 0.0


def test_smoke_refuses_a_folder_that_is_not_its_own(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    result = CliRunner().invoke(main, ["real", "smoke", "--out", str(tmp_path), "--images", "40", "--device", "cpu"])
    assert result.exit_code == 2 and "is not a smoke folder" in result.output
    assert (tmp_path / "mine.txt").read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_the_default_workers_are_the_cpus_less_one_at_most_sixteen(monkeypatch):
    import os

    from prhsim.real._smoke import default_workers

    for cpus, want in ((1, 1), (2, 1), (9, 8), (16, 15), (17, 16), (64, 16)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cpus: set(range(n)), raising=False)
        assert default_workers() == want


def test_without_cuda_the_smoke_says_at_once_what_it_is_and_cpu_runs_a_cpu_sized_one(tmp_path, monkeypatch):
    """It used to run for minutes on a CPU before saying anything; --device cpu scales every size left at its
    GPU default down (200 images, 3 captions, batch 16, the tiny model, 56-pixel images)."""
    import torch

    from prhsim.cli._real import CPU_SMOKE

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    refused = CliRunner().invoke(main, ["real", "smoke", "--out", str(tmp_path / "gpu")])
    assert refused.exit_code == 2 and not (tmp_path / "gpu").exists()
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1 and "is the GPU smoke test" in lines[0] and "--device cpu" in lines[0]
    calls = {}

    def fake_smoke(out, **kw):
        calls.update(kw)
        raise ValueError("stopped here")

    import prhsim.real

    monkeypatch.setattr(prhsim.real, "smoke", fake_smoke)
    CliRunner().invoke(main, ["real", "smoke", "--out", str(tmp_path / "cpu"), "--device", "cpu", "--images", "90"])
    assert calls["images"] == 90  # set by the user: kept
    assert {k: calls[k] for k in ("captions", "batch_size", "model", "image_size")} == {
        k: CPU_SMOKE[k] for k in ("captions", "batch_size", "model", "image_size")}
