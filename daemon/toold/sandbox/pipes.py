"""PipeWorker: the daemon's end of a worker process reached through two pipes.

The exchange uses the descriptors directly (non-blocking, woken by the event loop): no
asyncio transports to build and tear down per call, and the pipes stay open when the
worker offers to serve another call (see toold.sandbox.worker). The worker's stdout is
watched by the loop from its first call until its pipes close, not registered and
removed around each wait: two epoll_ctl calls less per exchange. While the worker is
idle nothing may arrive; if anything does (its end: it exited), the watch stops and the
worker is not reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import weakref
from abc import abstractmethod
from typing import Any

from toold.sandbox.channel import read_reply, take_line
from toold.sandbox.pool import WorkerHandle


def _close_fds(fds: list[int]) -> None:
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _unwatch_and_close(loop: asyncio.AbstractEventLoop, fd: int, fds: list[int]) -> None:
    """Stop ``loop`` watching ``fd``, then close the pipes: never the other way round, as
    a descriptor closed while watched, its number then reused, confuses the selector."""
    if not loop.is_closed():  # a closed loop's selector is gone, and the watch with it
        loop.remove_reader(fd)
    _close_fds(fds)


def _release(fds: list[int], out_fd: int, watch: list[asyncio.AbstractEventLoop]) -> None:
    """Close the pipes (from any thread): through the loop that watches them, if one
    does and runs on another thread; at once otherwise."""
    try:
        loop: asyncio.AbstractEventLoop | None = watch.pop()
    except IndexError:  # none, or the loop's own _unwatch took it, having unwatched
        loop = None
    if loop is None or loop.is_closed():
        _close_fds(fds)
    elif loop.is_running() and _running_loop() is not loop:
        try:
            loop.call_soon_threadsafe(_unwatch_and_close, loop, out_fd, fds)
        except RuntimeError:  # closed meanwhile
            _close_fds(fds)
    else:
        _unwatch_and_close(loop, out_fd, fds)


def _on_readable(ref: weakref.ref[PipeWorker]) -> None:
    # A weak reference: a watched worker dropped without discard() is still collected,
    # and its finalizer ends the watch and closes the pipes.
    worker = ref()
    if worker is not None:
        worker._readable()


async def _writable(fd: int) -> None:
    """Wait until ``fd`` can be written without blocking (a request larger than the pipe)."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await waiter
    finally:
        loop.remove_writer(fd)


class PipeWorker(WorkerHandle):
    """A worker process reached through two pipes: its stdin and its stdout."""

    def __init__(self, in_fd: int, out_fd: int) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self._fds = [in_fd, out_fd]
        """Still open (closing one removes it, so nothing is closed twice)."""
        self._buffer = bytearray()
        self._eof = False
        self._watch: list[asyncio.AbstractEventLoop] = []
        """The loop watching its stdout (at most one; emptied when the watch stops)."""
        self._busy = False
        """A call runs: output is expected (else nothing may come)."""
        self._waiter: asyncio.Future[None] | None = None
        """What the call awaits: woken when more output (or its end) came."""
        self._stirred = False
        """Its stdout turned readable while it was idle: it exited (or misbehaves)."""
        self._unwaited = 0
        """Reads in a row that found output without waiting on the loop (_read_some)."""
        self._poller: select.poll | None = None
        os.set_blocking(in_fd, False)
        os.set_blocking(out_fd, False)
        # A worker dropped without discard() still gets its pipes closed (and exits).
        self._finalizer = weakref.finalize(self, _release, self._fds, out_fd, self._watch)

    @abstractmethod
    def finished(self, exited: bool) -> None:
        """The exchange is over (answered, failed or cancelled) and the worker not kept;
        end it if that is this kind's way. ``exited``: its stdout closed, so it is gone."""

    async def cancelled(self) -> None:
        """The call was cancelled and the worker's stdin closed (by default: no grace)."""

    def alive(self) -> bool:
        """Nothing waiting on its stdout (an idle worker that exited would show EOF), and
        watched by the running loop, if by any."""
        if self._eof or self._stirred or self.out_fd not in self._fds:
            return False
        if self._watch and self._watch[0] is not _running_loop():
            return False  # kept by another loop: it is released, not moved
        if self._poller is None:
            self._poller = select.poll()  # not select(): descriptors may pass 1024
            self._poller.register(self.out_fd, select.POLLIN)
        return not self._poller.poll(0)

    def _readable(self) -> None:
        """The loop saw its stdout readable: take what came (reading it here, so the loop
        does not see it readable again before the call does) and wake the call; idle,
        stop watching, as nothing may come then."""
        if not self._take():
            return
        if not self._busy:
            self._stirred = True
            self._unwatch()
        elif (waiter := self._waiter) is not None and not waiter.done():
            waiter.set_result(None)

    def _watched(self) -> None:
        if not self._watch:
            loop = asyncio.get_running_loop()
            loop.add_reader(self.out_fd, _on_readable, weakref.ref(self))
            self._watch.append(loop)

    def _unwatch(self) -> None:
        # Unwatched before the loop leaves _watch: a discard on another thread that finds
        # _watch empty closes the pipes at once.
        try:
            loop = self._watch[0]
        except IndexError:
            return
        loop.remove_reader(self.out_fd)
        with contextlib.suppress(IndexError):
            self._watch.pop()

    async def call(self, request: bytes, shared: bool = False) -> Any:
        """One exchange over the pipes."""
        self.reusable = False
        offered = False
        self._watched()
        self._busy = True
        self._unwaited = 0
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
            self._busy = False
            self._waiter = None
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
                await _writable(self.in_fd)
            except BrokenPipeError:
                return  # the worker is gone: reading its stdout says so

    def _take(self) -> bool:
        """Read what its stdout holds into the buffer, or note its end; False if nothing."""
        try:
            chunk = os.read(self.out_fd, 65536)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if chunk:
            self._buffer += chunk
        else:
            self._eof = True
            self._unwatch()  # the end stays readable: it would wake the loop forever
        return True

    async def _read_some(self) -> None:
        """More of its output (or its end): what is there already (a worker that ran on
        this CPU as soon as its request came has answered), else what _readable reads
        once the loop sees it come."""
        if self._eof:
            return
        if self._take():
            # Found there at once: free the first time in a row (a reply ready as the call
            # looks); again and again, something floods the pipe (a command writing to it
            # through /proc/PID/fd), and the loop's other sessions must go on meanwhile.
            self._unwaited += 1
            if self._unwaited > 1:
                await asyncio.sleep(0)
            return
        self._unwaited = 0
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        await waiter

    async def _readline(self) -> bytes:
        """The next line from the worker; what is left (maybe b"") once its stdout ends."""
        while (line := take_line(self._buffer, self._eof, self.who)) is None:
            await self._read_some()
        return line

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
        """End an idle worker, then close its pipes (from any thread; the loop that
        watches them closes them)."""
        self.finished(exited=False)
        self._finalizer()
