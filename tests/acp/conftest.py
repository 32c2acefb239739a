"""``toold acp`` driven by the ACP Python SDK's client side, against the scripted model.

Every message the agent sends is recorded as raw wire JSON (the SDK's stream
observers), so tests assert on the protocol's camelCase contract; permission requests
are answered from a script of option ids.

``toold acp`` runs as users run it: its sessions are served by the engine of their
workspace, under a runtime folder of the test's own whose engines are stopped at its
end. ``agent_env(..., TOOLD_NO_DAEMON="1")`` runs the agent in the process instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from acp import spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

from tests.acp.scripts import MeteredModel
from tests.agents.conftest import API_KEY, ModelServer
from tests.agents.conftest import model as model  # the scripted Messages API, shared
from tests.engine.support import live_engines, stop_engines
from tests.processes import wait_gone

WAIT = 20.0
T = TypeVar("T")


def agent_env(model: ModelServer | None, **extra: str) -> dict[str, str]:
    """The environment ``toold acp`` runs with: the scripted model's URL and key."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "TOOLD_MODEL")
    }
    if model is not None:
        env |= {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": model.url}
    return env | extra


class Recorder:
    """The client: records the agent's messages, answers permissions from a script,
    and serves fs/read_text_file and fs/write_text_file from ``buffers``."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.answers: list[str] = []
        self.buffers: dict[str, str] = {}
        self.writes: list[tuple[str, str]] = []
        self._changed = asyncio.Event()

    def observe(self, event: StreamEvent) -> None:
        """Stream observer: keep every message the agent sent."""
        if event.direction == StreamDirection.INCOMING:
            self.received.append(event.message)
            self._changed.set()

    async def until(self, check: Callable[[], T], what: str, timeout: float = WAIT) -> T:
        """Wait for the agent's messages to satisfy ``check`` (its truthy value)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            self._changed.clear()  # before the check: a message after it sets the event
            if value := check():
                return value
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    # -- what the agent sent ---------------------------------------------------------
    def updates(self, kind: str | None = None) -> list[dict[str, Any]]:
        """session/update ``update`` objects (raw), optionally of one kind."""
        found = [
            m["params"]["update"] for m in self.received if m.get("method") == "session/update"
        ]
        return [u for u in found if kind is None or u["sessionUpdate"] == kind]

    def requests(self, method: str) -> list[dict[str, Any]]:
        """Requests of ``method`` the agent sent (raw params)."""
        return [m["params"] for m in self.received if m.get("method") == method]

    def text(self) -> str:
        """The agent's streamed message text, joined."""
        return "".join(u["content"]["text"] for u in self.updates("agent_message_chunk"))

    def call_updates(self, call_id: str) -> list[dict[str, Any]]:
        """Every tool_call / tool_call_update of one call, in order."""
        return [
            u
            for u in self.updates()
            if u["sessionUpdate"] in ("tool_call", "tool_call_update")
            and u["toolCallId"] == call_id
        ]

    # -- acp.Client ------------------------------------------------------------------
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Recorded raw by ``observe``."""

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        """Answer with the next scripted option id; "cancel" answers cancelled, "never"
        never answers."""
        answer = self.answers.pop(0) if self.answers else "cancel"
        if answer == "never":
            await asyncio.Event().wait()
        if answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kw: Any,
    ) -> ReadTextFileResponse:
        """An editor buffer (unsaved text) for ``path``."""
        text = self.buffers[path]
        if line is not None or limit is not None:
            start = max((line or 1) - 1, 0)
            lines = text.splitlines(keepends=True)
            text = "".join(lines[start : start + limit if limit else None])
        return ReadTextFileResponse(content=text)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        """Keep the text as the editor's buffer."""
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()


@asynccontextmanager
async def acp_agent(
    workspace: Path, env: dict[str, str], recorder: Recorder, *args: str
) -> AsyncIterator[ClientSideConnection]:
    """``toold acp`` as a subprocess, connected; its stderr goes to ``workspace/../agent.log``."""
    log = (workspace.parent / "agent.log").open("ab")
    try:
        async with spawn_agent_process(
            recorder,
            sys.executable,
            "-m",
            "toold",
            "acp",
            *args,
            env=env,
            cwd=workspace,
            transport_kwargs={"stderr": log.fileno()},
            observers=[recorder.observe],
        ) as (conn, _process):
            yield conn
    finally:
        log.close()


async def start_session(
    conn: ClientSideConnection, workspace: Path, *, client_fs: bool = False, **kw: Any
) -> str:
    """initialize + session/new; the session id."""
    fs = FileSystemCapabilities(read_text_file=client_fs, write_text_file=client_fs)
    await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities(fs=fs))
    session = await conn.new_session(cwd=str(workspace), mcp_servers=kw.get("mcp_servers", []))
    return session.session_id


def run(scenario: Callable[[], Awaitable[T]], timeout: float = 90) -> T:
    """Run an async scenario with an overall limit."""

    async def main() -> T:
        return await asyncio.wait_for(scenario(), timeout)

    return asyncio.run(main())


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(autouse=True)
def engine_runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The default path: ``toold acp`` attaches to the engines of a runtime folder of
    this test's own (``agent_env`` copies the environment), all stopped at its end."""
    # Short, under /tmp: a socket's path must fit in 108 bytes.
    runtime = Path(tempfile.mkdtemp(prefix="toold-a-", dir="/tmp"))
    monkeypatch.setenv("TOOLD_RUNTIME_DIR", os.fspath(runtime))
    monkeypatch.delenv("TOOLD_NO_DAEMON", raising=False)
    yield runtime
    # SIGTERM stops an engine as `toold daemon stop` does (its jobs cancelled), without a
    # command's start per test; what is left is killed.
    pids = live_engines(runtime)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(AssertionError):
        wait_gone(pids, "engines", timeout=10)
    stop_engines(runtime, dict(os.environ))
    if os.environ.get("TOOLD_KEEP_ENGINE_LOGS"):
        for log in runtime.glob("*.log"):
            print(log.read_text())
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def metered() -> Iterator[MeteredModel]:
    """The scripted Messages API whose replies report the usages a test queues."""
    server = MeteredModel()
    yield server
    server.close()
