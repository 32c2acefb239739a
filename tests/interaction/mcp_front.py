"""The MCP session: the mcp SDK's ``Client`` on ``build_server(state)``, in memory or spawned.

In memory, the workspace is bound as ``toold mcp`` binds it and the SDK connects its
``Client`` to the low-level server through its in-memory streams (the initialize
handshake and every message go through the SDK's session loop, as on stdio). Spawned,
the same ``Client`` starts ``toold mcp --workspace`` on stdio.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.interaction.loop import Loop
from tests.interaction.sessions import Job, Result, as_text
from toold.assembly import bind
from toold.bridge.mcp_server import JOB_URI, build_server

JOB_PREFIX = JOB_URI.format(job_id="")


def result_of(reply: types.CallToolResult) -> Result:
    """A CallToolResult as a Result: its text blocks, isError, a job's resource link."""
    texts = [b.text for b in reply.content if isinstance(b, types.TextContent)]
    links = [str(b.uri) for b in reply.content if isinstance(b, types.ResourceLink)]
    jobs = [uri[len(JOB_PREFIX) :] for uri in links if uri.startswith(JOB_PREFIX)]
    text = "\n".join(texts) if texts else as_text(reply.structured_content)
    return Result(text=text, is_error=reply.is_error, job_id=jobs[0] if jobs else None)


@asynccontextmanager
async def in_memory(workspace: Path) -> AsyncIterator[Client]:
    """``build_server`` for ``workspace`` bound as ``toold mcp`` binds it, connected."""
    problems: list[str] = []

    def drop(method: str, params: dict[str, Any]) -> None:
        """MCP has no equivalent of toold's notifications: the bridge drops them too."""

    state = await asyncio.to_thread(bind, workspace, None, drop, problems.append)
    try:
        async with Client(build_server(state), mode="legacy") as client:
            yield client
    finally:
        await state.aclose()
    assert not problems, problems


@asynccontextmanager
async def spawned(workspace: Path) -> AsyncIterator[Client]:
    """``toold mcp --workspace`` on stdio, with this run's environment (private state)."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toold", "mcp", "--workspace", os.fspath(workspace)],
        env=dict(os.environ),
        cwd=workspace,
    )
    async with Client(server, mode="legacy") as client:
        yield client


class McpSession:
    """tools/list and tools/call through the mcp SDK's client."""

    def __init__(self, transport: str, workspace: Path) -> None:
        """Connect in memory (``mcp``) or to a spawned bridge (``mcp-process``)."""
        self.transport = transport
        self.loop = Loop()
        opener = spawned if transport == "mcp-process" else in_memory
        try:
            self.client = self.loop.enter(opener(workspace))
        except BaseException:
            self.loop.close()
            raise

    def tools(self) -> list[str]:
        """tools/list's names."""
        listed = self.loop.run(self.client.list_tools)
        return [t.name for t in listed.tools]

    def call(self, name: str, arguments: dict[str, Any]) -> Result:
        """tools/call; an MCP error (an unknown tool) is an error Result with its message."""

        async def call() -> Result:
            try:
                return result_of(await self.client.call_tool(name, arguments))
            except MCPError as exc:
                return Result(text=exc.message, is_error=True)

        return self.loop.run(call)

    def job(self, job_id: str) -> Job:
        """resources/read of the job's toold://jobs/<id>: its JSON record."""

        async def read() -> types.ReadResourceResult:
            return await self.client.read_resource(JOB_URI.format(job_id=job_id))

        [content] = self.loop.run(read).contents
        assert isinstance(content, types.TextResourceContents), content
        record = json.loads(content.text)
        return Job(status=record["status"], output=record["output"])

    def close(self) -> None:
        """Disconnect; the in-memory workspace is closed, a spawned bridge exits."""
        self.loop.close()
