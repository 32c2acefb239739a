"""ToolRunner: the facade Tool.execute delegates to, wrapping one sandbox.

Every run emits ``execution.started`` then ``execution.completed`` or
``execution.failed`` to an optional listener (the server turns them into
``execution/event`` notifications for clients that asked).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from toold.tools.base import Tool

log = logging.getLogger(__name__)

EventListener = Callable[[dict[str, Any]], None]
_call_ids = itertools.count(1)


class Sandbox(Protocol):
    """Somewhere a tool can run."""

    name: str

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """Run ``tool`` with already-validated ``args`` and return its result."""
        ...

    async def close(self) -> None:
        """Release workers, containers and the like."""
        ...


class LocalSandbox:
    """Runs the tool in the daemon process (sync tools in a worker thread)."""

    name = "local"

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """Run in-process."""
        return await tool._execute_local(args)

    async def close(self) -> None:
        """Nothing to release."""


class ToolRunner:
    """Wraps a sandbox and reports each run's lifecycle."""

    def __init__(self, sandbox: Sandbox | None = None, on_event: EventListener | None = None):
        self.sandbox: Sandbox = sandbox or LocalSandbox()
        self.on_event = on_event

    @property
    def name(self) -> str:
        """The sandbox kind: local, subprocess, bwrap or docker."""
        return self.sandbox.name

    @property
    def problem(self) -> str | None:
        """Why the sandbox cannot run calls here (naming the fix), or None when it can."""
        problem: str | None = getattr(self.sandbox, "problem", None)
        return problem

    def _emit(self, event: str, tool: str, call_id: str, **extra: Any) -> None:
        payload = {"event": event, "tool": tool, "runner": self.name, "callId": call_id, **extra}
        log.debug("%s", payload)
        if self.on_event is not None:
            self.on_event(payload)

    async def run(
        self, tool: Tool, args: Any, *, event_context: Mapping[str, Any] | None = None
    ) -> Any:
        """Run ``tool`` through the sandbox."""
        name = getattr(tool, "name", type(tool).__name__)
        call_id = str((event_context or {}).get("callId") or f"call-{next(_call_ids)}")
        started = time.perf_counter()
        self._emit("execution.started", name, call_id)
        try:
            result = await self.sandbox.run_tool(tool, args)
        except BaseException as exc:
            elapsed = round((time.perf_counter() - started) * 1000, 3)
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self._emit("execution.failed", name, call_id, durationMs=elapsed, error=error)
            raise
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        self._emit("execution.completed", name, call_id, durationMs=elapsed)
        return result

    async def close(self) -> None:
        """Close the sandbox: idle workers, the fork server, containers."""
        await self.sandbox.close()
