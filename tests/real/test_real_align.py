"""``prhsim real align --unpaired A B``: a map between two feature files found without pairs, scored only when pairs or
labels are given; every problem a one-line error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from prhsim.cli import main
from prhsim.real._align import align_unpaired, pca_whitening


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A: 300 rows of skewed 3-d features in 6 dimensions; B: the same rows rotated into 9 dimensions (another width)."""
    folder = tmp_path_factory.mktemp("align")
    gen = np.random.default_rng(0)
    z = np.minimum(gen.exponential(size=(300, 3)), 4.0) * [1.0, 0.7, 0.4]
    a = z @ np.linalg.qr(gen.standard_normal((6, 6)))[0][:3] + 0.5
    b = z @ np.linalg.qr(gen.standard_normal((9, 9)))[0][:3] - 2.0
    np.save(folder / "a.npy", a.astype(np.float32))
    np.save(folder / "b.npy", b.astype(np.float32))
    # positive pairs of each encoder: feature i of the second view keeps the first's w.p. c_i, else another row's,
    # so in whitened coordinates E[y(z) y(z')ᵀ] = diag(c): a simple spectrum
    keep = np.array([0.8, 0.5, 0.2])
    for name, basis, shift in (("a", a, 0.5), ("b", b, -2.0)):
        first, other = gen.integers(300, size=(2, 20000))
        second = np.where(gen.random((20000, 3)) < keep, z[first], z[other])
        embed = np.linalg.lstsq(z, basis - shift, rcond=None)[0]
        np.save(folder / f"pairs_{name}.npy", np.stack([z[first] @ embed + shift, second @ embed + shift], axis=1))
    labels = np.arange(300) % 30
    np.save(folder / "la.npy", labels)
    np.save(folder / "lb.npy", labels)
    return folder


def test_pca_whitening_gives_whitened_principal_components():
    x = np.random.default_rng(1).standard_normal((500, 5)) @ np.diag([3.0, 2.0, 1.0, 0.5, 0.1])
    mean, proj = pca_whitening(x, 3, "x")
    y = (x - mean) @ proj
    assert np.allclose(np.cov(y, rowvar=False), np.eye(3), atol=1e-10)
    top = np.linalg.svd(x - mean, full_matrices=False)[2][:3]  # twin: the top right singular vectors
    assert np.allclose(np.abs(top @ (proj / np.linalg.norm(proj, axis=0))), np.eye(3), atol=1e-8)


def test_the_map_found_without_pairs_retrieves_the_paired_rows(files, tmp_path):
    out = tmp_path / "map.npz"
    report = align_unpaired(files / "a.npy", files / "b.npy", dim=3, paired=True, labels_a=files / "la.npy",
                            labels_b=files / "lb.npy", out=out)
    assert report["r1_a_to_b"] > 0.95 and report["r1_b_to_a"] > 0.95 and report["chance_r1"] == pytest.approx(1 / 300)
    assert report["top1_accuracy"] > 0.95
    saved = np.load(out)
    a, b = np.load(files / "a.npy").astype(np.float64), np.load(files / "b.npy").astype(np.float64)
    ya, yb = (a - saved["mean_a"]) @ saved["proj_a"], (b - saved["mean_b"]) @ saved["proj_b"]
    assert np.abs(ya @ saved["map"] + saved["offset"] - yb).max() < 1e-2  # the map aligns the rows it never saw paired
    assert np.allclose(saved["rotation"] @ saved["rotation"].T, np.eye(3), atol=1e-10)


