"""The library's shape: an acyclic import graph, rng passed through, the public faces (the layers of docs/architecture.md)."""

import ast
import functools
from pathlib import Path

import numpy as np
import pytest

import prhsim
from support import assert_close
from prhsim.optima import EigenBasis, KroneckerBasis, VectorBasis, kronecker_top, top_eigenpairs
from prhsim.worlds import FiniteWorld, Modality, ProductWorld, bad, random_world, resampling, view_world

PACKAGE = Path(prhsim.__file__).parent


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module under ``root`` by dotted name (a package by its ``__init__``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Edges module -> imported module inside the package, from every import statement (function-level too)."""
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in files and t != name)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_import_graph_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg._a import f\n")
    (pkg / "_a.py").write_text("def f():\n    from ._b import g\n    return g\n")
    (pkg / "_b.py").write_text("import pkg._a\n")
    graph = import_graph(module_files(pkg))
    assert graph == {"pkg": {"pkg._a"}, "pkg._a": {"pkg._b"}, "pkg._b": {"pkg._a"}}
    assert find_cycle(graph) == ["pkg._a", "pkg._b", "pkg._a"]


def test_prhsim_has_no_import_cycles():
    graph = import_graph(module_files())
    assert "prhsim.optima._basis" in graph and graph["prhsim.optima._basis"].isdisjoint(
        {"prhsim.optima._spectrum", "prhsim.optima._kronecker"})
    assert "prhsim.optima._kronecker" in graph["prhsim.optima._spectrum"]
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_basis_types_are_shared_by_both_backends():
    w = ProductWorld([random_world(4, rng=0), random_world(5, rng=1)])
    assert isinstance(top_eigenpairs(w, 3), KroneckerBasis) and isinstance(top_eigenpairs(w, 3), EigenBasis)
    dense = top_eigenpairs(w, 3, backend="dense")
    assert isinstance(dense, VectorBasis) and isinstance(dense, EigenBasis)


def _product_with_partial_factor(monkeypatch):
    """A product whose first factor (30 states) takes the Lanczos path once FULL_FACTOR_UP_TO is lowered."""
    import prhsim.optima._kronecker as kr

    monkeypatch.setattr(kr, "FULL_FACTOR_UP_TO", 10)
    return ProductWorld([random_world(30, rng=4, self_loop=1.0), resampling([0.3, 0.7], 0.5)])


def test_kronecker_top_draws_its_lanczos_start_from_the_caller_s_rng(monkeypatch):
    w = _product_with_partial_factor(monkeypatch)
    gen = np.random.default_rng(11)
    before = gen.bit_generator.state["state"]["state"]
    basis = kronecker_top(w, 4, rng=gen)
    assert not basis.spectra[0].complete
    assert gen.bit_generator.state["state"]["state"] != before, "the caller's generator was used"
    ref = top_eigenpairs(w, 4, backend="dense")
    for seed in (0, 1, None):
        assert_close(kronecker_top(w, 4, rng=seed).values, ref.values, atol=1e-10)
    gen = np.random.default_rng(11)
    before = gen.bit_generator.state["state"]["state"]
    top_eigenpairs(w, 4, backend="kronecker", rng=gen)
    assert gen.bit_generator.state["state"]["state"] != before, "top_eigenpairs passes its rng through"


def test_kronecker_top_rejects_a_bad_rng(monkeypatch):
    w = _product_with_partial_factor(monkeypatch)
    with pytest.raises(ValueError, match="rng must be an int seed or a numpy Generator, got str"):
        kronecker_top(w, 4, rng="seed")


def test_a_modality_from_its_nuisance_law_alone_reaches_the_mathematics():
    """Modality(name, q): the modal world, its closed form and the merge rule need no renderer (§4)."""
    from prhsim.experiments import merge_rule
    from prhsim.optima import closed_form

    base = random_world(7, rng=3, self_loop=2.0)
    text = Modality("text", [0.25, 0.75])
    world = view_world(base, text, bad(0.2))
    opt = closed_form(world, 3)
    assert_close(opt.eigenvalues, merge_rule(base, bad(0.2), text.n_nuisance, 3).values, atol=1e-10)
    assert isinstance(world.base, FiniteWorld) and world.modality is text


def test_resource_error_is_public_and_a_value_error():
    assert issubclass(prhsim.ResourceError, ValueError)
    with prhsim.memory_limit(10**6):
        with pytest.raises(prhsim.ResourceError):
            random_world(10**4)


# --------------------------------------------------------------------------------------
# the house's import rules (docs/architecture.md)
# --------------------------------------------------------------------------------------
def _package(module: str) -> str:
    """The top-level subpackage a module belongs to (``prhsim.experiments.sweeps._x`` -> ``experiments``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@functools.cache
def _edges() -> tuple[tuple[str, str], ...]:
    """Every edge of the package's import graph (parsed once per test process)."""
    graph = import_graph(module_files())
    return tuple((a, b) for a, targets in graph.items() for b in sorted(targets))


def test_no_library_module_imports_another_package_s_underscored_module():
    """Across packages only faces are imported; prhsim's own shared modules (prhsim._budget, ...) are for all."""
    bad = [f"{a} -> {b}" for a, b in _edges()
           if _package(a) != _package(b) and not _package(b).startswith("_")
           and any(part.startswith("_") for part in b.split(".")[2:])]
    assert not bad, "\n".join(bad)


def test_the_rule_finder_sees_a_reach_into_another_package(tmp_path):
    pkg = tmp_path / "prhsim"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "b" / "__init__.py").write_text("")
    (pkg / "b" / "_x.py").write_text("")
    (pkg / "a" / "_y.py").write_text("def f():\n    from prhsim.b._x import g\n")
    graph = import_graph(module_files(pkg))
    assert graph["prhsim.a._y"] == {"prhsim.b._x"}


@pytest.mark.parametrize("package", ["objectives", "metrics"])
def test_objectives_and_metrics_import_nothing_of_worlds_optima_or_learners(package):
    bad = [f"{a} -> {b}" for a, b in _edges()
           if _package(a) == package and _package(b) in ("worlds", "optima", "learners", "experiments", "real")]
    assert not bad, "\n".join(bad)


def _documented_dependencies() -> dict[str, set[str] | None]:
    """The packages each package may import, from docs/architecture.md's table (None: any)."""
    import re

    table = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| `prhsim\.(\w+)` \|.*\| ([^|]+) \|$", table, flags=re.M)
    allowed: dict[str, set[str] | None] = {}
    for package, column in rows:
        column = column.strip()
        if column == "everything":
            allowed[package] = None
        elif column.startswith("all of the above but "):
            allowed[package] = set(allowed) - {column.rpartition(" ")[2]}
        elif column in ("—", "nothing of the others") or column.startswith("nothing of "):
            allowed[package] = set()
        else:
            allowed[package] = {word.split(" ")[0] for word in column.split(", ")}
    return allowed


def test_every_package_imports_only_what_docs_architecture_says():
    """The layers of docs/architecture.md's table are the import graph's (prhsim's own shared modules aside)."""
    allowed = _documented_dependencies()
    assert {"worlds", "config", "real", "cli"} <= set(allowed)
    bad = sorted({f"{_package(a)} -> {_package(b)} ({a} -> {b})" for a, b in _edges()
                  if _package(a) != _package(b) and _package(a) in allowed and _package(b) in allowed  # not prhsim's own
                  and allowed[_package(a)] is not None and _package(b) not in allowed[_package(a)]})
    assert not bad, "\n".join(bad)


def test_nothing_outside_real_and_cli_imports_real():
    bad = [f"{a} -> {b}" for a, b in _edges() if _package(b) == "real" and _package(a) not in ("real", "cli")]
    assert not bad, "\n".join(bad)


HEAVY = ("jax", "torch", "transformers", "matplotlib")


def _heavy_after(code: str) -> list[str]:
    import subprocess
    import sys

    probe = f"{code}\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return eval(out.stdout.strip().splitlines()[-1])


def test_the_command_line_and_a_run_import_no_heavy_library(tmp_path):
    """``import prhsim.cli`` and a whole ``prhsim run`` (figures off) import neither JAX, torch, transformers nor
    matplotlib; drawing the figures imports matplotlib alone."""
    assert _heavy_after("import prhsim.cli") == []
    run = (f"from prhsim.cli import main\n"
           f"main(['run', '--world', 'ring', '--n', '12', '--modalities', '2', '-q', '--out', {str(tmp_path / 'a')!r}"
           f"{{figures}}], standalone_mode=False)")
    assert _heavy_after(run.replace("{figures}", ", '--no-figures'")) == []
    assert _heavy_after(run.replace("{figures}", "").replace("'a'", "'b'").replace(str(tmp_path / "a"),
                                                                              str(tmp_path / "b"))) == ["matplotlib"]


def test_a_run_imports_no_sweep_and_the_face_still_gives_every_sweep_name(tmp_path):
    """The sweeps' names on the experiments face are imported when first used: ``prhsim run`` loads none of them (it
    reads the registry, whose records name each sweep's exports, and the cell machinery beside it)."""
    import subprocess
    import sys

    probe = (f"from prhsim.cli import main\n"
             f"main(['run', '--world', 'ring', '--n', '12', '--modalities', '2', '-q', '--no-figures', '--out', "
             f"{str(tmp_path / 'a')!r}], standalone_mode=False)\n"
             "import sys\nprint(sorted(m for m in sys.modules if m.startswith('prhsim.experiments.sweeps.')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(out.stdout.strip().splitlines()[-1]))
    machinery = {f"prhsim.experiments.sweeps.{name}"
                 for name in ("_registry", "_cells", "_cost", "_executors", "_cell_table")}
    assert loaded <= machinery, out.stdout
    import prhsim.experiments as experiments
    from prhsim.experiments.sweeps._bad_view import bad_view_sweep

    assert experiments.bad_view_sweep is bad_view_sweep and "bad_view_sweep" in dir(experiments)
    assert all(hasattr(experiments, name) for name in experiments.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        experiments.nope


def test_the_simulator_s_suite_collects_without_torch():
    """torch hidden (as if not installed): the whole tree collects (tests/real and prhsim.real's doctests are
    left out). That the core tests then pass, with neither torch nor JAX installed, is `make test-core`'s
    (CI runs it after `make test`)."""
    import subprocess
    import sys

    root = PACKAGE.parent
    code = ("import sys\n"
            "class NoTorch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.partition('.')[0] == 'torch':\n"
            "            raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n"
            "sys.meta_path.insert(0, NoTorch())\n"
            "import pytest\n"
            "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--collect-only']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "tests/real" not in out.stdout and "prhsim/real" not in out.stdout


@pytest.mark.parametrize("old", ["prhsim.jepa", "prhsim.experiments.real", "prhsim._moved"])
def test_the_old_import_paths_are_gone(old):
    """The package was never released: the paths of the rename were removed, not forwarded (CHANGELOG.md)."""
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    import prhsim.experiments.report as report

    with pytest.raises(AttributeError):
        report.sweep_figure  # noqa: B018 - moved beside its sweep


@pytest.mark.parametrize("package", ["worlds", "objectives", "optima", "learners", "metrics", "io", "config",
                                     "experiments", "experiments.report", "experiments.sweeps", "real"])
def test_every_package_face_lists_its_names(package):
    """Each face has ``__all__``, every listed name resolves, and no name is listed twice."""
    import importlib

    if package == "real":
        pytest.importorskip("torch", reason="prhsim.real's names load torch (pip install 'prhsim[real]')")

    module = importlib.import_module(f"prhsim.{package}")
    names = module.__all__
    assert len(names) == len(set(names)), package
    assert all(hasattr(module, name) for name in names), [n for n in names if not hasattr(module, n)]


# the registries: a new SGD objective and a new metric are each their module and one entry
# --------------------------------------------------------------------------------------
def _imported_names(path: Path, module: str) -> set[str]:
    """The names ``path`` imports from ``module`` (any depth of the file)."""
    return {alias.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.module == module for alias in node.names}


def test_no_module_branches_on_an_sgd_objective_s_name():
    """What an objective does is its record's (learners/_objectives.py): no other module compares anything to an
    objective's name, so a new objective is its loss and one OBJECTIVES entry."""
    from prhsim.learners._objectives import OBJECTIVES

    found = []
    for name, path in module_files().items():
        if name == "prhsim.learners._objectives":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                values = [node.left, *node.comparators]
                values += [e for v in values if isinstance(v, (ast.Tuple, ast.List, ast.Set)) for e in v.elts]
                if any(isinstance(v, ast.Constant) and v.value in OBJECTIVES for v in values):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not found, "\n".join(found)


def test_every_learner_of_the_run_is_an_objective_record_or_the_closed_form():
    from prhsim.learners import LEARNERS
    from prhsim.learners._objectives import OBJECTIVES

    assert [k for k, v in LEARNERS.items() if v.sgd] == list(OBJECTIVES)
    assert all(LEARNERS[name].objective is record for name, record in OBJECTIVES.items())


#: The consumers of the sample metrics, each scoring the registered metrics through the registry.
METRIC_CONSUMERS = ("prhsim.experiments._pair_metrics", "prhsim.experiments.sweeps._metric_bridge",
                    "prhsim.real._eval", "prhsim.metrics._protocol", "prhsim.metrics._prh_table")


@pytest.mark.parametrize("consumer", METRIC_CONSUMERS)
def test_the_metric_consumers_read_the_registry_not_the_metrics(consumer):
    """None of them names a registered metric's function: they iterate ``reported_metrics()`` or take a name, so a new
    metric is its module and one registry entry (real eval's directional R@1/R@5 through ``retrieval`` aside)."""
    from prhsim.metrics import PRH_METRICS

    path = module_files()[consumer]
    named = (_imported_names(path, "prhsim.metrics") | _imported_names(path, "prhsim.metrics._knn")
             | _imported_names(path, "prhsim.metrics._cka"))
    assert not named & (set(PRH_METRICS) | {"knn_chance"}), named
    assert named & {"metric_record", "reported_metrics"} or _imported_names(path, "prhsim.metrics._registry")


def test_docs_architecture_names_the_registries_a_new_thing_touches():
    """'Where a new thing goes' sends a new SGD objective and a new metric to the modules that hold the registries
    the code reads."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    objective = rows["SGD objective for `prhsim run --learner`"]
    assert "`objectives/_x.py`" in objective and "`learners/_objectives.py`'s `OBJECTIVES`" in objective
    metric = rows["PRH sample metric"]
    assert "`metrics/_x.py`" in metric and "`metrics/_registry.py`'s `METRICS`" in metric
    from prhsim.learners._objectives import OBJECTIVES
    from prhsim.metrics._registry import METRICS

    assert OBJECTIVES and METRICS
