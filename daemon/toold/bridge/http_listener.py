"""The ``toold mcp --http`` process: its options, its socket, and that socket's hand-over.

The process binds its socket itself (so "address in use", ``--host``/``--port`` and the
printed URL are its own), then hands the listening socket to the workspace's engine
(``toold.engine.attach``, a hello of kind ``mcp-http`` carrying the socket), which serves
MCP over Streamable HTTP on it with its shared workspace (toold.bridge.attached_http).
The process stays in the foreground as the server's owner: SIGINT or SIGTERM here, or
this process's death, closes its connection to the engine, and the engine stops the
listener and ends its HTTP sessions. The engine never sees the bearer token: the hello
carries its SHA-256, which is all the check compares. Standard library only: the MCP SDK
and uvicorn load in the engine.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

from toold.engine.attach import MCP_HTTP, EngineError, attach

log = logging.getLogger(__name__)

TOKEN_ENV = "TOOLD_MCP_TOKEN"
"""The environment variable a token may come from (removed once read)."""
MCP_PATH = "/mcp"
"""The endpoint, as in the SDK's examples and most clients' defaults."""
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
STOP_WAIT = 15.0
"""Seconds a stopped ``toold mcp --http`` waits for the engine to close the listener (its
grace for calls under way is 5)."""


class HttpUsageError(ValueError):
    """A command line ``toold mcp --http`` refuses to start with; the message names the fix."""


def token_digest(token: str) -> bytes:
    """The token's SHA-256: digests of equal length, so comparing them tells nothing of
    the token's; the engine is handed this, never the token."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


@dataclass(frozen=True)
class HttpOptions:
    """Where and how ``toold mcp --http`` listens."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    """None: no token (loopback only)."""
    token_printed: bool = False
    """The token was made here: print it, since nobody else knows it."""
    allowed_hosts: list[str] = field(default_factory=list)
    """Names clients may reach a non-loopback host by (Host and Origin)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def http_options(
    host: str,
    port: int,
    token_file: Path | None,
    no_token: bool,
    allowed_hosts: list[str],
    workspace: Path | None = None,
) -> HttpOptions:
    """The options of a command line, the token from ``--token-file``, ``$TOOLD_MCP_TOKEN``
    or made here; raises HttpUsageError for what must not start, a token file inside
    ``workspace`` included (the agent's tools read the workspace: with the token, a
    command could connect as a client of its own and answer its own questions)."""
    env_token = os.environ.pop(TOKEN_ENV, None)  # tools' processes (and the engine) never see it
    if no_token:
        if token_file is not None or env_token:
            raise HttpUsageError("--no-token contradicts --token-file / $TOOLD_MCP_TOKEN")
        if not is_loopback(host):
            raise HttpUsageError(
                f"--host {host} is reachable from other machines, so toold requires a bearer "
                f"token there: drop --no-token (a token is made and printed), pass "
                f"--token-file FILE or set ${TOKEN_ENV}; or bind --host 127.0.0.1"
            )
        return HttpOptions(host, port, None, False, allowed_hosts)
    if token_file is not None:
        if workspace is not None and token_file.resolve().is_relative_to(workspace.resolve()):
            raise HttpUsageError(
                f"the token file {token_file} lies in the workspace {workspace}, where the "
                "agent's tools can read it: keep it outside (for example ~/.toold-mcp-token)"
            )
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise HttpUsageError(f"cannot read the token file {token_file}: {exc}") from None
        if not token:
            raise HttpUsageError(f"the token file {token_file} is empty")
        return HttpOptions(host, port, token, False, allowed_hosts)
    if env_token is not None and env_token.strip():
        return HttpOptions(host, port, env_token.strip(), False, allowed_hosts)
    return HttpOptions(host, port, secrets.token_urlsafe(32), True, allowed_hosts)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
        sock.set_inheritable(False)
    except OSError:
        sock.close()
        raise
    return sock


def endpoint_url(sock: socket.socket) -> str:
    """``http://HOST:PORT/mcp`` of a bound socket."""
    address, port = sock.getsockname()[:2]
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}{MCP_PATH}"


class Stopped(Exception):
    """SIGINT or SIGTERM reached the foreground process."""


@contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise Stopped within the block (from the start: while the
    engine starts, too), and are restored after it."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve_mcp_http_in_engine(workspace: Path, options: HttpOptions, from_tool: bool) -> int:
    """Entry point of ``toold mcp --http``: bind, hand the socket to the workspace's engine,
    print the URL, and wait. 0 after SIGINT/SIGTERM stopped it, 2 when the address cannot
    be bound, 1 when the engine could not serve or stopped serving."""
    try:
        sock = bind_socket(options.host, options.port)
    except OSError as exc:
        print(f"toold: cannot listen on {options.host}:{options.port}: {exc}", file=sys.stderr)
        return 2
    url = endpoint_url(sock)
    hello = {
        "client": "toold mcp --http",
        "fromTool": from_tool,
        "host": options.host,
        "allowedHosts": options.allowed_hosts,
        "tokenDigest": None if options.token is None else token_digest(options.token).hex(),
    }
    attached = None
    try:
        with _stop_signals():
            try:
                attached = attach(workspace, MCP_HTTP, hello, fds=[sock.fileno()])
            finally:
                sock.close()  # the engine listens on its own copy: none stays here
            log.info(
                "toold serving %s over HTTP through its engine (pid %s); the engine's log: %s",
                attached.paths.workspace,
                attached.reply.get("pid", "?"),
                attached.paths.log,
            )
            if options.token_printed:
                print(f"toold mcp: bearer token {options.token}", file=sys.stderr, flush=True)
            # The socket listens already: a client that reads the URL can connect now.
            print(url, flush=True)
            end = attached.reader.readline()
    except (EngineError, OSError) as exc:
        hint = ""
        if "kind must be one of" in str(exc):  # an engine of a toold before mcp-http
            hint = f" (an older toold's engine: `toold daemon stop --workspace {workspace}`)"
        print(f"toold: {exc}{hint}", file=sys.stderr)
        return 1
    except Stopped:
        if attached is not None:
            _stop(attached.sock, attached.reader)
            attached.close()
        return 0
    attached.close()
    return _status(end, url, attached.paths.log)


def _stop(sock: socket.socket, reader: IO[bytes]) -> None:
    """Tell the engine to stop the listener (this side's end of the connection), and wait
    until it says the listener is closed, or STOP_WAIT; a second signal waits no more."""
    try:
        with _stop_signals():
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(STOP_WAIT)
            reader.readline()
    except (Stopped, OSError):
        pass


def _status(line: bytes, url: str, engine_log: Path) -> int:
    """The status the engine's last line names; 1 with a message when it names none."""
    try:
        end = json.loads(line) if line else None
    except ValueError:
        end = None
    code = end.get("exit") if isinstance(end, dict) else None
    if not isinstance(code, int) or code != 0:
        print(
            f"toold: the engine stopped serving {url} (it was stopped, or crashed); "
            f"see its log {engine_log}",
            file=sys.stderr,
        )
        return code if isinstance(code, int) and code else 1
    return 0
