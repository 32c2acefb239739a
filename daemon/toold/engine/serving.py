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
    from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)


def session_server(state: WorkspaceState, hello: dict[str, Any]) -> TooldServer:
    """A server for one session on the shared, already bound ``state``."""
    from toold.server import create_server

    client_pid = hello.get("clientProcessId")
    server = create_server(
        state.root,
        max_message_bytes=hello.get("maxMessageBytes"),
        client_process_id=client_pid if isinstance(client_pid, int) else None,
    )
    loop = asyncio.get_running_loop()
    bound = loop.create_future()
    bound.set_result(None)
    # TODO(wire stack): replace with create_server's shared-state parameter.
    server.state, server.root, server._loop, server._binding = state, state.root, loop, bound
    server.max_message_bytes = hello.get("maxMessageBytes") or state.config.limits.max_message_bytes
    server.start_binding = lambda *args, **kwargs: None  # type: ignore[method-assign]

    async def close() -> None:
        for task in list(server._background):
            task.cancel()

    server.close = close  # type: ignore[method-assign]
    return server


async def serve_session(
    engine: Engine, conn: socket.socket, output: int | None, peer_pid: int, hello: dict[str, Any]
) -> None:
    """Serve one session until it ends; ``output`` is the relay's stdout (stdio kind)."""
    from toold.transport import serve_stdio

    assert engine.state is not None
    kind = hello["kind"]
    server = session_server(engine.state, hello)
    session = engine.sessions.open(kind, server, peer_pid, str(hello.get("client", "")))
    current.set(session)  # this task's context: every request of the session inherits it
    log.info("session %d (%s, pid %d) attached", session.id, kind, peer_pid)
    code = 1
    reader = os.fdopen(os.dup(conn.fileno()), "rb", buffering=0)
    writer = os.fdopen(output if output is not None else os.dup(conn.fileno()), "wb", buffering=0)
    try:
        reply = {"ok": True, "pid": os.getpid(), "version": __version__, "session": session.id}
        conn.sendall(json.dumps(reply).encode() + b"\n")
        stop = asyncio.ensure_future(engine.stopping.wait())
        serving = asyncio.ensure_future(serve_stdio(server, reader, writer))
        await asyncio.wait({stop, serving}, return_when=asyncio.FIRST_COMPLETED)
        if not serving.done():
            server.request_stop(1)
        stop.cancel()
        code = await serving
    finally:
        engine.sessions.close(session)
        _close_output(server, writer)
        with contextlib.suppress(OSError):
            reader.close()
        log.info("session %d ended (status %d)", session.id, code)
    if kind == "stdio":
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"exit": code}).encode() + b"\n")


def _close_output(server: TooldServer, writer: Any) -> None:
    transport = getattr(server.protocol.writer, "_transport", None)
    if transport is not None:
        transport.close()
    with contextlib.suppress(OSError):
        writer.close()
