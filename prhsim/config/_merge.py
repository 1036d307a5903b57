"""The one merge of settings: defaults <- config file <- ``--set key=value`` <- flags.

Validation errors come back as one line per run, naming each key the way a
user writes it (``world.colour_change[0]: Input should be a finite number``).
"""

from __future__ import annotations

import copy
import tomllib
from typing import Any, Iterable

from pydantic import BaseModel, ValidationError

from prhsim.config._files import ConfigError
from prhsim.config._run import RunConfig
from prhsim.config._worlds import WORLD_KINDS


def parse_assignment(text: str) -> tuple[list[str], Any]:
    """``"world.size=6"`` -> (["world", "size"], 6). Values are TOML values; a bare word is a string."""
    key, sep, raw = text.partition("=")
    path = key.strip().split(".")
    if not sep or not all(path):
        raise ConfigError(f"--set expects key=value (e.g. world.size=6), got {text!r}")
    raw = raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        if not raw or any(c in raw for c in "[]{}\"'=,"):
            raise ConfigError(f"--set {key.strip()}: cannot read the value {raw!r} (write it as in TOML)") from None
        value = raw
    return path, value


def _assign(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for i, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif isinstance(child, str) and part == "world" and i == 0:
            child = node[part] = {"kind": child}
        elif not isinstance(child, dict):
            raise ConfigError(f"--set {'.'.join(path)}: {'.'.join(path[: i + 1])} is not a table")
        node = child
    node[path[-1]] = value


def _set_world_kind(data: dict[str, Any], kind: str | None, notes: list[str] | None) -> None:
    """The ``world`` flag: the kind of a world table that has none, or a new world replacing one of another kind (the
    replaced settings named in ``notes``)."""
    if kind is None:
        return
    current = data.get("world")
    if isinstance(current, str):
        current = {"kind": current}
    if not isinstance(current, dict) or "kind" not in current:
        data["world"] = {**(current if isinstance(current, dict) else {}), "kind": kind}
    elif current["kind"] != kind:
        dropped = ", ".join(f"{k}={v!r}" for k, v in current.items() if k != "kind")
        if notes is not None:
            notes.append(f"--world {kind} replaces the configured {current['kind']!r} world"
                         + (f" (its settings {dropped} are not used)" if dropped else ""))
        data["world"] = {"kind": kind}
    else:
        data["world"] = current


def _merged(file_data: dict[str, Any] | None, sets: Iterable[str], flags: dict[str, Any] | None,
            notes: list[str] | None) -> dict[str, Any]:
    """The file's settings <- ``sets`` (``key=value``) <- ``flags`` (dotted keys; None values are not given; a
    ``world`` flag is the world's kind: :func:`_set_world_kind`), a world given by its kind alone as a table."""
    data: dict[str, Any] = copy.deepcopy(dict(file_data or {}))
    for text in sets:
        _assign(data, *parse_assignment(text))
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    _set_world_kind(data, flags.pop("world", None), notes)
    for key, value in flags.items():
        _assign(data, key.split("."), value)
    if isinstance(data.get("world"), str):
        data["world"] = {"kind": data["world"]}
    return data


def _key(loc: tuple) -> str:
    """A validation error's location as a user writes the key: ``world.colour_change[0]``."""
    loc = list(loc)
    if len(loc) > 1 and loc[0] == "world" and loc[1] in WORLD_KINDS:
        del loc[1]  # the union's tag, not a key the user wrote
    where = ""
    for item in loc:
        where += f"[{item}]" if isinstance(item, int) else (f".{item}" if where else str(item))
    return where


def format_validation_error(exc: ValidationError) -> str:
    """One line: ``key.path: message`` for each problem, joined by ``; ``."""
    parts = []
    for err in exc.errors():
        where = _key(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {where!r}")
        elif where and not message.startswith(where.split(".")[-1].split("[")[0] + " "):
            parts.append(f"{where}: {message}")
        else:
            parts.append(message)
    return "; ".join(parts)


def resolve_run_config(
    file_data: dict[str, Any] | None = None,
    flags: dict[str, Any] | None = None,
    sets: Iterable[str] = (),
    notes: list[str] | None = None,
) -> RunConfig:
    """Defaults <- file <- ``sets`` (``key=value``) <- flags; flags whose value is None are not given.

    A ``world`` flag (a kind) fills in a world table (from the file or ``sets``) that has no
    kind; a table of another kind is replaced, with a note appended to ``notes``.

    Raises:
        ConfigError: naming every key that is wrong.
    """
    data = _merged(file_data, sets, flags, notes)
    world = data.get("world")
    implicit_kind = isinstance(world, dict) and "kind" not in world
    if implicit_kind:
        data["world"] = {"kind": "gridscene", **world}
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        message = format_validation_error(exc)
        unknown = tuple(_key(e["loc"]) for e in exc.errors() if e["type"] == "extra_forbidden")
        if implicit_kind and any(k.startswith("world.") for k in unknown):
            message += " (world.kind is not set, so the world is gridscene; set world.kind or --world)"
        raise ConfigError(message, unknown) from None


def resolve_settings(model: type[BaseModel], file_data: dict[str, Any] | None = None, sets: Iterable[str] = (),
                     flags: dict[str, Any] | None = None, notes: list[str] | None = None) -> Any:
    """Defaults <- file <- ``sets`` <- ``flags`` (dotted keys; None values are not given) for any settings model (the
    sweeps'); errors, and a ``world`` flag (a kind), as :func:`resolve_run_config`'s.

    A ``world`` table without a kind adjusts the model's default world (``--set world.size=3``
    keeps the default's kind and other settings).

    Raises:
        ConfigError: naming every key that is wrong.
    """
    data = _merged(file_data, sets, flags, notes)
    if isinstance(data.get("world"), dict) and "kind" not in data["world"] and "world" in model.model_fields:
        default = model.model_fields["world"].get_default(call_default_factory=True)  # adjust the model's own world
        data["world"] = {**default.model_dump(exclude_none=True), **data["world"]}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        unknown = tuple(_key(e["loc"]) for e in exc.errors() if e["type"] == "extra_forbidden")
        raise ConfigError(format_validation_error(exc), unknown) from None
