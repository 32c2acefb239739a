"""jobs/list, jobs/get, jobs/cancel."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toold.errors import InsideToolCall
from toold_protocol.models import EmptyParams, JobDetail, JobIdParams, JobInfo, JobsListResult

if TYPE_CHECKING:
    from toold.rpc import Context


async def jobs_list(ctx: Context, params: EmptyParams) -> JobsListResult:
    """Every job, running or finished."""
    return JobsListResult.model_validate({"jobs": ctx.workspace.jobs.list()})


async def jobs_get(ctx: Context, params: JobIdParams) -> JobDetail:
    """One job with its output so far (UnknownJob when there is none)."""
    return JobDetail.model_validate(ctx.workspace.jobs.get(params.job_id))


async def jobs_cancel(ctx: Context, params: JobIdParams) -> JobInfo:
    """Cancel a running job (UnknownJob, or ForeignJob when another daemon runs it); not
    from inside a tool call, whose client would cancel the user's jobs (the agent ends
    its own through its tools)."""
    if ctx.from_tool:
        raise InsideToolCall(
            "jobs/cancel from inside a tool call (an agent's command) is refused: cancel "
            "the job from your editor or your own shell"
        )
    return JobInfo.model_validate(await ctx.workspace.jobs.cancel(params.job_id))
