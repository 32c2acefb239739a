"""The transport: LSP base-protocol framing over a pair of byte streams.

pygls's reader silently drops frames it cannot parse. A sidecar driven by CI
scripts must instead answer -32700/-32600 and keep serving, cap message size,
and never block the event loop on its input or output, so the framing loop lives
here; the connection (connection.py) takes each decoded message. ``serve_streams``
reads any asyncio StreamReader (stdin, a Unix socket) and writes through a
FrameWriter over any write transport; ``serve_stdio`` and ``run`` are the stdio
case ``toold serve`` uses.

After a frame whose Content-Length lied, the bytes left over sit in front of the next
frame's ``Content-Length:``; the reader reports them and finds that header again, so
one bad frame never costs the ones after it. Content-Length given twice with two values
is refused as an invalid one (which of them frames the body cannot be known). What a
body must be is messages.py's. A client that stops reading its answers stops being read
(WRITE_HIGH_WATER), and so does one with MAX_IN_FLIGHT requests unanswered: a burst of
requests is otherwise all read before the first answer fills the output, and every
answer is then held for a client that never takes it. Memory stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import stat
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO, Protocol

from toold.messages import BadMessage, decode
from toold_protocol import errors

log = logging.getLogger(__name__)

HEADER_LIMIT = 8192
"""Longest header line; give a StreamReader this ``limit``."""
HEADER_BLOCK_LIMIT = 4 * HEADER_LIMIT
DISCARD_CHUNK = 1 << 20
MAX_LENGTH_DIGITS = 15
"""A Content-Length of more digits (a petabyte) is not a size but garbage: no body is skipped."""
WRITE_HIGH_WATER = 16 * 1024 * 1024
"""Output queued for a client that does not read; past it, reading pauses until it drains."""
MAX_IN_FLIGHT = 128
"""Requests read and not answered yet; at it, reading pauses until one is answered."""

_LENGTH_MARKER = "content-length:"
_LENGTH_LINE = b"Content-Length: "
_MARKER_TAIL = 64
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class Connection(Protocol):
    """What the framing loop drives (connection.JsonRpcConnection): the writer for replies,
    each checked message, error answers, and the cap on one message's size."""

    max_message_bytes: int

    def in_flight(self) -> int:
        """The client's requests read and not answered yet."""
        ...

    def set_writer(self, writer: Any) -> None:
        """Where replies go from now on."""
        ...

    def dispatch(self, data: dict[str, Any]) -> None: ...

    def send_error(self, msg_id: Any, code: int, message: str) -> None: ...


class Session(Protocol):
    """What ``serve_stdio`` serves: a session over a pair of streams, to its exit code."""

    def serve(self, reader: asyncio.StreamReader, writer: FrameWriter) -> Awaitable[int]: ...


class FrameWriter:
    """Output over an asyncio write transport (a pipe or a socket): writes never block
    the loop. Without a transport (stdout is a regular file) writes go to ``fallback``."""

    def __init__(
        self, transport: asyncio.WriteTransport | None, fallback: BinaryIO | None = None
    ) -> None:
        self._transport = transport
        self._fallback = fallback
        self._stream: asyncio.StreamWriter | None = None

    @classmethod
    def over(cls, stream: asyncio.StreamWriter) -> FrameWriter:
        """Output through an asyncio StreamWriter (a socket's), kept alive with it: a
        StreamWriter closes its transport when it is collected."""
        writer = cls(stream.transport)
        writer._stream = stream
        return writer

    def write(self, data: bytes) -> None:
        """Queue bytes for the client."""
        if self._transport is not None:
            if not self._transport.is_closing():
                self._transport.write(data)
        elif self._fallback is not None:
            self._fallback.write(data)
            self._fallback.flush()

    def close(self) -> None:
        """Close the output (serving never does: whoever opened the streams decides)."""
        if self._transport is not None:
            self._transport.close()

    async def wait_writable(self) -> None:
        """Return once queued output is under WRITE_HIGH_WATER (at once, usually)."""
        transport = self._transport
        while (
            transport is not None
            and not transport.is_closing()
            and transport.get_write_buffer_size() > WRITE_HIGH_WATER
        ):
            await asyncio.sleep(0.01)

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait until queued bytes reached the pipe (bounded)."""
        if self._transport is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._transport.get_write_buffer_size() and loop.time() < deadline:
            await asyncio.sleep(0.01)


async def _stdin_reader(
    stdin: BinaryIO,
) -> tuple[asyncio.StreamReader, asyncio.BaseTransport | None]:
    """The input stream, and the loop's transport over it when there is one (to close)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=HEADER_LIMIT)
    mode = os.fstat(stdin.fileno()).st_mode
    # Pipes, sockets and terminals can be watched by the loop; regular files and other
    # devices (/dev/null: epoll refuses it, and the loop would wait forever) cannot.
    transport: asyncio.BaseTransport | None = None
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(stdin.fileno()):
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), stdin
        )
    else:
        # Fed from a thread instead.
        def pump() -> None:
            while chunk := stdin.read1(65536) if hasattr(stdin, "read1") else stdin.read(65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=pump, name="toold-stdin", daemon=True).start()
    return reader, transport


