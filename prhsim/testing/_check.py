"""The theorem's property suite as one call: every claim through hypothesis, on drawn worlds or a user's world.

:func:`check_theorem` runs each claim of :data:`CLAIMS` as a hypothesis property (its strategy draws the
inputs, its predicate checks them) and returns one :class:`ClaimOutcome` per claim: how many examples were
tried, whether the claim held, and the shrunk counterexample with the predicate's message when it did not.
With ``world``, every claim is checked on that world over Z, and on the modal worlds built from it (drawn
modalities and views), with its own p for the table claims. ``prhsim check`` is its command line.
"""

from __future__ import annotations

import importlib
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, reject, reporting, seed as hypothesis_seed, settings, strategies as st
from hypothesis.errors import Unsatisfiable

from prhsim.optima import TieWarning, whitened_optimum
from prhsim.testing import _predicates as pred, strategies as S
from prhsim.worlds import FiniteWorld, ProductWorld, World, view_world

#: The largest user world :func:`load_world` accepts: each example takes dense eigendecompositions of it.
WORLD_LIMIT = 400


@dataclass(frozen=True)
class Claim:
    """One universal claim: its name, section, predicate and how one example is drawn and checked."""

    name: str
    section: str
    predicate: str
    body: Callable[[Any, World | None], None]


@dataclass(frozen=True)
class ClaimOutcome:
    """What :func:`check_theorem` found for one claim.

    Attributes:
        claim, section, predicate: the claim's name, its section of docs/theory.md and its predicate.
        status: "passed", "failed", or "not applicable" (no drawn input met the claim's premises, e.g. a
            user world without a k at a gap).
        examples: the examples tried (those that met the premises).
        counterexample: the shrunk failing example as hypothesis prints it (None unless failed).
        message: the predicate's message (failed), or why the claim did not apply.
        seconds: the time it took.
    """

    claim: str
    section: str
    predicate: str
    status: str
    examples: int
    counterexample: str | None
    message: str | None
    seconds: float


def _k(data: Any, n: int, centred: bool) -> int:
    top = n - 2 if centred else n - 1
    if top < 1:
        reject()
    return data.draw(st.integers(1, top), label="k")


def _ky_fan(data: Any, world: World | None) -> None:
    w = data.draw(st.one_of(S.worlds(), S.modal_worlds()) if world is None else st.just(world), label="world")
    centred = data.draw(st.booleans(), label="centred")
    k = _k(data, w.n, centred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TieWarning)
        F = whitened_optimum(w, k, centred=centred).F
    tables = [data.draw(S.feasible_tables(w.p, k, centred, near=near), label="feasible table") for near in (None, F)]
    pred.assert_ky_fan(w, k, centred=centred, tables=tables)


def _setup(data: Any, world: World | None, **kw: Any) -> tuple:
    base = None if world is None else st.just(world)
    return data.draw(S.nuisance_setups(base=base, **kw), label="setup")


def _rotation(data: Any, world: World | None) -> None:
    base, k, mods, views = _setup(data, world, good_only=True)
    pred.assert_rotation_unique(base, mods, views, k)


def _merge(data: Any, world: World | None) -> None:
    base, k, mods, views = _setup(data, world)
    pred.assert_merge_rule(base, mods, views, k)


def _factor_space(data: Any, world: World | None) -> None:
    base, k, mods, views = _setup(data, world, max_modalities=2)
    pred.assert_factor_space_equals_table(base, mods, views, k)


def _mismatch(data: Any, world: World | None) -> None:
    w1, w2, _ = data.draw(S.perturbed_pairs(None if world is None else st.just(world)), label="pair")
    centred = data.draw(st.booleans(), label="centred")
    pred.assert_mismatch_bounds(w1, w2, _k(data, w1.n, centred), centred=centred)


