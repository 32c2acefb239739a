"""PipeWorker: the daemon's end of a worker process reached through two pipes.

The exchange uses the descriptors directly (non-blocking, woken by the event loop): no
asyncio transports to build and tear down per call, and the pipes stay open when the
worker offers to serve another call (see toold.sandbox.worker).
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
    """A worker process reached through two pipes: its stdin and its stdout."""

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
        poller = select.poll()  # not select(): an engine's descriptors may pass 1024
        poller.register(self.out_fd, select.POLLIN)
        return not poller.poll(0)

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
        """End an idle worker, then close its pipes (it exits when its stdin closes)."""
        self.finished(exited=False)
        self._finalizer()
