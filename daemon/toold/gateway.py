"""ToolGateway: the one way a front end runs a tool — validate → guard → run → audit.

Every front end translates its protocol to ``gateway.call(name, arguments, context)``
and the outcome back, nothing more: tools/call over LSP framing (which ``toold call``
and ``toold run`` reach too), the agent loop with its subagents and teammates, and the
MCP bridge. None of them holds a guard and a runner of its own, so none can run a tool
the guard has not judged.

Arguments are validated before the guard sees them, so rules and the classifier judge
the values the tool will really use (aliases folded, defaults filled), and a call that
fails validation (two names for one argument, an empty command) never reaches the guard.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pydantic_core import to_jsonable_python

from toold.permissions.guard import DENIED, PermissionGuard
from toold.sandbox.runner import ToolRunner
from toold.tools.base import ToolArgumentError
from toold.tools.context import CallContext
from toold.tools.toolset import ToolOutcome, ToolSet


@dataclass(frozen=True)
class ToolGateway:
    """A tool set, the guard that judges its calls and the runner that runs them."""

    toolset: ToolSet
    guard: PermissionGuard
    runner: ToolRunner | None = None
    """Where sandboxable tools run; None runs them in this process."""

    def narrowed(
        self, *, toolset: ToolSet | None = None, guard: PermissionGuard | None = None
    ) -> ToolGateway:
        """The same runner with fewer tools or a stricter guard (a subagent, a teammate)."""
        return replace(
            self,
            toolset=self.toolset if toolset is None else toolset,  # an empty set stays empty
            guard=self.guard if guard is None else guard,
        )

    async def call(self, name: str, arguments: Any, context: CallContext) -> ToolOutcome:
        """Run one call the guard allows; every refusal or failure is an isError outcome.

        Only an unknown name raises (toold.tools.toolset.UnknownToolError): each front
        end answers it in its own protocol. Cancellation propagates.
        """
        tool = self.toolset.require(name)
        try:
            checked = tool.validate_args(arguments)
        except ToolArgumentError as exc:
            return ToolOutcome(f"Error: {exc}", is_error=True)
        # Tools without an arguments model keep the call's own shape (rules are written for it).
        seen = (
            to_jsonable_python(checked, fallback=str) if isinstance(checked, Mapping) else arguments
        )
        # The guard judges the tool by its own annotations (a user's tool included).
        verdict = await self.guard.check(tool.name, seen, context.origin, tool.annotations)
        if not verdict.allowed:
            return ToolOutcome(verdict.message or DENIED, is_error=True)
        started = time.perf_counter()
        outcome = await self.toolset.run(tool, checked, context=context, runner=self.runner)
        if self.guard.audit is not None:
            self.guard.audit.record(
                event="call",
                tool=tool.name,
                origin=context.origin,
                arguments=arguments,
                durationMs=round((time.perf_counter() - started) * 1000, 3),
                outcome="error" if outcome.is_error else "ok",
                exitCode=outcome.exit_code,
            )
        return outcome
