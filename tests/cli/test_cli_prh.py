"""``prhsim prh``: the PRH protocol on feature files, every format read alike, every bad file one line."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.io import FeatureFileError, load_features

N, L, D = 120, 3, 12


def _stacks(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """B's layer 1 is A's layer 2 under a random rotation; every other layer is independent noise."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((N, L, D)).astype(np.float32)
    b = rng.standard_normal((N, 2, D)).astype(np.float32)
    Q, _ = np.linalg.qr(rng.standard_normal((D, D)))
    b[:, 1] = a[:, 2] @ Q.astype(np.float32)
    return a, b


def _feature_folder(tmp_path, a_name: str, b_name: str, noise_name: str, noise_shape: tuple[int, int], seed: int):
    """A folder of .npy feature files: the two stacks of :func:`_stacks` and one independent noise stack."""
    a, b = _stacks()
    folder = tmp_path / "feats"
    folder.mkdir()
    np.save(folder / a_name, a)
    np.save(folder / b_name, b)
    np.save(folder / noise_name, np.random.default_rng(seed).standard_normal((N, *noise_shape)).astype(np.float32))
    return folder, a, b


def _save_all(tmp_path, x: np.ndarray) -> dict[str, object]:
    torch = pytest.importorskip("torch")
    from safetensors.numpy import save_file

    paths = {"npy": tmp_path / "x.npy", "safetensors": tmp_path / "x.safetensors", "pt-dict": tmp_path / "x.pt",
             "pt-tensor": tmp_path / "t.pth"}
    np.save(paths["npy"], x)
    save_file({"feats": x}, str(paths["safetensors"]))
    torch.save({"feats": torch.from_numpy(x.copy()).to(torch.bfloat16), "mask": torch.ones(N)}, paths["pt-dict"])
    torch.save(torch.from_numpy(x.copy()), paths["pt-tensor"])
    return paths


def test_every_format_reads_the_same_stack(tmp_path):
    torch = pytest.importorskip("torch")
    a, _ = _stacks()
    bf16 = torch.from_numpy(a.copy()).to(torch.bfloat16).float().numpy()  # the .pt dict is saved in bf16
    for name, path in _save_all(tmp_path, a).items():
        got = load_features(path)
        assert got.shape == (N, L, D) and got.dtype == np.float32, name
        np.testing.assert_allclose(got, bf16 if name == "pt-dict" else a, rtol=0, atol=0, err_msg=name)
    np.save(tmp_path / "flat.npy", a[:, 0])
    assert load_features(tmp_path / "flat.npy").shape == (N, 1, D)  # one layer


def test_score_finds_the_rotated_layer_pair(tmp_path):
    a, b = _stacks()
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    result = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                                       "--metric", "linear_cka", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    # the protocol's clip at the 95th percentile of |x| does not commute with the rotation: 0.9935, not 1
    assert doc["layer_pair"] == [2, 1] and 0.99 < doc["best"] < 1.0
    assert doc["best"] == max(max(row) for row in doc["table"])
    assert np.shape(doc["table"]) == (L, 2) and doc["chance"] is None and doc["n"] == N
    text = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.npy")])
    assert text.exit_code == 0, text.output
    assert "(chance 0.08403) at layers 2 (A) x 1 (B)" in text.output and text.output.startswith("mutual_knn = 0.9")


def test_table_writes_csv_json_and_heatmap(tmp_path):
    folder, a, b = _feature_folder(tmp_path, "llm-a.npy", "vit-b.npy", "vit-c.npy", (1, 7), seed=5)
    (folder / "notes.txt").write_text("not a feature file")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["prh", "table", str(folder), "--rows", "llm-*", "--cols", "vit-*",
                                       "--metric", "linear_cka", "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["rows"] == ["llm-a.npy"] and doc["cols"] == ["vit-b.npy", "vit-c.npy"]
    assert 0.99 < doc["scores"][0][0] < 1.0 and doc["layer_pairs"][0][0] == [2, 1]
    assert doc["scores"][0][1] < 0.5  # independent noise
    rows = list(csv.reader((out / "table.csv").read_text().splitlines()))
    assert rows[0] == ["", "vit-b.npy", "vit-c.npy"] and rows[1][0] == "llm-a.npy"
    assert float(rows[1][1]) == pytest.approx(doc["scores"][0][0], abs=1e-6)
    assert (out / "table.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("case, message", [
    ("mismatch", "has 120 samples and"),
    ("nan", "features contain NaN or inf"),
    ("shape", "features must have shape (N, D) or (N, L, D), got (120,)"),
    ("suffix", "unknown feature format '.txt'"),
    ("garbage", "cannot be read"),
    ("no-feats", "no tensor named 'feats' (tensors: x, y)"),
    ("missing", "no such file"),
])
def test_bad_feature_files_are_one_line_errors_naming_the_file(tmp_path, case, message):
    a, _ = _stacks()
    good = tmp_path / "good.npy"
    np.save(good, a)
    bad = tmp_path / "bad.npy"
    if case == "mismatch":
        np.save(bad, a[:60])
    elif case == "nan":
        a[3, 1, 2] = np.nan
        np.save(bad, a)
    elif case == "shape":
        np.save(bad, np.ones(N))
    elif case == "suffix":
        bad = tmp_path / "bad.txt"
        bad.write_text("1 2 3")
    elif case == "garbage":
        pytest.importorskip("torch")  # without it a .pt file is refused for that (it needs torch)
        bad = tmp_path / "bad.pt"
        bad.write_bytes(b"\x00not a torch file")
    elif case == "no-feats":
        pytest.importorskip("safetensors")
        from safetensors.numpy import save_file

        bad = tmp_path / "bad.safetensors"
        save_file({"x": np.ones((4, 2), np.float32), "y": np.ones((4, 2), np.float32)}, str(bad))
    elif case == "missing":
        bad = tmp_path / "absent.npy"
    result = CliRunner().invoke(main, ["prh", "score", str(good), str(bad)])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert str(bad) in result.output or case == "mismatch"
    if case != "mismatch":
        with pytest.raises(FeatureFileError):
            load_features(bad)


