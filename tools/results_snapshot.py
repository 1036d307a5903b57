"""Record, or compare against, the numbers of the default run, an all-learner run and every sweep at small settings.

A refactoring that must leave every number unchanged is checked with two commands::

    python tools/results_snapshot.py record tools/snapshots/NAME     # before the first move
    python tools/results_snapshot.py compare tools/snapshots/NAME    # after each move

``record`` runs the commands below through the CLI and keeps each ``results.json``; ``compare`` runs them again
and compares every field: strings and integers exactly, floats (and the numbers inside strings) to
``|a - b| <= ATOL + RTOL |b|``. Timings, versions and the git revision are left out, and keys renamed since the
snapshot (``RENAMED``: per command, top-level keys) are read under their new name; documents whose layout changed
since (``RESHAPED``: per command, a function of the old document) are moved field by field into the new layout
(every number kept, none computed), and fields added since (``ADDED``: per command, patterns of paths) are listed
as added, not as differences. It prints one line per command and every field that differs, and exits 1 when any
does.

The commands: ``prhsim run`` (defaults), ``prhsim run --learner all --world ring --n 16``, and ``prhsim sweep
NAME`` for every sweep with the small settings of the CLI tests (``tests/cli/test_cli_sweeps.py``: ``SMALL``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Fields that vary from one run to the next or one commit to the next, at any depth.
UNSTABLE = {"seconds", "git_revision", "prhsim_version", "versions", "wall_seconds", "elapsed"}
#: Keys renamed since the snapshots, per command: old name -> new name (the snapshot's old key is read under the new
#: one). The neighbour count was already ``knn_k`` in every document these commands write ("k" counts features).
RENAMED: dict[str, dict[str, str]] = {"sweep-ntp-ca": {"d": "k"}, "sweep-pair-free": {"samples": "sample_sizes"}}
RTOL, ATOL = 1e-9, 1e-12


def _pairs_as_mappings(doc: dict) -> dict:
    """A run's pair metrics, once flat fields (mutual_knn, knn_chance, linear_cka, r1, the calibrated scores and
    p-values of mutual_knn and linear_cka), as the mappings keyed by registered metric they are now."""
    names = {"mutual_knn": "mutual_knn", "linear_cka": "linear_cka", "r1": "retrieval_r1"}
    for pair in doc.get("pairs", []):
        if isinstance(pair.get("metrics"), dict):  # a snapshot recorded in the new layout
            continue
        pair["metrics"] = {new: pair.pop(old) for old, new in names.items() if pair.get(old) is not None}
        for old in names:
            pair.pop(old, None)
        chance = pair.pop("knn_chance", None)
        pair["chance"] = {} if chance is None else {"mutual_knn": chance}
        pair["calibrated"], pair["p_values"] = {}, {}
        for name in ("mutual_knn", "linear_cka"):
            calibrated, p_value = pair.pop(f"{name}_calibrated", None), pair.pop(f"{name}_p", None)
            if calibrated is not None:
                pair["calibrated"][name], pair["p_values"][name] = calibrated, p_value
    return doc


def _bridge_cells_as_mappings(doc: dict) -> dict:
    """The metric bridge's cells, once flat fields, as mappings keyed by registered metric; its chance levels, once
    mutual k-NN's per family, per family and metric."""
    names = {"mutual_knn": "mutual_knn", "linear_cka": "linear_cka", "r1": "retrieval_r1", "cknna": "cknna"}
    if "knn_chance" not in doc:  # a snapshot recorded in the new layout
        return doc
    for cell in doc.get("cells", []):
        cell["metrics"] = {new: cell.pop(old) for old, new in names.items()}
    doc["chance"] = {family: {"mutual_knn": chance} for family, chance in doc.pop("knn_chance").items()}
    doc["metrics"] = ["mutual_knn", "linear_cka", "retrieval_r1", "cknna"]
    return doc


#: Documents whose layout changed since the snapshots, per command: the old document -> the new layout (a
#: document already in the new layout passes unchanged).
RESHAPED = {"run-default": _pairs_as_mappings, "run-all-learners-ring-16": _pairs_as_mappings,
            "sweep-metric-bridge": _bridge_cells_as_mappings}
