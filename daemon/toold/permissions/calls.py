"""guarded_invoke: the one path every guarded tool call takes (tools/call and agent loops)."""

from __future__ import annotations

import time
from typing import Any

from toold.permissions.guard import DENIED, PermissionGuard
from toold.sandbox.runner import ToolRunner
from toold.tools.context import CallContext
from toold.tools.toolset import ToolOutcome, ToolSet


async def guarded_invoke(
    toolset: ToolSet,
    guard: PermissionGuard,
    name: str,
    args: Any,
    *,
    context: CallContext,
    runner: ToolRunner | None = None,
) -> ToolOutcome:
    """Check the guard (asking if needed), run the tool, and audit both."""
    verdict = await guard.check(name, args, context.origin)
    if not verdict.allowed:
        return ToolOutcome(verdict.message or DENIED, is_error=True)
    started = time.perf_counter()
    outcome = await toolset.invoke(name, args, context=context, runner=runner)
    if guard.audit is not None:
        guard.audit.record(
            event="call",
            tool=name,
            origin=context.origin,
            arguments=args,
            durationMs=round((time.perf_counter() - started) * 1000, 3),
            outcome="error" if outcome.is_error else "ok",
            exitCode=outcome.exit_code,
        )
    return outcome
