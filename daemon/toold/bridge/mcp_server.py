"""``toold mcp``: toold's tools over the Model Context Protocol on stdio.

The same catalogue, runner and guard as ``toold serve``: ``toold mcp`` hands its stdio
to the workspace's engine, which serves this module's server on its shared workspace
(toold.bridge.attached); with ``--no-daemon`` (on stdio or ``--http``) the workspace is
opened here by ``toold.opening.open_workspace``. Every call goes through its gateway
(toold.gateway), whose outcome carries the verdict this bridge renders. MCP clients
(Claude Desktop, Cursor, Claude Code) call tools because a model decided to, so
calls have origin "agent". Both revisions the SDK serves are served: the handshake
(2024-11-05 to 2025-11-25) and 2026-07-28 (``server/discover`` lists them all). What the
guard would ask about is asked of the client (toold.bridge.asking: an elicitation, or an
``input_required`` result on 2026-07-28); a client that cannot ask gets a refusal saying
which ``[permissions]`` setting in toold.toml would allow the call. A background job is
a task for clients of the tasks extension (toold.bridge.tasks), a resource for the
others. Edits to toold.toml apply without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from toold import __version__
from toold.bridge import asking, tasks
from toold.bridge.inflight import capped
from toold.bridge.tasks import EXIT_CODE_META
from toold.errors import TooldError, wire_error
from toold.hooks import matches
from toold.outcome import ToolOutcome
from toold.tools.base import Tool
from toold.tools.context import CallContext
from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)

REVISIONS: list[str] = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]
"""Every MCP revision served: the SDK's handshake ones and its stateless ones."""

DIAGNOSTICS_META = "toold/diagnostics"
"""``_meta`` key of an edit's result carrying the diagnostics it introduced or fixed."""
JOB_URI = "toold://jobs/{job_id}"
"""A background job as an MCP resource: its record and output so far, as JSON."""


def title_of(name: str) -> str:
    """A display name for clients' tool pickers: ``read_file`` → ``Read file``."""
    return name.replace("_", " ").strip().capitalize() or name


def output_schema(tool: Tool) -> dict[str, Any] | None:
    """``outputSchema`` for a tool with a structured result: its object schema, or a list
    wrapped as ``{"items": [...]}`` (MCP's structured content is an object); else None."""
    schema = tool.output_schema
    if schema.get("type") == "object":
        return schema
    if schema.get("type") == "array":
        return {"type": "object", "properties": {"items": schema}, "required": ["items"]}
    return None


def structured(tool: Tool, content: Any) -> dict[str, Any] | None:
    """``structuredContent`` for a result that has the tool's declared shape."""
    kind = tool.output_schema.get("type")
    if kind == "object" and isinstance(content, dict):
        return content
    if kind == "array" and isinstance(content, list):
        return {"items": content}
    return None


def _post_hooked(state: WorkspaceState, tool: Tool) -> bool:
    """Whether a post hook adds text to this tool's results (which then are text)."""
    hooks = state.gateway.hooks
    return hooks is not None and any(matches(h, tool.name) for h in hooks.config.post_tool_use)


def tool_definitions(state: WorkspaceState) -> list[types.Tool]:
    """Every tool, its JSON Schema as ``inputSchema`` and its hints as ``annotations``;
    ``outputSchema`` where its results are structured (and no post hook turns them to text)."""
    return [
        types.Tool(
            name=t.name,
            title=title_of(t.name),
            description=t.description,
            input_schema=t.parameters(),
            output_schema=None if _post_hooked(state, t) else output_schema(t),
            annotations=types.ToolAnnotations(
                title=title_of(t.name),
                read_only_hint=t.annotations.read_only,
                destructive_hint=t.annotations.destructive,
                idempotent_hint=t.annotations.idempotent,
                open_world_hint=t.annotations.open_world,
            ),
        )
        for t in state.toolset
    ]


def refusal(tool: str, outcome: ToolOutcome) -> str:
    """Why the guard refused a call it would have asked about, and how to allow it: from
    the outcome's fields, as the gateway judged the call (nothing is judged again)."""
    return (
        f"Denied: {tool} needs the user's confirmation ({outcome.ask_reason}), and this "
        f"MCP client cannot be asked for it; {outcome.remedy}."
    )


