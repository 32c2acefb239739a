"""tools/list and tools/call."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toold.diagnostics.report import noteworthy
from toold.tools import formats
from toold.tools.context import CallContext
from toold_protocol import ToolsCallParams, ToolsCallResult, ToolsListParams, ToolsListResult

if TYPE_CHECKING:
    from toold.rpc import Context


async def tools_list(ctx: Context, params: ToolsListParams) -> ToolsListResult:
    """Every tool's schema in the requested format."""
    render = formats.FORMATS[params.format]
    return ToolsListResult.model_validate({"tools": [render(t) for t in ctx.workspace.toolset]})


async def tools_call(ctx: Context, params: ToolsCallParams) -> ToolsCallResult:
    """Run one tool; tool failures are isError results, an unknown name is UnknownTool."""
    gateway = ctx.gateway  # under the session's own mode
    name = gateway.toolset.require(params.name).name  # UnknownTool before any $/progress
    # A client inside a tool call is the agent's command, whatever origin it claims.
    context = CallContext(origin="agent" if ctx.from_tool else params.origin)
    with ctx.editor.work_done(params.work_done_token, name) as progress:
        if progress.reporting:
            context.progress = progress.report
        outcome = await gateway.call(name, params.arguments, context)
        progress.outcome = "failed" if outcome.is_error else "done"
    content = "" if outcome.content is None else outcome.content
    # A call the rules simply ran keeps the plain result: content, isError, exitCode.
    ran = outcome.decision == "ran"
    return ToolsCallResult(
        content=content,
        is_error=outcome.is_error,
        exit_code=outcome.exit_code,
        decision=None if ran else outcome.decision,
        rule=None if ran else outcome.rule,
        job_id=outcome.job_id,
        diagnostics=noteworthy(outcome.diagnostics),
    )
