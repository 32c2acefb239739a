"""``toold mcp`` attaches to the workspace's engine like every other client (issue 28).

Real processes: ``toold mcp`` driven by the mcp SDK's own client (``mcp.client.stdio``,
with an elicitation callback standing in for the user), ``toold mcp --http`` driven by
its streamable HTTP client, an editor through ``toold serve``, and the engine they share
under the test's runtime folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
from mcp.client.client import Client
from mcp.client.context import ClientRequestContext

from tests.engine.support import Engines, live_engines
from tests.mcp.http_process import HttpServer, sdk_client, toold_http
from tests.mcp.reading import text
from tests.mcp.stdio import toold_mcp
from tests.processes import wait_gone
from tests.waiting import wait_until
from toold.bridge.attached import Lines


class User:
    """The elicitation callback: answers every question with ``answer``, counting them."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked = 0

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked += 1
        return types.ElicitResult(action="accept", content={"answer": self.answer})


@asynccontextmanager
async def mcp_client(
    engines: Engines, workspace: Path, user: User | None = None
) -> AsyncIterator[Client]:
    """The SDK's Client (the handshake revision) on ``toold mcp`` for ``workspace``, on
    the test's engines."""
    async with Client(
        toold_mcp(workspace, env=engines.env), mode="legacy", elicitation_callback=user
    ) as connected:
        yield connected


def _kinds(engines: Engines, workspace: Path) -> list[str]:
    return sorted(s["kind"] for s in engines.status(workspace)["sessions"])


def test_two_mcp_clients_and_an_editor_share_one_engine(engines: Engines, workspace: Path) -> None:
    """One engine, three sessions: a TODO made through MCP is the editor's to see, an
    "Always allow" given through one MCP client holds in the other (which cannot even
    be asked), and the engine outlives one client and exits after the last, per its
    idle rules (an MCP client counts as an editor)."""
    (workspace / "toold.toml").write_text("[daemon]\nidle_timeout = 1\n")
    user = User("always")

    async def scenario() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with mcp_client(engines, workspace, user) as first:
            await first.call_tool("todo_write", {"action": "add", "task": "shared todo"})
            got["one"] = await first.call_tool(
                "write_file", {"file_path": "one.txt", "content": "1"}
            )
            async with mcp_client(engines, workspace) as second:
                editor = engines.editor(workspace)
                got["todos"] = editor.call("todos/list", {})
                got["status"] = engines.status(workspace)
                done = engines.toold("daemon", "list", "--json", cwd=workspace)
                got["listed"] = json.loads(done.stdout)
                got["two"] = await second.call_tool(
                    "write_file", {"file_path": "two.txt", "content": "2"}
                )
            got["after"] = _kinds(engines, workspace)  # the second client is gone
        got["last"] = _kinds(engines, workspace)
        return got

    got = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert [t["task"] for t in got["todos"]["todos"]] == ["shared todo"], got["todos"]
    assert sorted(s["kind"] for s in got["status"]["sessions"]) == ["mcp", "mcp", "stdio"]
    # An MCP session shows its client's clientInfo.name, not the relay's hello.
    mcp_clients = {s["client"] for s in got["status"]["sessions"] if s["kind"] == "mcp"}
    assert mcp_clients and "toold mcp" not in mcp_clients and "" not in mcp_clients, mcp_clients
    assert [e["sessions"] for e in got["listed"]] == [3], got["listed"]
    assert not got["one"].is_error and not got["two"].is_error, (got["one"], got["two"])
    assert user.asked == 1  # one.txt: Always allow; two.txt ran on it, unasked
    assert (workspace / "two.txt").read_text() == "2"
    assert (got["after"], got["last"]) == (["mcp", "stdio"], ["stdio"])
    pids = live_engines(engines.runtime)
    assert len(pids) == 1
    engines.editors[0].close()
    wait_gone(pids, "the engine, idle after its last client")


INNER = """\
import asyncio, os, sys
import mcp.types as types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

asked = 0

async def user(context, params):
    global asked
    asked += 1
    return types.ElicitResult(action="accept", content={"answer": "always"})

async def main():
    # The SDK starts servers with a few variables only: TOOLD_RUNTIME_DIR is the test's;
    # the marker of a tool call's environment is the agent's to remove.
    env = {k: v for k, v in os.environ.items() if k != "TOOLD_TOOL_CALL"}
    server = StdioServerParameters(command=sys.executable, args=["-m", "toold", "mcp"], env=env)
    async with Client(server, mode="legacy", elicitation_callback=user) as client:
        result = await client.call_tool("write_file", {"file_path": "pwned.txt", "content": "x"})
        print("asked", asked, "error", result.is_error, result.content[0].text)

asyncio.run(main())
"""


