"""Stream resumption for ``toold mcp --http``: the events of each session, kept apart.

The SDK's session manager hands every session's transport the one ``EventStore`` it was
built with and names a stream by its JSON-RPC request id ("1", "2", ...), without saying
which session stores or replays: a store keyed as told could replay one session's results
into another's. ``SessionStores`` is that one store, and routes each call to the events
of the session it is made for (``SessionEvents``), found through ``current``:

- the HTTP guard (mcp_http.Guard) sets it for every request (``SessionStores.scoped``): a
  new ``SessionEvents`` for a request that names no session (one that opens a session),
  registered under the ``Mcp-Session-Id`` its response carries; the registered one for a
  request naming its session; None for a session it does not know (nothing is stored or
  replayed: the SDK answers 404 for an unknown session anyway);
- a session's own tasks (its server task and message router, which store its messages)
  are started by the request that opened it and so run in a copy of its context.

An event id is the session's random prefix and a sequence number: an id of another
session finds nothing. A session keeps at most ``MAX_EVENTS`` events and ``MAX_BYTES``
of messages (the oldest go first); a replay from an event no longer kept, or across one
too big to keep, replays nothing rather than a stream with a gap (the client sends its
request again). The events are held by the session's tasks and a weak map only: they
go with the session.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import secrets
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from mcp.server.streamable_http import (
    MCP_SESSION_ID_HEADER,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp.types import JSONRPCMessage
from starlette.types import Message, Send

log = logging.getLogger(__name__)

MAX_EVENTS = 512
"""Events a session keeps for a client that reconnects (the oldest go first)."""
MAX_BYTES = 1024 * 1024
"""Bytes of messages a session keeps (with at most 256 sessions: 256 MiB at worst)."""


@dataclass
class _Event:
    stream: StreamId
    message: JSONRPCMessage | None
    """None for a priming event (it has an id, no data)."""
    size: int


class SessionEvents:
    """One session's events, by id, oldest first, within MAX_EVENTS and MAX_BYTES."""

    def __init__(self) -> None:
        self.prefix = secrets.token_hex(8)
        self.count = 0
        self.floor = 0
        """Events numbered below this cannot be replayed from: one after them was lost."""
        self.size = 0
        self.events: OrderedDict[EventId, _Event] = OrderedDict()

    def store(self, stream: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Keep one event; its id."""
        self.count += 1
        event_id = f"{self.prefix}-{self.count}"
        size = 0 if message is None else len(message.model_dump_json(by_alias=True))
        if size > MAX_BYTES:  # never kept: a replay from before it would have a gap
            self.floor = self.count
            return event_id
        self.events[event_id] = _Event(stream, message, size)
        self.size += size
        while len(self.events) > MAX_EVENTS or self.size > MAX_BYTES:
            _, dropped = self.events.popitem(last=False)
            self.size -= dropped.size
        return event_id

    def after(self, event_id: EventId) -> tuple[StreamId, list[EventMessage]] | None:
        """The stream of ``event_id`` and its events after it; None when this session does
        not have that event, or cannot replay from it without a gap."""
        found = self.events.get(event_id)
        if found is None or int(event_id.rpartition("-")[2]) < self.floor:
            return None
        later = list(self.events.items())
        start = next(i for i, (key, _) in enumerate(later) if key == event_id) + 1
        return found.stream, [
            EventMessage(event.message, key)
            for key, event in later[start:]
            if event.stream == found.stream and event.message is not None
        ]


current: contextvars.ContextVar[SessionEvents | None] = contextvars.ContextVar(
    "toold_mcp_session_events", default=None
)
"""The events of the session the running request (or session task) serves."""


class SessionStores(EventStore):
    """The SDK's one event store, routing each call to the current session's events."""

    def __init__(self) -> None:
        self.sessions: weakref.WeakValueDictionary[str, SessionEvents] = (
            weakref.WeakValueDictionary()
        )

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Keep an event of the current session; outside one, an id that replays nothing."""
        events = current.get()
        if events is None:
            return f"none-{secrets.token_hex(8)}"
        return events.store(stream_id, message)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the current session's events after ``last_event_id`` on its stream; None
        (nothing sent) for an event the session does not have."""
        events = current.get()
        found = None if events is None else events.after(last_event_id)
        if found is None:
            log.info("nothing to replay after event %.40s in this session", last_event_id)
            return None
        stream, messages = found
        for message in messages:
            await send_callback(message)
        return stream

    @contextlib.contextmanager
    def scoped(self, session_id: str | None, send: Send) -> Iterator[Send]:
        """Serve one request with ``current`` set to its session's events; the ``send``
        to answer it with (for a request opening a session: one that registers it)."""
        sending = send
        if session_id is None:
            events: SessionEvents | None = SessionEvents()
            header = MCP_SESSION_ID_HEADER.lower().encode("latin-1")

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start" and events is not None:
                    for name, value in message.get("headers", []):
                        if name.lower() == header:
                            self.sessions[value.decode("latin-1")] = events
                await send(message)
        else:
            events = self.sessions.get(session_id)
        token = current.set(events)
        try:
            yield sending
        finally:
            current.reset(token)
