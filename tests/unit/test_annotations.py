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
        "diagnostics",
    }
    writers = {"write_file", "edit_file", "str_replace", "multi_edit", "apply_patch"}
    always = writers | {"task_create", "task_update"}
    assert _names(lambda a: a.confirm == "always") == always
    assert _names(lambda a: a.writes_path) == writers
    assert _names(lambda a: a.runs_code) == {"python_repl"}
    assert _names(lambda a: a.shell) == {"bash", "background_run"}
    assert _names(lambda a: a.searches_folder) == {
        "grep",
        "glob",
        "list_dir",
        "glob_search",
        "grep_search",
    }
    assert _names(lambda a: a.agents == "lead") == {"team_spawn", "team_register"}
    assert _names(lambda a: a.agents == "team") == {"team_send"}
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
    assert not (mine.annotations.shell or mine.annotations.searches_folder)
    assert mine.annotations.agents == "all"

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


def test_who_gets_the_team_tools_comes_from_their_annotations() -> None:
    @tool(annotations=ToolAnnotations(agents="lead"))
    def conduct(text: str) -> str:
        """Only the main loop."""
        return text

    @tool(annotations=ToolAnnotations(agents="team"))
    def huddle(text: str) -> str:
        """The main loop and its teammates."""
        return text

    tools = ToolSet([*BuiltinToolProvider().get_tools(), conduct, huddle])
    system = AgentSystem(None, ToolGateway(tools, PermissionGuard()), system_prompt="")
    everyone = set(tools.names())
    lead_only = {"team_spawn", "team_register", "conduct"}
    team = {"team_send", "huddle"}
    assert set(system.toolset_for("general-purpose").names()) == everyone - lead_only - team
    assert set(system.toolset_for_teammate().names()) == everyone - lead_only


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


def test_a_tool_that_says_it_is_a_shell_is_judged_as_one() -> None:
    shell = ToolAnnotations(shell=True)
    default = PermissionGuard(mode="default")
    # Its command is parsed: a read-only line runs, a dangerous one asks unapprovably.
    assert default.decide("my_shell", {"command": "ls -la"}, shell).action == "allow"
    decision = default.decide("my_shell", {"command": "rm -rf build"}, shell)
    assert (decision.action, decision.approvable) == ("ask", False)
    assert PermissionGuard(mode="auto").decide("my_shell", {"command": "make"}, shell).action == (
        "allow"
    )
    # Rules match each command of the line, as for bash.
    denying = PermissionGuard.from_config("auto", [], ["my_shell(git push*)"])
    decision = denying.decide("my_shell", {"command": "echo hi && git push"}, shell)
    assert (decision.action, decision.approvable) == ("ask", False)
    allowing = PermissionGuard.from_config("default", ["my_shell(git status*)"], [])
    assert allowing.decide("my_shell", {"command": "git status; touch x"}, shell).action == "ask"
    # The same tool saying nothing asks (no shell allowances), in auto mode too.
    assert PermissionGuard(mode="auto").decide("my_shell", {"command": "ls"}).action == "ask"


def test_a_tool_that_took_a_shells_name_gets_a_shells_checks_not_its_allowances() -> None:
    plain = ToolAnnotations()
    # Not a shell: a read-only line or auto mode does not let it run unasked ...
    assert PermissionGuard(mode="default").decide("bash", {"command": "ls"}, plain).action == (
        "ask"
    )
    assert PermissionGuard(mode="auto").decide("bash", {"command": "ls"}, plain).action == "ask"
    reader = PermissionGuard(mode="default").decide("bash", {"command": "ls"}, READS)
    assert reader.action == "ask"
    # ... but rules written for bash are read as bash's: every command must be covered,
    # and a deny rule matches any command of the line.
    allowing = PermissionGuard.from_config("auto", ["bash(git status*)"], [])
    assert allowing.decide("bash", {"command": "git status; rm -rf /"}, plain).action == "ask"
    assert allowing.decide("bash", {"command": "git status"}, plain).action == "allow"
    denying = PermissionGuard.from_config("auto", ["bash(rm*)"], ["bash(rm*)"])
    decision = denying.decide("bash", {"command": "echo; rm x"}, plain)
    assert (decision.action, decision.approvable) == ("ask", False)
    # "Always allow" remembers the exact line, not the whole tool.
    guard = PermissionGuard(mode="default")
    rule = guard.approve_always("bash", {"command": "make test"}, plain)
    assert rule is not None and rule.pattern == "make test"


def test_folder_deny_rules_follow_the_searches_folder_annotation() -> None:
    searches = ToolAnnotations(read_only=True, confirm="never", searches_folder=True)
    guard = PermissionGuard.from_config("default", [], ["my_search(secrets/keys)"])
    # Searching a folder above a denied path is denied; a sibling is not.
    for path in (".", "secrets"):
        decision = guard.decide("my_search", {"path": path}, searches)
        assert (decision.action, decision.approvable) == ("ask", False), path
    assert guard.decide("my_search", {"path": "src"}, searches).action == "allow"
    # Without the annotation only the exact path is covered.
    reader = ToolAnnotations(read_only=True, confirm="never")
    assert guard.decide("my_search", {"path": "."}, reader).action == "allow"
    # A user tool that took grep's name is read as grep is: stricter, never looser.
    grep_deny = PermissionGuard.from_config("default", [], ["grep(secrets/keys)"])
    assert grep_deny.decide("grep", {"path": "."}, reader).action == "ask"