def _sandwich(data: Any, world: World | None) -> None:
    w = data.draw(S.worlds() if world is None else st.just(world), label="world")
    p = np.asarray(w.p)
    if p.size < 3:
        reject()
    centred = data.draw(st.booleans(), label="centred")
    k = data.draw(st.integers(1, (p.size - 1) // 2), label="k")
    F1, F2, theta = data.draw(S.tables_at_known_angles(p, k, centred), label="tables")
    pred.assert_sin_theta_sandwich(F1, F2, p, theta)


def _kronecker(data: Any, world: World | None) -> None:
    if world is None:
        w = data.draw(st.one_of(S.product_worlds(), S.modal_worlds()), label="world")
    else:  # the modal worlds of the user's world: π_Z ⊗ ρ_ε over Z x N
        (mod,) = data.draw(S.modalities(world.n, 1), label="modality")
        w = view_world(world, mod, data.draw(S.views(), label="view"))
    assert isinstance(w, ProductWorld)
    centred = data.draw(st.booleans(), label="centred")
    m = data.draw(st.integers(1, w.n - 1 if centred else w.n), label="m")
    pred.assert_kronecker_top(w, m, centred=centred)


#: Every claim the suite checks, in the order of docs/theory.md.
CLAIMS: tuple[Claim, ...] = (
    Claim("Ky Fan: the closed form attains L* and no whitened table beats it", "§1.1", "assert_ky_fan", _ky_fan),
    Claim("sinΘ sandwich at known principal angles", "§2", "assert_sin_theta_sandwich", _sandwich),
    Claim("good views at a gap: one representation up to rotation", "§2, §4", "assert_rotation_unique", _rotation),
    Claim("kernel mismatch: Davis–Kahan and Yu–Wang–Samworth bound the drift", "§3", "assert_mismatch_bounds",
          _mismatch),
    Claim("bad views: the merge rule's k_Z and ρ_P", "§4", "assert_merge_rule", _merge),
    Claim("factor space = the full tables", "§6", "assert_factor_space_equals_table", _factor_space),
    Claim("Kronecker top-m = the dense eigenproblem", "§6", "assert_kronecker_top", _kronecker),
)


def check_theorem(*, examples: int = 100, seed: int = 0, world: World | None = None,
                  progress: Callable[[str], None] | None = None) -> list[ClaimOutcome]:
    """Run every claim of :data:`CLAIMS` through hypothesis (``examples`` each, seeded by ``seed``).

    Args:
        examples: examples per claim (hypothesis' ``max_examples``), at least 1.
        seed: the seed of hypothesis' draws (the same seed, the same examples).
        world: a world over Z of one's own (None: the strategies' worlds).
        progress: optional callable ``progress(message)``, told as each claim starts.

    Returns:
        One :class:`ClaimOutcome` per claim, in the order of :data:`CLAIMS`.
    """
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise ValueError(f"examples must be a positive integer, got {examples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    outcomes = []
    for claim in CLAIMS:
        if progress is not None:
            progress(f"{claim.section} {claim.name}")
        outcomes.append(_run(claim, examples, seed, world))
    return outcomes


def _run(claim: Claim, examples: int, seed: int, world: World | None) -> ClaimOutcome:
    tried = [0]
    report: list[str] = []

    @hypothesis_seed(seed)
    @settings(max_examples=examples, database=None, deadline=None, derandomize=False, print_blob=False,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def prop(data: Any) -> None:
        claim.body(data, world)
        tried[0] += 1

    start = time.perf_counter()
    status, message = "passed", None
    with reporting.with_reporter(report.append):
        try:
            prop()
        except pred.ClaimFailed as exc:  # hypothesis attaches the shrunk example to the exception as notes
            status, message = "failed", str(exc)
            notes = "\n".join(getattr(exc, "__notes__", []))
            report.append(notes.split("\nExplanation:")[0])  # the example, not hypothesis' coverage explanation
        except Unsatisfiable:
            status, message = "not applicable", "no drawn input met the claim's premises (e.g. no k at a gap)"
    counterexample = "\n".join(line for line in report if line.strip()) if status == "failed" else None
    if status == "passed" and tried[0] == 0:
        status, message = "not applicable", "no drawn input met the claim's premises (e.g. no k at a gap)"
    return ClaimOutcome(claim.name, claim.section, claim.predicate, status, tried[0], counterexample, message,
                        time.perf_counter() - start)


#: How a .npy array begins, and the zip archives an .npz is (numpy.load tells them apart by these bytes).
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def _world_file_problem(text: str, path: Path) -> str | None:
    """What keeps a world file from being read as an .npz (a folder, a device, a symlink loop, a .npy array, an
    empty or other file), in one line naming it; None where it may be one."""
    from prhsim.io import file_problem

    problem = file_problem(path)
    if problem is not None:
        return f"{text}: {problem}"
    try:
        with open(path, "rb") as stream:
            head = stream.read(len(NPY_MAGIC))
    except OSError:
        return None  # unreadable: numpy says why
    if head.startswith(ZIP_MAGICS):
        return None
    what = "a .npy array, not" if head.startswith(NPY_MAGIC) else "an empty file, not" if not head else "not"
    return f"{text}: {what} an .npz archive holding arrays 'p' and 'Pi' (numpy.savez(file, p=p, Pi=Pi) writes one)"


def _exit_code(exc: SystemExit) -> str:
    """``sys.exit``'s argument as the call was written ("" for none)."""
    return "" if exc.code is None else repr(exc.code)


def load_world(spec: str | Path) -> World:
    """A user's world over Z: an ``.npz`` file holding ``p`` (n,) and ``Pi`` (n, n), or ``module:function``
    (a function of no arguments returning a :class:`prhsim.worlds.World`). Every problem is a one-line
    ValueError: a missing file or key, a file that is not an .npz (a folder, a .npy array, ...), a Π that is not
    symmetric, non-negative and with both marginals p, a module or function that calls ``sys.exit``, or a world
    above :data:`WORLD_LIMIT` states."""
    text = str(spec)
    path = Path(text)
    if path.suffix.lower() == ".npz" or path.exists() or path.is_symlink():
        problem = _world_file_problem(text, path)
        if problem is not None:
            raise ValueError(problem)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except Exception as exc:
            raise ValueError(f"{text}: cannot be read as .npz ({type(exc).__name__}: {exc})") from None
        key = next((name for name in ("Pi", "pi", "PI") if name in arrays), None)
        if "p" not in arrays or key is None:
            raise ValueError(f"{text}: a world file holds arrays 'p' and 'Pi', got {', '.join(sorted(arrays)) or 'none'}")
        try:
            world: Any = FiniteWorld(np.asarray(arrays["p"], dtype=float), np.asarray(arrays[key], dtype=float))
        except (ValueError, TypeError) as exc:
            reason = str(exc).splitlines()[0].split("; pass ")[0]  # the constructor's keyword hints are not the file's
            raise ValueError(f"{text}: not a valid world: {reason}") from None
    elif ":" in text:
        module, _, name = text.partition(":")
        try:
            factory = getattr(importlib.import_module(module), name)
        except SyntaxError as exc:  # the module itself: name its file and line
            raise ValueError(f"{text}: cannot import {module!r}: a syntax error in {exc.filename}, line {exc.lineno}: "
                             f"{exc.msg}") from None
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"{text}: cannot import {name!r} from {module!r} ({type(exc).__name__}: {exc})") from None
        except Exception as exc:  # the module raised while it was imported
            raise ValueError(f"{text}: importing {module!r} failed ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
        except SystemExit as exc:  # it would end the caller silently: say so
            raise ValueError(f"{text}: importing {module!r} called sys.exit({_exit_code(exc)})") from None
        try:
            world = factory()
        except Exception as exc:
            raise ValueError(f"{text}: calling it failed ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
        except SystemExit as exc:
            raise ValueError(f"{text}: {name}() called sys.exit({_exit_code(exc)})") from None
        if not isinstance(world, World):
            raise ValueError(f"{text}: returned {type(world).__name__}, not a prhsim World")
    else:
        raise ValueError(f"{text}: expected an .npz file with p and Pi, or module:function")
    if world.n > WORLD_LIMIT:
        raise ValueError(f"{text}: the world has {world.n:,} states; the check takes dense eigendecompositions per "
                         f"example and accepts at most {WORLD_LIMIT}")
    if world.n < 3:
        raise ValueError(f"{text}: the world has {world.n} states; the claims need at least 3")
    return world
