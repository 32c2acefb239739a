"""Who is on the other end of the engine's socket, and what it said first.

Peers are checked with ``SO_PEERCRED`` (only this user's processes are served) and
judged by where they run: a peer below the engine is one of its tool calls' commands,
the agent's. The engine is a child subreaper (``hardening``), so what a tool call
starts stays below it whatever it does (``setsid``, a double fork, its parent's exit).
The hello (one JSON line, with a ``stdio`` session's two descriptors) is read on the
event loop with a deadline, so a client that never speaks holds up no one. Connections
that have not said hello are bounded in number, time and bytes (``Doorway``,
``UNGREETED_LIMIT``, ``HELLO_TIMEOUT``, ``HELLO_LIMIT``): silent connections once took
every descriptor of the engine, and four 96 MiB hellos 361 MiB of its memory. What a
``stdio`` session read before attaching (the editor's ``initialize``) follows the
engine's answer instead (``prefaceBytes``), once the connection is a session.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import json
import logging
import os
import socket
import stat
import struct
from typing import Any

from toold.engine.attach import HANDED_STDIO, MCP_HTTP, PROTOCOL

log = logging.getLogger(__name__)

HELLO_LIMIT = 8 * 1024
"""Longest hello line accepted, in bytes (a hello is a few hundred)."""
HELLO_TIMEOUT = 5.0
"""Seconds a new connection has to say hello (clients send it as they connect)."""
UNGREETED_LIMIT = 64
"""Connections that have not said hello yet; beyond it the oldest of them is closed."""
PREFACE_LIMIT = 64 * 1024 * 1024 + 64 * 1024
"""Most bytes a ``stdio`` hello may announce (``prefaceBytes``): the largest first
message the relay reads whole, with its header."""
KINDS = ("session", "stdio", "acp", "mcp", MCP_HTTP, "status", "stop")
"""What a hello may open: an LSP session framed on the socket (the command line), an
editor's stdio (``toold serve``), an ACP connection (``toold acp``), an MCP client's
stdio (``toold mcp``), an MCP server's listening socket (``toold mcp --http``), or a
control ask."""


class PeerRefused(Exception):
    """A connection the engine will not serve; the message is sent back before closing."""


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def _stat(pid: int) -> list[int] | None:
    """[parent, process group, session] of ``pid`` (/proc); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read().rpartition(b")")[2].split()
        return [int(field) for field in fields[1:4]]
    except (OSError, IndexError, ValueError):
        return None


def descends_from(pid: int, ancestor: int, limit: int = 256) -> bool:
    """Whether process ``pid`` is ``ancestor`` or runs below it (parents read from /proc)."""
    for _ in range(limit):
        if pid == ancestor:
            return True
        found = _stat(pid)
        if pid <= 1 or found is None:
            return False
        pid = found[0]
    return False


def inside_tool_call(pid: int, engine: int) -> bool:
    """Whether peer ``pid`` runs inside one of ``engine``'s tool calls, jobs or teammates.

    The engine is detached (its parent is init), so such a peer is an agent's command,
    not the user's editor. It counts when it runs below the engine: as a subreaper, the
    engine inherits every orphan of its tool calls, so a command that left its shell
    (``( toold call ... & )``, ``setsid -f``, a double fork) is still its descendant. Its
    process group's or session's leader below the engine, or the engine's own session,
    count too (where the engine could not become a subreaper). A peer already gone when
    asked (it connected, handed the socket to a child and exited) or that the engine
    cannot see (pid 0: another pid namespace) counts too: fail closed.
    """
    peer, own = _stat(pid), _stat(engine)
    if pid <= 0 or peer is None or own is None:
        return True
    _, group, session = peer
    if session == own[2]:
        return True
    return any(descends_from(leader, engine) for leader in {pid, group, session})


MAX_FDS = 2
"""Descriptors a hello may carry: a ``stdio`` session's stdin and stdout."""


async def read_hello(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The client's hello line and the descriptors sent with it (``sock`` non-blocking).

    Read on the event loop, so a client that never speaks holds a socket, not a worker
    thread the other clients need; descriptors received are closed on any failure.
    """
    data = bytearray()
    fds: list[int] = []
    try:
        async with asyncio.timeout(HELLO_TIMEOUT):
            while True:
                room = HELLO_LIMIT + 1 - len(data)  # one byte more says it is too long
                chunk, ancillary = await _receive(sock, socket.CMSG_SPACE(MAX_FDS * 4), room)
                for level, kind, payload in ancillary:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        usable = len(payload) - len(payload) % 4
                        fds += struct.unpack(f"{usable // 4}i", payload[:usable])
                if len(fds) > MAX_FDS:
                    raise PeerRefused(f"a hello sends at most {MAX_FDS} descriptors")
                data += chunk
                if len(data) > HELLO_LIMIT:
                    raise PeerRefused(f"a hello is one line of at most {HELLO_LIMIT} bytes")
                if not chunk or b"\n" in chunk:
                    break
        return parse_hello(bytes(data), fds), fds
    except BaseException:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise


async def _receive(sock: socket.socket, space: int, size: int) -> tuple[bytes, list[Any]]:
    """One ``recvmsg`` of at most ``size`` bytes on a non-blocking socket, waiting on the
    loop until it is readable."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            chunk, ancillary, _, _ = sock.recvmsg(size, space, socket.MSG_CMSG_CLOEXEC)
            return chunk, ancillary
        except BlockingIOError:
            readable = loop.create_future()
            loop.add_reader(sock.fileno(), readable.set_result, None)
            try:
                await readable
            finally:
                loop.remove_reader(sock.fileno())


def parse_hello(data: bytes, fds: list[int]) -> dict[str, Any]:
    """The hello in ``data``: one JSON line of our protocol, its descriptors fit its kind."""
    line, newline, rest = data.partition(b"\n")
    try:
        if not newline or rest:
            raise ValueError("one JSON line, then the client waits for the answer")
        hello = json.loads(line)
        if not isinstance(hello, dict):
            raise ValueError(f"expected a toold hello of protocol {PROTOCOL}")
        if hello.get("toold") != PROTOCOL:
            raise ValueError(_other_protocol(hello.get("toold"), hello.get("version")))
        if hello.get("kind") not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}")
        if hello["kind"] in HANDED_STDIO:
            _check_stdio(fds)
            hello["preface"] = _preface(hello.get("preface"))
            hello["prefaceBytes"] = _preface_bytes(hello.get("prefaceBytes"))
        elif hello["kind"] == MCP_HTTP:
            _check_listener(hello, fds)
        elif fds:
            raise ValueError("only a stdio, mcp or mcp-http session sends descriptors")
    except ValueError as exc:
        raise PeerRefused(f"bad hello: {exc}") from None
    return hello


