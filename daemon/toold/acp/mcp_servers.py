"""MCP servers an ACP client passes at ``session/new``, as tools of that session.

Each stdio server is started, and each HTTP server (streamable HTTP) connected to, with
the ``mcp`` SDK's client; its tools join the session's
catalogue as ``<server>__<tool>`` and go through the same gateway and guard as toold's
own. Their annotations are the defaults (a tool that says nothing may change things),
so the guard asks before each call unless a rule or the mode allows it: a server's
own hints are its author's claims, not something toold has checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import mcp.types as types
from acp.schema import HttpMcpServer, McpServerStdio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT

from toold.config import LimitsConfig
from toold.tools.annotations import ToolAnnotations
from toold.tools.base import Tool
from toold.tools.context import failed

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``server__tool``, in the characters (and length) model APIs accept for a tool name."""
    return f"{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"[:64]


@contextlib.asynccontextmanager
async def http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with the given headers (and the SDK's timeouts: a response stream
    may stay open for minutes); the HTTP client closes with the transport."""
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


class McpServerLink:
    """One running MCP server: its process and client session live in their own task
    (the SDK's contexts must be left by the task that entered them)."""

    def __init__(self, server: McpServerStdio | HttpMcpServer, cwd: Path) -> None:
        self.server = server
        self.cwd = cwd
        self.session: ClientSession | None = None
        self.limits: Callable[[], LimitsConfig] = LimitsConfig
        """The session's limits in force (``idle_timeout``, ``mcp_call_timeout``), read at
        each call; the defaults until the session's workspace is bound."""
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[list[types.Tool]] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> list[Tool]:
        """Start the server and list its tools; RuntimeError naming the server if it fails."""
        self._task = asyncio.ensure_future(self._run())
        try:
            listed = await asyncio.wait_for(asyncio.shield(self._ready), START_TIMEOUT_S)
        except Exception as exc:
            await self.close()
            where = getattr(self.server, "command", None) or getattr(self.server, "url", "")
            raise RuntimeError(
                f"mcpServers: {self.server.name!r} ({where}) did not start: {exc}"
            ) from None
        return [self._wrap(tool) for tool in listed]

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """The SDK's client transport for this server: a process, or streamable HTTP."""
        server = self.server
        if isinstance(server, HttpMcpServer):
            return http_transport(server.url, {h.name: h.value for h in server.headers})
        params = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env={e.name: e.value for e in server.env},
            cwd=str(self.cwd),
        )
        return stdio_client(params)

    async def _run(self) -> None:
        try:
            async with self._transport() as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                self.session = session
                self._ready.set_result(list(listed.tools))
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            if not isinstance(exc, Exception):
                raise
            log.warning("MCP server %s stopped: %s", self.server.name, exc)
        finally:
            self.session = None

    def _wrap(self, tool: types.Tool) -> Tool:
        schema = dict(tool.input_schema or {"type": "object"})
        attributes: dict[str, Any] = {
            "name": tool_name(self.server.name, tool.name),
            "description": tool.description or f"{tool.name} (MCP server {self.server.name})",
            "input_schema": schema,
            "annotations": ToolAnnotations(),
            "sandboxable": False,
            "parallel_safe": False,
        }
        cls = type(f"McpTool_{attributes['name']}", (McpTool,), attributes)
        return cls(self, tool.name)

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """tools/call on the server; the text of its result (an error result is a failure)."""
        session = self.session
        if session is None:
            return failed(f"Error: the MCP server {self.server.name} is not running")
        limits = self.limits()
        result = await _within(
            lambda progressed: session.call_tool(tool, arguments, progress_callback=progressed),
            limits.idle_timeout,
            limits.mcp_call_timeout,
        )
        if isinstance(result, str):
            return failed(f"Error: {self.server.name}'s {tool} {result}")
        if not isinstance(result, types.CallToolResult):
            return failed(f"Error: {self.server.name} answered {type(result).__name__}")
        parts = []
        for block in result.content:
            if isinstance(block, types.TextContent):
                parts.append(block.text)
            else:
                parts.append(f"[{block.type} content]")
        text = "\n".join(parts)
        return failed(text) if result.is_error else text

    async def close(self) -> None:
        """Stop the server (its process ends with its stdio)."""
        self._stop.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT_S)
        except Exception:  # a timeout included
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


async def _within(
    call: Callable[[ProgressFnT], Awaitable[Any]],
    idle: float,
    ceiling: float,
) -> Any:
    """The call's result, or why it was stopped (cancelled: the SDK tells the server):
    ``idle`` seconds without a progress notification (0: no idle limit), or ``ceiling``
    seconds in all, whatever progress it made."""
    loop = asyncio.get_running_loop()
    started = last = loop.time()

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        nonlocal last
        last = loop.time()

    task = asyncio.ensure_future(call(progressed))
    try:
        while True:
            now = loop.time()
            left = ceiling - (now - started)
            quiet = idle - (now - last) if idle else left
            if min(left, quiet) <= 0:
                break
            done, _ = await asyncio.wait({task}, timeout=min(left, quiet))
            if done:
                return task.result()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    if left <= 0:
        return f"timed out after {ceiling:g} seconds (limits.mcp_call_timeout)"
    return f"timed out after {idle:g} seconds without progress (limits.idle_timeout)"


class McpTool(Tool):
    """A tool of an MCP server (subclassed per tool, with its name and schema)."""

    def __init__(self, link: McpServerLink, remote: str) -> None:
        super().__init__(None)
        self.link = link
        self.remote = remote

    async def run(self, *args: Any, **kwargs: Any) -> str:
        """Call the tool on its server."""
        arguments = dict(kwargs) if kwargs else (args[0] if args else {})
        return await self.link.call(self.remote, arguments)


async def start_servers(servers: list[Any], cwd: Path) -> tuple[list[McpServerLink], list[Tool]]:
    """Start every stdio server; RuntimeError (the others stopped) if one cannot start."""
    links: list[McpServerLink] = []
    tools: list[Tool] = []
    for server in servers:
        if not isinstance(server, McpServerStdio | HttpMcpServer):
            kind = getattr(server, "type", type(server).__name__)
            raise ValueError(
                f"mcpServers: {server.name!r} is a {kind} server; toold connects to stdio "
                "and HTTP servers only"
            )
        link = McpServerLink(server, cwd)
        links.append(link)
        try:
            tools += await link.start()
            _distinct(tools)
        except (RuntimeError, ValueError):
            for started in links:
                await started.close()
            raise
    return links, tools


def _distinct(tools: list[Tool]) -> None:
    """ValueError when two servers' tools get one name (``a.b`` and ``a_b``, or names cut
    at 64 characters): one would silently stand in for the other."""
    seen: dict[str, McpTool] = {}
    for tool in tools:
        assert isinstance(tool, McpTool)
        other = seen.setdefault(tool.name, tool)
        if other is not tool:
            raise ValueError(
                f"mcpServers: {other.remote!r} of {other.link.server.name!r} and "
                f"{tool.remote!r} of {tool.link.server.name!r} would both be the tool "
                f"{tool.name!r}: give the servers names that differ in letters or digits"
            )
