"""stdio transport: LSP base-protocol framing with answers for malformed input.

pygls's reader silently drops frames it cannot parse. A sidecar driven by CI
scripts must instead answer -32700/-32600 and keep serving, cap message size,
and never block the event loop on stdin or stdout, so the framing loop lives here
while pygls keeps dispatch, lifecycle, cancellation and progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, BinaryIO

from pygls.exceptions import JsonRpcException

from toold_protocol import errors

if TYPE_CHECKING:
    from toold.server import TooldServer

log = logging.getLogger(__name__)

HEADER_LIMIT = 8192
DISCARD_CHUNK = 1 << 20


class PipeWriter:
    """pygls writer over an asyncio write transport: writes never block the loop."""

    def __init__(self, transport: asyncio.WriteTransport | None, fallback: BinaryIO) -> None:
        self._transport = transport
        self._fallback = fallback

    def write(self, data: bytes) -> None:
        """Queue bytes for the client."""
        if self._transport is not None:
            if not self._transport.is_closing():
                self._transport.write(data)
        else:
            self._fallback.write(data)
            self._fallback.flush()

    def close(self) -> None:
        """Flushing happens in drain(); closing is left to shutdown."""

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait until queued bytes reached the pipe (bounded)."""
        if self._transport is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._transport.get_write_buffer_size() and loop.time() < deadline:
            await asyncio.sleep(0.01)


async def _stdin_reader(stdin: BinaryIO) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=HEADER_LIMIT)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except ValueError:
        # Regular files cannot be watched by the loop: feed from a thread instead.
        def pump() -> None:
            while chunk := stdin.read1(65536) if hasattr(stdin, "read1") else stdin.read(65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=pump, name="toold-stdin", daemon=True).start()
    return reader


async def _stdout_writer(stdout: BinaryIO) -> PipeWriter:
    loop = asyncio.get_running_loop()
    try:
        transport, _ = await loop.connect_write_pipe(asyncio.Protocol, stdout)
    except ValueError:
        return PipeWriter(None, stdout)
    return PipeWriter(transport, stdout)


def send_error(server: TooldServer, msg_id: Any, code: int, message: str) -> None:
    """Write a JSON-RPC error response (``msg_id`` None when the id is unknown)."""
    server.protocol._send_data(
        {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
    )


async def _read_headers(reader: asyncio.StreamReader) -> dict[str, str] | None:
    """Header block as lower-cased names; None at end of input."""
    headers: dict[str, str] = {}
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
            headers["x-invalid"] = "header line too long"
            continue
        text = line.decode("latin-1").strip()
        if not text:
            if headers:
                return headers
            continue
        name, sep, value = text.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
        else:
            headers["x-invalid"] = f"malformed header line {text[:80]!r}"


def dispatch_body(server: TooldServer, body: bytes) -> None:
    """Decode one message and hand it to pygls; answer what pygls would drop."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        send_error(server, None, errors.PARSE_ERROR, f"Parse error: {exc}")
        return
    if isinstance(data, list):
        send_error(server, None, errors.INVALID_REQUEST, "Batch messages are not supported")
        return
    msg_id = data.get("id") if isinstance(data, dict) else None
    problem = _invalid_message(data)
    if problem:
        if not isinstance(data, dict) or "method" in data or "id" not in data:
            send_error(
                server, msg_id if _valid_id(msg_id) else None, errors.INVALID_REQUEST, problem
            )
        else:
            log.warning("dropping invalid message: %s", problem)
        return
    try:
        message = server.protocol.structure_message(data)
    except JsonRpcException as exc:
        if "method" in data and "id" in data:
            send_error(server, msg_id, exc.code, exc.message or "Invalid params")
        else:
            log.warning("dropping undecodable message %s: %s", data.get("method"), exc)
        return
    server.protocol.handle_message(message)


def _valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _invalid_message(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "A message must be a JSON object"
    if data.get("jsonrpc") != "2.0":
        return 'Missing or wrong "jsonrpc" member: expected "2.0"'
    if "method" in data:
        if not isinstance(data["method"], str):
            return '"method" must be a string'
        if "id" in data and not _valid_id(data["id"]):
            return '"id" must be a string or an integer'
        return None
    if "id" not in data:
        return 'A message needs "method" (request or notification) or "id" (response)'
    return None


async def serve_stdio(server: TooldServer, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Serve until exit, end of input or the client process dying; returns the exit code."""
    reader = await _stdin_reader(stdin)
    writer = await _stdout_writer(stdout)
    server.protocol.set_writer(writer)
    read_task = asyncio.create_task(_read_loop(server, reader))
    stop_task = asyncio.create_task(server.stopped.wait())
    await asyncio.wait({read_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    for task in (read_task, stop_task):
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await read_task
    await server.cancel_inflight()
    await server.close()
    await writer.drain()
    return server.exit_code


async def _read_loop(server: TooldServer, reader: asyncio.StreamReader) -> None:
    while True:
        headers = await _read_headers(reader)
        if headers is None:
            log.info("client closed stdin")
            server.request_stop(0 if server.protocol._shutdown else 1)
            return
        length = _content_length(headers)
        if isinstance(length, str):
            send_error(server, None, errors.PARSE_ERROR, length)
            continue
        if length > server.max_message_bytes:
            await _discard(reader, length)
            send_error(
                server,
                None,
                errors.MESSAGE_TOO_LARGE,
                f"Message of {length} bytes exceeds the {server.max_message_bytes}-byte cap",
            )
            continue
        try:
            body = await reader.readexactly(length)
        except asyncio.IncompleteReadError:
            log.info("client closed stdin in the middle of a message")
            server.request_stop(1)
            return
        try:
            dispatch_body(server, body)
        except SystemExit as exc:
            server.request_stop(exc.code if isinstance(exc.code, int) else 0)
            return
        except Exception:
            log.exception("unhandled error while dispatching a message")


def _content_length(headers: dict[str, str]) -> int | str:
    if "x-invalid" in headers and "content-length" not in headers:
        return f"Invalid header: {headers['x-invalid']}"
    raw = headers.get("content-length")
    if raw is None:
        return "Missing Content-Length header"
    if not raw.isdigit():
        return f"Invalid Content-Length header: {raw[:40]!r}"
    return int(raw)


async def _discard(reader: asyncio.StreamReader, length: int) -> None:
    remaining = length
    while remaining:
        chunk = await reader.read(min(remaining, DISCARD_CHUNK))
        if not chunk:
            return
        remaining -= len(chunk)


def run(server: TooldServer) -> int:
    """Blocking entry point used by ``toold serve``."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Nothing else may write to fd 1: stray prints would corrupt the framing.
    sys.stdout = sys.stderr
    try:
        return asyncio.run(serve_stdio(server, stdin, stdout))
    except KeyboardInterrupt:
        return 130
    finally:
        with contextlib.suppress(OSError):
            os.close(stdout.fileno())
