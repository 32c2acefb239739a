"""jobs/list, jobs/get, jobs/cancel."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pygls.exceptions import JsonRpcException

from toold_protocol import errors
from toold_protocol.models import EmptyParams, JobDetail, JobIdParams, JobInfo, JobsListResult

if TYPE_CHECKING:
    from toold.server import TooldServer


def _not_found(job_id: str) -> JsonRpcException:
    return JsonRpcException(f"Unknown job: {job_id}", code=errors.NOT_FOUND)


async def jobs_list(server: TooldServer, params: EmptyParams) -> JobsListResult:
    """Every job, running or finished."""
    return JobsListResult.model_validate({"jobs": server.state.jobs.list()})


async def jobs_get(server: TooldServer, params: JobIdParams) -> JobDetail:
    """One job with its output so far."""
    try:
        return JobDetail.model_validate(server.state.jobs.get(params.job_id))
    except KeyError:
        raise _not_found(params.job_id) from None


async def jobs_cancel(server: TooldServer, params: JobIdParams) -> JobInfo:
    """Cancel a running job."""
    from toold.jobs.manager import ForeignJobError

    try:
        return JobInfo.model_validate(await server.state.jobs.cancel(params.job_id))
    except KeyError:
        raise _not_found(params.job_id) from None
    except ForeignJobError as exc:
        raise JsonRpcException(str(exc), code=errors.INVALID_REQUEST) from None
