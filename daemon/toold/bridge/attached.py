"""The engine's side of ``toold mcp``: one MCP client's stdio, on the engine's workspace.

``toold mcp`` hands its stdin and stdout to the workspace's engine (toold.engine.relay
``hand_over``, a hello of kind ``mcp``) and waits; the engine serves that client here
with the same server ``toold mcp --no-daemon`` runs (toold.bridge.mcp_server
``build_server``: both revisions, asking, tasks, the in-flight cap) on the
WorkspaceState it already holds. So MCP clients, editors and ACP sessions on one folder
share its todos, tasks, jobs and the guard's one "Always allow" memory.

To the engine's bookkeeping (toold.engine.sessions) the connection is one session, a
``FrontEnd`` of kind ``mcp``. MCP has no notification for toold's shared state (as in
process, they are dropped); a permission prompt of one of its calls is asked of this
client (toold.bridge.asking: an elicitation, or ``input_required``), and a client inside
one of the engine's tool calls (an agent's own) is asked nothing: ``Sessions.ask``
denies such calls, as it does for an editor's or an ACP client's.

The engine imports this module when an ``mcp`` session arrives. The MCP SDK
(toold.bridge.mcp_server) loads on a worker thread from the first ``mcp`` hello on,
while the workspace binds (toold.engine.engine ``stack_for``); a session opened before
it is in waits for it in ``serve``, counted as attached (not idle), and the engine goes
on serving its other sessions meanwhile.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from toold.engine.attached import AttachedConnection

if TYPE_CHECKING:
    import anyio
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from toold.bridge.asking import McpAsker
    from toold.permissions.guard import Answer
    from toold.transport import FrameWriter
    from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)


class Lines:
    """The client's stdin as the text lines the SDK's stdio transport reads
    (``async for line in stdin``), from the engine's non-blocking reader of the pipe. A
    line past ``limit`` bytes (``[limits] max_message_bytes``, as an LSP frame's and an
    HTTP body's cap) ends them, and the session."""

    def __init__(self, reader: asyncio.StreamReader, limit: int) -> None:
        self._reader = reader
        self._limit = limit
        self.too_long = False
        """The client sent a line past ``limit``: the lines ended there."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        pending = bytearray()
        searched = 0  # no newline before this offset: a long line is scanned once
        while chunk := await self._reader.read(1 << 16):
            pending += chunk
            while (end := pending.find(b"\n", searched)) >= 0 and end <= self._limit:
                line = bytes(pending[: end + 1])
                del pending[: end + 1]
                searched = 0
                yield line.decode("utf-8", "replace")
            searched = len(pending)
            if searched > self._limit:
                log.warning("the MCP client sent a line past %d bytes: session ended", self._limit)
                self.too_long = True
                return
        if pending:
            yield pending.decode("utf-8", "replace")


class Output:
    """The client's stdout as the SDK's stdio transport writes it (``write``, ``flush``),
    over the engine's writer of the pipe: a flush waits while the client does not read."""

    def __init__(self, writer: FrameWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        """Queue one message line."""
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Return once the queued output is under the writer's high-water mark."""
        await self._writer.wait_writable()


class McpConnection(AttachedConnection):
    """One ``toold mcp``'s stdio, served by the engine as a session of its own."""

    kind = "MCP"

    def __init__(self, state: WorkspaceState, from_tool: bool) -> None:
        super().__init__(from_tool)
        self.state = state
        self.client_name = ""
        """The client's ``clientInfo.name``, once its initialize came (handshake only)."""
        self._asker: McpAsker | None = None
        """The guard's questions to the client, once the SDK is loaded (``serve``)."""

    # -- SessionEditor (the rest: AttachedConnection) -----------------------------------
    def push(self, method: str, params: dict[str, Any]) -> None:
        """No MCP equivalent of toold's notifications: dropped, as in process."""
        log.debug("no MCP equivalent for %s; dropped", method)

    async def ask_user(self, tool: str, args: Any, reason: str) -> Answer | None:
        """The guard's question, to the client of the call being judged (asking)."""
        if self._asker is None:  # no call of this session runs yet: nobody to ask
            return None
        return await self._asker(tool, args, reason)

    # -- serving -------------------------------------------------------------------
    async def _named(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Middleware: note the client's name from its initialize (``daemon status``)."""
        if ctx.method == "initialize" and isinstance(ctx.params, dict):
            info = ctx.params.get("clientInfo")
            name = info.get("name") if isinstance(info, dict) else None
            if isinstance(name, str):
                self.client_name = name[:200]
        return await call_next(ctx)

    async def _run(self, reader: asyncio.StreamReader, writer: FrameWriter) -> None:
        await asyncio.to_thread(importlib.import_module, "toold.bridge.mcp_server")
        from mcp.server.stdio import stdio_server

        from toold.bridge.asking import McpAsker
        from toold.bridge.inflight import capped
        from toold.bridge.mcp_server import build_server

        self._asker = McpAsker(self.state)
        # Explicit streams: the SDK's transport claims no descriptor of the engine's.
        lines = Lines(reader, self.state.config.limits.max_message_bytes)
        output = cast("anyio.AsyncFile[str]", Output(writer))
        async with (
            stdio_server(cast("anyio.AsyncFile[str]", lines), output) as (stdin, stdout),
            capped(stdin, stdout) as (read_stream, write_stream),
        ):
            server = build_server(self.state)
            server.middleware.append(self._named)
            await server.run(read_stream, write_stream, server.create_initialization_options())
        if lines.too_long:
            self.exit_code = 1

    async def serve(self, reader: asyncio.StreamReader, writer: FrameWriter) -> int:
        """Serve MCP on the client's stdio until it hangs up (0) or the engine stops."""
        if await self.serve_until_stopped(self._run(reader, writer)):
            self.exit_code = 1
        return self.exit_code
