"""One small client interface over every front end, so one test body runs on each.

A ``Session`` lists the tools a front end offers and calls one by name; every answer
comes back as a ``Result`` (its text, whether it is an error, a background job's id).
Each front end's session speaks that front end's own protocol through its own client:

- LSP: raw framed JSON-RPC (tests/e2e/wire.py's ``WireClient``), to the daemon on a
  thread (lsp_front.py) or to a spawned ``toold serve``;
- MCP: the mcp SDK's ``Client``, to ``build_server(state)`` over its in-memory streams
  or to a spawned ``toold mcp`` (see mcp_front.py);
- ACP: the ACP SDK's client connection, to ``TooldAgent`` over an in-memory message
  pair or to a spawned ``toold acp``, with the scripted model asking for the call (see
  acp_front.py).

Every call is the agent's (origin "agent"): MCP and ACP calls always are, so the LSP
session says so too, and the guard judges the same call the same way everywhere. No
session can be asked for a permission: the LSP client offers no message requests, the
MCP bridge cannot ask, and the ACP client dismisses every permission request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tests.e2e.wire import WireClient
from tests.interaction.lsp_front import InProcessDaemon

_SUBMITTED = re.compile(r"Submitted background task (\S+)")


@dataclass(frozen=True)
class Result:
    """A tool call's answer as any front end's client sees it."""

    text: str
    """The result's text (structured content as JSON), or the protocol error's message."""
    is_error: bool
    """A failed or refused call, or a request the front end rejected."""
    job_id: str | None = None
    """The background job the call started."""


@dataclass(frozen=True)
class Job:
    """A background job as a front end shows it."""

    status: str
    """running, done, failed or cancelled."""
    output: str
    """What the job printed so far."""


class Session(Protocol):
    """A connected client of one front end."""

    transport: str

    def tools(self) -> list[str]:
        """The names of the tools the front end offers, in its order."""
        ...

    def call(self, name: str, arguments: dict[str, Any]) -> Result:
        """Call ``name`` with ``arguments`` as the agent; the answer as a Result."""
        ...

    def close(self) -> None:
        """End the connection (and the daemon, for a private one)."""
        ...


@runtime_checkable
class JobReader(Protocol):
    """A front end that shows a background job by id: LSP's jobs/get, MCP's resources/read
    of toold://jobs/<id>. ACP has no such method (an editor sees the tool call only)."""

    def job(self, job_id: str) -> Job:
        """The job ``job_id`` as this front end shows it."""
        ...


def as_text(content: Any) -> str:
    """A result's content as text: strings stay, anything else is JSON."""
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def job_in_text(text: str) -> str | None:
    """The job id of background_run's answer where a front end carries it as text only
    (ACP's tool_call_update has no field for it; LSP and MCP send it as data)."""
    found = _SUBMITTED.fullmatch(text.strip())
    return found.group(1) if found else None


class LspSession:
    """tools/list and tools/call over LSP-framed JSON-RPC (in process or spawned)."""

    def __init__(self, transport: str, client: WireClient, workspace: Path) -> None:
        """Initialize ``client`` without window capabilities: nobody to ask."""
        self.transport = transport
        self.client = client
        # No processId: an in-process daemon would watch this very process.
        client.initialize(rootUri=workspace.as_uri(), processId=None)

    def tools(self) -> list[str]:
        """tools/list's names."""
        return [t["name"] for t in self.client.call("tools/list", {})["tools"]]

    def call(self, name: str, arguments: dict[str, Any]) -> Result:
        """tools/call as the agent; an error response is an error Result with its message."""
        params = {"name": name, "arguments": arguments, "origin": "agent"}
        reply = self.client.response(self.client.request("tools/call", params), timeout=60)
        if "error" in reply:
            return Result(text=reply["error"]["message"], is_error=True)
        result = reply["result"]
        text = as_text(result["content"])
        return Result(text=text, is_error=result["isError"], job_id=result.get("jobId"))

    def job(self, job_id: str) -> Job:
        """jobs/get."""
        detail = self.client.call("jobs/get", {"jobId": job_id})
        return Job(status=detail["status"], output=detail["output"])

    def close(self) -> None:
        """shutdown + exit; the daemon must exit 0."""
        status = self.client.close()
        assert status == 0, f"{self.transport} daemon exited {status}: {self.client.stderr()}"


def lsp_in_process(workspace: Path) -> LspSession:
    """The daemon's ``create_server`` on a thread, over two pipes."""
    return LspSession("lsp", InProcessDaemon(workspace), workspace)


def lsp_spawned(workspace: Path) -> LspSession:
    """A spawned ``toold serve --workspace``."""
    return LspSession("lsp-process", WireClient(workspace), workspace)
