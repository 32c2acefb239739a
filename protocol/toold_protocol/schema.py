"""Generate protocol/schema.json: the JSON Schema of every message, for non-Python clients.

Run ``python -m toold_protocol.schema`` to rewrite the checked-in file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from toold_protocol import PROTOCOL_VERSION, errors
from toold_protocol.methods import METHODS

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema.json"


def build_schema() -> dict[str, Any]:
    """Return the schema document for every method in METHODS."""
    models: list[tuple[type[BaseModel], Literal["validation", "serialization"]]] = []
    for spec in METHODS.values():
        models.append((spec.params, "validation"))
        if spec.result is not None:
            models.append((spec.result, "serialization"))
    refs, defs = models_json_schema(models, by_alias=True, ref_template="#/$defs/{model}")
    methods: dict[str, Any] = {}
    for spec in METHODS.values():
        entry: dict[str, Any] = {
            "direction": spec.direction,
            "kind": "notification" if spec.is_notification else "request",
            "description": spec.doc,
            "params": refs[(spec.params, "validation")],
        }
        if spec.result is not None:
            entry["result"] = refs[(spec.result, "serialization")]
        methods[spec.name] = entry
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "toold wire contract",
        "version": PROTOCOL_VERSION,
        "methods": methods,
        "errorCodes": {name: code for code, name in sorted(errors.ERROR_NAMES.items())},
        "$defs": defs["$defs"],
    }


def render() -> str:
    """The schema as the exact text checked in."""
    return json.dumps(build_schema(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    """Write schema.json next to the package, or with --check fail when it is stale."""
    text = render()
    if "--check" in sys.argv[1:]:
        if not SCHEMA_PATH.exists() or SCHEMA_PATH.read_text(encoding="utf-8") != text:
            print(f"{SCHEMA_PATH} is stale: run python -m toold_protocol.schema", file=sys.stderr)
            return 1
        return 0
    SCHEMA_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
