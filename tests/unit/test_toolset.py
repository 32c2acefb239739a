"""ToolSet (a plain collection): merging and lookup; and how a call's failures become
isError outcomes on the one run path (ToolGateway.call, then toold.dispatch)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from toold.tools import ToolRuntime, ToolSet, UnknownToolError, tool
from toold.tools.context import report_progress


def _run(tools: ToolSet, name: str, args: Any, **context: Any) -> tuple[Any, bool]:
    """The content and isError flag of one call through the gateway, as the user."""
    outcome = asyncio.run(user_call(tools, name, args, **context))
    assert (outcome.exit_code, outcome.timed_out) == (None, False)
    return outcome.content, outcome.is_error


def _named(name: str, text: str):  # type: ignore[no-untyped-def]
    @tool(name=name, description=text)
    def fn() -> str:
        return text

    return fn


def test_merge_last_wins() -> None:
    first, second, other = _named("x", "first"), _named("x", "second"), _named("y", "other")
    merged = ToolSet.merge(ToolSet([first, other]), [second])
    assert len(merged) == 2
    assert sorted(merged.names()) == ["x", "y"]
    assert merged.get("x") is second
    assert _run(merged, "x", {}) == ("second", False)
    back = ToolSet.merge([second], ToolSet([first]))
    assert back.get("x") is first


def test_constructor_dedupes_by_name_last_wins() -> None:
    first, second = _named("x", "first"), _named("x", "second")
    tools = ToolSet([first, second])
    assert len(tools) == 1
    assert tools.require("x") is second


def test_iteration_and_contains() -> None:
    a, b = _named("a", "A"), _named("b", "B")
    tools = ToolSet.from_tools([a, b])
    assert list(tools) == [a, b]
    assert "a" in tools
    assert "c" not in tools
    assert 3 not in tools


def test_require_unknown() -> None:
    with pytest.raises(UnknownToolError) as info:
        ToolSet().require("nope")
    assert str(info.value) == "Unknown tool: nope"


def test_a_call_unknown_raises() -> None:
    with pytest.raises(UnknownToolError):
        asyncio.run(user_call(ToolSet(), "nope", {}))


def test_a_call_success() -> None:
    tools = ToolSet([_named("hello", "hi there")])
    assert _run(tools, "hello", {}) == ("hi there", False)


def test_a_call_makes_results_json_ready() -> None:
    @tool
    def paths() -> dict[str, object]:
        return {"p": Path("a/b"), "t": (1, 2)}

    assert _run(ToolSet([paths]), "paths", {}) == ({"p": "a/b", "t": [1, 2]}, False)


def test_a_call_turns_exceptions_into_error_outcomes() -> None:
    @tool
    def boom(kind: str) -> str:
        if kind == "value":
            raise ValueError("bad value")
        raise KeyError("k")

    tools = ToolSet([boom])
    assert _run(tools, "boom", {"kind": "value"}) == ("Error: ValueError: bad value", True)
    assert _run(tools, "boom", {"kind": "key"}) == ("Error: KeyError: 'k'", True)


def test_a_call_builtin_failures(workspace: Path) -> None:
    (workspace / "f.txt").write_text("hello")
    tools = ToolSet.resolve(["edit_file", "read_file"], ToolRuntime(workspace=workspace))
    edit = {"file_path": "f.txt", "old_text": "zz", "new_text": "x"}
    assert _run(tools, "edit_file", edit) == (
        "Error: ValueError: old_text not found in file",
        True,
    )
    assert _run(tools, "file_read", {"file_path": "f.txt", "offset": -1}) == (
        "Error: ValueError: offset must be >= 0",
        True,
    )
    assert _run(tools, "read_file", {"file_path": "../x"}) == (
        f"Error: PermissionError: Path '../x' escapes workspace {workspace}",
        True,
    )


def test_a_call_schema_failure_names_each_bad_field(workspace: Path) -> None:
    tools = ToolSet.resolve(["read_file"], ToolRuntime(workspace=workspace))
    outcome = asyncio.run(user_call(tools, "read_file", {"offset": "x", "bogus": 1}))
    assert outcome.is_error
    assert outcome.content.startswith("Error: invalid arguments for read_file: ")
    assert "file_path: Field required" in outcome.content
    assert "offset: Input should be a valid integer" in outcome.content
    assert "(got 'x')" in outcome.content
    assert "bogus: unexpected argument; remove it" in outcome.content


def test_a_call_non_object_arguments(workspace: Path) -> None:
    tools = ToolSet.resolve(["glob"], ToolRuntime(workspace=workspace))
    assert _run(tools, "glob", ["*.py"]) == (
        "Error: invalid arguments for glob: expected an object, got list",
        True,
    )


def test_a_call_propagates_cancellation() -> None:
    @tool
    async def forever() -> None:
        await asyncio.Event().wait()

    async def scenario() -> None:
        task = asyncio.create_task(user_call(ToolSet([forever]), "forever", {}))
        await asyncio.sleep(0)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(scenario())


def test_a_call_delivers_progress_from_worker_threads() -> None:
    @tool
    def chatty() -> str:
        report_progress("step 1")
        report_progress("")
        report_progress("step 2")
        return "done"

    seen: list[str] = []
    assert _run(ToolSet([chatty]), "chatty", {}, progress=seen.append) == ("done", False)
    assert seen == ["step 1", "step 2"]


def test_from_providers_later_wins(workspace: Path) -> None:
    from toold.tools import BuiltinToolProvider

    first = BuiltinToolProvider(ToolRuntime(workspace=workspace))
    second = BuiltinToolProvider(ToolRuntime(workspace=workspace / "sub"))
    tools = ToolSet.from_providers([first, second])
    assert len(tools) == len(first.get_tools())
    bash = tools.require("bash")
    assert bash.runtime is not None and bash.runtime.workspace == workspace / "sub"
