"""``prhsim worlds``: every world kind with its settings, defaults and ranges, read from the config models."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from prhsim.cli._console import console
from prhsim.config import WORLD_MODELS

_KEYWORDS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
             ("minItems", "length >="), ("maxItems", "length <="))


def _range(schema: dict[str, Any], prefix: str = "") -> list[str]:
    """Constraints of one JSON-schema property, items included (``each >= 0``)."""
    parts = [f"{prefix}{symbol} {schema[key]}" for key, symbol in _KEYWORDS if key in schema]
    for option in schema.get("anyOf", []):
        parts += _range(option, prefix)
    if "items" in schema:
        parts += _range(schema["items"], "each " if not prefix else prefix)
    return parts


def _type_name(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " | ".join(_type_name(option) for option in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list[{_type_name(schema.get('items', {}))}]"
    return {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "null": "None"}.get(
        schema.get("type", ""), "any")


def world_catalogue() -> list[dict[str, Any]]:
    """One entry per world kind: its description and each setting's type, default, range and meaning."""
    catalogue = []
    for model in WORLD_MODELS:
        settings = []
        properties = model.model_json_schema()["properties"]
        for name, field in model.model_fields.items():
            if name == "kind":
                continue
            default = field.get_default(call_default_factory=True)
            schema = properties[name]
            settings.append({"key": f"world.{name}", "type": _type_name(schema), "default": default,
                             "range": ", ".join(_range(schema)) or "-", "description": field.description or ""})
        kind = model.model_fields["kind"].default
        summary = (model.__doc__ or "").strip().splitlines()[0].removeprefix(f"{kind}: ")
        catalogue.append({"kind": kind, "description": summary,
                          "states_by_default": model().n_states, "settings": settings})
    return catalogue


@click.command()
@click.option("--json", "as_json", is_flag=True, default=False, help="Print the catalogue as JSON.")
def worlds(as_json: bool) -> None:
    """List every world kind with its settings, defaults and ranges.

    Use a world with `prhsim run --world KIND`, set its settings with flags
    (--size, --objects, --n, --shape), `--set world.KEY=VALUE`, or a [world]
    table in a config file.
    """
    catalogue = world_catalogue()
    if as_json:
        click.echo(json.dumps(catalogue, indent=2))
        return
    out = console()
    for entry in catalogue:
        title = f"{entry['kind']}: {entry['description']} ({entry['states_by_default']:,} states by default)"
        table = Table(title=escape(title), title_justify="left")
        for col in ("setting", "type", "default", "range", "meaning"):
            table.add_column(col, overflow="fold")
        for s in entry["settings"]:
            table.add_row(*(escape(cell) for cell in (s["key"], s["type"], json.dumps(s["default"]), s["range"],
                                                      s["description"])))
        out.print(table)
