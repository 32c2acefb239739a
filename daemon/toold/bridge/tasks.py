"""Background jobs as MCP tasks: the ``io.modelcontextprotocol/tasks`` extension (2026-07-28).

A ``background_run`` whose client declared the extension in its request's capabilities is
answered with a task handle (``resultType: "task"``) named by the job's id, instead of
the call's result and its ``toold://jobs/<id>`` link (which every other client keeps).
``tasks/get`` answers the job as a task (its output, once it ended, as the tool result),
and ``tasks/cancel`` cancels it (its process group dies: BackgroundManager.cancel). The
installed SDK has no server support for the extension, so its three shapes are built here
from the extension's schema; ``tasks/update`` is not served: a job never waits for input.
"""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toold.errors import TooldError
from toold.workspace import WorkspaceState

EXTENSION = "io.modelcontextprotocol/tasks"
POLL_MS = 1000
"""How often a client is asked to poll ``tasks/get``."""
EXIT_CODE_META = "toold/exitCode"
"""``_meta`` key of a result carrying the exit status of the command a tool ran."""
STATUSES = {"running": "working", "cancelled": "cancelled"}
"""A job's status as a task's; every other end (done, failed, timed_out) is
``completed``: a command that failed is a tool error (isError), not a JSON-RPC one."""


class TaskParams(types.RequestParams):
    """``tasks/get`` and ``tasks/cancel`` params: the task's id."""

    task_id: str


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client declared the tasks extension (2026-07-28 only)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    extensions = getattr(caps, "extensions", None) if caps is not None else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def _task(job: dict[str, Any]) -> dict[str, Any]:
    """The Task fields of a job record (BackgroundManager.get)."""
    status = STATUSES.get(str(job.get("status")), "completed")
    task: dict[str, Any] = {
        "taskId": job["job_id"],
        "status": status,
        "statusMessage": f"{job.get('status')}: {job.get('command')}",
        "createdAt": job.get("started_at"),
        "lastUpdatedAt": job.get("finished_at") or job.get("started_at"),
        "ttlMs": None,
    }
    if status == "working":
        task["pollIntervalMs"] = POLL_MS
    return task


def created(state: WorkspaceState, job_id: str) -> dict[str, Any]:
    """The ``CreateTaskResult`` for a job just started (tasks/get resolves it already)."""
    return {**_task(state.jobs.get(job_id)), "resultType": "task"}


def _result(job: dict[str, Any]) -> dict[str, Any]:
    """A finished job as the ``CallToolResult`` of its call: its output, isError unless it
    exited 0, the exit code in ``_meta``."""
    parts = [job.get("output") or "", job.get("result") or "", job.get("error") or ""]
    text = "\n".join(part for part in parts if part).strip()
    exit_code = job.get("exit_code")
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": text}],
        "isError": not (job.get("status") == "done" and exit_code in (None, 0)),
    }
    if exit_code is not None:
        result["_meta"] = {EXIT_CODE_META: exit_code}
    return result


def _job(state: WorkspaceState, ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """Refuse a client that did not declare the extension, or a task that is no job."""
    if not declared(ctx):
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
        )
    try:
        state.jobs.get(task_id)
    except TooldError:
        raise MCPError(types.INVALID_PARAMS, "Failed to retrieve task: Task not found") from None


def handlers(state: WorkspaceState) -> dict[str, Any]:
    """``tasks/get`` and ``tasks/cancel`` for the bridge's server, by method."""

    async def get(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        _job(state, ctx, params.task_id)
        job = state.jobs.get(params.task_id)
        task = _task(job)
        if task["status"] == "completed":
            task["result"] = _result(job)
        return {**task, "resultType": "complete"}

    async def cancel(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        _job(state, ctx, params.task_id)
        try:
            await state.jobs.cancel(params.task_id)
        except TooldError as exc:  # a job another daemon runs
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        return {"resultType": "complete"}

    return {"tasks/get": get, "tasks/cancel": cancel}