def test_without_the_clip_a_rotated_layer_scores_one_and_bf16_safetensors_read(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    from prhsim.metrics import PRH_METRICS  # noqa: F401 - the registry is public

    a, b = _stacks()
    np.save(tmp_path / "a.npy", a)
    save_file({"feats": torch.from_numpy(b.copy())}, str(tmp_path / "b.safetensors"))
    result = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.safetensors"),
                                       "--metric", "linear_cka", "--no-clip", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["best"] == pytest.approx(1.0, abs=1e-5) and doc["clip"] is None and doc["layer_pair"] == [2, 1]
    save_file({"feats": torch.from_numpy(a.copy()).to(torch.bfloat16)}, str(tmp_path / "half.safetensors"))
    half = load_features(tmp_path / "half.safetensors")
    assert half.dtype == np.float32 and half.shape == (N, L, D)
    np.testing.assert_allclose(half, torch.from_numpy(a.copy()).to(torch.bfloat16).float().numpy(), rtol=0, atol=0)


def test_knn_k_names_the_neighbours_in_the_option_and_the_results(tmp_path):
    """--knn-k sets the neighbours and results say knn_k; --k, its old spelling, is gone; the chance level follows."""
    a, b = _stacks()
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    args = ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--json"]
    new = CliRunner().invoke(main, [*args, "--knn-k", "5"])
    assert new.exit_code == 0, new.output
    assert json.loads(new.stdout)["knn_k"] == 5 and json.loads(new.stdout)["chance"] == 5 / (N - 1)
    assert "k" not in json.loads(new.stdout)
    old = CliRunner().invoke(main, [*args, "--k", "5"])
    assert old.exit_code == 2 and "Did you mean '--knn-k'?" in old.output
    bad = CliRunner().invoke(main, [*args, "--knn-k", str(N)])
    assert bad.exit_code == 2 and f"--knn-k must be an integer with 1 <= --knn-k < N = {N}, got {N}" in bad.output


def test_the_metric_choices_are_the_registry_s():
    from prhsim.metrics import PRH_METRICS

    result = CliRunner().invoke(main, ["prh", "score", "--help"])
    assert all(name in result.output for name in PRH_METRICS)
    assert {n for n, m in PRH_METRICS.items() if m.neighbours} == {"mutual_knn", "cycle_knn", "cknna", "cknna_agnostic",
                                                                   "cknna_biased"}
    assert PRH_METRICS["mutual_knn"].chance(101, 10) == 0.1 and PRH_METRICS["linear_cka"].chance is None


@pytest.mark.parametrize("metric", ["mutual_knn", "linear_cka"])
def test_the_protocol_s_calibration_is_the_null_of_the_protocol_on_permuted_rows(metric):
    """The twin: for the same permutations, each null score is the whole protocol (clip, normalise, every layer
    pair, max) rerun on B with its rows permuted; p-value and tau from their definitions."""
    import math

    from prhsim.metrics import calibrated_protocol, prh_protocol

    a, b = (x.astype(np.float64) for x in _stacks(1))  # calibrate's CKA computes in float64
    perms = np.stack([np.random.default_rng(s).permutation(N) for s in range(30)])
    result = calibrated_protocol(a, b, metric=metric, permutations=perms, alpha=0.1)
    cal = result.calibration
    twin = np.array([prh_protocol(a, b[p], metric=metric).best for p in perms])
    assert cal.raw == pytest.approx(result.best, abs=1e-12)
    np.testing.assert_allclose(cal.null, twin, rtol=0, atol=1e-12 if metric == "linear_cka" else 0)
    assert cal.p_value == (1 + np.sum(twin >= result.best)) / 31
    tau = np.sort(np.append(twin, result.best))[math.ceil((1 - 0.1) * 31) - 1]
    assert cal.tau == pytest.approx(tau, abs=1e-12)
    assert cal.calibrated == pytest.approx(min(max((result.best - tau) / (1 - tau), 0), 1), abs=1e-12)


def test_score_calibrate_reports_the_null_beside_the_raw_score(tmp_path):
    a, b = _stacks()
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    args = ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--calibrate", "99"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    cal = doc["calibration"]
    assert cal["permutations"] == 99 and cal["alpha"] == 0.05 and cal["aggregate"] == "max"
    assert cal["p_value"] == 0.01 and 0 < cal["tau"] < doc["best"] and cal["calibrated"] > 0.8
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0 and "calibrated 0." in text.output and "over 99 permutations" in text.output
    bad = CliRunner().invoke(main, [*args[:-1], "0"])
    assert bad.exit_code == 2 and "--calibrate" in bad.output


def test_table_calibrate_shows_calibrated_scores_and_marks_what_holm_does_not_keep(tmp_path):
    """rows are A, columns B; the rotated pair is significant, an independent pair is not (Holm over the cells)."""
    from prhsim.metrics import holm

    folder, _, _ = _feature_folder(tmp_path, "a.npy", "b.npy", "noise.npy", (2, D), seed=9)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["prh", "table", str(folder), "--rows", "a.npy", "--cols", "*.npy",
                                       "--metric", "linear_cka", "--calibrate", "199", "--out", str(out),
                                       "--no-figures"])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    cal = doc["calibration"]
    assert doc["rows"] == ["a.npy"] and doc["cols"] == ["a.npy", "b.npy", "noise.npy"]
    assert "rows[i] is A" in doc["orientation"]
    assert cal["correction"] == "holm" and cal["permutations"] == 199
    assert cal["significant"] == holm(np.array(cal["p_values"]), 0.05).tolist()
    assert cal["significant"][0][1] and not cal["significant"][0][2]  # the rotated pair; an independent one
    assert cal["calibrated"][0][2] == 0.0 and cal["calibrated"][0][1] > 0.8
    assert "n.s." in result.output and "Holm's correction for the 3 cells" in result.output
    few = CliRunner().invoke(main, ["prh", "table", str(folder), "--rows", "a.npy", "--metric", "linear_cka",
                                    "--calibrate", "49", "--out", str(tmp_path / "few"), "--no-figures"])
    assert few.exit_code == 0 and "use K >= 59 (--calibrate)" in few.output.replace("\n", " ")


