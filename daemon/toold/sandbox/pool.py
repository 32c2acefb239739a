"""Worker sandboxes: each call in a worker process, taken from a pool of pre-started ones.

A worker answers one call, then goes away; taking one from the pool starts its
replacement. The exception is a shareable call (toold.sandbox.channel.shareable: a tool
that runs no command or code the caller chose, such as read_file or grep): its worker
offers to serve the next shareable call, and the pool keeps up to ``size`` such idle
workers, so a run of file calls costs one pipe round trip each instead of a fork. The
worker kills whatever a call left behind before it reads the next request. Starting
happens on a small thread pool, so a sandbox can be built (and its pool filled) from
any thread, before the event loop runs a single call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold.sandbox.channel import SandboxUnavailable, encode_request, shareable
from toold.sandbox.worker import ORIGINAL_PYTHONPATH

if TYPE_CHECKING:
    from toold.config import TooldConfig
    from toold.tools.base import Tool

log = logging.getLogger(__name__)

REFILL_DELAY = 0.01
"""Seconds after a call before a cheap-to-start worker's replacement is started."""
CANCEL_GRACE = 3.0
"""Seconds a cancelled worker gets to stop its tool (and its process group) cleanly."""


def under(path: str, root: str) -> bool:
    """``path`` is ``root`` or inside it (both absolute, normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def python_paths() -> list[str]:
    """Folders the worker's interpreter needs: prefixes, sys.path, toold's own packages."""
    import toold
    import toold_protocol

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)}
    cwd = os.getcwd()  # on sys.path under ``python -m``, but not something workers need
    paths.update(p for p in map(os.path.abspath, filter(None, sys.path)) if p != cwd)
    paths = {p for p in paths if os.path.isdir(p)}
    paths.update(str(Path(m.__file__ or "").parent) for m in (toold, toold_protocol))
    return sorted(paths)


def worker_env(base: dict[str, str]) -> dict[str, str]:
    """``base`` (a sandbox_environment) with PYTHONPATH leading to this very toold: a worker
    must run the daemon's code, whatever the installation says meanwhile. The worker puts
    ``base``'s own PYTHONPATH back (ORIGINAL_PYTHONPATH; none unless the user passes it
    through) before any tool runs."""
    import toold
    import toold_protocol

    daemon = os.environ.get("PYTHONPATH", "")
    roots = [str(Path(m.__file__ or "").parent.parent) for m in (toold, toold_protocol)]
    path = os.pathsep.join(dict.fromkeys(filter(None, [*roots, *daemon.split(os.pathsep)])))
    return {**base, "PYTHONPATH": path, ORIGINAL_PYTHONPATH: base.get("PYTHONPATH", "")}


class WorkerHandle(ABC):
    """One started worker, good for one call (and, when it offers, the shareable ones
    that follow: see ``reusable``)."""

    who: str = "sandbox"
    reusable: bool = False
    """Its last call was shareable and it offered to serve another (set by call())."""
    config: str | None = None
    """The configuration (JSON text) it was sent last: later requests leave it out."""

    @abstractmethod
    async def call(self, request: bytes, shared: bool = False) -> Any:
        """Send the request, forward progress, return the result or raise its exception;
        ``shared``: the call's tool may share the worker with later calls."""

    @abstractmethod
    def discard(self) -> None:
        """Release a worker that is not running a call (from any thread)."""

    def alive(self) -> bool:
        """Whether an idle worker can still take a call (cheap; no blocking)."""
        return True


