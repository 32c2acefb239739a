"""Tool annotations: declared once on each tool, read by the guard, the agent types,
tools/list and the MCP bridge."""

from __future__ import annotations

import asyncio

from toold.agents.system import AgentSystem
from toold.gateway import ToolGateway
from toold.permissions.guard import DENIED, PermissionGuard
from toold.tools import BuiltinToolProvider, ToolOutcome, ToolSet
from toold.tools.annotations import READS, ToolAnnotations
from toold.tools.context import CallContext
from toold.tools.decorator import tool
from toold.tools.formats import native
from toold_protocol import NativeTool

CLASSES = BuiltinToolProvider.tool_classes()


def _names(check: object) -> set[str]:
    return {name for name, cls in CLASSES.items() if check(cls.annotations)}  # type: ignore[operator]


def test_what_the_builtins_declare() -> None:
    assert _names(lambda a: a.safe) == {
        "read_file",
        "glob",
        "grep",
        "list_dir",
        "glob_search",
        "grep_search",
        "file_info",
        "calculator",
        "todo_read",
        "todo_write",
        "task_list",
        "task_get",
        "team_list",
        "load_skill",
    }
    always = {"write_file", "edit_file", "str_replace", "task_create", "task_update"}
    assert _names(lambda a: a.confirm == "always") == always
    assert _names(lambda a: a.writes_path) == {"write_file", "edit_file", "str_replace"}
    assert _names(lambda a: a.runs_code) == {"python_repl"}
    # Read-only means it changes nothing; a read-only tool is never destructive.
    assert all(not a.destructive for a in (c.annotations for c in CLASSES.values()) if a.read_only)
    assert "duckduckgo_search" in _names(lambda a: a.read_only and a.open_world)


def test_a_tool_that_declares_nothing_gets_mcps_cautious_defaults() -> None:
    @tool
    def mine(text: str) -> str:
        """A user's own tool."""
        return text

    assert mine.annotations == ToolAnnotations()
    assert (mine.annotations.read_only, mine.annotations.destructive) == (False, True)
    assert mine.annotations.open_world and mine.annotations.confirm == "ask"
    assert not mine.annotations.safe

    @tool(annotations=READS)
    def reader(path: str) -> str:
        """Reads."""
        return path

    assert reader.annotations.safe


def test_tools_list_carries_them_in_camel_case() -> None:
    for cls in CLASSES.values():
        entry = native(cls())
        parsed = NativeTool.model_validate(entry)
        assert parsed.annotations.read_only_hint is cls.annotations.read_only
        assert parsed.annotations.confirm == cls.annotations.confirm
    read = native(CLASSES["read_file"]())["annotations"]
    assert read == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
        "confirm": "never",
        "writesPath": False,
        "runsCode": False,
    }


def test_read_only_agent_types_get_the_read_only_tools_that_never_ask() -> None:
    tools = ToolSet(BuiltinToolProvider().get_tools())
    system = AgentSystem(None, ToolGateway(tools, PermissionGuard()), system_prompt="")
    explore = set(system.toolset_for("explore").names())
    assert explore == _names(lambda a: a.read_only and a.safe)
    assert "todo_write" not in explore  # never asks, but writes
    assert "duckduckgo_search" not in explore  # reads, but asks (plan mode refuses it)
    assert "write_file" in system.toolset_for("general-purpose").names()


def test_the_guard_reads_the_tools_own_annotations() -> None:
    guard = PermissionGuard(mode="default")
    # A tool the guard does not know, and one without annotations, ask.
    assert guard.decide("my_tool", {}).action == "ask"
    assert guard.decide("my_tool", {}, ToolAnnotations()).action == "ask"
    # A user's tool that declares READS runs unasked; one that borrows a builtin's name
    # but declares nothing does not inherit the builtin's safety.
    assert guard.decide("my_reader", {}, READS).action == "allow"
    assert guard.decide("read_file", {"file_path": "a"}, ToolAnnotations()).action == "ask"
    assert guard.decide("read_file", {"file_path": "a"}).action == "allow"
    # always / writes_path / runs_code come from the annotations too.
    always = ToolAnnotations(confirm="always")
    allowing = PermissionGuard.from_config("auto", ["mine"], [])
    assert allowing.decide("mine", {}, always).action == "ask"
    writes = ToolAnnotations(writes_path=True)
    decision = guard.decide("mine", {"file_path": "toold.toml"}, writes)
    assert (decision.action, decision.approvable) == ("ask", False)
    code = ToolAnnotations(runs_code=True)
    decision = guard.decide("mine", {"code": "open('toold.toml', 'w')"}, code)
    assert (decision.action, decision.approvable) == ("ask", False)
    # Plan mode runs only what never asks.
    assert PermissionGuard(mode="plan").decide("my_reader", {}, READS).action == "allow"
    assert PermissionGuard(mode="plan").decide("my_tool", {}).action == "ask"


def test_through_the_gateway_a_users_tool_is_judged_by_its_own_annotations() -> None:
    @tool(name="read_file")
    def shadow(file_path: str) -> str:
        """A user's own read_file that declares nothing."""
        return "ran"

    @tool(annotations=READS)
    def peek(file_path: str) -> str:
        """A user's own reader."""
        return "peeked"

    gateway = ToolGateway(ToolSet([shadow, peek]), PermissionGuard(mode="default"))

    async def both() -> tuple[ToolOutcome, ToolOutcome]:
        context = CallContext(origin="agent")
        return (
            await gateway.call("read_file", {"file_path": "a"}, context),
            await gateway.call("peek", {"file_path": "a"}, context),
        )

    shadowed, peeked = asyncio.run(both())
    assert (shadowed.content, shadowed.is_error) == (DENIED, True)
    assert (peeked.content, peeked.is_error) == ("peeked", False)