def _other_protocol(spoken: Any, version: Any) -> str:
    """Why a hello of another protocol is refused, and what to do: a toold of another
    version started this engine, or is attaching to it."""
    if not isinstance(spoken, int) or isinstance(spoken, bool):
        return f"expected a toold hello of protocol {PROTOCOL}"
    from toold import __version__

    client = f"toold {version}" if isinstance(version, str) else "the client"
    return (
        f"expected a toold hello of protocol {PROTOCOL} (this engine is toold {__version__}), "
        f"{client} speaks protocol {spoken}: use one toold for both, or stop this engine "
        "(`toold daemon stop` with the toold that started it) so the next client starts its own"
    )


def _preface(text: Any) -> bytes:
    """The bytes ``toold serve`` read before attaching (base64 in the hello)."""
    if text is None:
        return b""
    if isinstance(text, str):
        with contextlib.suppress(ValueError):
            return base64.b64decode(text, validate=True)
    raise ValueError("preface must be the base64 of the bytes toold serve read first")


def _preface_bytes(count: Any) -> int:
    """How many bytes of preface follow the engine's answer (0: none)."""
    if count is None:
        return 0
    if isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= PREFACE_LIMIT:
        return count
    raise ValueError(f"prefaceBytes must be a whole number from 0 to {PREFACE_LIMIT}")


class Doorway:
    """The connections that have not said hello yet, oldest first, at most ``limit``.

    When one more arrives at the limit, the oldest is closed (its task cancelled): a
    client says hello as it connects, so the one that waited longest is the likeliest to
    be a connection that never will, and a new client still gets in. Refusing the newest
    instead would let a few dozen silent connections lock every client out until they
    timed out.
    """

    def __init__(self, limit: int = UNGREETED_LIMIT) -> None:
        self.limit = limit
        self._waiting: dict[asyncio.Future[Any] | None, None] = {}
        self.closed = 0
        """Connections closed to make room (for the log and tests)."""

    def __len__(self) -> int:
        return len(self._waiting)

    def admit(self, task: asyncio.Task[Any]) -> None:
        """A new connection, served by ``task``: make room for it first."""
        while len(self._waiting) >= self.limit:
            oldest = next(iter(self._waiting))
            del self._waiting[oldest]
            if oldest is not None:
                oldest.cancel()  # its hello read ends; the connection and descriptors close
            self.closed += 1
            if self.closed == 1 or self.closed % 1000 == 0:
                log.warning(
                    "%d connections had not said hello: closed the oldest (%d so far)",
                    self.limit,
                    self.closed,
                )
        self._waiting[task] = None
        task.add_done_callback(self.greeted)

    def greeted(self, task: asyncio.Future[Any] | None) -> None:
        """``task``'s connection said hello (or ended): it no longer counts."""
        self._waiting.pop(task, None)


def _check_stdio(fds: list[int]) -> None:
    if len(fds) != 2:
        raise ValueError("a stdio session sends two descriptors: its stdin and stdout")
    for fd, name in zip(fds, ("stdin", "stdout"), strict=True):
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)) and not (
            stat.S_ISREG(mode)  # toold serve < requests > answers
        ):
            raise ValueError(f"its {name} must be a pipe, socket, terminal or file")


def _check_listener(hello: dict[str, Any], fds: list[int]) -> None:
    """An ``mcp-http`` hello: one listening TCP socket, the host it was bound for, the
    names clients may use, and the bearer token's SHA-256 (hex), which a socket
    reachable from other machines must have."""
    if len(fds) != 1 or not stat.S_ISSOCK(os.fstat(fds[0]).st_mode):
        raise ValueError("an mcp-http session sends one descriptor: its listening socket")
    probe = socket.socket(fileno=fds[0])
    try:
        tcp = probe.family in (socket.AF_INET, socket.AF_INET6)
        listening = tcp and probe.type == socket.SOCK_STREAM
        listening = listening and probe.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
        address = probe.getsockname()[0] if tcp else ""
    finally:
        probe.detach()  # the descriptor stays the hello's
    if not listening:
        raise ValueError("an mcp-http session's descriptor must be a listening TCP socket")
    host, names, digest = hello.get("host"), hello.get("allowedHosts", []), hello.get("tokenDigest")
    if not isinstance(host, str) or not 0 < len(host) <= 255:
        raise ValueError("host must be the name or address the socket was bound for")
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ValueError("allowedHosts must be a list of names")
    if digest is None:
        if not ipaddress.ip_address(address).is_loopback:
            raise ValueError("a socket reachable from other machines needs a bearer token")
    elif not isinstance(digest, str) or len(digest) != 64 or digest.strip("0123456789abcdef"):
        raise ValueError("tokenDigest must be the SHA-256 of the bearer token, in hex")
