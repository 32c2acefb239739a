"""tools/list and tools/call."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from toold.permissions.calls import guarded_invoke
from toold.tools import formats
from toold.tools.context import CallContext
from toold.tools.toolset import UnknownToolError
from toold_protocol import ToolsCallParams, ToolsCallResult, ToolsListParams, ToolsListResult

if TYPE_CHECKING:
    from toold.server import TooldServer


async def tools_list(server: TooldServer, params: ToolsListParams) -> ToolsListResult:
    """Every tool's schema in the requested format."""
    render = formats.FORMATS[params.format]
    return ToolsListResult.model_validate({"tools": [render(t) for t in server.toolset]})


async def tools_call(server: TooldServer, params: ToolsCallParams) -> ToolsCallResult:
    """Run one tool; tool failures are isError results, an unknown name is -32602."""
    try:
        tool = server.toolset.require(params.name)
    except UnknownToolError as exc:
        raise JsonRpcInvalidParams(str(exc)) from None
    token = params.work_done_token
    context = CallContext(origin=params.origin)
    if token is not None:
        progress = server.work_done_progress
        progress.begin(token, types.WorkDoneProgressBegin(title=tool.name, cancellable=True))
        context.progress = lambda text: progress.report(
            token, types.WorkDoneProgressReport(message=text)
        )
    outcome = None
    try:
        outcome = await guarded_invoke(
            server.toolset,
            server.state.guard,
            tool.name,
            params.arguments,
            context=context,
            runner=server.state.runner,
        )
    finally:
        if token is not None:
            message = "cancelled" if outcome is None else "failed" if outcome.is_error else "done"
            server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
    content = "" if outcome.content is None else outcome.content
    return ToolsCallResult(content=content, is_error=outcome.is_error, exit_code=outcome.exit_code)
