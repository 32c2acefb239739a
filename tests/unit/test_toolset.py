"""ToolSet: merging, lookup and invoke()'s isError outcomes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from toold.tools import ToolOutcome, ToolRuntime, ToolSet, UnknownToolError, tool
from toold.tools.context import CallContext, report_progress


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
    assert asyncio.run(merged.execute("x", {})) == "second"
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


def test_invoke_unknown_raises() -> None:
    with pytest.raises(UnknownToolError):
        asyncio.run(ToolSet().invoke("nope", {}))


def test_invoke_success() -> None:
    tools = ToolSet([_named("hello", "hi there")])
    assert asyncio.run(tools.invoke("hello", {})) == ToolOutcome("hi there")


def test_invoke_makes_results_json_ready() -> None:
    @tool
    def paths() -> dict[str, object]:
        return {"p": Path("a/b"), "t": (1, 2)}

    outcome = asyncio.run(ToolSet([paths]).invoke("paths", {}))
    assert outcome == ToolOutcome({"p": "a/b", "t": [1, 2]})


def test_invoke_turns_exceptions_into_error_outcomes() -> None:
    @tool
    def boom(kind: str) -> str:
        if kind == "value":
            raise ValueError("bad value")
        raise KeyError("k")

    tools = ToolSet([boom])
    assert asyncio.run(tools.invoke("boom", {"kind": "value"})) == ToolOutcome(
        "Error: ValueError: bad value", is_error=True
    )
    assert asyncio.run(tools.invoke("boom", {"kind": "key"})) == ToolOutcome(
        "Error: KeyError: 'k'", is_error=True
    )


def test_invoke_builtin_failures(workspace: Path) -> None:
    (workspace / "f.txt").write_text("hello")
    tools = ToolSet.resolve(["edit_file", "read_file"], ToolRuntime(workspace=workspace))
    outcome = asyncio.run(
        tools.invoke("edit_file", {"file_path": "f.txt", "old_text": "zz", "new_text": "x"})
    )
    assert outcome == ToolOutcome("Error: ValueError: old_text not found in file", is_error=True)
    outcome = asyncio.run(tools.invoke("file_read", {"file_path": "f.txt", "offset": -1}))
    assert outcome == ToolOutcome("Error: ValueError: offset must be >= 0", is_error=True)
    outcome = asyncio.run(tools.invoke("read_file", {"file_path": "../x"}))
    assert outcome == ToolOutcome(
        f"Error: PermissionError: Path '../x' escapes workspace {workspace}", is_error=True
    )


def test_invoke_schema_failure_names_each_bad_field(workspace: Path) -> None:
    tools = ToolSet.resolve(["read_file"], ToolRuntime(workspace=workspace))
    outcome = asyncio.run(tools.invoke("read_file", {"offset": "x", "bogus": 1}))
    assert outcome.is_error
    assert outcome.content.startswith("Error: invalid arguments for read_file: ")
    assert "file_path: Field required" in outcome.content
    assert "offset: Input should be a valid integer" in outcome.content
    assert "(got 'x')" in outcome.content
    assert "bogus: unexpected argument; remove it" in outcome.content


def test_invoke_non_object_arguments(workspace: Path) -> None:
    tools = ToolSet.resolve(["glob"], ToolRuntime(workspace=workspace))
    outcome = asyncio.run(tools.invoke("glob", ["*.py"]))
    assert outcome == ToolOutcome(
        "Error: invalid arguments for glob: expected an object, got list", is_error=True
    )


def test_invoke_propagates_cancellation() -> None:
    @tool
    async def forever() -> None:
        await asyncio.Event().wait()

    async def scenario() -> None:
        task = asyncio.create_task(ToolSet([forever]).invoke("forever", {}))
        await asyncio.sleep(0)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(scenario())


def test_invoke_delivers_progress_from_worker_threads() -> None:
    @tool
    def chatty() -> str:
        report_progress("step 1")
        report_progress("")
        report_progress("step 2")
        return "done"

    seen: list[str] = []
    outcome = asyncio.run(
        ToolSet([chatty]).invoke("chatty", {}, context=CallContext(progress=seen.append))
    )
    assert outcome == ToolOutcome("done")
    assert seen == ["step 1", "step 2"]


def test_from_providers_later_wins(workspace: Path) -> None:
    from toold.tools import BuiltinToolProvider

    first = BuiltinToolProvider(ToolRuntime(workspace=workspace))
    second = BuiltinToolProvider(ToolRuntime(workspace=workspace / "sub"))
    tools = ToolSet.from_providers([first, second])
    assert len(tools) == len(first.get_tools())
    bash = tools.require("bash")
    assert bash.runtime is not None and bash.runtime.workspace == workspace / "sub"
