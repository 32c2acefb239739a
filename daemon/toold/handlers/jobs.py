"""jobs/list, jobs/get, jobs/cancel."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toold.errors import InsideToolCall
from toold_protocol.models import EmptyParams, JobDetail, JobIdParams, JobInfo, JobsListResult

if TYPE_CHECKING:
    from toold.server import TooldServer


async def jobs_list(server: TooldServer, params: EmptyParams) -> JobsListResult:
    """Every job, running or finished."""
    return JobsListResult.model_validate({"jobs": server.state.jobs.list()})


async def jobs_get(server: TooldServer, params: JobIdParams) -> JobDetail:
    """One job with its output so far (UnknownJob when there is none)."""
    return JobDetail.model_validate(server.state.jobs.get(params.job_id))


async def jobs_cancel(server: TooldServer, params: JobIdParams) -> JobInfo:
    """Cancel a running job (UnknownJob, or ForeignJob when another daemon runs it); not
    from inside a tool call, whose client would cancel the user's jobs (the agent ends
    its own through its tools)."""
    if server.from_tool:
        raise InsideToolCall(
            "jobs/cancel from inside a tool call (an agent's command) is refused: cancel "
            "the job from your editor or your own shell"
        )
    return JobInfo.model_validate(await server.state.jobs.cancel(params.job_id))