def denial(tool: str, outcome: ToolOutcome) -> str:
    """A call the user was asked about and did not allow: Deny, a decline, no answer."""
    return f"Denied: {tool} was not allowed ({outcome.reason})."


def call_result(tool: Tool, outcome: ToolOutcome) -> types.CallToolResult:
    """A toold outcome as MCP: text content (JSON pretty-printed), isError, the exit code,
    ``structuredContent`` when the tool declares an output schema, and a link to the
    background job the call started.

    A command that ran and exited non-zero (or timed out) is an error to MCP clients, as
    it is to a model; the exit code stays in ``_meta``.
    """
    content = outcome.content
    if outcome.remedy is not None:  # an ask nobody could answer: say how to allow it
        text = refusal(tool.name, outcome)
    elif outcome.decision == "denied_by_user" and outcome.ask_reason is not None:
        text = denial(tool.name, outcome)
    elif content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    else:
        text = json.dumps(content, indent=2, ensure_ascii=False)
    meta: dict[str, Any] = {}
    if outcome.exit_code is not None:
        meta[EXIT_CODE_META] = outcome.exit_code
    if outcome.diagnostics is not None:  # what the edit broke or fixed (toold.diagnostics)
        meta[DIAGNOSTICS_META] = outcome.diagnostics.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    blocks: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    if outcome.job_id is not None and not outcome.is_error:
        blocks.append(job_link(outcome.job_id))
    is_error = outcome.is_error or outcome.timed_out or outcome.exit_code not in (None, 0)
    shaped = None if is_error else structured(tool, content)
    result = types.CallToolResult(content=blocks, is_error=is_error, _meta=meta or None)
    if shaped is not None:
        result.structured_content = shaped
    return result


def job_link(job_id: str) -> types.ResourceLink:
    """A link to a background job the client can read (resources/read) while it runs."""
    return types.ResourceLink(
        type="resource_link",
        uri=JOB_URI.format(job_id=job_id),
        name=f"job {job_id}",
        description="The job's status, exit code and output so far (JSON).",
        mime_type="application/json",
    )


def read_job(state: WorkspaceState, uri: str) -> types.ReadResourceResult:
    """resources/read of ``toold://jobs/<id>``: what jobs/get answers editors."""
    prefix = JOB_URI.format(job_id="")
    if not uri.startswith(prefix) or not uri[len(prefix) :]:
        raise MCPError(
            types.INVALID_PARAMS, f"unknown resource {uri!r}: toold serves {JOB_URI} only"
        )
    try:
        job = state.jobs.get(uri[len(prefix) :])
    except TooldError as exc:
        raise as_mcp(exc) from None
    text = json.dumps(job, indent=2, ensure_ascii=False)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
    )


def as_mcp(exc: TooldError) -> MCPError:
    """A domain error as an MCP error: MCP is JSON-RPC, so toold.errors' table holds."""
    error = wire_error(exc)
    return MCPError(error.code, error.message, error.data)


class ProgressRelay:
    """Sends a call's progress (reported from any thread) as MCP progress, in order.

    A no-op on the wire unless the client's request carried a progress token.
    """

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._send_all())

    def report(self, text: str) -> None:
        """CallContext.progress: queue one message."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, text)

    async def _send_all(self) -> None:
        count = 0
        while (text := await self._queue.get()) is not None:
            count += 1
            try:
                await self._ctx.session.report_progress(count, None, text)
            except Exception as exc:
                log.debug("progress dropped: %s", exc)

    async def flush(self) -> None:
        """Send everything reported so far and stop, so progress precedes the result."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
        await self._task

    def cancel(self) -> None:
        """Stop without sending the rest (the call was cancelled)."""
        self._task.cancel()