def test_holm_is_the_step_down_rule():
    from prhsim.metrics import holm

    p = np.array([[0.001, 0.03], [0.013, 0.5]])
    # sorted: 0.001 <= .05/4, 0.013 <= .05/3, then 0.03 > .05/2: stop there
    assert holm(p, 0.05).tolist() == [[True, False], [True, False]]
    assert holm([0.04], 0.05).tolist() == [True]
    with pytest.raises(ValueError, match="p_values"):
        holm([1.5])


def test_a_per_layer_list_file_reads_as_its_stack(tmp_path):
    torch = pytest.importorskip("torch")
    a, _ = _stacks()
    torch.save({"feats": [torch.from_numpy(a[:, i].copy()) for i in range(L)]}, tmp_path / "list.pt")
    np.testing.assert_array_equal(load_features(tmp_path / "list.pt"), a)
    torch.save({"feats": [torch.zeros(N, 3), torch.zeros(N, 4)]}, tmp_path / "ragged.pt")
    with pytest.raises(FeatureFileError, match=r"ragged.pt: the per-layer tensors must all be \(N, D\) of one shape"):
        load_features(tmp_path / "ragged.pt")


def test_a_per_layer_list_file_keeps_its_layers_and_their_widths_when_asked(tmp_path):
    torch = pytest.importorskip("torch")
    a, _ = _stacks()
    torch.save({"feats": [torch.from_numpy(a[:, 0].copy()), torch.from_numpy(a[:, 1, :5].copy()).to(torch.bfloat16)]},
               tmp_path / "ragged.pt")
    layers = load_features(tmp_path / "ragged.pt", layers=True)
    assert [x.shape for x in layers] == [(N, D), (N, 5)] and all(x.dtype == np.float32 for x in layers)
    np.testing.assert_array_equal(layers[0], a[:, 0])
    with pytest.raises(FeatureFileError, match="of one shape to stack"):  # without layers=True a list is stacked
        load_features(tmp_path / "ragged.pt")
    np.save(tmp_path / "stack.npy", a)
    assert load_features(tmp_path / "stack.npy", layers=True).shape == (N, L, D)  # a stack stays a stack
    torch.save({"feats": [torch.zeros(N, 3), torch.zeros(N + 1, 3)]}, tmp_path / "uneven.pt")
    with pytest.raises(FeatureFileError, match="uneven.pt: the per-layer tensors must all have one number of samples"):
        load_features(tmp_path / "uneven.pt", layers=True)
    torch.save({"feats": [torch.zeros(N, 3), torch.zeros(N, 3, 2)]}, tmp_path / "deep.pt")
    with pytest.raises(FeatureFileError, match=r"deep.pt: 'feats' as a list must hold one \(N, D\) tensor per layer"):
        load_features(tmp_path / "deep.pt", layers=True)


