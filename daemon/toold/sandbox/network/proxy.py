"""The HTTP proxy that is a sandbox's only way out under an ``[execution.network]`` policy.

It listens on a Unix socket (bound into the sandbox, where toold.sandbox.network.forward
relays the sandbox's loopback port to it) and speaks HTTP/1.1 proxy: ``CONNECT
host:port`` opens a tunnel (TLS passes through untouched), an absolute-URI request
(``GET http://host/path``) is forwarded in origin form with its Host set to the URI's
authority, one request per connection (``Connection: close`` upstream), so a pipelined
request can never reach the origin unjudged. Each request is judged by
toold.sandbox.network.policy, which resolves the name itself; the proxy connects to
exactly the addresses it checked. A refusal is an HTTP error whose status line and body
say why (``403 toold: pypi.org not in execution.network.allow``), and every decision is
audited (host, port, method, allowed or denied, the rule).

SOCKS5 CONNECT is served on the same socket (toold.sandbox.network.socks), told apart by
its first byte, and judged the same way.

It runs on an event loop of its own thread, so a hostile client inside the sandbox
cannot stall the daemon's loop, and it is bounded: a cap on connections at once, a
deadline for the request head, its size, connecting and every idle read or write, and
no buffer beyond one chunk per direction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from toold.config import NetworkPolicy
from toold.sandbox.network import socks
from toold.sandbox.network.policy import Decision, NetworkRules
from toold.tools.builtin._http_policy import Lookup

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
"""Connections served at once; more are answered 503 at once."""
HEAD_LIMIT = 64 * 1024
"""Largest request head (request line and headers), in bytes."""
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 15.0
IDLE_TIMEOUT = 300.0
"""Seconds a relay may see nothing flow in one direction before the connection closes."""
CHUNK = 64 * 1024
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
     "upgrade", "host"}
)  # fmt: skip


class Recorder(Protocol):
    """Where decisions go: the workspace's audit log (toold.permissions.audit.AuditLog)."""

    def record(self, **entry: Any) -> None:
        """Append one entry."""