class WorkerPool:
    """Keeps ``size`` workers starting or ready; hands each out once."""

    def __init__(self, spawn: Callable[[bool], WorkerHandle], size: int, threads: int = 4) -> None:
        self._spawn = spawn
        self.size = size
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="toold-sandbox")
        self._ready: deque[Future[WorkerHandle]] = deque()
        self._idle: deque[WorkerHandle] = deque()
        """Workers that served a shareable call and offered another (at most ``size``)."""
        self.closed = False
        self.fill()

    def fill(self) -> None:
        """Start workers until ``size`` are ready or starting."""
        while self.short():
            self._ready.append(self._executor.submit(self._spawn, True))

    def short(self) -> bool:
        """Whether fewer than ``size`` workers are ready or starting (fill() has work)."""
        return not self.closed and len(self._ready) < self.size

    async def acquire(self, refill: bool = True, shared: bool = False) -> WorkerHandle:
        """A worker of its own for one call: for a ``shared`` one, an idle worker that
        offered another call; else a ready one, else one started now.

        ``refill``: start its replacement at once; otherwise call fill() when convenient.
        """
        if self.closed:
            raise SandboxUnavailable("the runner is closed")
        while shared and self._idle:
            worker = self._idle.pop()
            if worker.alive():
                return worker
            worker.discard()
        ready = self._ready
        future = ready.popleft() if ready else self._executor.submit(self._spawn, False)
        if refill:
            self.fill()
        if future.done():
            return future.result()  # the common case: no hop through the event loop
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(_discard_result)
            raise

    def give_back(self, worker: WorkerHandle) -> None:
        """Keep a worker that offered another call for the next shareable one (up to
        ``size`` of them; one more is released)."""
        if len(self._idle) >= self.size:
            worker.discard()
            return
        self._idle.append(worker)
        if self.closed:  # closed meanwhile, from another thread
            self._release_idle()

    def _release_idle(self) -> None:
        while self._idle:
            try:
                worker = self._idle.pop()
            except IndexError:
                return
            worker.discard()

    def close(self) -> None:
        """Release every idle worker; calls already running keep theirs."""
        self.closed = True
        self._release_idle()
        while self._ready:
            future = self._ready.popleft()
            if not future.cancel():
                future.add_done_callback(_discard_result)
        self._executor.shutdown(wait=False, cancel_futures=True)


def _discard_result(future: Future[WorkerHandle]) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    try:
        future.result().discard()
    except Exception:
        log.exception("discarding an unused worker failed")


class WorkerSandbox(ABC):
    """A sandbox that runs each call in a worker of its own."""

    name = "worker"
    pool_threads = 4
    refill_after_call = False
    """Start a taken worker's replacement after the call instead of during it: right for
    workers that start in milliseconds, which would only compete with the call for CPU."""

    def __init__(self, workspace: Path, config: TooldConfig) -> None:
        self.workspace = workspace
        self.config = config
        self.problem: str | None = None
        self.notice: str | None = None
        """Shown to each session once (see toold.sandbox.runners.fallback_notice)."""
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._running = 0

    def activate(self) -> None:
        """Check that the sandbox works here and start the pool; else remember why not."""
        with self._lock:
            if self._pool is not None or self._closed:
                return
            self.problem = self.check()
            if self.problem is not None:
                log.error("%s runner unavailable: %s", self.name, self.problem)
                return
            if self.deferred():
                return
            warm = self.config.execution.warm_workers
            self._pool = WorkerPool(self.spawn, warm, self.pool_threads)

    def deferred(self) -> bool:
        """Whether the pool waits for the first call to start it (under ``_lock``)."""
        return False

    def check(self) -> str | None:
        """Why this sandbox cannot run here, naming the fix; None when it can."""
        return None

    def explain(self, result: Any) -> Any:
        """A call's result as the caller sees it (a sandbox adds hints about its limits)."""
        return result

    @abstractmethod
    def spawn(self, warm: bool) -> WorkerHandle:
        """Start one worker (blocking; on the pool's threads); ``warm``: for the pool, not
        for a call already waiting."""

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """Run one call in a fresh worker."""
        if self._pool is None:
            # Checked again on each call, so installing the missing piece needs no restart.
            await asyncio.to_thread(self.activate)
            if self._pool is None:
                raise SandboxUnavailable(self.problem or f"the {self.name} runner is closed")
        request = encode_request(tool, args, self.workspace, self.config)
        shared = shareable(tool)
        pool = self._pool
        self._running += 1
        try:
            worker = await pool.acquire(refill=not self.refill_after_call, shared=shared)
            line = request.line(worker.config)
            worker.config = request.config
            result = await worker.call(line, shared)
            if worker.reusable:
                pool.give_back(worker)
            return self.explain(result)
        finally:
            self._running -= 1
            loop = asyncio.get_running_loop()
            if self._closed and not self._running:
                loop.run_in_executor(None, self.release)  # the last call of a closed runner
            elif self.refill_after_call and pool.short():
                # Once the answer is on its way to the client, not while it is being sent
                # (a call served by an idle worker took none: nothing to start, no timer).
                loop.call_later(REFILL_DELAY, pool.fill)

    async def close(self) -> None:
        """Release idle workers now, and what the workers need (a fork server, a sandbox,
        an engine connection) once the calls still running have finished."""
        await asyncio.to_thread(self._close_pool)
        if not self._running:
            await asyncio.to_thread(self.release)

    def _close_pool(self) -> None:
        with self._lock:
            self._closed = True
            if self._pool is not None:
                self._pool.close()

    @abstractmethod
    def release(self) -> None:
        """Free what the workers shared, once none is left (blocking; idempotent)."""
