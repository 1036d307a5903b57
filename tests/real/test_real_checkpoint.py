"""Training checkpoints: a run killed after any save resumes bit for bit, bad checkpoints are one-line
errors naming the path, and a save that fails part way leaves the previous checkpoint loadable."""

from __future__ import annotations

import json
import math
import os
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from safetensors.torch import load_file  # noqa: E402

from prhsim.real import _checkpoint  # noqa: E402
from prhsim.real._checkpoint import (  # noqa: E402
    CheckpointError,
    has_checkpoint,
    load_checkpoint,
    save_checkpoint,
)

VOCAB, WIDTH, CONTEXT, BATCH, STEPS, WARMUP = 13, 8, 5, 6, 10, 3


class Net(torch.nn.Module):
    """Mean embeddings, two Linear layers with batch norm and dropout, a head tied to the embedding."""

    def __init__(self, width: int = WIDTH, extra_layer: bool = False):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, width)
        self.hidden = torch.nn.Linear(width, width)
        self.norm = torch.nn.BatchNorm1d(width)  # buffers, one of them int64
        self.out = torch.nn.Linear(width, width)
        self.drop = torch.nn.Dropout(0.3)
        self.head = torch.nn.Linear(width, VOCAB, bias=False)
        self.head.weight = self.embed.weight
        if extra_layer:
            self.more = torch.nn.Linear(width, width)

    def forward(self, tokens):
        h = self.drop(torch.tanh(self.norm(self.hidden(self.embed(tokens).mean(1)))))
        return self.head(torch.tanh(self.out(h)))


def warmup_cosine(step: int) -> float:
    """Linear warmup over WARMUP steps, then cosine decay to 0 at STEPS."""
    if step < WARMUP:
        return (step + 1) / WARMUP
    return 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP)))


def build(seed: int, **net):
    """A model, AdamW and its warmup-cosine LambdaLR, the model initialised from torch seed ``seed``."""
    torch.manual_seed(seed)
    model = Net(**net)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine)
    return model, optimizer, scheduler


def train(model, optimizer, scheduler, generator, steps: int) -> None:
    """``steps`` optimiser steps on random batches from ``generator`` (and dropout from torch's generator)."""
    model.train()
    for _ in range(steps):
        tokens = torch.from_numpy(generator.integers(0, VOCAB, size=(BATCH, CONTEXT)))
        targets = torch.from_numpy(generator.integers(0, VOCAB, size=BATCH))
        loss = torch.nn.functional.cross_entropy(model(tokens), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()


def assert_states_equal(a: dict, b: dict) -> None:
    """Two state dicts with the same keys and bitwise-equal tensors."""
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


def assert_optimizer_states_equal(a: dict, b: dict) -> None:
    """Two optimiser state dicts: the same parameter groups and bitwise-equal state tensors."""
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for index in a["state"]:
        assert_states_equal(a["state"][index], b["state"][index])


@pytest.fixture
def saved(tmp_path):
    """A run's folder holding a checkpoint taken after 4 of STEPS steps, and the objects it was saved from."""
    model, optimizer, scheduler = build(0)
    generator = np.random.default_rng(2024)
    train(model, optimizer, scheduler, generator, 4)
    save_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler, generator=generator,
                    step=4, extra={"run": "a", "losses": [1.5, 0.25], "pair": (1, 2)})
    return tmp_path, model, optimizer, scheduler


def test_a_resumed_run_ends_bitwise_where_a_straight_run_does(tmp_path):
    model, optimizer, scheduler = build(0)
    train(model, optimizer, scheduler, np.random.default_rng(2024), STEPS)

    first = build(0)
    generator = np.random.default_rng(2024)
    train(*first, generator, 4)
    folder = save_checkpoint(tmp_path, model=first[0], optimizer=first[1], scheduler=first[2],
                             generator=generator, step=4, extra={"run": "a", "pair": (1, 2)})
    assert folder == tmp_path / "checkpoint" and has_checkpoint(tmp_path)
    del first, generator
    torch.manual_seed(99)  # a new process: torch's generator elsewhere
    resumed_model, resumed_optimizer, resumed_scheduler = build(1)
    assert not torch.equal(resumed_model.hidden.weight, model.hidden.weight)
    resumed = load_checkpoint(tmp_path, model=resumed_model, optimizer=resumed_optimizer,
                              scheduler=resumed_scheduler)
    assert resumed.step == 4 and resumed.extra == {"run": "a", "pair": (1, 2)}
    train(resumed_model, resumed_optimizer, resumed_scheduler, resumed.generator, STEPS - resumed.step)

    assert_states_equal(resumed_model.state_dict(), model.state_dict())
    assert_optimizer_states_equal(resumed_optimizer.state_dict(), optimizer.state_dict())
    assert resumed_scheduler.state_dict() == scheduler.state_dict()
    assert resumed_model.head.weight is resumed_model.embed.weight  # still tied


