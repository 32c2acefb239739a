"""Outbox: one session's ``session/update`` notifications, in order, from any thread.

The agent loop's hooks are synchronous and a running command reports its output from
worker threads; they queue updates here and one task sends them. ``flush`` waits until
everything queued so far is on the wire: before a permission request (the client must
know the tool call it names) and before a prompt's answer (updates precede the stop).

A subagent's child session sends through its parent's outbox (``Outbox(..., parent=)``):
one queue, so the ``subagent_update`` announcing the child precedes the child's updates.
An update the SDK (0.12) has no model for yet is queued as a dict and sent as it is.

This module is where the protocol version is picked: sessions report the same events
(the SDK's v1 update models, ``CommandEvent`` and ``Cancelled``), and ``deliver`` and
``ask`` send them to a v1 client as they are, or to a v2 connection's ``V2Client``,
which renders them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from acp.connection import Connection
from acp.interfaces import Client
from acp.schema import RequestPermissionResponse, ToolCallUpdate

from toold.acp.updates import PERMISSION_OPTIONS, Cancelled, CommandEvent
from toold.acp.v2_client import V2Client

log = logging.getLogger(__name__)


class Outbox:
    """Sends a session's updates through the client connection, one at a time."""

    def __init__(self, conn: Client, session_id: str, *, parent: Outbox | None = None) -> None:
        self._conn = conn
        self.session_id = session_id
        self._owner = parent is None
        self._loop: asyncio.AbstractEventLoop
        self._queue: asyncio.Queue[Any]
        self._task: asyncio.Future[None]
        if parent is not None:  # a child session's: its parent's queue and sender
            self._loop, self._queue, self._task = parent._loop, parent._queue, parent._task
            return
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._task = asyncio.ensure_future(self._send_all())

    def child(self, session_id: str) -> Outbox:
        """The outbox of a child session (a subagent's), sending through this one."""
        return Outbox(self._conn, session_id, parent=self)

    def put(self, update: Any) -> None:
        """Queue one update (a session/update's ``update``: a model, or a dict of JSON);
        safe from any thread."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (self.session_id, update))

    async def flush(self) -> None:
        """Wait until every update queued before this call has been sent."""
        done: asyncio.Future[None] = self._loop.create_future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, done)
        await done

    async def _send_all(self) -> None:
        while True:
            item = await self._queue.get()
            if isinstance(item, asyncio.Future):
                if not item.done():
                    item.set_result(None)
                continue
            session_id, update = item
            try:
                await self.deliver(session_id, update)
            except Exception as exc:  # the client hung up: nothing left to tell it
                log.debug("session/update dropped: %s", exc)

    async def deliver(self, session_id: str, update: Any) -> None:
        """Send one event: rendered for v2, or as v1 (a command's event as its update)."""
        if isinstance(self._conn, V2Client):
            await self._conn.session_update(session_id, update)
        elif isinstance(update, dict):
            await self._raw(session_id, update)
        elif isinstance(update, CommandEvent | Cancelled):
            await self._conn.session_update(session_id=session_id, update=update.update)
        else:
            await self._conn.session_update(session_id=session_id, update=update)

    async def ask(
        self, session_id: str, subject: ToolCallUpdate, reason: str, timeout: float
    ) -> RequestPermissionResponse:
        """session/request_permission about ``subject`` (sent after every update queued so
        far); TimeoutError after ``timeout``, ConnectionError once the client is gone."""
        await self.flush()
        if isinstance(self._conn, V2Client):
            return await self._conn.ask(session_id, subject, reason, timeout)
        asked = self._conn.request_permission(
            session_id=session_id, tool_call=subject, options=PERMISSION_OPTIONS
        )
        return await asyncio.wait_for(asked, timeout)

    async def _raw(self, session_id: str, update: dict[str, Any]) -> None:
        """An update as JSON, through the SDK's connection (its typed session_update
        refuses a kind it does not know)."""
        connection = getattr(self._conn, "_conn", None)
        if not isinstance(connection, Connection):
            raise ConnectionError("no JSON-RPC connection to send a raw update through")
        params = {"sessionId": session_id, "update": update}
        await connection.send_notification("session/update", params)

    async def close(self) -> None:
        """Stop sending (the connection is closing); a child's outbox leaves its parent's."""
        if not self._owner:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
