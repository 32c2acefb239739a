"""``toold mcp --http`` on the engine against a flood of connections from the machine.

Anyone on 127.0.0.1 can connect to the port, token or not: the bearer is checked per
request, once a connection is accepted. Before the engine served the socket, a flood hurt
the ``toold mcp --http`` process alone; now its descriptors are the workspace's engine's,
which its editors need too. Real processes: ``toold mcp --http``, the engine it starts
(with a low descriptor limit, so that the flood stays small), the CLI's status.
"""

from __future__ import annotations

import resource
import socket
from pathlib import Path

from tests.engine.support import Engines
from tests.mcp.http_process import toold_http
from tests.waiting import wait_until

LIMIT = 256
"""The engine's descriptor limit in this test (1024 is a common default)."""
TOKEN = "flood-token-0123456789abcdef"


def _closed(conn: socket.socket) -> bool:
    conn.setblocking(False)
    try:
        return conn.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_silent_connections_past_the_bound_leave_the_engine_serving(
    engines: Engines, workspace: Path
) -> None:
    """More connections than the engine has descriptors, none sending a byte: the engine
    still answers its CLI (it refuses connections past its bound at once), and closes the
    silent ones after uvicorn's keep-alive timeout instead of holding them forever."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, hard))  # inherited by the engine
    try:
        serving = toold_http(workspace, token=TOKEN, env=engines.env)
        server = serving.__enter__()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    flood: list[socket.socket] = []
    try:
        host, port = server.host_port.split(":")
        for _ in range(LIMIT + 64):
            flood.append(socket.create_connection((host, int(port)), timeout=5))
        status = engines.status(workspace)  # fails when the engine cannot accept its CLI
        assert status["sessions"], status
        wait_until(lambda: all(_closed(c) for c in flood), "the silent connections closed")
    finally:
        for conn in flood:
            conn.close()
        serving.__exit__(None, None, None)