def test_the_files_hold_what_the_format_says(saved):
    folder, model, optimizer, _ = saved
    directory = folder / "checkpoint"
    assert sorted(path.name for path in folder.iterdir()) == ["checkpoint"]
    assert sorted(path.name for path in directory.iterdir()) == sorted(_checkpoint.FILES)
    weights = load_file(directory / "model.safetensors")
    assert "embed.weight" in weights and "head.weight" not in weights  # the tied weight once
    assert torch.equal(weights["embed.weight"], model.embed.weight.detach())
    assert weights["norm.num_batches_tracked"].dtype == torch.int64
    moments = load_file(directory / "optimizer.safetensors")
    assert torch.equal(moments["state.0.exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"])
    assert load_file(directory / "rng.safetensors")["cpu"].dtype == torch.uint8
    document = json.loads((directory / "state.json").read_text())
    assert document["format"] == 1 and document["step"] == 4
    assert document["model"]["aliases"] == {"head.weight": "embed.weight"}
    assert document["scheduler"]["class"] == "LambdaLR" and document["scheduler"]["state"]["last_epoch"] == 4
    assert document["generator"]["bit_generator"] == "PCG64"
    assert document["extra"]["losses"] == [1.5, 0.25]


def test_a_round_trip_restores_the_optimizer_state_exactly(saved):
    folder, model, optimizer, scheduler = saved
    fresh_model, fresh_optimizer, fresh_scheduler = build(5)
    load_checkpoint(folder, model=fresh_model, optimizer=fresh_optimizer, scheduler=fresh_scheduler)
    assert_optimizer_states_equal(fresh_optimizer.state_dict(), optimizer.state_dict())
    assert isinstance(fresh_optimizer.param_groups[0]["betas"], tuple)
    assert fresh_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
    assert fresh_scheduler.get_last_lr() == scheduler.get_last_lr()
    assert_states_equal(fresh_model.state_dict(), model.state_dict())


@pytest.mark.parametrize("bit_generator", ["PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"])
def test_every_numpy_bit_generator_resumes_its_stream(tmp_path, bit_generator):
    model, optimizer, scheduler = build(0)
    generator = np.random.Generator(getattr(np.random, bit_generator)(7))
    generator.random(3)
    save_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler, generator=generator, step=0)
    resumed = load_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler)
    assert type(resumed.generator.bit_generator).__name__ == bit_generator and resumed.extra == {}
    assert np.array_equal(resumed.generator.integers(0, 2**63, size=5), generator.integers(0, 2**63, size=5))


def test_json_values_round_trip_with_their_types():
    value = {"t": (1, (2.5, None)), "k": {1: "a", (2, 3): [True]}, "c": Counter({30: 1, 80: 2}),
             "a": np.arange(3, dtype=np.uint64), "tag": {"__tuple__": 1}, "inf": float("inf")}
    encoded = json.loads(json.dumps(_checkpoint._encode(value, "value", "state.json")))
    decoded = _checkpoint._decode(encoded)
    assert decoded["t"] == (1, (2.5, None)) and decoded["k"] == {1: "a", (2, 3): [True]}
    assert isinstance(decoded["c"], Counter) and decoded["c"] == Counter({30: 1, 80: 2})
    assert decoded["a"].dtype == np.uint64 and decoded["a"].tolist() == [0, 1, 2]
    assert decoded["tag"] == {"__tuple__": 1} and decoded["inf"] == float("inf")


def expect_error(folder, *fragments, **objects):
    """load_checkpoint raises a one-line CheckpointError containing every fragment."""
    model, optimizer, scheduler = objects.get("built") or build(3)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(folder, model=model, optimizer=optimizer, scheduler=scheduler)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert str(fragment) in message, message
    return message


def test_no_checkpoint_is_an_error(tmp_path):
    assert not has_checkpoint(tmp_path) and not has_checkpoint(tmp_path / "missing")
    expect_error(tmp_path, tmp_path, "no checkpoint")


@pytest.mark.parametrize("name", ["model.safetensors", "optimizer.safetensors", "rng.safetensors", "state.json"])
@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing"])
def test_a_corrupt_or_missing_file_is_an_error_naming_it(saved, name, damage):
    folder = saved[0]
    path = folder / "checkpoint" / name
    if damage == "garbage":
        path.write_bytes(b"\x00garbage{")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-7])
    else:
        path.unlink()
    assert has_checkpoint(folder) == (damage != "missing")
    expect_error(folder, path, "missing" if damage == "missing" else "")