class BadRequest(Exception):
    """The request cannot be judged; the message says why, status is the answer's."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def error_response(status: int, message: str) -> bytes:
    """An HTTP error whose reason phrase and body both carry ``message``."""
    phrase = "".join(c if " " <= c <= "~" else "?" for c in message)[:300]
    body = (message + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class NetworkProxy:
    """One sandbox's proxy: its Unix socket in ``folder``, its loop on its own thread."""

    def __init__(
        self,
        policy: NetworkPolicy,
        folder: Path,
        audit: Recorder | None = None,
        lookup: Lookup | None = None,
    ) -> None:
        self.rules = NetworkRules(policy, lookup)
        self.path = folder / "proxy.sock"
        self.audit = audit
        self._active = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="toold-network-proxy", daemon=True)

    def start(self) -> None:
        """Listen (blocking until the socket exists); raises what stopped it."""
        self._thread.start()
        self._ready.wait(30)
        if self._failure is not None:
            raise self._failure

    def close(self) -> None:
        """Stop serving; open connections are cut."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            server = loop.run_until_complete(
                asyncio.start_unix_server(self._client, str(self.path), limit=HEAD_LIMIT)
            )
            os.chmod(self.path, 0o600)
        except BaseException as exc:
            self._failure = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._active >= MAX_CONNECTIONS:
            writer.write(error_response(503, "toold: too many proxy connections at once"))
            # Read (a moment, a head's worth) what the client sent: closing on unread
            # data would reset the connection before it reads the answer.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader.read(HEAD_LIMIT), 1.0)
            writer.close()
            return
        self._active += 1
        try:
            await self._serve(reader, writer)
        except BadRequest as exc:
            with contextlib.suppress(Exception):
                writer.write(error_response(exc.status, f"toold: {exc}"))
                await asyncio.wait_for(writer.drain(), IDLE_TIMEOUT)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the client or the origin went away, or stalled: just close
        finally:
            self._active -= 1
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await asyncio.wait_for(reader.readexactly(1), HEAD_TIMEOUT)
        if first[0] == socks.VERSION:
            await self._socks(reader, writer)
            return
        try:
            head = first + await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except asyncio.LimitOverrunError:
            raise BadRequest("request head too large", 431) from None
        method, target, version, headers = parse_head(head)
        length = 0
        if method == "CONNECT":
            host, port = split_authority(target, None)
        else:
            host, port, target = absolute_target(target)
            length = body_length(headers)  # framing first: nothing connects for a bad one
        decision = await self.rules.judge(host, port, method)
        self._record(decision, port, method)
        if not decision.allowed:
            writer.write(error_response(decision.status, decision.reason))
            await asyncio.wait_for(writer.drain(), IDLE_TIMEOUT)
            return
        upstream = await self._connect(decision, port)
        up_reader, up_writer = upstream
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await _both(_pipe(reader, up_writer), _pipe(up_reader, writer))
                return
            authority = decision.host if port == 80 else f"{_bracketed(decision.host)}:{port}"
            lines = [f"{method} {target} {version}", f"Host: {authority}"]
            lines += [
                f"{name}: {value}" for name, value in headers if name.lower() not in HOP_BY_HOP
            ]
            lines.append("Connection: close")
            up_writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            await _both(_request(reader, up_writer, length), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _socks(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A SOCKS5 CONNECT, judged as an HTTP CONNECT (toold.sandbox.network.socks)."""
        try:
            host, port = await asyncio.wait_for(socks.handshake(reader, writer), HEAD_TIMEOUT)
        except socks.SocksError as exc:
            if exc.code is not None:
                writer.write(socks.reply(exc.code))
            return
        decision = await self.rules.judge(host, port, "CONNECT")
        self._record(decision, port, "CONNECT")
        if not decision.allowed:
            code = socks.HOST_UNREACHABLE if decision.status == 502 else socks.NOT_ALLOWED
            writer.write(socks.reply(code))
            return
        try:
            up_reader, up_writer = await self._connect(decision, port)
        except BadRequest:
            writer.write(socks.reply(socks.REFUSED))
            return
        try:
            writer.write(socks.reply(socks.SUCCEEDED))
            await _both(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _connect(
        self, decision: Decision, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to the first checked address that answers (never a new lookup)."""
        last: BaseException | None = None
        for info in decision.addresses:
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(info[4][0], port, limit=CHUNK), CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError) as exc:
                last = exc
        raise BadRequest(f"cannot connect to {decision.host}:{port} ({last})", 502)

    def _record(self, decision: Decision, port: int, method: str) -> None:
        if self.audit is None:
            return
        self.audit.record(
            event="network",
            host=decision.host,
            port=port,
            method=method,
            decision="allowed" if decision.allowed else "denied",
            rule=decision.rule,
            reason=decision.reason or None,
        )


def parse_head(head: bytes) -> tuple[str, str, str, list[tuple[str, str]]]:
    """The request line's method, target and version, and the header fields in order."""
    text = head.decode("latin-1")
    lines = text[:-4].split("\r\n")
    if "\0" in text or any("\n" in line or "\r" in line for line in lines):
        # A bare LF or CR would end a line for the origin but not here: a header (a second
        # Host) or a whole request slipped past the judge.
        raise BadRequest("a bare CR, LF or NUL in the request head")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(f"not an HTTP/1 proxy request: {lines[0][:100]!r}")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or any(c in name for c in " \t"):
            raise BadRequest(f"malformed header line: {line[:100]!r}")
        headers.append((name, value.strip()))
    return parts[0].upper(), parts[1], parts[2], headers


def split_authority(authority: str, default: int | None) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) split; ``default`` when the port is absent."""
    host, port = authority, ""
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port = rest.removeprefix(":")
    elif authority.count(":") == 1:
        host, _, port = authority.partition(":")
    if not port and default is None:
        raise BadRequest(f"CONNECT needs host:port, got {authority[:100]!r}")
    try:
        number = int(port) if port else default
    except ValueError:
        raise BadRequest(f"bad port in {authority[:100]!r}") from None
    if number is None or not 0 < number < 65536 or not host:
        raise BadRequest(f"bad authority {authority[:100]!r}")
    return host, number


def absolute_target(target: str) -> tuple[str, int, str]:
    """An absolute http URI's host, port and origin-form path (with its query)."""
    url = urlsplit(target)
    if url.scheme.lower() != "http" or not url.netloc:
        raise BadRequest(
            f"the proxy forwards absolute http:// URIs and CONNECT tunnels, got {target[:100]!r}"
        )
    authority = url.netloc.rpartition("@")[2]
    host, port = split_authority(authority, 80)
    path = url.path or "/"
    return host, port, f"{path}?{url.query}" if url.query else path


def body_length(headers: list[tuple[str, str]]) -> int:
    """The request body's length: Content-Length, never chunked (it could smuggle a
    second request past the judge), 0 without one."""
    if any(name.lower() == "transfer-encoding" for name, _ in headers):
        raise BadRequest("chunked request bodies are not forwarded; send Content-Length", 411)
    values = {value for name, value in headers if name.lower() == "content-length"}
    if not values:
        return 0
    if len(values) != 1 or not next(iter(values)).isdigit():
        raise BadRequest("conflicting or invalid Content-Length")
    return int(next(iter(values)))


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def _pipe(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, limit: int | None = None
) -> None:
    """Copy ``source`` to ``sink`` (at most ``limit`` bytes), one chunk in flight."""
    left = limit
    while left is None or left > 0:
        size = CHUNK if left is None else min(CHUNK, left)
        data = await asyncio.wait_for(source.read(size), IDLE_TIMEOUT)
        if not data:
            break
        sink.write(data)
        await asyncio.wait_for(sink.drain(), IDLE_TIMEOUT)
        if left is not None:
            left -= len(data)
    if limit is None and sink.can_write_eof():
        with contextlib.suppress(OSError):
            sink.write_eof()


async def _request(source: asyncio.StreamReader, sink: asyncio.StreamWriter, length: int) -> None:
    """Forward the request's body, then watch the client: a byte more is a further request
    on this connection (a reused keep-alive one), which ends the exchange, as an origin
    that ignores ``Connection: close`` would otherwise hold it until the idle timeout."""
    await _pipe(source, sink, length)
    if await source.read(1):
        raise ConnectionAbortedError("a further request on a proxied connection")


async def _both(upward: Awaitable[None], downward: Awaitable[None]) -> None:
    """Relay both ways until the origin's side ends; the client's side ending cleanly
    (its EOF) leaves the answer flowing, its failing ends both."""
    up, down = asyncio.ensure_future(upward), asyncio.ensure_future(downward)
    try:
        done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if down in done or up.exception() is None:
            await down
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
