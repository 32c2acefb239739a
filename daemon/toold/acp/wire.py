"""LineTransport: ACP's newline-delimited JSON on stdio, checked before the SDK sees it.

The SDK's own stdio framing hands every parsed line to its connection, which assumes an
object: a line holding ``42`` or ``[]`` ended its receive loop and so the agent, a line
that is not JSON was dropped without an answer, and a line without a newline was
buffered whole, however long. The SDK takes any ``Transport`` (send, receive, close of
decoded messages) in place of its streams, so this one owns the framing: a body is
checked by toold.messages as on toold's other wire (-32700 for what is not JSON,
-32600 for JSON that is not a JSON-RPC message, batches included), a line longer than
the cap is skipped and answered -33001, and the daemon reads on.

A client that stops reading its answers stops being read (``WRITE_HIGH_WATER``), so
what toold queues for it stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from toold.messages import BadMessage, decode
from toold_protocol import errors

log = logging.getLogger(__name__)

WRITE_HIGH_WATER = 16 * 1024 * 1024
"""Output queued for a client that does not read; past it, reading pauses until it drains."""
READ_LIMIT = 1 << 20
"""The reader's buffer: a longer line is taken in pieces of this size, up to the cap."""


class LineTransport:
    """JSON-RPC messages, one per line, over an asyncio reader and writer."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_bytes: int = errors.MAX_MESSAGE_BYTES,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.max_bytes = max_bytes
        """The longest line read as a message; a longer one is skipped and answered -33001."""

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None at the end of input. Bad lines are answered, not returned."""
        while True:
            await self._writable()
            line = await self._line()
            if line is None:
                return None
            if isinstance(line, int):
                message = f"Message of more than {line} bytes exceeds the {self.max_bytes}-byte cap"
                await self._error(None, errors.MESSAGE_TOO_LARGE, message)
                continue
            if not line.strip():
                continue
            try:
                data = decode(line)
            except BadMessage as bad:
                await self._error(bad.msg_id, bad.code, bad.message)
                continue
            if data is not None:
                return data

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as a line; dropped once the output is closed (the client is
        gone: the SDK's shutdown would raise a send's error out of ``toold acp``)."""
        if self._writer.is_closing():
            log.debug("dropping a message for a closed connection: %s", message.get("method"))
            return
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n"
        self._writer.write(data.encode("utf-8"))

    async def close(self) -> None:
        """Close the output (whatever is queued is still written)."""
        with contextlib.suppress(Exception):
            self._writer.close()

    async def _line(self) -> bytes | int | None:
        """A line; its length so far (an int) when it ran past the cap; None at the end."""
        buffered = bytearray()
        while True:
            try:
                chunk = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                chunk = exc.partial
                if not buffered and not chunk:
                    return None
                buffered += chunk
                return None if len(buffered) > self.max_bytes else bytes(buffered)
            except asyncio.LimitOverrunError as exc:
                chunk = await self._reader.readexactly(exc.consumed)
                if len(buffered) + len(chunk) > self.max_bytes:
                    return await self._skip(len(buffered) + len(chunk))
                buffered += chunk
                continue
            if len(buffered) + len(chunk) > self.max_bytes:
                return len(buffered) + len(chunk)
            return bytes(buffered + chunk)

    async def _skip(self, seen: int) -> int | None:
        """Read past the rest of an over-long line without keeping it; its length so far."""
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return seen
            except asyncio.IncompleteReadError:
                return None
            except asyncio.LimitOverrunError as exc:
                seen += len(await self._reader.readexactly(max(exc.consumed, 1)))

    async def _writable(self) -> None:
        transport = self._writer.transport
        while not transport.is_closing() and transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            await asyncio.sleep(0.01)

    async def _error(self, msg_id: Any, code: int, message: str) -> None:
        log.warning("refusing a message: %s", message)
        error = {"code": code, "message": message}
        await self.send({"jsonrpc": "2.0", "id": msg_id, "error": error})


class Replayed:
    """A transport whose first message was already read (to negotiate the version):
    it is received again first, then the rest."""

    def __init__(self, transport: LineTransport, first: dict[str, Any]) -> None:
        self._transport = transport
        self._first: dict[str, Any] | None = first

    async def receive(self) -> dict[str, Any] | None:
        """The first message again, then the transport's."""
        first, self._first = self._first, None
        return first if first is not None else await self._transport.receive()

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message (as LineTransport.send)."""
        await self._transport.send(message)

    async def close(self) -> None:
        """Close the output."""
        await self._transport.close()
