"""Worker sandboxes: one fresh worker per call, taken from a pool of pre-started ones.

A worker answers exactly one call, then goes away; taking one from the pool starts its
replacement at once. Starting happens on a small thread pool, so a sandbox can be built
(and its pool filled) from any thread, before the event loop runs a single call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import sys
import threading
import weakref
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold.sandbox.channel import (
    READ_LIMIT,
    SandboxUnavailable,
    WorkerLost,
    encode_request,
    read_reply,
    shareable,
)
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


def _close_fds(fds: list[int]) -> None:
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())


async def _ready(fd: int, writing: bool) -> None:
    """Wait until ``fd`` can be written (or read) without blocking."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    if writing:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await waiter
    finally:
        if writing:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


class PipeWorker(WorkerHandle):
    """A worker process reached through two pipes: its stdin and its stdout.

    The exchange uses the descriptors directly (non-blocking, woken by the event loop):
    no transports to build and tear down per call, and the pipes stay open when the
    worker offers to serve another call.
    """

    def __init__(self, in_fd: int, out_fd: int) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self._fds = [in_fd, out_fd]
        """Still open (closing one removes it, so nothing is closed twice)."""
        self._buffer = bytearray()
        self._eof = False
        os.set_blocking(in_fd, False)
        os.set_blocking(out_fd, False)
        # A worker dropped without discard() still gets its pipes closed (and exits).
        self._finalizer = weakref.finalize(self, _close_fds, self._fds)

    @abstractmethod
    def finished(self, exited: bool) -> None:
        """The exchange is over (answered, failed or cancelled) and the worker not kept;
        end it if that is this kind's way. ``exited``: its stdout closed, so it is gone."""

    async def cancelled(self) -> None:
        """The call was cancelled and the worker's stdin closed (by default: no grace)."""

    def alive(self) -> bool:
        """Nothing waiting on its stdout: an idle worker that exited would show EOF."""
        if self._eof or self.out_fd not in self._fds:
            return False
        return not select.select([self.out_fd], [], [], 0)[0]

    async def call(self, request: bytes, shared: bool = False) -> Any:
        """One exchange over the pipes."""
        self.reusable = False
        offered = False
        try:
            try:
                await self._send(request)
                result, offered = await read_reply(self._readline, self.who)
            except asyncio.CancelledError:
                self._close_stdin()  # the worker cancels its tool when its stdin closes
                await self.cancelled()
                raise
            return result
        finally:
            if offered and shared and not self._buffer:
                self.reusable = True
            else:
                self.finished(exited=self._eof)
                self._finalizer()

    def _close_stdin(self) -> None:
        if self.in_fd in self._fds:
            self._fds.remove(self.in_fd)
            with contextlib.suppress(OSError):
                os.close(self.in_fd)

    async def _send(self, request: bytes) -> None:
        # Most requests fit the pipe: one write, no wait.
        view = memoryview(request)
        while view:
            try:
                view = view[os.write(self.in_fd, view) :]
            except BlockingIOError:
                await _ready(self.in_fd, writing=True)
            except BrokenPipeError:
                return  # the worker is gone: reading its stdout says so

    async def _read_some(self) -> None:
        while True:
            try:
                chunk = os.read(self.out_fd, 65536)
            except BlockingIOError:
                await _ready(self.out_fd, writing=False)
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True
            return

    async def _readline(self) -> bytes:
        """The next line from the worker; what is left (maybe b"") once its stdout ends."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            if self._eof:
                line = bytes(self._buffer)
                self._buffer.clear()
                return line
            if len(self._buffer) > READ_LIMIT:
                raise WorkerLost(f"the {self.who} worker sent a line over {READ_LIMIT} bytes")
            await self._read_some()

    async def wait_exit(self, timeout: float) -> bool:
        """Drain the worker's stdout until it closes; False if ``timeout`` passed first."""

        async def drain() -> None:
            while not self._eof:
                self._buffer.clear()
                await self._read_some()

        try:
            await asyncio.wait_for(drain(), timeout)
        except TimeoutError:
            return False
        return True

    def discard(self) -> None:
        """End an idle worker, then close its pipes (it exits when its stdin closes)."""
        self.finished(exited=False)
        self._finalizer()


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
        while not self.closed and len(self._ready) < self.size:
            self._ready.append(self._executor.submit(self._spawn, True))

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
            result = await worker.call(request, shared)
            if worker.reusable:
                pool.give_back(worker)
            return self.explain(result)
        finally:
            self._running -= 1
            loop = asyncio.get_running_loop()
            if self._closed and not self._running:
                loop.run_in_executor(None, self.release)  # the last call of a closed runner
            elif self.refill_after_call:
                # Once the answer is on its way to the client, not while it is being sent.
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
