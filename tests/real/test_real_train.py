"""``prhsim real train`` and ``eval`` end to end on a small synthetic export (tiny BERT, CPU): every learner trains
and is scored, a killed run resumes to the same parameters, and bad input is a one-line error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
torch = pytest.importorskip("torch")

from prhsim.cli import main  # noqa: E402
from support import real_task  # noqa: E402
from prhsim.real import RealTrainSettings  # noqa: E402
from prhsim.real import DataError, evaluate_run, train_real  # noqa: E402


@pytest.fixture(scope="module")
def data(small_export):
    return small_export


def _settings(data, **kw):
    base = dict(data=str(data), model="tiny", steps=6, batch_size=8, vocab_size=64, max_length=16,
                num_directions=16, proj_dim=16, checkpoint_every=3, log_every=2, device="cpu")
    return RealTrainSettings(**{**base, **kw})


@pytest.mark.parametrize("views", ["good", "bad", "ntp"])
def test_each_learner_trains_and_is_scored(data, tmp_path, views):
    run = tmp_path / views
    summary = train_real(_settings(data, **real_task(views)), run)
    assert summary.steps == 6 and np.isfinite(summary.loss)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [2, 4, 6] and all(x["tokens_per_s"] > 0 for x in lines)
    assert (run / "loss.png").read_bytes()[:4] == b"\x89PNG" and (run / "summary.json").is_file()
    result = evaluate_run(run, n_fit=10)
    for key in ("r1_text_to_image", "r5_text_to_image", "r1_image_to_text", "r5_image_to_text"):
        assert 0.0 <= result[key] <= 1.0, key
    assert set(result["metrics"]) == {"mutual_knn", "linear_cka", "retrieval_r1"}
    assert all(0.0 <= value <= 1.0 for value in result["metrics"].values()), result["metrics"]
    # R@1 of the registry is the mean of the two directions of the same fitted map
    assert result["metrics"]["retrieval_r1"] == pytest.approx((result["r1_text_to_image"] + result["r1_image_to_text"]) / 2)
    assert result["n_test"] == 12 and result["chance"]["r1"] == result["chance"]["retrieval_r1"] == pytest.approx(1 / 12)
    assert "retrieval_r1" not in result["calibration"]  # it fits a map: not calibrated
    assert json.loads((run / "eval.json").read_text()) == result
    cal = result["calibration"]
    assert cal["permutations"] == 1000 and cal["alpha"] == 0.05
    for name in ("mutual_knn", "linear_cka"):
        assert cal[name]["raw"] == pytest.approx(result["metrics"][name], abs=1e-6), name  # CKA's null: float64
        assert 1 / 1001 <= cal[name]["p_value"] <= 1.0 and 0.0 <= cal[name]["calibrated"] <= 1.0


def test_eval_calibration_is_the_metric_on_permuted_test_rows(data, tmp_path, monkeypatch):
    """eval.json's null is prhsim.metrics.calibrate's on the test embeddings (seed 0): the p-value recounted from
    the metric recomputed on each permutation of the image rows; --calibrate 0 leaves it out."""
    import prhsim.metrics as pm
    from prhsim.metrics import PRH_METRICS

    run = tmp_path / "run"
    train_real(_settings(data, **real_task("good")), run)
    seen = {}
    real_calibrate = pm.calibrate

    def spy(name, a, b, **kw):
        seen[name] = (np.asarray(a), np.asarray(b), kw)
        return real_calibrate(name, a, b, **kw)

    monkeypatch.setattr(pm, "calibrate", spy)
    result = evaluate_run(run, n_fit=10, permutations=40, alpha=0.1)
    for name in ("mutual_knn", "linear_cka"):
        a, b, kw = seen[name]
        assert kw["permutations"] == 40 and kw["alpha"] == 0.1 and kw["rng"] == 0
        gen = np.random.default_rng(0)
        perms = [gen.permutation(a.shape[0]) for _ in range(40)]
        raw = PRH_METRICS[name](a, b, knn_k=kw["knn_k"])
        null = np.array([PRH_METRICS[name](a, b[p], knn_k=kw["knn_k"]) for p in perms])
        entry = result["calibration"][name]
        assert entry["p_value"] == (1 + int(np.sum(null >= raw - 1e-12))) / 41, name
        assert entry["tau"] == pytest.approx(np.sort(np.append(null, raw))[int(np.ceil(0.9 * 41 - 1e-9)) - 1],
                                             abs=1e-9), name
    assert evaluate_run(run, n_fit=10, permutations=0)["calibration"] is None
    with pytest.raises(DataError, match="permutations must be an integer of at least 0, got -1"):
        evaluate_run(run, n_fit=10, permutations=-1)


def test_a_killed_run_resumes_to_the_same_parameters(data, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    train_real(_settings(data, steps=8, checkpoint_every=100), straight)
    train_real(_settings(data, steps=8, checkpoint_every=100), killed, stop_after=5)
    train_real(_settings(data, steps=8, checkpoint_every=100), killed, resume=True)
    from safetensors.torch import load_file

    a = load_file(straight / "checkpoint" / "model.safetensors")
    b = load_file(killed / "checkpoint" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_bad_input_is_one_line_and_leaves_no_run(data, tmp_path):
    runner = CliRunner()
    missing = runner.invoke(main, ["real", "train", "--data", str(tmp_path / "nowhere"), "--model", "tiny",
                                   "--out", str(tmp_path / "r1")])
    assert missing.exit_code == 2 and "no such dataset folder" in missing.output
    assert not (tmp_path / "r1").exists()
    short = tmp_path / "short.npy"
    np.save(short, np.zeros((5, 3)))
    run = tmp_path / "r2"
    train_real(_settings(data, steps=2), run)
    with pytest.raises(DataError, match="5 rows of image features, but the dataset has 60 images"):
        evaluate_run(run, features=short)
    no_tokenizer = runner.invoke(main, ["real", "train", "--data", str(data), "--model", "tiny", "--set",
                                        'tokenizer="/nonexistent/tok.json"', "--out", str(tmp_path / "r3")])
    assert no_tokenizer.exit_code == 2 and "/nonexistent/tok.json: no such file" in no_tokenizer.output
    weights = runner.invoke(main, ["real", "train", "--data", str(data), "--model", "tiny", "--set",
                                   f'weights="{tmp_path}"', "--out", str(tmp_path / "r4")])
    assert weights.exit_code == 2 and "not a Hugging Face checkpoint directory" in weights.output
    assert not (tmp_path / "r3").exists() and not (tmp_path / "r4").exists()


def test_a_diverging_run_stops_and_leaves_nothing_to_half_resume(data, tmp_path):
    from prhsim.real import TrainingDiverged

    run = tmp_path / "boom"
    with pytest.raises(TrainingDiverged, match=r"not finite at step 2 \(lr 1e\+12\); no checkpoint was written"):
        train_real(_settings(data, lr=1e12, steps=20, warmup=0.0), run)  # step 0's update blows up, seen at step 2
    assert not run.exists()  # failed before its first checkpoint: no run folder


def test_a_step_gone_non_finite_is_named_and_no_checkpoint_after_it_is_written(data, tmp_path, monkeypatch):
    """The check is read at logged and saved steps only: step 4 (0-based 3) goes bad, its checkpoint is never written."""
    from prhsim.real import TrainingDiverged
    from prhsim.real import _train

    objective = _train._objective

    def poisoned(model, batch, settings, step, device):
        loss = objective(model, batch, settings, step, device)
        return loss * float("nan") if step == 3 else loss

    monkeypatch.setattr(_train, "_objective", poisoned)
    run = tmp_path / "nan"
    with pytest.raises(TrainingDiverged, match="not finite at step 4 .* the checkpoint of step 2 is kept"):
        train_real(_settings(data, steps=8, checkpoint_every=2, log_every=10), run)
    assert json.loads((run / "checkpoint" / "state.json").read_text())["step"] == 2


def test_resume_logs_each_step_once_and_a_finished_run_stays_finished(data, tmp_path):
    run = tmp_path / "r"
    settings = _settings(data, steps=8, checkpoint_every=4, log_every=1)
    train_real(settings, run, stop_after=6)  # checkpoints at 4 and 6 ...
    with (run / "metrics.jsonl").open("a") as f:  # ... and a line logged after the last checkpoint
        f.write(json.dumps({"step": 7, "loss": 0.0, "lr": 0.0, "samples_per_s": 1.0, "tokens_per_s": 1.0}) + "\n")
    train_real(settings, run, resume=True)
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))
    summary = json.loads((run / "summary.json").read_text())
    again = train_real(settings, run, resume=True)
    assert again.steps == 8 and np.isfinite(again.loss) and json.loads((run / "summary.json").read_text()) == summary


def test_next_token_prediction_from_a_checkpoint_is_causal_and_evaluates(data, tmp_path):
    from transformers import BertConfig, BertModel

    from prhsim.real._text_models import TextEncoder

    tokenizer_run = tmp_path / "tok"
    train_real(_settings(data, steps=1), tokenizer_run)  # for its tokenizer
    vocab = json.loads((tokenizer_run / "model_config.json").read_text())["vocab_size"]
    weights = tmp_path / "bert"
    BertModel(BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(weights)
    encoder = TextEncoder("tiny", vocab, 16, causal=True, weights=weights)
    ids = torch.randint(5, vocab, (1, 6))
    changed = ids.clone()
    changed[0, -1] = 5 if int(ids[0, -1]) != 5 else 6
    with torch.no_grad():  # a later token never changes an earlier position's state
        a = encoder.backbone(input_ids=ids).last_hidden_state[0, :-1]
        b = encoder.backbone(input_ids=changed).last_hidden_state[0, :-1]
    assert torch.allclose(a, b, atol=1e-6)
    run = tmp_path / "ntp"
    train_real(_settings(data, learner="ntp", steps=2, weights=str(weights),
                         tokenizer=str(tokenizer_run / "tokenizer.json")), run)
    assert evaluate_run(run, n_fit=10)["n_test"] == 12


def test_the_command_line_trains_resumes_and_evaluates(data, tmp_path):
    runner = CliRunner()
    run = tmp_path / "cli"
    args = ["real", "train", "--data", str(data), "--views", "good", "--model", "tiny", "--steps", "4",
            "--batch-size", "8", "--set", "vocab_size=64", "--set", "proj_dim=16", "--set", "num_directions=16",
            "--set", 'device="cpu"', "--out", str(run), "-q"]
    assert runner.invoke(main, args).exit_code == 0
    again = runner.invoke(main, args)
    assert again.exit_code == 2 and "--resume" in again.output
    resumed = runner.invoke(main, ["real", "train", "--out", str(run), "--resume", "--steps", "6", "-q"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((run / "config.json").read_text())["steps"] == 6
    assert json.loads((run / "summary.json").read_text())["steps"] == 6
    changed = runner.invoke(main, ["real", "train", "--out", str(run), "--resume", "--views", "bad"])
    assert changed.exit_code == 2 and "not views" in changed.output
    table = runner.invoke(main, ["real", "eval", str(run), "--n-fit", "10"])
    assert table.exit_code == 0 and "R@1 text -> image" in table.output and "chance" in table.output
    assert "calibrated" in table.output and "over 1,000 permutations" in table.output
    assert "cannot reject" not in table.output
    few = runner.invoke(main, ["real", "eval", str(run), "--n-fit", "10", "--calibrate", "1"])
    assert few.exit_code == 0 and "K = 1 permutations cannot reject at alpha 0.05" in few.output.replace("\n", " ")


def test_a_registered_metric_is_in_real_eval(data, tmp_path):
    """A metric registered once (tests/cli/test_cli_metric_registry.py has the run, the bridge and prh score) is
    scored by real eval on the test split, printed, and calibrated (it fits nothing)."""
    from prhsim.metrics import PRH_METRICS, Metric, register_metric

    def mean_norm_gap(a, b, *, knn_k):
        return float(1.0 - abs(np.linalg.norm(a, axis=1).mean() - np.linalg.norm(b, axis=1).mean()))

    run = tmp_path / "run"
    train_real(_settings(data, steps=2, checkpoint_every=2), run)
    register_metric(Metric("toy_gap", mean_norm_gap, label="toy gap", reported=True))
    try:
        scored = CliRunner().invoke(main, ["real", "eval", str(run), "--n-fit", "10", "--calibrate", "20"])
    finally:
        del PRH_METRICS["toy_gap"]
    assert scored.exit_code == 0, scored.output
    assert "toy gap" in scored.output
    result = json.loads((run / "eval.json").read_text())
    assert set(result["metrics"]) == {"mutual_knn", "linear_cka", "retrieval_r1", "toy_gap"}
    assert "toy_gap" in result["calibration"] and "toy_gap" in result["chance"]  # a shuffled-rows baseline


def test_next_token_prediction_is_a_learner_and_not_a_view(data, tmp_path):
    """learner="ntp" (views are the JEPA learner's); views="ntp", an earlier spelling, is refused in one line naming
    learner='ntp', in the settings and as --views ntp."""
    new = _settings(data, learner="ntp")
    assert new.task == "ntp" and new.label == "next-token prediction"
    assert new.views_used is None and _settings(data).views_used == "good"
    with pytest.raises(ValueError, match="use learner='ntp'"):
        _settings(data, views="ntp")
    with pytest.raises(ValueError, match="applies to the jepa learner"):
        _settings(data, learner="ntp", views="bad")
    assert _settings(data, views="bad").task == "bad" and _settings(data, views="bad").label == "bad views"
    runner = CliRunner()
    base = ["real", "train", "--data", str(data), "--model", "tiny", "--steps", "2", "--batch-size", "8",
            "--set", "vocab_size=64", "--set", 'device="cpu"']
    refused = runner.invoke(main, [*base, "--views", "ntp", "--out", str(tmp_path / "old")])
    assert refused.exit_code == 2 and "use --learner ntp" in refused.output
    assert not (tmp_path / "old").exists()
    refused = runner.invoke(main, [*base, "--set", 'views="ntp"', "--out", str(tmp_path / "set")])
    assert refused.exit_code == 2 and "use learner='ntp'" in refused.output
    assert runner.invoke(main, [*base, "--learner", "ntp", "--out", str(tmp_path / "new")]).exit_code == 0
    summary = json.loads((tmp_path / "new" / "summary.json").read_text())
    assert summary["learner"] == "ntp" and summary["views"] is None
    table = runner.invoke(main, ["real", "eval", str(tmp_path / "new"), "--n-fit", "10"])
    assert table.exit_code == 0 and "(next-token prediction, tiny, step 2)" in table.output


def test_dinov2_features_of_every_image_in_order(data, tmp_path):
    from transformers import Dinov2Config, Dinov2Model

    from prhsim.io import load_features
    from prhsim.real._image_features import preprocess

    weights = tmp_path / "dino"
    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                             patch_size=14, image_size=28)).save_pretrained(weights)
    out = tmp_path / "feats.safetensors"
    runner = CliRunner()
    result = runner.invoke(main, ["real", "features", "--data", str(data), "--weights", str(weights), "--out", str(out),
                                  "--image-size", "28", "--batch-size", "16", "--device", "cpu", "-q"])
    assert result.exit_code == 0, result.output
    feats = load_features(out)[:, -1]
    assert feats.shape == (60, 32)
    model = Dinov2Model.from_pretrained(str(weights), local_files_only=True).eval()
    with torch.no_grad():  # image 7, alone, through the same preprocessing: the same row
        pixels = torch.from_numpy(preprocess(data / "images" / "000007.png", 28)[None])
        assert np.allclose(feats[7], model(pixel_values=pixels).pooler_output[0].numpy(), atol=1e-5)
    missing = runner.invoke(main, ["real", "features", "--data", str(data), "--weights", str(tmp_path / "none"),
                                   "--out", str(tmp_path / "f.npy")])
    assert missing.exit_code == 2 and "not a Hugging Face checkpoint directory" in missing.output
    assert not (tmp_path / "f.npy").exists()


def test_a_run_from_pretrained_weights_has_no_unused_pooler_and_resumes(data, tmp_path):
    """A JEPA encoder from a checkpoint is built as a random one is (no pooler, which no loss would train and which
    data-parallel training would refuse), so its run resumes from the model configuration it saved."""
    from transformers import BertConfig, BertModel

    tokenizer_run = tmp_path / "tok"
    train_real(_settings(data, steps=1), tokenizer_run)
    vocab = json.loads((tokenizer_run / "model_config.json").read_text())["vocab_size"]
    weights = tmp_path / "bert"
    BertModel(BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(weights)  # with a pooler, as BERT checkpoints have
    settings = _settings(data, steps=4, checkpoint_every=2, weights=str(weights),
                         tokenizer=str(tokenizer_run / "tokenizer.json"))
    run = tmp_path / "pretrained"
    train_real(settings, run, stop_after=2)
    assert not any("pooler" in key for key in json.loads((run / "checkpoint" / "state.json").read_text())["model"]
                   ["aliases"]) and train_real(settings, run, resume=True).steps == 4
    with pytest.raises(DataError, match="--stop-after 3 is not after the checkpoint's step 4"):
        train_real(_settings(data, steps=8, checkpoint_every=2, weights=str(weights),
                             tokenizer=str(tokenizer_run / "tokenizer.json")), run, resume=True, stop_after=3)


def test_a_failed_new_run_in_an_existing_folder_leaves_it_empty(data, tmp_path):
    from prhsim.real import TrainingDiverged

    run = tmp_path / "given"
    run.mkdir()
    with pytest.raises(TrainingDiverged):
        train_real(_settings(data, lr=1e12, steps=20, warmup=0.0, tensorboard=True), run)
    assert run.is_dir() and not any(run.iterdir())


def test_the_logged_real_token_share_is_the_batches_own(data, tmp_path):
    """Twin: the real tokens over the packed positions of the steps of each logged interval, from the batches."""
    from prhsim.real._train import batch_source, training_data
    from prhsim.real._tokenizer import load_tokenizer

    settings = _settings(data, steps=4, log_every=2, row_multiple=3)
    run = tmp_path / "share"
    train_real(settings, run)
    source = batch_source(settings, training_data(settings), load_tokenizer(run / "tokenizer.json"), start=0)
    shares = []
    for first in (0, 2):
        batches = [source[t] for t in (first, first + 1)]
        assert all(b[2].shape[0] % 3 == 0 for b in batches)  # rows in multiples of row_multiple
        shares.append(sum(int((b[2] >= 0).sum()) for b in batches) / sum(b[2].numel() for b in batches))
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["real_token_share"] for x in lines] == pytest.approx(shares, abs=1e-12)
    assert all(0 < s < 1 for s in shares)


def test_a_compiled_run_ends_where_the_eager_one_does(data, tmp_path):
    """compile="default" (inductor on this CPU) against eager, without dropout (their random streams differ)."""
    from safetensors.torch import load_file

    eager, compiled = tmp_path / "eager", tmp_path / "compiled"
    base = dict(steps=3, dropout=0.0, row_multiple=64, checkpoint_every=100)  # one row count: few compilations
    train_real(_settings(data, **base), eager)
    train_real(_settings(data, compile="default", **base), compiled)
    a, b = (load_file(run / "checkpoint" / "model.safetensors") for run in (eager, compiled))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-5, rtol=1e-4) for k in a)
    assert json.loads((compiled / "config.json").read_text())["compile"] == "default"


def test_a_checkpoint_of_padded_views_is_refused_on_resume(data, tmp_path):
    """Runs of the earlier padded layout drew other dropout masks: resuming them here would not be exact."""
    run = tmp_path / "old"
    train_real(_settings(data, steps=4), run, stop_after=2)
    state = run / "checkpoint" / "state.json"
    document = json.loads(state.read_text())
    assert document["extra"]["layout"] == "packed"
    del document["extra"]["layout"]
    state.write_text(json.dumps(document))
    with pytest.raises(DataError, match="padded every view instead of packing them"):
        train_real(_settings(data, steps=4), run, resume=True)


def test_a_seed_beyond_64_bits_is_refused_naming_the_key():
    """torch seeds are signed 64-bit integers: 2**70 used to fail in torch as "Overflow when unpacking long long"."""
    from pydantic import ValidationError

    from prhsim.real import RealTrainSettings

    with pytest.raises(ValidationError, match=r"seed\n  Input should be less than or equal to 9223372036854775807"):
        RealTrainSettings(data="x", seed=2**70)


def test_a_run_records_its_paths_resolved_so_eval_and_resume_work_from_anywhere(data, tmp_path, monkeypatch):
    """A dataset typed as a relative path used to be recorded as typed: eval and --resume from another folder then
    failed with "no such dataset folder"."""
    runner = CliRunner()
    monkeypatch.chdir(data.parent)
    run = tmp_path / "run"
    res = runner.invoke(main, ["real", "train", "--data", data.name, "--model", "tiny", "--steps", "2", "--batch-size",
                               "8", "--out", str(run), "-q"])
    assert res.exit_code == 0, res.output
    assert json.loads((run / "config.json").read_text())["data"] == str(data.resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert runner.invoke(main, ["real", "eval", str(run), "--n-fit", "5", "--calibrate", "0"]).exit_code == 0
    resumed = runner.invoke(main, ["real", "train", "--out", str(run), "--resume", "--steps", "4", "-q"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((run / "summary.json").read_text())["steps"] == 4


def test_a_resume_that_does_not_proceed_leaves_the_run_folder_as_it_was(data, tmp_path):
    """--resume --steps below the checkpoint is refused, and a truncated checkpoint is an error: in both, config.json
    keeps its step count (it used to be rewritten before the checkpoint was read)."""
    runner = CliRunner()
    run = tmp_path / "run"
    args = ["real", "train", "--data", str(data), "--model", "tiny", "--batch-size", "8", "--out", str(run), "-q"]
    assert runner.invoke(main, [*args, "--steps", "4"]).exit_code == 0
    before = (run / "config.json").read_text()
    fewer = runner.invoke(main, ["real", "train", "--out", str(run), "--resume", "--steps", "2", "-q"])
    assert fewer.exit_code == 2 and "the run is at step 4; --steps 2 would end before it" in fewer.output
    assert (run / "config.json").read_text() == before
    same = runner.invoke(main, ["real", "train", "--out", str(run), "--resume", "--steps", "4", "-q"])
    assert same.exit_code == 0 and (run / "config.json").read_text() == before
    for checkpoint in run.rglob("*.safetensors"):
        checkpoint.write_bytes(checkpoint.read_bytes()[:100])  # truncated
    broken = runner.invoke(main, ["real", "train", "--out", str(run), "--resume", "--steps", "8", "-q"])
    assert broken.exit_code != 0 and (run / "config.json").read_text() == before, broken.output


def test_an_unusable_out_or_a_damaged_run_folder_is_one_line(data, tmp_path):
    """These used to be tracebacks (NotADirectoryError, JSONDecodeError)."""
    runner = CliRunner()
    (tmp_path / "afile").write_text("x")
    args = ["real", "train", "--data", str(data), "--model", "tiny", "--steps", "2", "--batch-size", "8", "-q"]
    for out, message in ((tmp_path / "afile", "exists and is not a folder"),
                         (tmp_path / "afile" / "run", "afile is a file, not a folder")):
        res = runner.invoke(main, [*args, "--out", str(out)])
        assert res.exit_code == 2 and message in res.output and len(res.output.strip().splitlines()) == 1, res.output
    run = tmp_path / "run"
    assert runner.invoke(main, [*args, "--out", str(run)]).exit_code == 0
    (run / "config.json").write_text("{bad")
    res = runner.invoke(main, ["real", "train", "--out", str(run), "--resume", "--steps", "4", "-q"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "config.json cannot be read" in res.output and "the run folder is damaged" in res.output


def test_eval_that_cannot_write_its_file_is_one_line_and_not_a_success(data, tmp_path, monkeypatch):
    runner = CliRunner()
    run = tmp_path / "run"
    args = ["real", "train", "--data", str(data), "--model", "tiny", "--steps", "2", "--batch-size", "8", "-q"]
    assert runner.invoke(main, [*args, "--out", str(run)]).exit_code == 0
    import os

    real_replace = os.replace

    def read_only(src, dst):
        if str(dst).endswith("eval.json"):
            raise OSError(30, "Read-only file system")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", read_only)
    res = runner.invoke(main, ["real", "eval", str(run), "--n-fit", "5", "--calibrate", "0"])
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [f"Error: {run}: eval.json cannot be written: Read-only file system"]
    assert not (run / "eval.json").exists() and not list(run.glob(".eval.json.partial*"))


def test_a_run_from_a_checkpoint_resumes_to_the_run_it_would_have_been(data, tmp_path):
    """A run started from a checkpoint (a tiny random BERT saved with save_pretrained, its tokenizer with BERT's
    [CLS] … [SEP]), killed and resumed, ends with the parameters, optimiser state and metric lines of the
    uninterrupted run."""
    from safetensors.torch import load_file
    from tokenizers import processors
    from transformers import BertConfig, BertModel

    from prhsim.real import dataset_json, read_captions
    from prhsim.real._tokenizer import train_wordpiece

    weights = tmp_path / "bert"
    tokenizer = train_wordpiece((t for r in read_captions(dataset_json(data)).records for t in r.texts), 64)
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", tokenizer.token_to_id("[SEP]")),
                                                         ("[CLS]", tokenizer.token_to_id("[CLS]")))
    torch.manual_seed(2)
    BertModel(BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=64)).save_pretrained(weights)
    tokenizer.save(str(weights / "tokenizer.json"))
    settings = _settings(data, steps=8, checkpoint_every=100, weights=str(weights))
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    train_real(settings, straight)
    train_real(settings, killed, stop_after=5)
    assert json.loads((killed / "checkpoint" / "state.json").read_text())["extra"]["specials"] == [
        [tokenizer.token_to_id("[CLS]")], [tokenizer.token_to_id("[SEP]")]]
    train_real(settings, killed, resume=True)
    for name in ("model.safetensors", "optimizer.safetensors"):
        a, b = (load_file(run / "checkpoint" / name) for run in (straight, killed))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    lines = [[json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()] for run in (straight, killed)]
    keep = ("step", "loss", "lr", "model")  # the throughputs and token share cover the steps since the last line or start
    assert [[{k: x[k] for k in keep} for x in run] for run in lines] == [[{k: x[k] for k in keep}
                                                                          for x in lines[0]]] * 2
    assert json.loads((straight / "summary.json").read_text()) == json.loads((killed / "summary.json").read_text())



def test_a_checkpoint_fed_without_the_special_tokens_is_refused_on_resume(data, tmp_path):
    """A run written before views carried the tokenizer's special tokens read other inputs: resuming it with a
    tokenizer that has them would not be exact; a tokenizer without them resumes as before."""
    from tokenizers import processors

    from prhsim.real._tokenizer import load_tokenizer

    plain = tmp_path / "plain"
    train_real(_settings(data, steps=4), plain, stop_after=2)
    bert = tmp_path / "bert-tokenizer.json"
    tokenizer = load_tokenizer(plain / "tokenizer.json")
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", tokenizer.token_to_id("[SEP]")),
                                                         ("[CLS]", tokenizer.token_to_id("[CLS]")))
    tokenizer.save(str(bert))
    run = tmp_path / "old"
    train_real(_settings(data, steps=4, tokenizer=str(bert)), run, stop_after=2)
    for folder in (plain, run):
        state = folder / "checkpoint" / "state.json"
        document = json.loads(state.read_text())
        del document["extra"]["specials"]
        state.write_text(json.dumps(document))
    with pytest.raises(DataError, match="fed the views without the tokenizer's special tokens"):
        train_real(_settings(data, steps=4, tokenizer=str(bert)), run, resume=True)
    assert train_real(_settings(data, steps=4), plain, resume=True).steps == 4


def test_sigreg_over_pooled_views_is_an_option_of_the_run(data, tmp_path, monkeypatch):
    """``sigreg_views="pooled"`` reaches the loss (one SIGReg of all views' rows) and trains; the default is per view."""
    import prhsim.objectives as objectives

    seen = []
    real = objectives.lejepa_loss

    def watched(*args, **kwargs):
        seen.append(kwargs.get("sigreg_views"))
        return real(*args, **kwargs)

    monkeypatch.setattr(objectives, "lejepa_loss", watched)
    assert RealTrainSettings(data=str(data)).sigreg_views == "per_view"
    summary = train_real(_settings(data, steps=2, sigreg_views="pooled", **real_task("good")), tmp_path / "pooled")
    assert np.isfinite(summary.loss) and seen and set(seen) == {"pooled"}