@pytest.mark.parametrize("net, fragments", [
    ({"width": 9}, ["'embed.weight'", "[13, 9]", "[13, 8]"]),
    ({"extra_layer": True}, ["'more.weight'", "not in the checkpoint"]),
])
def test_a_model_of_other_keys_or_shapes_is_an_error_naming_the_key(saved, net, fragments):
    folder = saved[0]
    expect_error(folder, folder / "checkpoint" / "model.safetensors", *fragments, built=build(3, **net))


def test_a_checkpoint_key_the_model_lacks_is_an_error(saved):
    folder = saved[0]
    _, optimizer, scheduler = build(3)
    model = Net()
    del model.out  # the model has no out.*, the checkpoint does
    expect_error(folder, "the checkpoint's 'out.", "not in the model", built=(model, optimizer, scheduler))


def test_an_optimizer_over_other_parameters_is_an_error_and_changes_nothing(saved):
    folder = saved[0]
    model, _, _ = build(3)
    before = {key: value.clone() for key, value in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.hidden.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine)
    expect_error(folder, folder / "checkpoint" / "state.json", "2 parameters", "has 7",
                 built=(model, optimizer, scheduler))
    assert_states_equal(model.state_dict(), before)


def test_an_unknown_format_version_is_an_error(saved):
    folder = saved[0]
    path = folder / "checkpoint" / "state.json"
    document = json.loads(path.read_text())
    document["format"] = 99
    path.write_text(json.dumps(document))
    expect_error(folder, path, "unknown checkpoint format 99")


def test_a_malformed_state_is_an_error_naming_it(saved):
    folder = saved[0]
    path = folder / "checkpoint" / "state.json"
    document = json.loads(path.read_text())
    document["optimizer"]["state"] = {"zero": {}}
    path.write_text(json.dumps(document))
    expect_error(folder, path, "malformed checkpoint")


def assert_previous_checkpoint_intact(folder, step: int = 4) -> None:
    """Only ``checkpoint/`` in the folder, and it loads the checkpoint of ``step``."""
    assert sorted(path.name for path in folder.iterdir()) == ["checkpoint"]
    model, optimizer, scheduler = build(3)
    assert load_checkpoint(folder, model=model, optimizer=optimizer, scheduler=scheduler).step == step


def resave(folder, model, optimizer, scheduler, **extra):
    """Save the objects again as step 5."""
    save_checkpoint(folder, model=model, optimizer=optimizer, scheduler=scheduler,
                    generator=np.random.default_rng(1), step=5, **extra)


def test_a_save_failing_at_its_final_rename_keeps_the_previous_checkpoint(saved, monkeypatch):
    folder = saved[0]
    replace = os.replace

    def failing_replace(source, target):
        if os.path.basename(source).startswith(".checkpoint.new-"):
            raise OSError("disk on fire")
        replace(source, target)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk on fire"):
        resave(*saved)
    assert_previous_checkpoint_intact(folder)


def test_a_save_failing_mid_write_keeps_the_previous_checkpoint(saved, monkeypatch):
    folder = saved[0]
    save_file, written = _checkpoint.save_file, []

    def failing_save_file(tensors, path):
        written.append(path)
        if len(written) == 2:  # model.safetensors written, optimizer.safetensors not
            raise OSError("no space left on device")
        save_file(tensors, path)

    monkeypatch.setattr(_checkpoint, "save_file", failing_save_file)
    with pytest.raises(OSError, match="no space"):
        resave(*saved)
    monkeypatch.undo()
    assert_previous_checkpoint_intact(folder)


def test_a_save_of_what_json_cannot_hold_keeps_the_previous_checkpoint(saved):
    folder = saved[0]
    with pytest.raises(CheckpointError, match=r"extra\['bad'\] is a set") as info:
        resave(*saved, extra={"bad": {1, 2}})
    assert str(folder / "checkpoint" / "state.json") in str(info.value)
    assert_previous_checkpoint_intact(folder)


def test_a_save_killed_between_its_renames_leaves_a_loadable_checkpoint(saved):
    folder = saved[0]
    (folder / "checkpoint").rename(folder / ".checkpoint.old")  # killed after the first rename
    (folder / ".checkpoint.new-dead").mkdir()  # and a half-written new one
    (folder / ".checkpoint.new-dead" / "model.safetensors").write_bytes(b"partial")
    assert has_checkpoint(folder)
    model, optimizer, scheduler = build(3)
    assert load_checkpoint(folder, model=model, optimizer=optimizer, scheduler=scheduler).step == 4
    resave(*saved)  # the next save tidies up
    assert_previous_checkpoint_intact(folder, step=5)


def test_bad_arguments_to_save_are_errors(tmp_path):
    model, optimizer, scheduler = build(0)
    generator = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least 0"):
        save_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler, generator=generator,
                        step=-1)
    with pytest.raises(CheckpointError, match="extra must be a dict"):
        save_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler, generator=generator,
                        step=0, extra=[1])
    assert not has_checkpoint(tmp_path)
