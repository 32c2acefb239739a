"""How a session ends: ``shutdown``, ``exit`` and the end of stdin.

A CI script piped into the daemon sends its requests, ``shutdown`` and ``exit`` at once.
``shutdown`` is therefore answered only after every request received before it, an
``exit`` behind it waits for that answer, and the end of stdin lets running requests
finish too. ``limits.shutdown_grace`` bounds each wait; what is still running then is
cancelled (answered -32800, its process group killed), logged, and the exit status is 1.
A client process that dies (ClientWatch) stops the session at once instead.

SessionEnd and ClientWatch are given what they need (the connection's requests, the
grace, a way to stop) and know nothing of the session.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toold.connection import JsonRpcConnection

log = logging.getLogger(__name__)

POLL_CLIENT_S = 2.0
"""How often a client process is checked where pidfd_open is missing."""


class SessionEnd:
    """One session's ending; the waits are shared (shutdown, exit and EOF may overlap)."""

    def __init__(
        self,
        connection: JsonRpcConnection,
        grace: Callable[[], Awaitable[float]],
        stop: Callable[[int], None],
    ) -> None:
        """``grace`` gives ``limits.shutdown_grace`` (once it is known); ``stop`` ends the
        session with an exit code."""
        self._connection = connection
        self._grace = grace
        self._stop = stop
        self._finishing: asyncio.Future[None] | None = None
        self.abandoned: list[str] = []
        """Requests the grace ran out on (cancelled), as ``id (method)``."""

    async def finish_requests(self) -> None:
        """Let the client's requests in flight finish within the grace, then cancel and
        log what is left (``shutdown``'s own request is not waited for)."""
        if self._finishing is None:
            self._finishing = asyncio.ensure_future(self._finish_requests())
        await asyncio.shield(self._finishing)

    async def _finish_requests(self) -> None:
        pending = self._connection.pending_requests()
        if not pending:
            return
        grace = await self._grace()
        log.info("finishing %d request(s) in flight (at most %gs)", len(pending), grace)
        waits = {future: (msg_id, method) for msg_id, (method, future) in pending.items()}
        _, left = await asyncio.wait(waits, timeout=grace)
        if not left:
            return
        names = [f"{waits[w][0]!r} ({waits[w][1]})" for w in left]
        self.abandoned += names
        log.error(
            "shutdown grace of %gs (limits.shutdown_grace) ran out; cancelling %d request(s): %s",
            grace,
            len(names),
            ", ".join(names),
        )
        for _, future in pending.values():
            if not future.done():
                future.cancel()
        await asyncio.wait(left, timeout=5)

    async def settle(self) -> None:
        """Finish the requests in flight, then let an answer to ``shutdown`` go out."""
        await self.finish_requests()
        answering = self._connection.pending_requests(with_shutdown=True)
        rest = [future for _, future in answering.values()]
        if rest:
            await asyncio.wait(rest, timeout=5)

    async def exit(self) -> None:
        """``exit``: status 0 after ``shutdown`` (once it is answered), 1 without it."""
        if not self._connection.shutting_down:
            self._stop(1)
            return
        await self.settle()
        self._stop(0)

    async def end_of_input(self) -> None:
        """Stdin ended (a script file or a pipe that is done): requests in flight finish
        first; status 0 after ``shutdown``, 1 without it."""
        await self.settle()
        self._stop(0 if self._connection.shutting_down else 1)


class ClientWatch:
    """Ends a session when its editor's process dies (LSP's processId, --clientProcessId)."""

    def __init__(self, stop: Callable[[int], None]) -> None:
        """``stop`` ends the session with an exit code (0: the editor went away)."""
        self._stop = stop
        self._poll: asyncio.TimerHandle | None = None
        self._fds: list[int] = []
        self.watched: set[int] = set()

    def watch(self, pid: int) -> None:
        """Stop when process ``pid`` exits (on the running loop; a pid already watched is
        left alone)."""
        if pid in self.watched:
            return
        self.watched.add(pid)
        loop = asyncio.get_running_loop()
        try:
            fd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self._check(pid)
            return
        self._fds.append(fd)

        def on_exit() -> None:
            loop.remove_reader(fd)
            self._fds.remove(fd)
            os.close(fd)
            log.info("client process %s exited; stopping", pid)
            self._stop(0)

        loop.add_reader(fd, on_exit)

    def _check(self, pid: int) -> None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            log.info("client process %s exited; stopping", pid)
            self._stop(0)
            return
        except PermissionError:
            pass
        self._poll = asyncio.get_running_loop().call_later(POLL_CLIENT_S, self._check, pid)

    def close(self) -> None:
        """Stop watching."""
        if self._poll is not None:
            self._poll.cancel()
        loop = asyncio.get_running_loop()
        for fd in self._fds:
            loop.remove_reader(fd)
            os.close(fd)
        self._fds.clear()
