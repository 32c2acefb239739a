"""The one place a tool runs: in this process or through the runner, failures as outcomes.

``ToolGateway.call`` (toold.gateway) is the way a front end runs a tool; it judges the
call and then hands it here. The only other caller is a background job's command
(``WorkspaceState.run_job_command``), which the guard judged when the job was submitted.
Nothing else imports this module (tests/unit/test_layering.py pins it), so no call
reaches a tool without the guard having judged it. The seeds' faces (toold.compat) call
``Tool.call`` themselves: they answer with the tool's own result and exceptions.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_core import to_jsonable_python

from toold.outcome import ToolOutcome, error_text
from toold.sandbox.runner import ToolRunner
from toold.tools.base import Tool, ToolArgumentError
from toold.tools.context import CallContext, current_call


async def run_tool(
    tool: Tool, checked: Any, context: CallContext, runner: ToolRunner | None
) -> ToolOutcome:
    """Run ``tool`` with validated arguments: through ``runner`` when it is sandboxable,
    else here. Every failure is an isError outcome; cancellation propagates.

    ``context`` reaches the tool (progress, exit code, the isError flag) through the
    ``current_call`` context variable, also on a worker thread.
    """
    token = current_call.set(context)
    try:
        if runner is not None and tool.sandboxable:
            result = await runner.run(tool, checked)
        else:
            result = await tool.call(checked)
    except ToolArgumentError as exc:
        return ToolOutcome(f"Error: {exc}", is_error=True)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        # The spec's text for a failed handler: the agent reads it and corrects itself.
        return ToolOutcome(error_text(exc), is_error=True)
    finally:
        current_call.reset(token)
    meta = context.meta
    return ToolOutcome(
        to_jsonable_python(result, fallback=str),
        is_error=bool(meta.get("is_error")),
        exit_code=meta.get("exit_code"),
        timed_out=bool(meta.get("timed_out")),
    )


async def run_judged(
    tool: Tool, arguments: Any, context: CallContext, runner: ToolRunner | None
) -> ToolOutcome:
    """Validate and run a call the guard has already judged (a background job's command).

    Arguments that fail the tool's schema are an isError outcome, as at the gateway.
    """
    try:
        checked = tool.validate_args(arguments)
    except ToolArgumentError as exc:
        return ToolOutcome(f"Error: {exc}", is_error=True)
    return await run_tool(tool, checked, context, runner)