def test_an_mcp_client_inside_a_tool_call_is_the_agents(engines: Engines, workspace: Path) -> None:
    """An agent's command running its own ``toold mcp`` on the folder reaches the engine
    as the agent: its calls that would ask are denied without asking it (it would allow
    its own writes, and remember "Always" for everyone)."""
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "local"\n')
    (workspace / "inner.py").write_text(INNER)
    editor = engines.editor(workspace)
    command = f"{sys.executable} inner.py > inner.out 2>&1"
    editor.tool("bash", command=command)
    out = (workspace / "inner.out").read_text()
    assert "asked 0 error True Denied: write_file" in out, out
    assert not (workspace / "pwned.txt").exists()
    assert _kinds(engines, workspace) == ["stdio"]


def test_no_daemon_serves_in_its_own_process(engines: Engines, workspace: Path) -> None:
    """``--no-daemon``: no engine starts, and the client is served (and asked) as before."""
    user = User("allow")

    async def scenario() -> types.CallToolResult:
        params = toold_mcp(workspace, "--no-daemon", env=engines.env)
        async with Client(params, mode="legacy", elicitation_callback=user) as client:
            return await client.call_tool("write_file", {"file_path": "x.txt", "content": "x"})

    result = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert not result.is_error and text(result) == "Wrote 1 characters to x.txt", result
    assert user.asked == 1
    assert live_engines(engines.runtime) == []


def test_the_clients_stdin_comes_as_lines_and_one_past_the_cap_ends_them() -> None:
    """The engine reads the MCP client's pipe itself: whole lines, however the bytes
    arrive; a last line without its newline; a line past max_message_bytes ends them."""

    async def read(chunks: list[bytes], limit: int) -> tuple[list[str], bool]:
        reader = asyncio.StreamReader()
        for chunk in chunks:
            reader.feed_data(chunk)
        reader.feed_eof()
        lines = Lines(reader, limit)
        return [line async for line in lines], lines.too_long

    split = asyncio.run(read([b'{"a": 1}\n{"b"', b': "\xc3\xa9"}\n{"c": 3}'], 1024))
    assert split == (['{"a": 1}\n', '{"b": "\u00e9"}\n', '{"c": 3}'], False)
    capped = asyncio.run(read([b'{"a": 1}\n' + b"x" * 2000 + b"\n"], 1024))
    assert capped == (['{"a": 1}\n'], True)


TOKEN = "engine-token-0123456789abcdef"
ENV_CHECK = f"""\
import os
found = [k for k, v in os.environ.items() if k == "TOOLD_MCP_TOKEN" or "{TOKEN}" in v]
print(found or "no token")
"""
"""What a tool's command sees of the token: nothing."""


