"""A run folder is written whole or not at all, and an unusable one is refused before any work."""

from __future__ import annotations

import os
import re

import pytest

from prhsim.io import OutputError, check_out_folder, staged_folder


def test_staged_folder_appears_whole_on_success(tmp_path):
    out = tmp_path / "sub" / "run"
    with staged_folder(out) as stage:
        (stage / "a.json").write_text("{}")
        assert not out.exists() and stage.parent == out.parent
    assert sorted(p.name for p in out.iterdir()) == ["a.json"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["run"]


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_a_failure_leaves_nothing_and_keeps_the_old_folder(tmp_path, error):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text("old")
    with pytest.raises(type(error)):
        with staged_folder(out, overwrite=True) as stage:
            (stage / "results.json").write_text("{half")
            raise error
    assert (out / "results.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_overwrite_replaces_the_folder_whole(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text("old")
    (out / "stale.png").write_text("old")
    with staged_folder(out, overwrite=True) as stage:
        (stage / "results.json").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    assert (out / "results.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_an_empty_existing_folder_is_used(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    check_out_folder(out)
    with staged_folder(out) as stage:
        (stage / "results.json").write_text("{}")
    assert (out / "results.json").exists()


def test_a_symlink_is_followed_to_its_target(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "results.json").write_text("old")
    link = tmp_path / "link"
    link.symlink_to(target)
    check_out_folder(link, overwrite=True)
    with staged_folder(link, overwrite=True) as stage:
        (stage / "results.json").write_text("new")
    assert link.is_symlink() and (target / "results.json").read_text() == "new"


@pytest.mark.parametrize("make, overwrite, message", [
    (lambda t: t / "full", False, "exists and is not empty; pass --overwrite"),
    (lambda t: t / "notarun", True, "is not a prhsim run folder (no results.json)"),
    (lambda t: t / "file", False, "exists and is not a folder"),
    (lambda t: t / "file" / "sub", False, "is a file, not a folder"),
    (lambda t: t, True, "the current folder or one of its ancestors"),
    (lambda t: t.parent, True, "the current folder or one of its ancestors"),
])
def test_unusable_folders_are_refused(tmp_path, monkeypatch, make, overwrite, message):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "results.json").write_text("{}")
    (tmp_path / "notarun").mkdir()
    (tmp_path / "notarun" / "thesis.tex").write_text("precious")
    (tmp_path / "file").write_text("x")
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(OutputError, match=re.escape(message)):
        check_out_folder(make(tmp_path), overwrite=overwrite)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_files_and_folder_have_ordinary_permissions(tmp_path):
    with staged_folder(tmp_path / "run") as stage:
        (stage / "results.json").write_text("{}")
    mask = os.umask(0o022)
    os.umask(mask)
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o777 & ~mask
    assert (tmp_path / "run" / "results.json").stat().st_mode & 0o777 == 0o666 & ~mask


def test_atomic_file_renames_on_success_and_leaves_nothing_on_failure(tmp_path):
    from prhsim.io import atomic_file, write_text_atomic

    target = tmp_path / "sub" / "feats.npy"
    with atomic_file(target) as tmp:
        assert tmp.suffix == ".npy" and tmp.parent == target.parent and not target.exists()
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new"
    with pytest.raises(RuntimeError):
        with atomic_file(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("interrupted")
    assert target.read_bytes() == b"new" and sorted(p.name for p in target.parent.iterdir()) == ["feats.npy"]
    write_text_atomic(tmp_path / "a.json", "{}")
    assert (tmp_path / "a.json").read_text() == "{}"


def test_check_out_file_refuses_what_cannot_be_written_before_any_work(tmp_path):
    from prhsim.io import OutputError, check_out_file

    check_out_file(tmp_path / "new" / "deeper" / "map.npz")  # a new path under a writable folder
    (tmp_path / "old.npz").write_bytes(b"x")
    with pytest.raises(OutputError, match=r"old.npz exists; pass --overwrite to replace it"):
        check_out_file(tmp_path / "old.npz")
    check_out_file(tmp_path / "old.npz", overwrite=True)
    with pytest.raises(OutputError, match="is a folder; give a file name"):
        check_out_file(tmp_path)
    (tmp_path / "plain").write_text("")
    with pytest.raises(OutputError, match="cannot be created: .*plain is a file, not a folder"):
        check_out_file(tmp_path / "plain" / "map.npz")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root ignores the mode
            pytest.skip("running as root: a read-only folder is writable")
        with pytest.raises(OutputError, match=r"cannot be written: .*locked: Permission denied"):
            check_out_file(locked / "map.npz")
    finally:
        locked.chmod(0o700)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked", "old.npz", "plain"]  # no probe left


def test_the_atomic_writer_never_raises_from_its_own_clean_up(tmp_path, monkeypatch):
    from prhsim.io import atomic_file

    def refuse(self, missing_ok=False):
        raise OSError(30, "Read-only file system")

    with pytest.raises(ValueError, match="the real error"):
        with atomic_file(tmp_path / "x.txt") as tmp:
            tmp.write_text("half")
            monkeypatch.setattr(type(tmp), "unlink", refuse)
            raise ValueError("the real error")


def test_an_old_folder_that_cannot_be_moved_aside_keeps_the_new_results_beside_it(tmp_path, monkeypatch):
    """A read-only run folder cannot be moved (its '..' is rewritten): the old folder stays, no hidden folder is left
    behind, and the new results are kept in a visible sibling named in the one-line error (they were lost)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text("old")
    real = os.replace

    def refuse(src, dst):
        if os.fspath(src) == os.fspath(out):
            raise PermissionError(13, "Permission denied")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OutputError, match=r"^cannot replace --out .*run \(Permission denied\); it is left as it "
                                          r"was, and the new results are in .*run\.new-\w+/run$") as caught:
        with staged_folder(out, overwrite=True) as stage:
            (stage / "results.json").write_text("new")
    kept = caught.value.args[0].rsplit(" ", 1)[-1]
    assert (out / "results.json").read_text() == "old"
    assert (tmp_path / kept).joinpath("results.json").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_overwrite_of_a_read_only_run_folder_is_refused_before_any_work(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text("old")
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if os.fspath(path) == os.fspath(out)
                        else real(path, mode))  # as a user other than root sees a mode-555 folder
    with pytest.raises(OutputError, match=r"is read-only: --overwrite cannot replace it"):
        check_out_folder(out, overwrite=True)
