"""ToolRunner: the facade Tool.execute delegates to when a runner is configured."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from toold.tools.base import Tool

log = logging.getLogger(__name__)


class Sandbox(Protocol):
    """Somewhere a tool can run."""

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """Run ``tool`` with already-validated ``args`` and return its result."""
        ...


class LocalSandbox:
    """Runs the tool in the daemon process (sync tools in a worker thread)."""

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """Run in-process."""
        return await tool._execute_local(args)


class ToolRunner:
    """Wraps a sandbox and emits execution.started/completed/failed events."""

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self._sandbox: Sandbox = sandbox or LocalSandbox()

    async def run(
        self, tool: Tool, args: Any, *, event_context: Mapping[str, Any] | None = None
    ) -> Any:
        """Run ``tool`` through the sandbox."""
        name = getattr(tool, "name", type(tool).__name__)
        log.debug("execution.started %s %s", name, dict(event_context or {}))
        try:
            result = await self._sandbox.run_tool(tool, args)
        except Exception:
            log.debug("execution.failed %s", name)
            raise
        log.debug("execution.completed %s", name)
        return result
