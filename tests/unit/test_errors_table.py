"""toold.errors: the domain errors, the one table to JSON-RPC codes, the one formatter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from toold import errors
from toold_protocol import METHODS
from toold_protocol import errors as codes
from toold_protocol.names import JOBS_GET

ROOT = Path(__file__).resolve().parents[2]
DAEMON = ROOT / "daemon" / "toold"


def _domain_errors() -> list[type[errors.TooldError]]:
    found: list[type[errors.TooldError]] = []
    todo: list[type[errors.TooldError]] = [errors.TooldError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("toold"):
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_domain_error_is_in_the_table_with_a_named_code() -> None:
    import toold.jobs.manager
    import toold.planning.tasks
    import toold.tools.toolset  # noqa: F401  (modules that raise domain errors)

    for cls in _domain_errors():
        assert cls in errors.JSONRPC_CODES, f"{cls.__name__}: add it to JSONRPC_CODES"
        assert errors.JSONRPC_CODES[cls] in codes.ERROR_NAMES, cls.__name__


@pytest.mark.parametrize(
    ("exc", "code", "message", "data"),
    [
        (errors.UnknownJob("nope"), codes.NOT_FOUND, "Unknown job: nope", None),
        (errors.UnknownTool("gerp"), codes.INVALID_PARAMS, "Unknown tool: gerp", None),
        (errors.ForeignJob("runs elsewhere"), codes.INVALID_REQUEST, "runs elsewhere", None),
        (errors.TaskStoreError("fix it"), codes.INTERNAL_ERROR, "fix it", None),
        (errors.InvalidParams("x: bad"), codes.INVALID_PARAMS, "x: bad", None),
        (
            errors.AgentUnavailable("MY_KEY"),
            codes.INVALID_REQUEST,
            "Agent unavailable: provider is not configured: no API key in $MY_KEY. "
            "Set it in the environment the editor starts toold with, or name the variable "
            "holding your key in toold.toml ([agent] api_key_env), then restart toold.",
            {"apiKeyEnv": "MY_KEY"},
        ),
    ],
)
def test_wire_error(exc: errors.TooldError, code: int, message: str, data: object) -> None:
    assert errors.wire_error(exc) == errors.WireError(code, message, data)


def test_a_subclass_takes_its_nearest_listed_ancestors_code() -> None:
    class Stale(errors.UnknownJob):
        pass

    assert errors.wire_error(Stale("j1")).code == codes.NOT_FOUND


def test_lookups_still_catch_as_key_errors() -> None:
    """Callers that catch KeyError (a dict-like lookup) keep working."""
    for exc in (errors.UnknownJob("j"), errors.UnknownTool("t")):
        with pytest.raises(KeyError):
            raise exc


def test_the_job_store_raises_unknown_job(tmp_path: Path) -> None:
    import asyncio

    from toold.jobs.manager import BackgroundManager

    async def never(*_: object) -> object:
        raise AssertionError("no job is started here")

    manager = BackgroundManager(tmp_path / "jobs", execute=never)
    with pytest.raises(errors.UnknownJob, match="Unknown job: gone"):
        manager.get("gone")
    with pytest.raises(errors.UnknownJob):
        asyncio.run(manager.cancel("gone"))


def test_lsp_and_mcp_front_ends_share_the_table() -> None:
    from toold.bridge.mcp_server import as_mcp
    from toold.rpc import as_jsonrpc

    exc = errors.AgentUnavailable("K")
    lsp = as_jsonrpc(exc)
    assert (lsp.code, lsp.message, lsp.data) == (
        codes.INVALID_REQUEST,
        str(exc),
        {"apiKeyEnv": "K"},
    )
    mcp = as_mcp(exc)
    assert (mcp.error.code, mcp.error.message, mcp.error.data) == (
        codes.INVALID_REQUEST,
        str(exc),
        {"apiKeyEnv": "K"},
    )
    assert as_mcp(errors.UnknownTool("x")).error.data is None


def test_parse_params_names_each_field() -> None:
    from toold.rpc import parse_params

    spec = METHODS[JOBS_GET]
    with pytest.raises(errors.InvalidParams) as info:
        parse_params(spec, {"jobId": 5, "extra": 1})
    assert str(info.value) == (
        "jobs/get: invalid params: jobId: Input should be a valid string; "
        "extra: Extra inputs are not permitted"
    )
    with pytest.raises(errors.InvalidParams, match="params must be an object, got list"):
        parse_params(spec, [])


class _Sample(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int
    name: str


def _error(value: dict[str, object]) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        _Sample.model_validate(value)
    return info.value


def test_field_problems() -> None:
    exc = _error({"name": "x" * 200, "other": 1})
    assert errors.field_problems(exc, "params", show_input=False) == [
        "count: Field required",
        "other: Extra inputs are not permitted",
    ]
    assert errors.field_problems(exc, "arguments", unexpected="unexpected argument; remove it") == [
        "count: Field required",
        "other: unexpected argument; remove it",
    ]
    wrong = _error({"count": "many", "name": "n"})
    (problem,) = errors.field_problems(wrong, "arguments")
    integer = "Input should be a valid integer, unable to parse string as an integer"
    assert problem == f"count: {integer} (got 'many')"


def test_field_problems_names_the_root_and_cuts_long_inputs() -> None:
    with pytest.raises(ValidationError) as info:
        _Sample.model_validate("y" * 300)
    (problem,) = errors.field_problems(info.value, "params")
    assert problem.startswith("params: Input should be a valid dictionary")
    assert problem.endswith("(got '" + "y" * 79 + ")")


def _imports(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
    return found


def test_handlers_import_no_transport() -> None:
    for module in _imports(DAEMON / "handlers"):
        assert module.split(".")[0] not in ("pygls", "lsprotocol", "mcp"), module


def test_error_codes_are_named_only_in_the_wire_contract() -> None:
    """No -32xxx/-33xxx literal in code outside toold_protocol/errors.py (docstrings may cite)."""
    found = []
    for path in sorted(DAEMON.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.UnaryOp)
                and isinstance(node.op, ast.USub)
                and isinstance(node.operand, ast.Constant)
                and isinstance(node.operand.value, int)
                and 32000 <= node.operand.value <= 33999
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], "use toold_protocol.errors' names: " + ", ".join(found)
