"""One session: a server of its own over the engine's shared workspace.

Each connection gets its own server (its own ``initialize``, capabilities, progress
tokens and cancellations) on the one bound WorkspaceState. A ``session`` connection
carries LSP frames both ways on the socket (the command line); a ``stdio`` one (``toold
serve``) writes its answers straight to the stdout descriptor the relay handed over,
reads the editor's bytes from the socket, and ends with a line naming the exit status.
When the session ends its running calls are cancelled; the engine and its jobs go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from typing import TYPE_CHECKING, Any

from toold import __version__
from toold.engine.sessions import current

if TYPE_CHECKING:
    from toold.engine.engine import Engine
    from toold.server import TooldServer
    from toold.transport import FrameWriter
    from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)


def session_server(state: WorkspaceState, hello: dict[str, Any]) -> TooldServer:
    """A server for one session on the shared, already bound ``state``."""
    from toold.server import create_server

    client_pid = hello.get("clientProcessId")
    cap = hello.get("maxMessageBytes")
    return create_server(
        max_message_bytes=cap if isinstance(cap, int) and cap > 0 else None,
        client_process_id=client_pid if isinstance(client_pid, int) else None,
        state=state,
    )


async def _output(fd: int) -> FrameWriter:
    """A writer over the relay's stdout: a pipe, socket or terminal, else a plain file."""
    from toold.transport import FrameWriter

    stream = os.fdopen(fd, "wb", buffering=0)
    try:
        transport, _ = await asyncio.get_running_loop().connect_write_pipe(asyncio.Protocol, stream)
    except ValueError:
        return FrameWriter(None, stream)
    return FrameWriter(transport, stream)


async def serve_session(
    engine: Engine, conn: socket.socket, output: int | None, peer_pid: int, hello: dict[str, Any]
) -> None:
    """Serve one session until it ends; ``output`` is the relay's stdout (stdio kind)."""
    from toold.transport import HEADER_LIMIT, FrameWriter

    assert engine.state is not None
    kind = hello["kind"]
    server = session_server(engine.state, hello)
    session = engine.sessions.open(kind, server, peer_pid, str(hello.get("client", "")))
    current.set(session)  # this task's context: every request of the session inherits it
    log.info("session %d (%s, pid %d) attached", session.id, kind, peer_pid)
    reply = {"ok": True, "pid": os.getpid(), "version": __version__, "session": session.id}
    conn.sendall(json.dumps(reply).encode() + b"\n")
    conn.setblocking(False)
    reader, socket_writer = await asyncio.open_unix_connection(sock=conn, limit=HEADER_LIMIT)
    writer = await _output(output) if output is not None else FrameWriter.over(socket_writer)
    code = 1
    try:
        stop = asyncio.ensure_future(engine.stopping.wait())
        serving = asyncio.ensure_future(server.serve(reader, writer))
        await asyncio.wait({stop, serving}, return_when=asyncio.FIRST_COMPLETED)
        if not serving.done():
            server.request_stop(1)
        stop.cancel()
        code = await serving
    finally:
        engine.sessions.close(session)
        writer.close()
        log.info("session %d ended (status %d)", session.id, code)
    if kind == "stdio":
        with contextlib.suppress(OSError):
            socket_writer.write(json.dumps({"exit": code}).encode() + b"\n")
            await socket_writer.drain()
    socket_writer.close()
