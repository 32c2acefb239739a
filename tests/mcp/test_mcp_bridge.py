"""``toold mcp`` driven by the mcp SDK's own client (stdio_client + ClientSession)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from tests.mcp.reading import audit, text
from tests.mcp.stdio import toold_mcp
from tests.processes import process_alive, wait_gone

T = TypeVar("T")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("print('needle')\n", encoding="utf-8")
    return ws


@asynccontextmanager
async def bridge(workspace: Path) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with ``toold mcp`` for ``workspace``."""
    server = toold_mcp(workspace)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "toold"
        assert init.capabilities.tools is not None
        yield session


def run(workspace: Path, scenario: Callable[[ClientSession], Awaitable[T]]) -> T:
    async def main() -> T:
        async with bridge(workspace) as session:
            return await asyncio.wait_for(scenario(session), 45)

    return asyncio.run(main())


def test_lists_every_tool_with_its_schema(workspace: Path) -> None:
    listed = run(workspace, lambda s: s.list_tools())
    tools = {t.name: t for t in listed.tools}
    assert {"bash", "read_file", "write_file", "edit_file", "glob", "grep"} <= set(tools)
    read_file = tools["read_file"].input_schema
    assert read_file["type"] == "object"
    assert read_file["required"] == ["file_path"]
    assert read_file["properties"]["file_path"]["type"] == "string"
    assert "pattern" in tools["grep"].input_schema["properties"]
    assert all(t.description for t in listed.tools)
    read_hints, bash_hints = tools["read_file"].annotations, tools["bash"].annotations
    assert read_hints is not None and bash_hints is not None
    assert (read_hints.read_only_hint, read_hints.open_world_hint) == (True, False)
    assert (bash_hints.read_only_hint, bash_hints.destructive_hint) == (False, True)
    assert (tools["read_file"].title, read_hints.title) == ("Read file", "Read file")


def test_read_only_tools_run_and_failures_are_is_error(workspace: Path) -> None:
    async def scenario(s: ClientSession) -> dict[str, Any]:
        unknown: MCPError | None = None
        try:
            await s.call_tool("no_such_tool", {})
        except MCPError as exc:
            unknown = exc
        return {
            "read": await s.call_tool("read_file", {"file_path": "src/main.py"}),
            "alias": await s.call_tool("file_read", {"file_path": "src/main.py"}),
            "grep": await s.call_tool("grep", {"pattern": "needle"}),
            "escape": await s.call_tool("read_file", {"file_path": "../outside.txt"}),
            "bad_args": await s.call_tool("read_file", {"offset": "x"}),
            "unknown": unknown,
        }

    got = run(workspace, scenario)
    assert text(got["read"]) == "1: print('needle')" and not got["read"].is_error
    assert text(got["alias"]) == "1: print('needle')"
    assert json.loads(text(got["grep"])) == ["src/main.py:1:print('needle')"]
    assert not got["grep"].is_error
    assert got["escape"].is_error
    assert text(got["escape"]).startswith("Error: PermissionError: Path '../outside.txt' escapes")
    assert got["bad_args"].is_error
    assert text(got["bad_args"]).startswith("Error: invalid arguments for read_file: file_path")
    assert got["unknown"] is not None
    assert got["unknown"].code == types.INVALID_PARAMS
    assert got["unknown"].message == "Unknown tool: no_such_tool"
    calls = [e for e in audit(workspace) if e["event"] == "call"]
    assert {e["origin"] for e in calls} == {"agent"}


def test_the_guard_refuses_write_file_in_default_mode(workspace: Path) -> None:
    result = run(
        workspace, lambda s: s.call_tool("write_file", {"file_path": "x.txt", "content": "hi"})
    )
    assert result.is_error
    assert text(result).startswith("Denied: write_file needs the user's confirmation")
    assert 'mode = "bypass"' in text(result)
    assert not (workspace / "x.txt").exists()
    decision = next(e for e in audit(workspace) if e["tool"] == "write_file")
    assert (decision["event"], decision["origin"], decision["decision"]) == (
        "call",
        "agent",
        "denied",
    )
    assert decision["verdict"] == "denied_by_rule" and "outcome" not in decision


