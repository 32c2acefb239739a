"""Sessions on one shared workspace, each served over a Unix socket (the seams issue 15 uses).

Moved from tests/inprocess. The shared engine's processes (tests/engine) check the same
sharing end to end; here the seams themselves are checked in process, with no engine.

``create_server(state=...)`` serves an already-bound WorkspaceState and leaves it open;
``server.serve(reader, writer)`` takes any asyncio stream pair. Two sessions on one
state see each other's files, keep their own capabilities and requests, and one
ending (cleanly or by closing its input) leaves the other and the workspace serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
from pathlib import Path
from typing import Any

from toold.assembly import bind
from toold.server import LspSession, create_server
from toold.transport import HEADER_LIMIT, FrameWriter
from toold.workspace import WorkspaceState

TIMEOUT_S = 20.0
ASKING = {"window": {"showMessage": {"messageActionItem": {"additionalPropertiesSupport": False}}}}


class SocketSession:
    """A session served over one end of a socketpair; the test speaks raw frames."""

    def __init__(self, state: WorkspaceState) -> None:
        self.server: LspSession = create_server(state=state)
        self.notifications: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    async def start(self) -> None:
        """Serve the daemon's end; connect the client's."""
        ours, theirs = socket.socketpair()
        reader, self._daemon_side = await asyncio.open_connection(sock=ours, limit=HEADER_LIMIT)
        output = FrameWriter.over(self._daemon_side)
        self.serving = asyncio.ensure_future(self.server.serve(reader, output))
        self._reader, self._writer = await asyncio.open_connection(sock=theirs)

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self._writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def receive(self) -> dict[str, Any]:
        headers = await self._reader.readuntil(b"\r\n\r\n")
        length = int(headers.decode("ascii").split(":")[1].split("\r\n")[0])
        message: dict[str, Any] = json.loads(await self._reader.readexactly(length))
        return message

    async def call(self, method: str, params: Any = None) -> dict[str, Any]:
        """The response to one request (notifications meanwhile are kept)."""
        msg_id = next(self._ids)
        self.send({"id": msg_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.receive(), TIMEOUT_S)
            if message.get("id") == msg_id and "method" not in message:
                return message
            self.notifications.append(message)

    async def initialize(self, capabilities: dict[str, Any]) -> dict[str, Any]:
        reply = await self.call("initialize", {"processId": None, "capabilities": capabilities})
        self.send({"method": "initialized", "params": {}})
        return reply

    async def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        reply = await self.call("tools/call", {"name": name, "arguments": arguments})
        result: dict[str, Any] = reply["result"]
        return result

    def close_input(self) -> None:
        self._writer.close()

    async def close(self) -> None:
        """Close both ends (serving a socket leaves closing it to whoever opened it)."""
        for writer in (self._writer, self._daemon_side):
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def test_two_socket_sessions_share_one_workspace(workspace: Path) -> None:
    async def main() -> None:
        pushed: list[str] = []
        state = bind(workspace, None, lambda method, params: pushed.append(method), print)
        first, second = SocketSession(state), SocketSession(state)
        try:
            await first.start()
            await second.start()
            one = await first.initialize(ASKING)
            await second.initialize({})
            assert one["result"]["capabilities"]["experimental"]["toold"]["workspace"] == str(
                state.root
            )
            # Capabilities are the session's own, never the workspace's.
            assert first.server.editor.can_ask() and not second.server.editor.can_ask()
            assert first.server.state is second.server.state is state

            added = await first.tool("todo_write", action="add", task="shared")
            assert added["isError"] is False, added
            assert [t["task"] for t in (await second.call("todos/list"))["result"]["todos"]] == [
                "shared"
            ]
            assert pushed == ["todos/changed"]  # the workspace's own notifications

            assert (await first.call("shutdown"))["result"] is None
            first.send({"method": "exit"})
            assert await asyncio.wait_for(first.serving, TIMEOUT_S) == 0

            # The first session's end closed nothing of the shared workspace.
            assert (await second.tool("read_file", file_path="src/main.py"))["isError"] is False
            assert (await second.tool("bash", command="echo still"))["content"].strip() == "still"
            second.close_input()  # no shutdown: status 1, and the workspace stays open
            assert await asyncio.wait_for(second.serving, TIMEOUT_S) == 1
            assert [t["task"] for t in state.todos.items()] == ["shared"]
        finally:
            for session in (first, second):
                await session.close()
            await state.aclose()

    asyncio.run(main())


def test_a_session_binds_its_own_workspace_by_default(workspace: Path) -> None:
    """Without ``state=`` the session binds the workspace after initialize."""

    async def main() -> None:
        ours, theirs = socket.socketpair()
        server = create_server(workspace)
        assert server.owns_state
        reader, writer = await asyncio.open_connection(sock=ours, limit=HEADER_LIMIT)
        serving = asyncio.ensure_future(server.serve(reader, FrameWriter.over(writer)))
        client_reader, client_writer = await asyncio.open_connection(sock=theirs)
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
        ).encode()
        client_writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await asyncio.wait_for(client_reader.readuntil(b"\r\n\r\n"), TIMEOUT_S)
        await asyncio.wait_for(server.bound(), TIMEOUT_S)
        assert server.state.root == workspace.resolve()
        client_writer.close()
        assert await asyncio.wait_for(serving, TIMEOUT_S) == 1
        await server.close()
        for side in (writer, client_writer):
            side.close()
            await side.wait_closed()

    asyncio.run(main())
