"""Outbox: one session's ``session/update`` notifications, in order, from any thread.

The agent loop's hooks are synchronous and a running command reports its output from
worker threads; they queue updates here and one task sends them. ``flush`` waits until
everything queued so far is on the wire: before a permission request (the client must
know the tool call it names) and before a prompt's answer (updates precede the stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from acp.interfaces import Client

log = logging.getLogger(__name__)


class Outbox:
    """Sends a session's updates through the client connection, one at a time."""

    def __init__(self, conn: Client, session_id: str) -> None:
        self._conn = conn
        self._session_id = session_id
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._send_all())

    def put(self, update: Any) -> None:
        """Queue one update (a session/update's ``update``); safe from any thread."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, update)

    async def flush(self) -> None:
        """Wait until every update queued before this call has been sent."""
        done: asyncio.Future[None] = self._loop.create_future()
        self.put(done)
        await done

    async def _send_all(self) -> None:
        while True:
            item = await self._queue.get()
            if isinstance(item, asyncio.Future):
                if not item.done():
                    item.set_result(None)
                continue
            try:
                await self._conn.session_update(session_id=self._session_id, update=item)
            except Exception as exc:  # the client hung up: nothing left to tell it
                log.debug("session/update dropped: %s", exc)

    async def close(self) -> None:
        """Stop sending (the connection is closing)."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
