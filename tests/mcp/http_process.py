"""A real ``toold mcp --http`` process on 127.0.0.1 for the tests: its URL read from stdout.

The process prints its URL once its socket listens (``--port 0``: a free port), so a
test waits for that line, never for a fixed time. Its stderr is kept for the token it
prints and for what went wrong.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from mcp.client.client import Client
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

START_S = 60.0
"""Binding a workspace loads every tool: seconds on a loaded 2-core machine."""


@dataclass
class HttpServer:
    """A running ``toold mcp --http``: its process, URL and what it wrote to stderr."""

    proc: subprocess.Popen[bytes]
    url: str
    stderr: list[str] = field(default_factory=list)

    @property
    def host_port(self) -> str:
        """``127.0.0.1:PORT``, as a client puts it in ``Host``."""
        return self.url.split("/")[2]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``sig`` and wait for the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)


def _drain(stream: object, into: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.append(line.decode("utf-8", "replace"))


@contextmanager
def toold_http(
    workspace: Path, *args: str, token: str | None = None, env: dict[str, str] | None = None
) -> Iterator[HttpServer]:
    """``toold mcp --http --port 0 ARGS`` for ``workspace`` (token from the environment when
    given; ``env``: the process's environment, default this one's), stopped at the end
    whatever the test did."""
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != "TOOLD_MCP_TOKEN"}
    if token is not None:
        env["TOOLD_MCP_TOKEN"] = token
    ws = str(workspace)
    proc = subprocess.Popen(
        [sys.executable, "-m", "toold", "mcp", "--http", "--port", "0", *args, "--workspace", ws],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    stderr: list[str] = []
    lines: queue.Queue[bytes] = queue.Queue()
    threads = [
        threading.Thread(target=_drain, args=(proc.stderr, stderr), daemon=True),
        threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True),  # type: ignore[union-attr]
    ]
    for thread in threads:
        thread.start()
    try:
        try:
            first = lines.get(timeout=START_S).decode("utf-8").strip()
        except queue.Empty:
            raise AssertionError(f"no URL within {START_S:g} s: {''.join(stderr)}") from None
        assert first.startswith("http://127.0.0.1:"), f"{first!r}: {''.join(stderr)}"
        yield HttpServer(proc, first, stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        for thread in threads:
            thread.join(5)
        proc.stdout.close()
        proc.stderr.close()


@asynccontextmanager
async def sdk_client(
    server: HttpServer, mode: str, token: str, user: ElicitationFnT | None = None
) -> AsyncIterator[Client]:
    """The SDK's high-level client over its streamable HTTP transport, with the token and
    ``user`` as its elicitation callback."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(
            streamable_http_client(server.url, http_client=http),
            mode=mode,
            elicitation_callback=user,
        ) as client,
    ):
        yield client