def build_server(state: WorkspaceState) -> Server[Any]:
    """The MCP server for a bound workspace, for any transport: tools, the job resources,
    ``server/discover`` naming every revision, and the tasks extension's methods. Its
    guard asks through ``asking.McpAsker`` when the workspace was opened with one."""
    pending = asking.Pending()

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_definitions(state))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        args = params.arguments if params.arguments is not None else {}
        try:
            tool = state.toolset.require(params.name)
        except TooldError as exc:
            raise as_mcp(exc) from None
        responses = None if params.input_responses is None else dict(params.input_responses)
        current = asking.answered(ctx, pending, params.request_state, responses)
        name = tool.name
        relay = ProgressRelay(ctx)
        judging = asking.exchange.set(current)
        context = CallContext(origin="agent", progress=relay.report, meta=current.call_meta)
        try:
            outcome = await state.gateway.call(name, args, context)
        except TooldError as exc:
            relay.cancel()
            raise as_mcp(exc) from None
        except BaseException:
            relay.cancel()
            raise
        finally:
            asking.exchange.reset(judging)
        await relay.flush()
        if current.asked and not outcome.ran:  # 2026-07-28: the question is the result
            asked = current.asked[-1]
            return types.InputRequiredResult(
                input_requests={asked.key: asked.request()}, request_state=pending.add(asked)
            )
        if outcome.job_id is not None and not outcome.is_error and tasks.declared(ctx):
            return tasks.created(state, outcome.job_id)
        return call_result(tool, outcome)

    async def discover(
        ctx: ServerRequestContext[Any, Any], params: types.RequestParams
    ) -> types.DiscoverResult:
        capabilities = server.get_capabilities(
            extensions={tasks.EXTENSION: {}}, protocol_version=ctx.protocol_version
        )
        return types.DiscoverResult(
            supported_versions=REVISIONS,
            capabilities=capabilities,
            instructions=server.instructions,
        )

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        jobs = state.jobs.list()
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=JOB_URI.format(job_id=job["job_id"]),
                    name=f"job {job['job_id']}",
                    description=f"{job['status']}: {job['command']}",
                    mime_type="application/json",
                )
                for job in jobs
            ]
        )

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=JOB_URI,
            name="background job",
            description="A background job started by background_run: status and output.",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return read_job(state, str(params.uri))

    server: Server[Any] = Server(
        "toold",
        version=__version__,
        instructions=(
            f"Tools for the workspace {state.root}; paths are relative to it. Calls that need "
            "the user's confirmation are asked about through the client (elicitation, or "
            "input_required on 2026-07-28); a client that cannot ask gets them refused "
            "unless toold.toml's [permissions] allows them."
        ),
        on_list_tools=list_tools,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    server.add_request_handler("server/discover", types.RequestParams, discover)
    for method, handler in tasks.handlers(state).items():
        server.add_request_handler(method, tasks.TaskParams, handler)
    # The requestState of an input_required result is sealed (AES-GCM, this process's key)
    # and bound to the call's tool and arguments: a client can echo it, never forge it.
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience="toold")
    )
    return server


@contextlib.asynccontextmanager
async def mcp_workspace(
    workspace: Path, *, from_tool: bool = False
) -> AsyncIterator[tuple[WorkspaceState, Server[Any]]]:
    """Open ``workspace`` (toold.opening) with the guard asking MCP clients (McpAsker;
    nobody ``from_tool``: inside an agent's command), and its server, until the block ends."""
    from toold.opening import open_workspace

    def drop(method: str, params: dict[str, Any]) -> None:
        log.debug("no MCP equivalent for %s; dropped", method)

    asker = asking.McpAsker()
    ask = None if from_tool else asker
    async with open_workspace(workspace, push=drop, report=log.error, ask=ask) as state:
        asker.state = state
        yield state, build_server(state)


async def serve(workspace: Path, from_tool: bool = False) -> None:
    """``toold mcp --no-daemon``: serve ``workspace`` on stdin/stdout until the client hangs up."""
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if main is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, main.cancel)

    # Inside stdio_server fd 0/1 are diverted, so workers the runner starts never inherit
    # the MCP pipes; inflight.capped: a client that does not read its answers stops being read.
    async with (
        stdio_server() as (stdin, stdout),
        capped(stdin, stdout) as (read_stream, write_stream),
    ):
        opened = contextlib.AsyncExitStack()
        try:
            _, server = await opened.enter_async_context(
                mcp_workspace(workspace, from_tool=from_tool)
            )
            await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            # Released inside the streams' task groups: shielded from their cancellation too.
            with anyio.CancelScope(shield=True):
                await opened.aclose()


def serve_mcp(workspace: Path, from_tool: bool = False) -> int:
    """Entry point of ``toold mcp --no-daemon``: 0 when the client closed the connection."""
    try:
        asyncio.run(serve(workspace, from_tool))
    except (KeyboardInterrupt, asyncio.CancelledError):
        log.info("stopped")
    return 0
