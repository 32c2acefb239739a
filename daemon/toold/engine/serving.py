"""One session: a server of its own over the engine's shared workspace.

Each connection gets its own server (its own ``initialize``, capabilities, progress
tokens and cancellations) on the one bound WorkspaceState. A ``session`` connection
carries LSP frames both ways on the socket (the command line); a ``stdio`` one (``toold
serve``) reads and writes the stdin and stdout descriptors the relay handed over, and
ends with a line on the socket naming the exit status; an ``acp`` one (``toold acp``)
carries ACP's JSON lines both ways on the socket, served by toold's ACP agent on the
same workspace (toold.acp.attached); an ``mcp`` one (``toold mcp``) hands its stdio
over as a ``stdio`` one does, served by the MCP SDK's server (toold.bridge.attached); an
``mcp-http`` one (``toold mcp --http``) hands over its listening socket, on which the
engine serves MCP over HTTP until the connection closes (toold.bridge.attached_http).
When the session ends its running calls are cancelled; the engine and its jobs go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import stat
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from toold import __version__
from toold.engine.attach import HANDED_STDIO, MCP_HTTP
from toold.engine.sessions import ACP, MCP, FrontEnd, current
from toold.fairness import caller

if TYPE_CHECKING:
    from toold.acp.attached import AcpConnection
    from toold.bridge.attached import McpConnection
    from toold.bridge.attached_http import McpHttpListener
    from toold.engine.engine import Engine
    from toold.server import LspSession
    from toold.transport import FrameWriter
    from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)

PREFACE_TIMEOUT = 30.0
"""Seconds a relay has to send the preface its hello announced (it sends it at once)."""


def session_server(
    state: WorkspaceState, hello: dict[str, Any], from_tool: bool = False
) -> LspSession:
    """A server for one session on the shared, already bound ``state`` (``from_tool``: its
    client runs inside one of the engine's tool calls)."""
    from toold.server import create_server

    client_pid = hello.get("clientProcessId")
    cap = hello.get("maxMessageBytes")
    return create_server(
        max_message_bytes=cap if isinstance(cap, int) and cap > 0 else None,
        client_process_id=client_pid if isinstance(client_pid, int) else None,
        state=state,
        from_tool=from_tool,
    )


async def _output(stream: BinaryIO) -> FrameWriter:
    """A writer over the relay's stdout: a pipe, socket or terminal, else a plain file."""
    from toold.transport import FrameWriter

    try:
        transport, _ = await asyncio.get_running_loop().connect_write_pipe(asyncio.Protocol, stream)
    except ValueError:
        return FrameWriter(None, stream)
    return FrameWriter(transport, stream)


async def _input(
    stream: BinaryIO, preface: bytes
) -> tuple[asyncio.StreamReader, Callable[[], None]]:
    """A reader over the relay's stdin, starting with the bytes the relay read already;
    and how to close it. Pipes, sockets and terminals are watched by the loop; a plain
    file or /dev/null is read on a thread."""
    from toold.transport import HEADER_LIMIT

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=HEADER_LIMIT)
    if preface:
        reader.feed_data(preface)
    mode = os.fstat(stream.fileno()).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stream.isatty():
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), stream
        )
        return reader, transport.close
    stop = threading.Event()

    def pump() -> None:
        try:
            while not stop.is_set() and (chunk := stream.read(1 << 16)):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        finally:
            stream.close()
            with contextlib.suppress(RuntimeError):  # the loop may be closed by now
                loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="toold-session-input", daemon=True).start()
    return reader, stop.set


async def _until_closed(reader: asyncio.StreamReader) -> None:
    """Wait for the end of ``reader``, dropping anything sent on it (never kept)."""
    while await reader.read(1 << 16):
        pass


def _front_end(
    engine: Engine, hello: dict[str, Any], from_tool: bool, listener: int | None, peer_pid: int
) -> tuple[
    FrontEnd, AcpConnection | None, McpHttpListener | None, LspSession | McpConnection | None
]:
    """The server of a session of ``hello``'s kind, and it again as what it is (an ACP
    connection, an HTTP MCP listener, or ``lsp``: the LSP or the stdio MCP one)."""
    assert engine.state is not None
    kind = hello["kind"]
    acp: AcpConnection | None = None
    http: McpHttpListener | None = None
    lsp: LspSession | McpConnection | None = None
    if kind == MCP_HTTP:
        from toold.bridge.attached_http import McpHttpListener  # with uvicorn

        assert listener is not None  # owned by the listener from here (closed as it ends)
        from_tool = from_tool or hello.get("fromTool") is True
        http = McpHttpListener(engine.state, from_tool, hello, listener, engine.sessions, peer_pid)
        server: FrontEnd = http
    elif kind == ACP:
        from toold.acp.attached import AcpConnection  # the ACP SDK loads with the first

        acp = AcpConnection(engine.state, from_tool)
        server = acp
    elif kind == MCP:
        from toold.bridge.attached import McpConnection  # the MCP SDK loads as it serves

        # A client that says it runs inside a tool call is taken at its word (fail closed).
        lsp = McpConnection(engine.state, from_tool or hello.get("fromTool") is True)
        server = lsp
    else:
        lsp = session_server(engine.state, hello, from_tool)
        server = lsp
    return server, acp, http, lsp