def test_the_command_prints_the_scores_and_every_problem_is_one_line(files, tmp_path):
    runner = CliRunner()
    (tmp_path / "kept.npz").write_bytes(b"keep me")  # --out never replaces a file without --overwrite
    (tmp_path / "plain").write_text("")
    ok = runner.invoke(main, ["real", "align", "--unpaired", str(files / "a.npy"), str(files / "b.npy"), "--dim", "3",
                              "--paired", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["r1_a_to_b"] > 0.95
    table = runner.invoke(main, ["real", "align", "--unpaired", str(files / "a.npy"), str(files / "b.npy"),
                                 "--dim", "3", "--labels-a", str(files / "la.npy"), "--labels-b", str(files / "lb.npy")])
    assert table.exit_code == 0 and "chamfer distance" in table.output and "label accuracy top-1" in table.output
    for args, message in (
        (["--dim", "7"], "--dim must be an integer from 1 to 6"),
        (["--dim", "3", "--method", "spectral"], "needs each encoder's own positive pairs"),
        (["--dim", "3", "--labels-a", str(files / "la.npy")], "give both --labels-a and --labels-b"),
        (["--dim", "3", "--out", str(tmp_path / "map.txt")], "the map is written as .npz"),
        (["--dim", "3", "--out", str(tmp_path / "kept.npz")], "kept.npz exists; pass --overwrite to replace it"),
        (["--dim", "3", "--out", str(tmp_path / "plain" / "m.npz")], "plain is a file, not a folder"),
    ):
        bad = runner.invoke(main, ["real", "align", "--unpaired", str(files / "a.npy"), str(files / "b.npy"), *args])
        assert bad.exit_code == 2 and message in bad.output and len(bad.output.strip().splitlines()) == 1, bad.output
    assert (tmp_path / "kept.npz").read_bytes() == b"keep me"
    np.save(tmp_path / "float_classes.npy", (np.arange(300) % 30).astype(float))  # 3.0 is class 3
    np.save(tmp_path / "fractions.npy", np.linspace(0, 1, 300))
    labelled = ["real", "align", "--unpaired", str(files / "a.npy"), str(files / "b.npy"), "--dim", "3",
                "--labels-a", str(files / "la.npy"), "--labels-b"]
    same = runner.invoke(main, [*labelled, str(tmp_path / "float_classes.npy")])
    assert same.exit_code == 0 and same.stdout == table.stdout  # the report; stderr has the progress, with its times
    bad = runner.invoke(main, [*labelled, str(tmp_path / "fractions.npy")])
    assert bad.exit_code == 2 and "labels must be integer classes, got float64 values such as" in bad.output
    replaced = runner.invoke(main, ["real", "align", "--unpaired", str(files / "a.npy"), str(files / "b.npy"), "--dim",
                                    "3", "--out", str(tmp_path / "kept.npz"), "--overwrite"])
    assert replaced.exit_code == 0 and "map" in np.load(tmp_path / "kept.npz").files
    missing = runner.invoke(main, ["real", "align", "--unpaired", str(tmp_path / "none.npy"), str(files / "b.npy")])
    assert missing.exit_code == 2 and "none.npy" in missing.output


def test_the_spectral_method_reads_each_encoders_own_pairs(files):
    report = align_unpaired(files / "a.npy", files / "b.npy", dim=3, method="spectral", pairs_a=files / "pairs_a.npy",
                            pairs_b=files / "pairs_b.npy", paired=True)
    assert report["identifiable"] and report["r1_a_to_b"] > 0.5 and report["ambiguities"] == []
    with pytest.raises(Exception, match=r"must hold \(P, 2, 6\) features of positive pairs"):
        align_unpaired(files / "a.npy", files / "b.npy", dim=3, method="spectral", pairs_a=files / "pairs_b.npy",
                       pairs_b=files / "pairs_b.npy")


def test_the_search_says_each_of_iterative_match_s_starts():
    """Each start is said as iterative_match ends it (progress callback): the same map as without, every random and
    moment start counted, repeated rows (merged by it) included."""
    from prhsim.metrics import iterative_match
    from prhsim.real._align import _iterative_match

    gen = np.random.default_rng(3)
    z = np.minimum(gen.exponential(size=(120, 4)), 4.0)
    a = np.vstack([z, z[:10]]) + 0.01 * gen.standard_normal((130, 4))
    a[120:] = a[:10]
    b = z @ np.linalg.qr(gen.standard_normal((4, 4)))[0]
    said = []
    mine = _iterative_match(a, b, 5, np.random.default_rng(7), lambda message, done=None, total=None:
                            said.append((done, total)))
    theirs = iterative_match(a, b, starts=5, rng=np.random.default_rng(7))
    for field in ("map", "criteria", "iterations", "converged"):
        assert np.array_equal(getattr(mine, field), getattr(theirs, field)), field
    assert (mine.chosen, mine.criterion, mine.method) == (theirs.chosen, theirs.criterion, theirs.method)
    assert said == [(done, 5 + 4 + 1) for done in range(11)]  # 5 starts and the k + 1 moment starts, each said


def test_the_search_says_each_start_after_a_note_when_it_may_take_minutes(files, monkeypatch):
    """It printed nothing until it finished (33 s at 1,000 random rows a side, minutes at 2,000)."""
    import prhsim.real._align as align

    args = ["real", "align", "--unpaired", str(files / "a.npy"), str(files / "b.npy"), "--dim", "3", "--starts", "4"]
    short = CliRunner().invoke(main, args)
    assert short.exit_code == 0 and "may take" not in short.stderr, short.output
    assert [line.split("] ")[1].split(":")[0] for line in short.stderr.splitlines()] == \
        ["iterative search"] + [f"start {i}/8" for i in range(1, 9)]
    distances = 8 * 51 * 2 * 300 ** 2 * 3  # 4 + 3 + 1 starts of 50 rounds and the criterion, both ways, 3 coordinates
    assert align.iterative_seconds(300, 300, 3, 4) == pytest.approx(align.SECONDS_PER_DISTANCE * distances)
    monkeypatch.setattr(align, "SECONDS_PER_DISTANCE", 1e-5)  # as slow as 2,000 rows a side of --dim 16: the note
    long = CliRunner().invoke(main, args)
    assert long.exit_code == 0, long.output
    seconds = align.iterative_seconds(300, 300, 3, 4)
    assert long.stderr.splitlines()[0] == ("note: this search may take minutes: 8 starts of the iterative method on "
                                           f"300 x 300 rows in 3 dimensions (about {seconds:,.0f} s estimated; a "
                                           "rough class)")
    assert long.stdout == short.stdout
    quiet = CliRunner().invoke(main, [*args, "--json"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and json.loads(quiet.stdout)["chosen_start"] >= 0


def test_an_interrupted_align_leaves_no_map_and_no_partial_file(files, tmp_path, monkeypatch):
    """Ctrl-C during the search or while the map is written: --out is written whole or not at all."""
    import prhsim.metrics

    out = tmp_path / "map.npz"
    calls = []
    search = prhsim.metrics.iterative_match

    def interrupted(*args, progress, **kwargs):
        def stop(done, total, criterion):  # at the third start
            progress(done, total, criterion)
            calls.append(done)
            if done == 3:
                raise KeyboardInterrupt

        return search(*args, progress=stop, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(prhsim.metrics, "iterative_match", interrupted)
        with pytest.raises(KeyboardInterrupt):
            align_unpaired(files / "a.npy", files / "b.npy", dim=3, starts=4, out=out)
    assert calls == [1, 2, 3] and list(tmp_path.iterdir()) == []

    def half_written(handle, **arrays):
        handle.write(b"PK\x03\x04 half")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", half_written)
    with pytest.raises(KeyboardInterrupt):
        align_unpaired(files / "a.npy", files / "b.npy", dim=3, starts=4, out=out)
    assert list(tmp_path.iterdir()) == []