async def _stdout_writer(stdout: BinaryIO) -> FrameWriter:
    loop = asyncio.get_running_loop()
    try:
        transport, _ = await loop.connect_write_pipe(asyncio.Protocol, stdout)
    except ValueError:
        return FrameWriter(None, stdout)
    return FrameWriter(transport, stdout)


class _HeaderReader:
    """Reads header blocks and finds the next frame again after a desynchronised one.

    A body shorter or longer than its Content-Length, or a body sent without one, leaves
    bytes that are not headers in front of the next frame's ``Content-Length:`` line
    (a body has no newline of its own, so it is glued to that line). Such bytes are
    reported as a parse error and skipped up to the ``Content-Length:`` that follows.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._carry = b""

    async def _line(self) -> tuple[bytes, bool] | None:
        """The next line and whether part of it was dropped for being too long."""
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError as exc:
            dropped = await self._reader.readexactly(exc.consumed)
            # Keep the tail: a Content-Length header may start inside it.
            self._carry = dropped[-_MARKER_TAIL:]
            return b"", True
        if self._carry:
            line, self._carry = self._carry + line, b""
        return line, False

    async def read(self) -> dict[str, str] | None:
        """Header block as lower-cased names (``x-invalid`` names a problem); None at EOF."""
        headers: dict[str, str] = {}
        size = 0
        while True:
            got = await self._line()
            if got is None:
                return None
            raw, truncated = got
            if truncated:
                headers["x-invalid"] = "header line too long"
                continue
            size += len(raw)
            # The frame every client sends, first in its block: taken without the parsing
            # below, which would read it the same way.
            if not headers and raw[:16] == _LENGTH_LINE and raw[-2:] == b"\r\n":
                digits = raw[16:-2]
                if digits.isdigit() and size <= HEADER_BLOCK_LIMIT:  # bytes: ASCII only
                    headers["content-length"] = digits.decode("ascii")
                    continue
            text = raw.decode("latin-1").strip()
            if not text:
                if headers:
                    return headers
                continue
            marker = text.lower().rfind(_LENGTH_MARKER)
            if marker > 0:
                headers = {"x-invalid": f"unexpected bytes before a header: {text[:40]!r}"}
                text = text[marker:]
            name, sep, value = text.partition(":")
            if sep and _HEADER_NAME.fullmatch(name.strip()):
                key, value = name.strip().lower(), value.strip()
                if headers.get(key, value) != value:  # repeated: joined as HTTP joins them
                    value = f"{headers[key]}, {value}"
                headers[key] = value
            else:
                headers["x-invalid"] = f"malformed header line {text[:80]!r}"
            if size > HEADER_BLOCK_LIMIT:
                headers["x-invalid"] = "header block too long"
                headers.pop("content-length", None)
                return headers


def dispatch_body(connection: Connection, body: bytes) -> None:
    """Decode one message and hand it to the connection; answer what cannot be taken."""
    try:
        data = decode(body)
    except BadMessage as bad:
        connection.send_error(bad.msg_id, bad.code, bad.message)
        return
    if data is None:
        return
    try:
        connection.dispatch(data)
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception:
        log.exception("unhandled error while dispatching a message")
        if "method" in data and "id" in data:
            message = "Internal error (see the daemon's log)"
            connection.send_error(data["id"], errors.INTERNAL_ERROR, message)


async def serve_streams(
    connection: Connection,
    reader: asyncio.StreamReader,
    writer: FrameWriter,
    stop: asyncio.Event,
    end_of_input: Callable[[], Awaitable[None]],
) -> None:
    """Read frames from ``reader`` into ``connection`` until ``stop`` is set; at the end
    of input ``end_of_input`` decides what happens (it sets ``stop``, normally)."""
    connection.set_writer(writer)
    read_task = asyncio.create_task(_read_loop(connection, reader, writer, end_of_input))
    stop_task = asyncio.create_task(stop.wait())
    await asyncio.wait({read_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    for task in (read_task, stop_task):
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await read_task


async def serve_stdio(session: Session, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Serve ``session`` over stdin and stdout (any pair of binary files); its exit code."""
    reader, read_transport = await _stdin_reader(stdin)
    writer = await _stdout_writer(stdout)
    try:
        return await session.serve(reader, writer)
    finally:
        # Opened here, so closed here: an embedding process (the in-process tests) keeps
        # running. The output's queued bytes are flushed before its pipe closes.
        if read_transport is not None:
            read_transport.close()
        writer.close()