async def serve_session(
    engine: Engine,
    conn: socket.socket,
    stdio: tuple[int, int] | None,
    peer_pid: int,
    hello: dict[str, Any],
    from_tool: bool = False,
    listener: int | None = None,
) -> None:
    """Serve one session until it ends; ``stdio`` is the relay's (stdin, stdout),
    ``listener`` an ``mcp-http`` session's socket; ``from_tool``: the peer runs inside one
    of the engine's tool calls."""
    # Owned from the first line: closed, whatever fails before the session serves them
    # (else by its streams). An editor whose pipes stayed open here would wait forever
    # for the end of the server's output, though its toold serve exited.
    streams: list[BinaryIO] = []
    if stdio is not None:
        streams = [os.fdopen(stdio[0], "rb", buffering=0), os.fdopen(stdio[1], "wb", buffering=0)]
    try:
        from toold.transport import HEADER_LIMIT, FrameWriter

        server, acp, http, lsp = _front_end(engine, hello, from_tool, listener, peer_pid)
    except BaseException:
        for stream in streams:
            stream.close()
        raise
    kind = hello["kind"]
    # The listener is an MCP client's session, as a stdio one is (idle rules, questions).
    booked = MCP if kind == MCP_HTTP else kind
    session = engine.sessions.open(booked, server, peer_pid, str(hello.get("client", "")))
    current.set(session)  # this task's context: every request of the session inherits it
    caller.set(session.id)  # its share of the blocking pool and of running jobs (fairness)
    log.info("session %d (%s, pid %d) attached", session.id, kind, peer_pid)
    close_input: Callable[[], None] = lambda: None  # noqa: E731
    writer: FrameWriter | None = None
    try:
        reply = {"ok": True, "pid": os.getpid(), "version": __version__, "session": session.id}
        await asyncio.get_running_loop().sock_sendall(conn, json.dumps(reply).encode() + b"\n")
        control, socket_writer = await asyncio.open_unix_connection(sock=conn, limit=HEADER_LIMIT)
        if streams:
            # What the relay read to find the workspace follows the answer (it stayed out
            # of the hello, which is bounded while the engine does not know the client).
            preface = hello.get("preface", b"")
            if hello.get("prefaceBytes"):
                async with asyncio.timeout(PREFACE_TIMEOUT):
                    preface += await control.readexactly(hello["prefaceBytes"])
            reader, close_input = await _input(streams[0], preface)
            writer = await _output(streams[1])
            # The relay's connection carries nothing more: its end means the relay died.
            watch: asyncio.Future[Any] = asyncio.ensure_future(_until_closed(control))
        elif http is not None:
            # Nothing more comes on it: its end (Ctrl-C, SIGTERM, the process's death) is
            # toold mcp --http's, and stops the listener.
            watch = asyncio.ensure_future(_until_closed(control))
        else:
            reader = control
            if kind != ACP:
                writer = FrameWriter.over(socket_writer)
            watch = asyncio.ensure_future(engine.stopping.wait())  # the socket is the input
    except BaseException:  # the client hung up at once: no ghost session, no kept stdio
        engine.sessions.close(session)
        close_input()
        for stream in streams:
            stream.close()
        if http is not None:
            http.close()
        raise
    code = 1
    try:
        stop = asyncio.ensure_future(engine.stopping.wait())
        if acp is not None:  # ACP: its lines on the socket both ways
            serving = asyncio.ensure_future(acp.serve(reader, socket_writer))
        elif http is not None:  # MCP over HTTP on its listening socket
            serving = asyncio.ensure_future(http.serve())
        else:
            assert writer is not None and lsp is not None
            serving = asyncio.ensure_future(lsp.serve(reader, writer))
        await asyncio.wait({stop, serving, watch}, return_when=asyncio.FIRST_COMPLETED)
        if not serving.done():
            why = "the engine is stopping" if stop.done() else f"its client ({kind}) exited"
            log.info("session %d ends: %s", session.id, why)
            server.request_stop(1)
        stop.cancel()
        watch.cancel()
        code = await serving
    finally:
        engine.sessions.close(session)
        if writer is not None:
            writer.close()
        close_input()
        log.info("session %d ended (status %d)", session.id, code)
    if kind in HANDED_STDIO or kind == MCP_HTTP:
        with contextlib.suppress(OSError):
            socket_writer.write(json.dumps({"exit": code}).encode() + b"\n")
            await socket_writer.drain()
    socket_writer.close()
