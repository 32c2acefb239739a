"""ToolRunner: where the one run path (toold.dispatch) sends sandboxable tools; wraps one sandbox.

Every run emits ``execution.started`` then ``execution.completed`` or
``execution.failed`` to an optional listener (the server turns them into
``execution/event`` notifications for clients that asked).

When the execution settings change, the runner keeps its identity (agents and
teammates hold it) and swaps its sandbox: the replaced one is closed, on a thread of
its own, once the last call running in it has finished.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from toold.fairness import runner_shares

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
        return await tool.call(args)

    async def close(self) -> None:
        """Nothing to release."""


class ToolRunner:
    """Wraps a sandbox and reports each run's lifecycle."""

    def __init__(self, sandbox: Sandbox | None = None, on_event: EventListener | None = None):
        self.sandbox: Sandbox = sandbox or LocalSandbox()
        self.on_event = on_event
        self._lock = threading.Lock()  # replace_sandbox may run on another thread
        self._renewing = threading.Lock()
        self._calls: dict[Sandbox, int] = {}
        """Calls running in each sandbox."""
        self._replaced: set[Sandbox] = set()
        """Replaced sandboxes waiting for their last call to finish."""
        self.closing: list[threading.Thread] = []
        """Threads closing replaced sandboxes (kept for tests and shutdown)."""

    @property
    def name(self) -> str:
        """The sandbox kind: local, subprocess, bwrap or docker."""
        return self.sandbox.name

    @property
    def problem(self) -> str | None:
        """Why the sandbox cannot run calls here (naming the fix), or None when it can."""
        problem: str | None = getattr(self.sandbox, "problem", None)
        return problem

    @property
    def notice(self) -> str | None:
        """What the user should know about where calls run (``auto`` fell back from bwrap,
        naming why and the fix), or None."""
        notice: str | None = getattr(self.sandbox, "notice", None)
        return notice

    def replace_sandbox(self, sandbox: Sandbox) -> Sandbox:
        """Run later calls in ``sandbox`` (the execution settings changed; from any thread).

        Calls already running finish in the previous sandbox, which is then closed in the
        background: its workers, fork server, bwrap sandbox or engine connection go.
        Returns the previous sandbox.
        """
        with self._lock:
            previous, self.sandbox = self.sandbox, sandbox
            busy = previous in self._calls
            if busy:
                self._replaced.add(previous)
        if not busy:
            self._close_in_background(previous)
        return previous

    def _close_in_background(self, sandbox: Sandbox) -> None:
        def close() -> None:
            try:
                asyncio.run(sandbox.close())
            except Exception:
                log.exception("closing the replaced %s sandbox failed", sandbox.name)

        thread = threading.Thread(target=close, name=f"toold-close-{sandbox.name}")
        with self._lock:
            self.closing = [t for t in self.closing if t.is_alive()] + [thread]
        thread.start()

    def _renew(self, stale: Sandbox) -> None:
        """Replace a sandbox whose view no longer fits the workspace (blocking; once)."""
        with self._renewing:
            if self.sandbox is not stale:
                return  # another call renewed it meanwhile
            renewed: Sandbox = stale.renewed()  # type: ignore[attr-defined]
            log.info("the workspace's .git changed: a new %s sandbox", stale.name)
            self.replace_sandbox(renewed)

    async def _current(self) -> Sandbox:
        """The sandbox for a new call, renewed first if it went stale (see stale())."""
        sandbox = self.sandbox
        stale = getattr(sandbox, "stale", None)
        if stale is not None and stale():
            await asyncio.to_thread(self._renew, sandbox)
        return self._enter()

    def _enter(self) -> Sandbox:
        """The sandbox a call runs in (the whole call, even if it is replaced meanwhile)."""
        with self._lock:
            sandbox = self.sandbox
            self._calls[sandbox] = self._calls.get(sandbox, 0) + 1
        return sandbox

    def _leave(self, sandbox: Sandbox) -> None:
        with self._lock:
            left = self._calls.pop(sandbox) - 1
            if left:
                self._calls[sandbox] = left
                return
            if sandbox not in self._replaced:
                return
            self._replaced.discard(sandbox)
        self._close_in_background(sandbox)

    def _emit(self, event: str, tool: str, call_id: str, runner: str, **extra: Any) -> None:
        payload = {"event": event, "tool": tool, "runner": runner, "callId": call_id, **extra}
        log.debug("%s", payload)
        if self.on_event is not None:
            self.on_event(payload)

    async def run(
        self, tool: Tool, args: Any, *, event_context: Mapping[str, Any] | None = None
    ) -> Any:
        """Run ``tool`` through the sandbox, within its session's share of the runner
        (toold.fairness: one session's many calls wait rather than crowd out others')."""
        async with runner_shares.held():
            return await self._run(tool, args, event_context)

    async def _run(self, tool: Tool, args: Any, event_context: Mapping[str, Any] | None) -> Any:
        name = getattr(tool, "name", type(tool).__name__)
        call_id = str((event_context or {}).get("callId") or f"call-{next(_call_ids)}")
        sandbox = await self._current()
        started = time.perf_counter()
        self._emit("execution.started", name, call_id, sandbox.name)
        try:
            result = await sandbox.run_tool(tool, args)
        except BaseException as exc:
            elapsed = round((time.perf_counter() - started) * 1000, 3)
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self._emit(
                "execution.failed", name, call_id, sandbox.name, durationMs=elapsed, error=error
            )
            raise
        finally:
            self._leave(sandbox)
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        self._emit("execution.completed", name, call_id, sandbox.name, durationMs=elapsed)
        return result

    async def close(self) -> None:
        """Close the sandbox: idle workers, the fork server, containers (and wait for
        replaced sandboxes being closed)."""
        await self.sandbox.close()
        with self._lock:
            closing = list(self.closing)
        for thread in closing:
            await asyncio.to_thread(thread.join)
