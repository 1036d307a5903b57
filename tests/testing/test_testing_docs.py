"""docs/testing.md runs as written: its example test file passes under pytest and its commands succeed.

Every fenced block of the page is executed: ``python`` blocks are written to the file their first line
names (``# file: NAME``), ``bash`` blocks run line by line in that folder with this interpreter's scripts
first on PATH (the ``pip install`` line is what set this environment up, so it is checked, not rerun).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _blocks() -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", DOC.read_text(), flags=re.S)


def test_every_block_of_docs_testing_runs(tmp_path):
    blocks = _blocks()
    assert [lang for lang, _ in blocks] == ["bash", "python", "bash"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PRHSIM_HYPOTHESIS", None)
    ran = []
    for lang, body in blocks:
        if lang == "python":
            first, _, rest = body.partition("\n")
            assert first.startswith("# file: "), first
            (tmp_path / first.removeprefix("# file: ").strip()).write_text(rest)
            continue
        for line in body.strip().splitlines():
            if line.startswith("pip install"):
                assert line == "pip install 'prhsim[testing]'"
                import hypothesis  # noqa: F401  (the extra is installed here)
                continue
            out = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
            assert out.returncode == 0, f"{line}\n{out.stdout}\n{out.stderr}"
            ran.append((line, out.stdout))
    pytest_out = dict(ran)["pytest -q -p no:cacheprovider test_my_world.py"]
    assert "2 passed" in pytest_out
    check_out = dict(ran)["prhsim check --world-file test_my_world:office --examples 20"]
    assert check_out.count("passed") == 7 and "FAILED" not in check_out
