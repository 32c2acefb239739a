"""Runner tests: a real daemon per runner, a real bubblewrap and a real Docker engine.

bwrap and Docker tests skip, with the reason, only where the tool truly cannot run here;
the Docker image is built (offline, in about a second) by the session fixture.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import WireClient
from tests.environment import unavailable
from tests.idle_engines import stop_engine

Daemon = Callable[..., WireClient]


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    return ws


@pytest.fixture
def private_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    """``TOOLD_NO_DAEMON=1`` for a test that starts one daemon per runner on one folder
    and finds its workers, containers and children by the daemon's pid: on the default
    path every client of the folder shares one engine, which a new toold.toml reloads."""
    monkeypatch.setenv("TOOLD_NO_DAEMON", "1")


@pytest.fixture
def daemon(workspace: Path) -> Iterator[Daemon]:
    """Start a daemon whose toold.toml selects ``runner`` (extra [execution] keys allowed)."""
    clients: list[WireClient] = []

    def start(runner: str, *, events: bool = False, **execution: Any) -> WireClient:
        # A daemon of this configuration, not the engine a toold.toml edit reloads (a
        # loosening, the network say, would wait for the user's Apply).
        stop_engine(workspace)
        keys = {"tool_runner": runner, **execution}
        lines = ["[execution]", *(f"{k} = {_toml(v)}" for k, v in keys.items())]
        (workspace / "toold.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        client = WireClient(workspace)
        clients.append(client)
        client.initialize(
            rootUri=workspace.as_uri(), initializationOptions={"executionEvents": events}
        )
        return client

    yield start
    for client in clients:
        client.close()


def progress_until(client: WireClient, pattern: str) -> re.Match[str]:
    """Read $/progress reports until one matches ``pattern``."""
    while True:
        note = client.notification("$/progress")
        found = re.search(pattern, note["params"]["value"].get("message", ""))
        if found:
            return found


def start_call(client: WireClient, name: str, token: str, **arguments: Any) -> Any:
    """Send tools/call with a progress token; returns the request id."""
    params = {"name": name, "arguments": arguments, "origin": "user", "workDoneToken": token}
    return client.request("tools/call", params)


@pytest.fixture
def tcp_server() -> Iterator[socket.socket]:
    """A listening TCP socket on all interfaces; connects succeed even without accept()."""
    server = socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    yield server
    server.close()


@pytest.fixture(scope="session")
def bwrap_ready() -> None:
    """Bubblewrap can build a sandbox here (else skipped; in CI a failure)."""
    exe = shutil.which("bwrap")
    if exe is None:
        unavailable("bubblewrap is not installed (apt-get install bubblewrap)")
    argv = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all"]
    done = subprocess.run([*argv, "true"], capture_output=True, timeout=30)
    if done.returncode != 0:
        unavailable(f"bubblewrap cannot create a sandbox here: {done.stderr.decode().strip()}")


@pytest.fixture(scope="session")
def docker_ready() -> None:
    """A Docker engine answers (else skipped; in CI a failure); builds the image if needed."""
    try:
        import docker
    except ImportError:
        unavailable("the docker Python package is not installed")
    from toold.sandbox.docker import engine_socket_problem, ensure_image

    problem = engine_socket_problem()
    if problem is not None:
        unavailable(f"no Docker engine is reachable ({problem}); start one with `dockerd &`")
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        unavailable(f"no Docker engine is reachable ({exc}); start one with `dockerd &`")
    try:
        ensure_image(client=client)
    finally:
        client.close()