def test_allow_rules_cover_other_tools_but_never_write_file(workspace: Path) -> None:
    (workspace / "toold.toml").write_text(
        '[permissions]\nallow = ["write_file", "bash(prefix:touch *)"]\n'
        'deny = ["bash(prefix:touch secret*)"]\n',
        encoding="utf-8",
    )

    async def scenario(s: ClientSession) -> list[types.CallToolResult]:
        return [
            await s.call_tool("bash", {"command": "touch made.txt"}),
            await s.call_tool("bash", {"command": "mkdir other"}),
            await s.call_tool("bash", {"command": "touch secret.txt"}),
            await s.call_tool("write_file", {"file_path": "x.txt", "content": "hi"}),
        ]

    touch, mkdir, denied, write = run(workspace, scenario)
    assert not touch.is_error and (workspace / "made.txt").exists()
    assert mkdir.is_error and not (workspace / "other").exists()
    assert "bash(prefix:npm test*)" in text(mkdir)
    assert denied.is_error and not (workspace / "secret.txt").exists()
    assert "remove that rule from [permissions] deny" in text(denied)
    assert write.is_error and not (workspace / "x.txt").exists()


def test_bypass_mode_runs_writes_with_exit_codes_and_progress(workspace: Path) -> None:
    (workspace / "toold.toml").write_text('[permissions]\nmode = "bypass"\n', encoding="utf-8")
    progress: list[str] = []
    saw_two = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")
        if "two" in (message or ""):
            saw_two.set()

    async def scenario(s: ClientSession) -> list[types.CallToolResult]:
        results = [
            await s.call_tool("write_file", {"file_path": "x.txt", "content": "hi"}),
            await s.call_tool(
                "bash", {"command": "echo one; echo two; exit 3"}, progress_callback=on_progress
            ),
        ]
        await asyncio.wait_for(saw_two.wait(), 10)
        return results

    write, bash = run(workspace, scenario)
    assert not write.is_error and text(write) == "Wrote 2 characters to x.txt"
    assert (workspace / "x.txt").read_text() == "hi"
    assert text(bash) == "Command failed with exit code 3\none\ntwo"
    assert bash.is_error
    assert bash.meta == {"toold/exitCode": 3}
    assert "\n".join(progress).split() == ["one", "two"]


def test_a_cancelled_call_kills_its_command_and_the_session_goes_on(workspace: Path) -> None:
    """The SDK's client sends notifications/cancelled when its caller gives up; the bridge
    cancels the call and the runner kills the command's process group. On the local
    runner: the pids the command prints ($$, $!) are the host's only outside a sandbox's
    PID namespace (tests/sandbox cover the cancel inside bwrap)."""
    (workspace / "toold.toml").write_text(
        '[permissions]\nmode = "bypass"\n[execution]\ntool_runner = "local"\n', encoding="utf-8"
    )
    pids = workspace / "pids"
    command = "sleep 300 & echo $! > pids.tmp; echo $$ >> pids.tmp; mv pids.tmp pids; wait"

    async def scenario(s: ClientSession) -> types.CallToolResult:
        call = asyncio.ensure_future(s.call_tool("bash", {"command": command}))
        for _ in range(400):  # the command writes its pids once it runs (up to 20 s)
            if pids.exists() or call.done():
                break
            await asyncio.sleep(0.05)
        assert pids.exists(), "the command never started"
        assert all(process_alive(int(p)) for p in pids.read_text().split())
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # While the bridge still runs: the cancel, not the end of the session, killed them.
        pending = [int(p) for p in pids.read_text().split()]
        await asyncio.to_thread(wait_gone, pending, "the cancelled command and its child")
        return await s.call_tool("read_file", {"file_path": "src/main.py"})

    after = run(workspace, scenario)
    assert text(after) == "1: print('needle')"