async def _read_loop(
    connection: Connection,
    reader: asyncio.StreamReader,
    writer: FrameWriter,
    end_of_input: Callable[[], Awaitable[None]],
) -> None:
    headers_in = _HeaderReader(reader)
    while True:
        # A client that stops reading stops being read: bounded output buffering.
        await writer.wait_writable()
        while connection.in_flight() >= MAX_IN_FLIGHT:
            await asyncio.sleep(0.01)
        headers = await headers_in.read()
        if headers is None:
            log.info("client closed its input")
            await end_of_input()
            return
        length = _content_length(headers)
        if isinstance(length, str):
            connection.send_error(None, errors.PARSE_ERROR, length)
            continue
        if "x-invalid" in headers:
            # Junk in front of a good frame: report it, then read the frame.
            message = f"Invalid header: {headers['x-invalid']}"
            connection.send_error(None, errors.PARSE_ERROR, message)
        cap = connection.max_message_bytes
        if length > cap:
            await _discard(reader, length)
            message = f"Message of {length} bytes exceeds the {cap}-byte cap"
            connection.send_error(None, errors.MESSAGE_TOO_LARGE, message)
            continue
        try:
            body = await reader.readexactly(length)
        except asyncio.IncompleteReadError:
            log.info("client closed its input in the middle of a message")
            await end_of_input()
            return
        dispatch_body(connection, body)


def _content_length(headers: dict[str, str]) -> int | str:
    raw = headers.get("content-length")
    if raw is None:
        if "x-invalid" in headers:
            return f"Invalid header: {headers['x-invalid']}"
        return "Missing Content-Length header"
    # isascii: str.isdigit() also accepts digits int() refuses, such as "²".
    if not (raw.isascii() and raw.isdigit()) or len(raw) > MAX_LENGTH_DIGITS:
        return f"Invalid Content-Length header: {raw[:40]!r}"
    return int(raw)


async def _discard(reader: asyncio.StreamReader, length: int) -> None:
    remaining = length
    while remaining:
        chunk = await reader.read(min(remaining, DISCARD_CHUNK))
        if not chunk:
            return
        remaining -= len(chunk)


def run(session: Session) -> int:
    """Blocking entry point used by ``toold serve``: ``session`` over the process's stdio."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Nothing else may write to fd 1: stray prints would corrupt the framing.
    sys.stdout = sys.stderr
    try:
        return asyncio.run(serve_stdio(session, stdin, stdout))
    except KeyboardInterrupt:
        return 130
    finally:
        with contextlib.suppress(OSError, ValueError):  # ValueError: closed by serve_stdio
            os.close(stdout.fileno())
