"""A cap on the requests an MCP client has in flight, between the stdio streams and the server.

The SDK's server starts a task for every request it reads and each task holds its
result until the answer is written. A client that sends and never reads its stdout
(or reads slower than it sends) so made ``toold mcp`` grow without bound: three thousand
read_file calls of a 1 MB file held 3 GB. Here a request is passed on only while fewer
than ``MAX_IN_FLIGHT`` are unanswered; past that the client is not read until one is
answered, so memory stays bounded by the cap. A request leaves the count when its
answer is written, or when the client cancels it (the SDK never answers a cancelled
request).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

MAX_IN_FLIGHT = 64
"""Requests read from the client and not answered yet, at most."""

Incoming = MemoryObjectReceiveStream[SessionMessage | Exception]
Outgoing = MemoryObjectSendStream[SessionMessage]


def _key(request_id: Any) -> Any:
    """One id for ``7`` and ``"7"`` (the SDK correlates them as one)."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            return request_id
    return request_id


class InFlight:
    """The ids of the client's unanswered requests, and a wait for room under the cap."""

    def __init__(self, cap: int = MAX_IN_FLIGHT) -> None:
        self.cap = cap
        self.ids: set[Any] = set()
        self._room = anyio.Event()

    async def admit(self, message: Any) -> None:
        """Count a request from the client (after waiting for room); a cancel uncounts one."""
        if isinstance(message, JSONRPCRequest):
            while len(self.ids) >= self.cap:
                self._room = anyio.Event()
                await self._room.wait()
            self.ids.add(_key(message.id))
        elif isinstance(message, JSONRPCNotification) and message.method == (
            "notifications/cancelled"
        ):
            params = message.params or {}
            self._forget(params.get("requestId"))

    def answered(self, message: Any) -> None:
        """An answer on its way to the client: its request no longer counts."""
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._forget(message.id)

    def _forget(self, request_id: Any) -> None:
        if request_id is not None:
            self.ids.discard(_key(request_id))
            self._room.set()


@asynccontextmanager
async def capped(
    read_stream: Incoming, write_stream: Outgoing, cap: int = MAX_IN_FLIGHT
) -> AsyncIterator[tuple[Incoming, Outgoing]]:
    """The server's side of ``read_stream`` and ``write_stream``, under the cap."""
    flight = InFlight(cap)
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](0)

    # The server owned both streams before: they close as its ends close.
    async def inbound() -> None:
        async with to_server, read_stream:
            async for item in read_stream:
                if isinstance(item, SessionMessage):
                    await flight.admit(item.message)
                await to_server.send(item)

    async def outbound() -> None:
        async with from_server, write_stream:
            async for item in from_server:
                flight.answered(item.message)
                await write_stream.send(item)

    async with anyio.create_task_group() as group:
        group.start_soon(inbound)
        group.start_soon(outbound)
        try:
            yield server_reads, server_writes
        finally:
            group.cancel_scope.cancel()