#: Fields added since the snapshots, per command (regular expressions over the paths ``differences`` prints): the
#: chance level of R@1, once a run field of its own and now a registered metric with a chance.
ADDED = {"run-default": [r"/pairs\[\d+\]/chance/retrieval_r1"],
         "run-all-learners-ring-16": [r"/pairs\[\d+\]/chance/retrieval_r1"],
         "sweep-metric-bridge": [r"/chance/[a-z-]+/retrieval_r1"]}
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def commands() -> dict[str, list[str]]:
    """Each snapshot's name and its CLI arguments."""
    sys.path[:0] = [str(ROOT / "tests" / "cli"), str(ROOT / "tests")]  # the CLI tests import tests/support.py
    from test_cli_sweeps import SMALL  # the CLI tests' small settings, one entry per registered sweep

    runs = {"run-default": ["run"], "run-all-learners-ring-16": ["run", "--learner", "all", "--world", "ring",
                                                                "--n", "16"]}
    return runs | {f"sweep-{name}": ["sweep", name, *args] for name, args in sorted(SMALL.items())}


def produce(args: list[str], out: Path) -> dict:
    """Run one command into ``out`` and read its results.json."""
    from click.testing import CliRunner

    from prhsim.cli import main

    result = CliRunner().invoke(main, [*args, "--out", str(out), "-q"])
    if result.exit_code != 0:
        raise SystemExit(f"prhsim {' '.join(args)} failed: {result.output.strip().splitlines()[-1:]}")
    return json.loads((out / "results.json").read_text())


def stable(value, renamed: dict[str, str] | None = None):
    """The document without its unstable fields, with the top-level keys in ``renamed`` under their new names."""
    if isinstance(value, dict):
        return {(renamed or {}).get(k, k): stable(v) for k, v in value.items() if k not in UNSTABLE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= ATOL + RTOL * abs(b)


def differences(now, before, path: str = "") -> list[str]:
    """Every field where ``now`` and ``before`` differ, as 'path: now != before'."""
    if isinstance(before, dict) and isinstance(now, dict):
        out = [f"{path}/{k}: missing now" for k in before if k not in now]
        out += [f"{path}/{k}: new" for k in now if k not in before]
        for k in before:
            if k in now:
                out += differences(now[k], before[k], f"{path}/{k}")
        return out
    if isinstance(before, list) and isinstance(now, list):
        if len(before) != len(now):
            return [f"{path}: {len(now)} items != {len(before)}"]
        return [d for i, (a, b) in enumerate(zip(now, before)) for d in differences(a, b, f"{path}[{i}]")]
    if isinstance(before, float) or isinstance(now, float):
        same = (isinstance(now, (int, float)) and isinstance(before, (int, float)) and not isinstance(now, bool)
                and _close(float(now), float(before)))
        return [] if same else [f"{path}: {now!r} != {before!r}"]
    if isinstance(before, str) and isinstance(now, str):
        words_a, words_b = NUMBER.split(now), NUMBER.split(before)
        nums_a, nums_b = NUMBER.findall(now), NUMBER.findall(before)
        same = (words_a == words_b and len(nums_a) == len(nums_b)
                and all(_close(float(x), float(y)) for x, y in zip(nums_a, nums_b)))
        return [] if same else [f"{path}: {now!r} != {before!r}"]
    return [] if now == before else [f"{path}: {now!r} != {before!r}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("record", "compare"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--only", help="run only the snapshots whose name contains this text")
    args = parser.parse_args()
    failed = 0
    chosen = {n: a for n, a in commands().items() if not args.only or args.only in n}
    if args.action == "record":
        args.folder.mkdir(parents=True, exist_ok=True)
    for name, cli in chosen.items():
        with tempfile.TemporaryDirectory() as tmp:
            doc = stable(produce(cli, Path(tmp) / "out"))
        path = args.folder / f"{name}.json"
        if args.action == "record":
            staged = path.with_suffix(".tmp")
            staged.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
            staged.replace(path)
            print(f"recorded {name}")
            continue
        if not path.exists():
            print(f"{name}: no snapshot at {path}")
            failed += 1
            continue
        before = stable(json.loads(path.read_text()), RENAMED.get(name))
        found = differences(doc, RESHAPED.get(name, lambda d: d)(before))
        added = [line for line in found if line.endswith(": new")
                 and any(re.fullmatch(pattern, line.removesuffix(": new")) for pattern in ADDED.get(name, []))]
        found = [line for line in found if line not in added]
        failed += bool(found)
        print(f"{name}: {'unchanged' if not found else f'{len(found)} fields differ'}"
              + (f" ({len(added)} fields added: {added[0].removesuffix(': new')}, ...)" if added else ""))
        for line in found[:40]:
            print(f"  {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
