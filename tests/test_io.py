"""Results are written atomically: a failed write leaves the old file and no partial one."""

import json

import pytest

from prhsim._io import write_atomic, write_json_atomic


def test_json_written_atomically(tmp_path):
    path = write_json_atomic(tmp_path / "sub" / "r.json", {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}


def test_failed_write_keeps_previous_file_and_leaves_no_partial(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, {"old": True})

    def explode(tmp):
        tmp.write_text("{half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_atomic(path, explode)
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