def _refused(server: HttpServer) -> bool:
    """Whether nothing listens on the server's port any more."""
    host, port = server.host_port.split(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_an_http_client_and_a_stdio_client_share_one_engine(
    engines: Engines, workspace: Path
) -> None:
    """``toold mcp --http`` hands its socket to the workspace's engine: a TODO made over
    HTTP is the stdio client's to read, an "Always allow" given over HTTP holds for the
    stdio client (which cannot be asked), each HTTP session is one of the engine's until
    its DELETE; the token reaches neither a tool's environment nor the engine's log. Killing the
    ``toold mcp --http`` process closes the port and ends its sessions; the engine stays
    for the stdio client."""
    (workspace / "toold.toml").write_text(
        '[permissions]\nallow = ["bash(prefix:python3 env.py)"]\n'
    )
    (workspace / "env.py").write_text(ENV_CHECK)
    user = User("always")

    async def scenario(server: HttpServer) -> dict[str, Any]:
        got: dict[str, Any] = {}
        two = {"file_path": "two.txt", "content": "2"}
        async with mcp_client(engines, workspace) as local, contextlib.AsyncExitStack() as held:
            web = await held.enter_async_context(sdk_client(server, "legacy", TOKEN, user))
            await web.call_tool("todo_write", {"action": "add", "task": "made over http"})
            got["one"] = await web.call_tool("write_file", {"file_path": "one.txt", "content": "1"})
            got["todos"] = await local.call_tool("todo_read", {})
            got["two"] = await local.call_tool("write_file", two)
            got["env"] = await local.call_tool("bash", {"command": "python3 env.py"})
            got["status"] = engines.status(workspace)
            async with sdk_client(server, "legacy", TOKEN) as brief:  # its end: a DELETE
                got["brief"] = len(engines.status(workspace)["sessions"])
                await brief.list_tools()
            wait_until(
                lambda: len(engines.status(workspace)["sessions"]) == 3, "the DELETE's session end"
            )
            server.proc.kill()  # no signal to catch: the engine sees its connection close
            wait_until(lambda: _refused(server), "the port closed")
            got["after"] = wait_until(
                lambda: len((s := engines.status(workspace))["sessions"]) == 1 and s,
                "the HTTP sessions ended",
            )
            got["three"] = await local.call_tool("read_file", {"file_path": "two.txt"})
            with contextlib.suppress(Exception):  # its server is gone: no DELETE answered
                await held.aclose()
        return got

    with toold_http(workspace, token=TOKEN, env=engines.env) as server:
        got = asyncio.run(asyncio.wait_for(scenario(server), 120))
    assert not got["one"].is_error and user.asked == 1, (got["one"], user.asked)
    assert "made over http" in text(got["todos"]), got["todos"]
    assert not got["two"].is_error and (workspace / "two.txt").read_text() == "2", got["two"]
    assert text(got["env"]).strip() == "no token", got["env"]
    sessions = got["status"]["sessions"]
    assert [s["kind"] for s in sessions] == ["mcp", "mcp", "mcp"], sessions
    # The listener and its HTTP session are toold mcp --http's; the third, the stdio one.
    served = [s for s in sessions if s["peerPid"] == server.proc.pid]
    assert [s["client"] for s in served][:1] == [f"toold mcp --http {server.url}"], sessions
    assert len(served) == 2 and served[1]["client"] not in ("", "toold mcp --http"), sessions
    assert live_engines(engines.runtime) == [got["status"]["pid"]]
    assert got["brief"] == 4  # one more session while the brief client was there
    assert got["after"]["pid"] == got["status"]["pid"]
    assert [s["id"] for s in got["after"]["sessions"]] == [
        s["id"] for s in sessions if s not in served
    ]
    assert not got["three"].is_error and "2" in text(got["three"]), got["three"]
    for log in engines.runtime.glob("*.log*"):
        assert TOKEN not in log.read_text(errors="replace"), log


def test_http_with_no_daemon_serves_in_its_own_process(engines: Engines, workspace: Path) -> None:
    """``TOOLD_NO_DAEMON=1 toold mcp --http``: the process opens the workspace itself (no
    engine starts), asks over HTTP as before, and a signal stops it cleanly."""
    user = User("allow")

    async def scenario(server: HttpServer) -> types.CallToolResult:
        async with sdk_client(server, "legacy", TOKEN, user) as client:
            return await client.call_tool("write_file", {"file_path": "x.txt", "content": "x"})

    env = {**engines.env, "TOOLD_NO_DAEMON": "1"}
    with toold_http(workspace, token=TOKEN, env=env) as server:
        result = asyncio.run(asyncio.wait_for(scenario(server), 60))
        assert server.stop(signal.SIGINT) == 0
    assert not result.is_error and text(result) == "Wrote 1 characters to x.txt", result
    assert user.asked == 1
    assert live_engines(engines.runtime) == []


def test_daemon_stop_ends_an_http_listener_and_says_so(engines: Engines, workspace: Path) -> None:
    """``toold daemon stop`` while ``toold mcp --http`` serves through the engine: the port
    closes, and the foreground process exits 1 naming the engine's log (a script that
    runs it sees why its server went away), not 0 as after its own SIGTERM."""

    async def scenario(server: HttpServer) -> types.ListToolsResult:
        async with sdk_client(server, "legacy", TOKEN) as client:
            return await client.list_tools()

    with toold_http(workspace, token=TOKEN, env=engines.env) as server:
        listed = asyncio.run(asyncio.wait_for(scenario(server), 60))
        pid = engines.status(workspace)["pid"]
        stopped = engines.toold("daemon", "stop", "--workspace", str(workspace), cwd=workspace)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert server.proc.wait(60) == 1
        assert _refused(server)
        wait_gone(pid)
    assert any(tool.name == "read_file" for tool in listed.tools)
    said = "".join(server.stderr)
    assert f"the engine stopped serving {server.url}" in said and ".log" in said, said
    assert live_engines(engines.runtime) == []


def _raw(server: HttpServer, method: str, path: str, body: Any = None, **headers: str) -> Any:
    """One authorized request to the server, read whole: (status, its session id header)."""
    sent = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    if body is not None:
        sent["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection(server.host_port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={**sent, **headers})
        response = conn.getresponse()
        response.read()
        return response.status, response.getheader("mcp-session-id")
    finally:
        conn.close()


def test_a_404_for_another_path_leaves_the_session_the_engines(
    engines: Engines, workspace: Path
) -> None:
    """A request naming a live session on a path the server does not serve gets 404, and
    the session stays one of the engine's (its calls still run as that session's) until
    its DELETE."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw"},
        },
    }
    with toold_http(workspace, token=TOKEN, env=engines.env) as server:
        status, named = _raw(server, "POST", "/mcp", init)
        assert status == 200 and named, status
        opened = len(engines.status(workspace)["sessions"])
        assert _raw(server, "GET", "/elsewhere", **{"Mcp-Session-Id": named})[0] == 404
        assert len(engines.status(workspace)["sessions"]) == opened
        assert _raw(server, "DELETE", "/mcp", **{"Mcp-Session-Id": named})[0] == 200
        wait_until(
            lambda: len(engines.status(workspace)["sessions"]) == opened - 1, "the DELETE's end"
        )