def test_a_background_job_is_a_resource_the_client_reads(workspace: Path) -> None:
    (workspace / "toold.toml").write_text('[permissions]\nmode = "bypass"\n', encoding="utf-8")

    async def scenario(s: ClientSession) -> dict[str, Any]:
        started = await s.call_tool("background_run", {"command": "echo from-the-job; exit 4"})
        link = started.content[1]
        assert isinstance(link, types.ResourceLink)
        for _ in range(400):  # until the job has finished (up to 20 s)
            read = await s.read_resource(link.uri)
            block = read.contents[0]
            assert isinstance(block, types.TextResourceContents)
            job = json.loads(block.text)
            if job["status"] != "running":
                break
            await asyncio.sleep(0.05)
        unknown: MCPError | None = None
        try:
            await s.read_resource("toold://jobs/nope")
        except MCPError as exc:
            unknown = exc
        return {
            "started": started,
            "link": link,
            "job": job,
            "listed": await s.list_resources(),
            "templates": await s.list_resource_templates(),
            "unknown": unknown,
        }

    got = run(workspace, scenario)
    first = got["started"].content[0]
    assert isinstance(first, types.TextContent) and not got["started"].is_error
    job_id = first.text.removeprefix("Submitted background task ")
    assert str(got["link"].uri) == f"toold://jobs/{job_id}"
    assert got["link"].mime_type == "application/json"
    job = got["job"]
    assert (job["job_id"], job["status"], job["exit_code"]) == (job_id, "failed", 4)
    assert "from-the-job" in job["output"]
    assert [str(r.uri) for r in got["listed"].resources] == [f"toold://jobs/{job_id}"]
    assert got["templates"].resource_templates[0].uri_template == "toold://jobs/{job_id}"
    assert got["unknown"] is not None and "nope" in got["unknown"].message


def test_structured_results_come_with_an_output_schema(workspace: Path) -> None:
    (workspace / "toold.toml").write_text('[permissions]\nmode = "bypass"\n', encoding="utf-8")

    async def scenario(s: ClientSession) -> dict[str, Any]:
        # The SDK's client checks structuredContent against the listed outputSchema.
        return {
            "listed": {t.name: t for t in (await s.list_tools()).tools},
            "created": await s.call_tool("task_create", {"title": "ship it"}),
            "tasks": await s.call_tool("task_list", {}),
            "glob": await s.call_tool("glob", {"pattern": "*.py"}),
            "missing": await s.call_tool("task_get", {"task_id": "nope"}),
            "text": await s.call_tool("read_file", {"file_path": "src/main.py"}),
            "info": await s.call_tool("file_info", {"path": "src/main.py"}),
        }

    got = run(workspace, scenario)
    listed = got["listed"]
    assert listed["task_create"].output_schema["required"] == ["id", "title", "status"]
    assert listed["glob"].output_schema["properties"]["items"]["type"] == "array"
    assert listed["read_file"].output_schema is None
    created = got["created"].structured_content
    assert created is not None and created["title"] == "ship it"
    assert json.loads(text(got["created"])) == created  # the JSON is also the text
    assert got["tasks"].structured_content == {"items": [created]}
    assert got["glob"].structured_content == {"items": ["src/main.py"]}
    assert got["missing"].is_error and got["missing"].structured_content is None
    assert got["text"].structured_content is None
    info = got["info"].structured_content
    assert info is not None and (info["path"], info["type"]) == ("src/main.py", "file")


def test_the_daemon_never_imports_the_mcp_sdk() -> None:
    """Nor does the engine, to start, bind and serve editors: it loads the SDK when an
    ``mcp`` session serves (toold.bridge.attached imports it then)."""
    probe = (
        "import sys, toold.cli, toold.server, toold.handlers, toold.assembly,"
        " toold.engine.process, toold.engine.serving, toold.engine.relay, toold.bridge.attached\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_an_edit_carries_the_diagnostics_it_introduced(workspace: Path) -> None:
    """A real ruff server checks the edit; the result's _meta carries what it broke."""
    (workspace / "toold.toml").write_text('[permissions]\nmode = "bypass"\n', encoding="utf-8")

    async def scenario(s: ClientSession) -> types.CallToolResult:
        await s.call_tool("read_file", {"file_path": "src/main.py"})  # an agent reads first
        return await s.call_tool(
            "write_file", {"file_path": "src/main.py", "content": "import os\nprint('needle')\n"}
        )

    result = run(workspace, scenario)
    assert not result.is_error, result
    found = (result.meta or {}).get("toold/diagnostics")
    assert found is not None, result
    unused = [d for d in found["new"] if d.get("code") == "F401"]
    assert len(unused) == 1, found
    assert unused[0]["path"] == "src/main.py" and unused[0]["line"] == 1
    assert "Diagnostics introduced by this change" in text(result)
