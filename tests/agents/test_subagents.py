"""Subagents: tool filters, nesting and its limit, guard downgrades, background runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import API_KEY, ModelServer, tool_names, tool_results
from tests.calls import user_call
from toold.agents.provider import AnthropicProvider
from toold.agents.system import AGENT_TYPES, AgentSystem
from toold.gateway import ToolGateway
from toold.jobs.manager import BackgroundManager
from toold.jobs.records import Outcome
from toold.permissions.guard import PermissionGuard
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet

WRITE_TOOLS = {"write_file", "edit_file", "bash", "subagent"}


# subagent is not a safe tool: without this allow rule the guard would ask (and, with no
# asker, deny) before any child runs.
def subagents_allowed() -> PermissionGuard:
    return PermissionGuard.from_config("default", ["subagent"], [])


@dataclass
class Asker:
    """Records what the guard asked and answers with ``answer``."""

    answer: str | None = "allow"
    asked: list[str] = field(default_factory=list)

    async def __call__(self, tool: str, args: Any, reason: str) -> Any:
        self.asked.append(tool)
        return self.answer


def run_system(
    model: ModelServer,
    workspace: Path,
    body: Callable[[AgentSystem], Awaitable[Any]],
    *,
    guard: PermissionGuard | None = None,
    with_jobs: bool = False,
    **options: Any,
) -> Any:
    """Build an AgentSystem over the builtin tools bound to ``workspace`` and run ``body``."""

    async def main() -> Any:
        runtime = ToolRuntime(workspace=workspace)
        toolset = ToolSet(BuiltinToolProvider(runtime).get_tools())
        provider = AnthropicProvider(API_KEY, base_url=model.url)
        jobs = None
        if with_jobs:

            async def no_commands(*_: Any) -> Outcome:
                raise AssertionError("no shell jobs in these tests")

            jobs = BackgroundManager(workspace / ".toold" / "jobs", no_commands)
        system = AgentSystem(
            provider,
            ToolGateway(toolset, guard or PermissionGuard(mode="default")),
            system_prompt="MAIN PROMPT",
            background=jobs,
            drain=jobs.drain_notifications if jobs else None,
            **options,
        )
        runtime.agents = system
        runtime.background = jobs
        try:
            return await body(system)
        finally:
            if jobs is not None:
                await jobs.close()
            await provider.close()

    return asyncio.run(main())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("needle\n", encoding="utf-8")
    return ws.resolve()


@pytest.mark.parametrize("agent_type", ["explore", "plan", "code-review"])
def test_read_only_types_get_no_write_tools(
    model: ModelServer, workspace: Path, agent_type: str
) -> None:
    model.tool_use(("subagent", {"task": "find the needle", "agent_type": agent_type}))
    model.tool_use(("read_file", {"file_path": "notes.txt"}))
    model.text("needle is in notes.txt:1")
    model.text("The child says: notes.txt:1")

    text = run_system(
        model, workspace, lambda s: s.run("where is the needle?"), guard=subagents_allowed()
    )

    assert text == "The child says: notes.txt:1"
    main, child, child2, main2 = model.wait_requests(4)
    assert tool_names(main) >= WRITE_TOOLS
    assert not tool_names(child) & WRITE_TOOLS
    assert {"read_file", "glob", "grep"} <= tool_names(child)
    # A fresh conversation: the parent prompt plus the type's prompt, the task as the only turn.
    assert child["system"] == f"MAIN PROMPT\n\n{AGENT_TYPES[agent_type].prompt}"
    assert child["messages"] == [{"role": "user", "content": "find the needle"}]
    assert tool_results(child2)[0]["content"] == "1: needle"
    assert tool_results(main2)[0]["content"] == "needle is in notes.txt:1"


def test_a_read_only_child_runs_in_plan_mode_and_never_asks(
    model: ModelServer, workspace: Path
) -> None:
    asker = Asker("allow")
    parent = PermissionGuard.from_config("default", [], ["read_file"], ask=asker)
    # The model names a write tool it was not offered, and a tool a deny rule covers.
    model.tool_use(
        ("write_file", {"file_path": "x.txt", "content": "x"}),
        ("read_file", {"file_path": "notes.txt"}),
    )
    model.text("could not")

    async def body(system: AgentSystem) -> str:
        return await system.run_subagent("look", "explore")

    assert run_system(model, workspace, body, guard=parent) == "could not"
    write, read = tool_results(model.wait_requests(2)[1])
    assert write["content"] == "Unknown tool: write_file"
    assert read["content"] == "Plan mode: read_file blocked (read-only)"
    assert asker.asked == []
    assert not (workspace / "x.txt").exists()


def test_child_guards() -> None:
    system = AgentSystem(None, ToolGateway(ToolSet(), PermissionGuard()), system_prompt="")
    parent = PermissionGuard(mode="auto", ask=Asker())
    for kind in ("explore", "plan", "code-review"):
        child = system.child_guard(parent, kind, background=False)
        assert (child.mode, child.fail_closed) == ("plan", True)
    inherit = system.child_guard(parent, "general-purpose", background=False)
    assert (inherit.mode, inherit.fail_closed) == ("auto", False)
    assert inherit.ask is parent.ask
    background = system.child_guard(parent, "general-purpose", background=True)
    assert (background.mode, background.fail_closed) == ("auto", True)
    # Session approvals are shared with the parent.
    assert background.session_rules is parent.session_rules


def test_general_purpose_nests_until_the_depth_limit(model: ModelServer, workspace: Path) -> None:
    for level in (1, 2, 3):
        model.tool_use(("subagent", {"task": f"level {level}"}))
    for level in (2, 1, 0):
        model.text(f"done at depth {level}")

    text = run_system(
        model, workspace, lambda s: s.run("start"), guard=subagents_allowed(), max_depth=2
    )

    assert text == "done at depth 0"
    requests = model.wait_requests(6)
    _, depth1, depth2, depth2_after, depth1_after, main_after = requests
    assert depth1["messages"] == [{"role": "user", "content": "level 1"}]
    assert depth2["messages"] == [{"role": "user", "content": "level 2"}]
    general = AGENT_TYPES["general-purpose"].prompt
    assert depth1["system"] == depth2["system"] == f"MAIN PROMPT\n\n{general}"
    # general-purpose children may nest and write, but never use the main-loop-only tools.
    assert {"subagent", "write_file", "bash"} <= tool_names(depth1)
    assert not tool_names(depth1) & {"team_spawn", "team_send", "team_register"}
    [refused] = tool_results(depth2_after)
    assert refused["content"] == "Subagent refused: recursion depth 3 exceeds limit 2."
    assert tool_results(depth1_after)[0]["content"] == "done at depth 2"
    assert tool_results(main_after)[0]["content"] == "done at depth 1"


def test_a_general_purpose_child_inherits_mode_and_asker(
    model: ModelServer, workspace: Path
) -> None:
    asker = Asker("allow")
    model.tool_use(("write_file", {"file_path": "out.txt", "content": "hello"}))
    model.text("written")

    async def body(system: AgentSystem) -> str:
        return await system.run_subagent("write it", "general-purpose")

    guard = PermissionGuard(mode="default", ask=asker)
    assert run_system(model, workspace, body, guard=guard) == "written"
    assert asker.asked == ["write_file"]
    assert (workspace / "out.txt").read_text() == "hello"


def test_unknown_agent_type_falls_back_with_a_warning(
    model: ModelServer, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model.text("ok")

    async def body(system: AgentSystem) -> str:
        return await system.run_subagent("task", "wizard")

    with caplog.at_level(logging.WARNING, logger="toold.agents.system"):
        assert run_system(model, workspace, body) == "ok"
    assert "wizard" in caplog.text
    assert "subagent" in tool_names(model.wait_requests(1)[0])


def test_without_a_provider_the_tool_says_unavailable(workspace: Path) -> None:
    tools = ToolSet(BuiltinToolProvider(ToolRuntime(workspace=workspace)).get_tools())
    outcome = asyncio.run(user_call(tools, "subagent", {"task": "anything"}))
    assert outcome.content == "Subagent unavailable: provider is not configured."


def test_background_subagent_is_a_job_and_fails_closed(model: ModelServer, workspace: Path) -> None:
    asker = Asker("allow")
    model.tool_use(("write_file", {"file_path": "bg.txt", "content": "x"}))
    model.text("background finished")

    async def body(system: AgentSystem) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
        jobs = system.background
        finished = asyncio.Event()
        jobs.on_finished = lambda job: finished.set()
        started = await system.run_subagent("work quietly", run_in_background=True)
        await asyncio.wait_for(finished.wait(), 10)
        job_id = started.split()[1]
        return started, jobs.drain_notifications(), jobs.get(job_id)

    guard = PermissionGuard(mode="default", ask=asker)
    started, notes, job = run_system(model, workspace, body, guard=guard, with_jobs=True)

    assert started.startswith("Subagent subagent-")
    assert started.endswith(" started in the background.")
    job_id = started.split()[1]
    assert len(job_id) == len("subagent-") + 8
    assert notes == [{"task_id": job_id, "status": "done", "result": "background finished"}]
    assert job["status"] == "done"
    # Fail-closed: the write was refused without asking anyone.
    assert tool_results(model.wait_requests(2)[1])[0]["content"] == "User denied."
    assert asker.asked == []
    assert not (workspace / "bg.txt").exists()


def test_background_without_a_manager(model: ModelServer, workspace: Path) -> None:
    async def body(system: AgentSystem) -> str:
        return await system.run_subagent("x", run_in_background=True)

    assert run_system(model, workspace, body) == "Background manager unavailable."
    assert model.requests == []