def test_score_reads_a_list_file_layer_by_layer_and_reports_the_convention(tmp_path):
    torch = pytest.importorskip("torch")
    from prhsim.metrics import prh_protocol

    a, b = _stacks()
    torch.save({"feats": [torch.from_numpy(a[:, 0].copy()), torch.from_numpy(a[:, 2, :7].copy())]}, tmp_path / "a.pt")
    np.save(tmp_path / "b.npy", b)
    for convention in ("prhsim", "prh"):
        res = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "a.pt"), str(tmp_path / "b.npy"), "--metric",
                                        "unbiased_cka", "--convention", convention, "--json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.output)
        expected = prh_protocol([a[:, 0], a[:, 2, :7]], b, metric="unbiased_cka", convention=convention)
        assert doc["convention"] == convention and doc["layers_a"] == 2 and doc["layers_b"] == 2
        assert doc["best"] == pytest.approx(expected.best, abs=1e-12)
        assert doc["orientation"] == "table[i][j] = metric(layer i of a, layer j of b)"
    res = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "a.pt"), str(tmp_path / "b.npy"),
                                    "--convention", "huh"])
    assert res.exit_code == 2 and "'huh' is not one of 'prhsim', 'prh'" in res.output


def test_table_records_its_convention(tmp_path):
    folder, _, _ = _feature_folder(tmp_path, "a.npy", "b.npy", "c.npy", (2, D), seed=5)
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["prh", "table", str(folder), "--metric", "cknna", "--convention", "prh",
                                    "--out", str(out), "--no-figures", "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["convention"] == "prh"


def test_features_near_the_top_of_float32_score_without_an_overflow(tmp_path):
    """Rows of size 1e37 used to overflow in the normalisation (a RuntimeWarning, then "row 0 of a is zero")."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(50, 8)).astype(np.float32)
    np.save(tmp_path / "big.npy", a * np.float32(1e37))
    np.save(tmp_path / "small.npy", a)
    for metric in ("mutual_knn", "linear_cka"):
        res = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "big.npy"), str(tmp_path / "small.npy"),
                                        "--metric", metric, "--no-clip", "--json"])
        assert res.exit_code == 0 and "Warning" not in res.output, res.output
        assert json.loads(res.stdout)["best"] == pytest.approx(1.0, abs=1e-6)  # the same rows, scaled


def test_score_leaves_a_constant_layer_out_with_a_note_and_null_in_the_json(tmp_path):
    """A class token before the first block is the same for every input: its layer is left out (it ended the command
    with the metric's refusal, and two constant files scored mutual k-NN 1.0)."""
    a, b = _stacks(3)
    a[:, 0, :] = 1.0
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    result = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.npy")])
    assert result.exit_code == 0, result.output
    assert "note: left out layer 0 of A: zero variance (all rows equal), so no metric of it is defined" in result.output
    doc = json.loads(CliRunner().invoke(main, ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                                               "--json"]).output)
    assert doc["constant_layers"] == {"a": [0], "b": []}
    assert doc["table"][0] == [None] * b.shape[1] and None not in doc["table"][1]
    np.save(tmp_path / "c.npy", np.ones((a.shape[0], 5), dtype=np.float32))
    refused = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "c.npy"), str(tmp_path / "c.npy")])
    assert refused.exit_code == 2
    assert "every layer has zero variance (all rows equal)" in refused.output.strip().splitlines()[-1]


def test_a_calibration_that_no_allowed_k_can_reject_says_to_raise_alpha(tmp_path):
    a, b = _stacks(4)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    result = CliRunner().invoke(main, ["prh", "score", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                                       "--calibrate", "10", "--alpha", "1e-9"])
    assert result.exit_code == 0, result.output
    assert ("it needs K >= 999,999,999, above the most allowed (1,000,000): raise alpha"
            in result.output.replace("\n", " "))
