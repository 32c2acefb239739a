"""guarded_invoke: the one path every guarded tool call takes (tools/call and agent loops).

Arguments are validated before the guard sees them, so rules and the classifier judge
the values the tool will really use (aliases folded, defaults filled), and a call that
fails validation (two names for one argument, an empty command) never reaches the guard.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from toold.permissions.guard import DENIED, PermissionGuard
from toold.sandbox.runner import ToolRunner
from toold.tools.base import ToolArgumentError
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
    """Validate, check the guard (asking if needed), run the tool, and audit both."""
    try:
        checked = toolset.require(name).validate_args(args)
    except ToolArgumentError as exc:
        return ToolOutcome(f"Error: {exc}", is_error=True)
    # Tools without an arguments model keep the call's own shape (rules are written for it).
    seen = to_jsonable_python(checked, fallback=str) if isinstance(checked, Mapping) else args
    verdict = await guard.check(name, seen, context.origin)
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
