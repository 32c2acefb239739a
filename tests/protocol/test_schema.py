"""The wire contract package: schema.json is current and the package depends on pydantic only."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import toold_protocol
from toold_protocol.schema import SCHEMA_PATH, render

ROOT = Path(__file__).resolve().parents[2]


def test_schema_json_is_current() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render(), (
        "protocol/schema.json is stale: run `python -m toold_protocol.schema`"
    )


def test_schema_describes_every_method() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert set(schema["methods"]) == set(toold_protocol.METHODS)
    call = schema["methods"]["tools/call"]
    params = schema["$defs"][call["params"]["$ref"].rsplit("/", 1)[1]]
    assert set(params["properties"]) == {"name", "arguments", "origin", "workDoneToken"}
    result = schema["$defs"][call["result"]["$ref"].rsplit("/", 1)[1]]
    assert set(result["properties"]) == {
        "content",
        "isError",
        "exitCode",
        "decision",
        "rule",
        "jobId",
        "diagnostics",
    }
    assert schema["errorCodes"]["ServerNotInitialized"] == -32002


def test_own_error_codes_avoid_reserved_ranges() -> None:
    from toold_protocol import errors

    own = [errors.MESSAGE_TOO_LARGE, errors.NOT_FOUND]
    assert all(not (-32899 <= code <= -32800) for code in own)
    assert all(not (-32768 <= code <= -32000) for code in own)


def _imports(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_protocol_imports_only_pydantic_and_stdlib() -> None:
    third_party = _imports(ROOT / "protocol" / "toold_protocol") - {"toold_protocol"}
    import sys

    assert {m for m in third_party if m not in sys.stdlib_module_names} == {"pydantic"}


def test_stores_and_tools_never_import_pygls() -> None:
    for sub in ("tools", "search", "sandbox"):
        assert "pygls" not in _imports(ROOT / "daemon" / "toold" / sub), sub
