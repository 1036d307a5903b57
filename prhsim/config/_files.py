"""Reading a configuration file: JSON or TOML, UTF-8, a table of settings at the top."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

#: The formats a config file may have, by suffix.
FORMATS = {".json": "JSON", ".toml": "TOML"}
#: The deepest nesting of tables a config file may have (the settings are at most a few levels deep).
MAX_DEPTH = 32


class ConfigError(ValueError):
    """A configuration file, key or flag is invalid; the one-line message names the key.

    Attributes:
        unknown_keys: the keys (``"world.size"``) that the settings do not have.
    """

    def __init__(self, message: str, unknown_keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.unknown_keys = unknown_keys


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a ``.json`` or ``.toml`` file of settings into a dict.

    Raises:
        ConfigError: the file is missing or unreadable, has another suffix, is not
            UTF-8, does not parse, or does not hold a table of settings.
    """
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        accepted = " or ".join(FORMATS)
        raise ConfigError(f"config file {path}: unsupported format {path.suffix or '(no suffix)'!r}; "
                          f"config files are {accepted}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text: byte 0x{raw[exc.start]:02x} "
                          f"at offset {exc.start}") from None
    depth = _bracket_depth(text)
    if depth > MAX_DEPTH:
        raise ConfigError(f"config file {path} nests {depth} levels deep; settings are at most {MAX_DEPTH} levels")
    try:
        data = tomllib.loads(text) if fmt == "TOML" else json.loads(text, object_pairs_hook=_unique_keys)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid {fmt}: {exc}") from None
    except _DuplicateKey as exc:
        raise ConfigError(f"config file {path} sets {exc.args[0]!r} twice (JSON keeps the last silently; "
                          f"remove one)") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a table/object of settings, got {type(data).__name__}")
    return data


class _DuplicateKey(Exception):
    """A JSON object with one key twice (TOML refuses it by itself)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _bracket_depth(text: str) -> int:
    """The deepest nesting of ``{``/``[`` outside strings (a cheap guard before a recursive parser)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "}]":
            depth -= 1
    return deepest


def is_run_folder_config(path: Path) -> bool:
    """True for the config.json a run wrote into its folder (a results.json sits beside it)."""
    path = Path(path)
    return path.name == "config.json" and (path.parent / "results.json").is_file()
