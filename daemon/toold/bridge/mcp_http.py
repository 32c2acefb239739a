"""``toold mcp --http``: the server ``toold mcp`` serves, over Streamable HTTP.

The SDK's own transport (``Server.streamable_http_app``: sessions, SSE, both protocol
revisions, its body cap and its Host/Origin checks) run by uvicorn on one socket this
module binds, loopback by default. In front of it, in this order, every request meets:

1. the SDK's Host/Origin check (DNS rebinding): a browser page on another site that
   resolves its name to 127.0.0.1 gets 421 (Host) or 403 (Origin), token or not;
2. the bearer token, compared in constant time: 401 with ``WWW-Authenticate``;
3. a POST that is not JSON: 415 (the SDK itself would say 400);
4. the cap on requests in flight (``bridge.inflight.MAX_IN_FLIGHT``, as on stdio): one
   POST more gets 503 with ``Retry-After`` (HTTP cannot stop reading one client only).

Then the SDK's app refuses a body over ``[limits] max_message_bytes`` (413), an unknown
session (404), a wrong ``Accept`` (406) or method (405). Every session of the process
serves the one workspace the process opened (``mcp_server.mcp_workspace``, as
``--no-daemon`` does on stdio): unlike stdio, HTTP does not attach to the workspace's
engine, since the process is a long-running server itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from toold.bridge.inflight import MAX_IN_FLIGHT
from toold.bridge.mcp_events import SessionStores
from toold.bridge.mcp_server import mcp_workspace
from toold_protocol import errors as codes

log = logging.getLogger(__name__)

TOKEN_ENV = "TOOLD_MCP_TOKEN"
"""The environment variable a token may come from (removed once read)."""
MCP_PATH = "/mcp"
"""The endpoint, as in the SDK's examples and most clients' defaults."""
MAX_SESSIONS = 256
"""Sessions open at once; one more is refused (503) until one ends or idles out."""
CONNECTIONS = 4 * MAX_SESSIONS
"""Open connections at most (a session's GET stream holds one while it lasts)."""
SHUTDOWN_GRACE = 5
"""Seconds a signal waits for calls under way before they are cancelled."""
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class HttpUsageError(ValueError):
    """A command line ``toold mcp --http`` refuses to start with; the message names the fix."""


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
) -> HttpOptions:
    """The options of a command line, the token from ``--token-file``, ``$TOOLD_MCP_TOKEN``
    or made here; raises HttpUsageError for what must not start."""
    env_token = os.environ.pop(TOKEN_ENV, None)  # tools' processes never see it
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


def security_settings(options: HttpOptions) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection: the loopback names always, and the host bound
    (or named with --allow-host) when it is not loopback; any port."""
    names = list(LOOPBACK_NAMES)
    if not is_loopback(options.host):
        names.append(f"[{options.host}]" if ":" in options.host else options.host)
    names.extend(options.allowed_hosts)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names] + names,
        allowed_origins=[
            f"{scheme}://{name}{port}"
            for name in names
            for scheme in ("http", "https")
            for port in (":*", "")
        ],
    )


def _json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """A JSON-RPC error without an id, as the SDK answers what it refuses."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": codes.INVALID_REQUEST, "message": message},
    }
    return Response(json.dumps(body), status, headers, media_type="application/json")


def _digest(token: str) -> bytes:
    """Digests of equal length, so that comparing them tells nothing of the token's."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def _is_json(request: Request) -> bool:
    media_type = request.headers.get("content-type", "").partition(";")[0]
    return media_type.strip().lower() == "application/json"


class Guard:
    """ASGI middleware in front of the SDK's app: Host/Origin, the token, the cap."""

    def __init__(
        self,
        app: ASGIApp,
        settings: TransportSecuritySettings,
        token: str | None,
        cap: int = MAX_IN_FLIGHT,
        events: SessionStores | None = None,
    ) -> None:
        self.app = app
        self.events = events
        """The event store the SDK's app was built with: told each request's session."""
        self.origin_check = TransportSecurityMiddleware(settings)
        self.token = _digest(token) if token is not None else None
        self.cap = cap
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse what fails a check; pass the rest to the SDK's app."""
        if scope["type"] == "lifespan":  # the session manager's start and stop
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # uvicorn runs with ws="none": fail closed all the same
            return
        request = Request(scope)
        refused = await self.origin_check.validate_request(request, is_post=False)
        if refused is None:
            refused = self._check_token(request)
        posted = request.method == "POST"
        if refused is None and posted and not _is_json(request):
            # RFC 9110 §15.5.16; the SDK would answer 400 for the same.
            refused = _json_error(415, "Content-Type must be application/json")
        if refused is None and posted and self.in_flight >= self.cap:
            log.warning("refused a request: %d requests in flight", self.in_flight)
            refused = _json_error(
                503, f"toold is serving {self.cap} requests already", {"Retry-After": "1"}
            )
        if refused is not None:
            await refused(scope, receive, send)
            return
        self.in_flight += posted
        try:
            if self.events is None:
                await self.app(scope, receive, send)
            else:
                named = request.headers.get(MCP_SESSION_ID_HEADER)
                with self.events.scoped(named, send) as sending:
                    await self.app(scope, receive, sending)
        finally:
            self.in_flight -= posted

    def _check_token(self, request: Request) -> Response | None:
        if self.token is None:
            return None
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            _digest(presented.strip()), self.token
        ):
            return None
        # RFC 6750 §3: no error code when the request carried no credentials.
        challenge = 'Bearer realm="toold"'
        if scheme:
            challenge += ', error="invalid_token"'
        return _json_error(401, "a valid bearer token is required", {"WWW-Authenticate": challenge})


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: it re-raises SIGTERM after a graceful stop,
    which would kill the process before the workspace is released."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Signals are this module's (serve_http); uvicorn only watches should_exit."""
        yield


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


class _Stop:
    """SIGINT/SIGTERM from the start: while the workspace loads they only mark the stop;
    once uvicorn runs they are its handle_exit (sse-starlette hooks that to end the open
    SSE streams, which would otherwise hold the stop for SHUTDOWN_GRACE)."""

    def __init__(self) -> None:
        self.requested = False
        self.runner: uvicorn.Server | None = None

    def __call__(self, sig: int) -> None:
        self.requested = True
        if self.runner is not None:
            self.runner.handle_exit(sig, None)


async def serve_http(
    workspace: Path, options: HttpOptions, sock: socket.socket, from_tool: bool = False
) -> None:
    """Open ``workspace`` (mcp_workspace, as ``--no-daemon`` does: the guard asks the
    client) and serve MCP over HTTP on ``sock`` until SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    stop = _Stop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig)
    try:
        async with mcp_workspace(workspace, from_tool=from_tool) as (state, server):
            settings = security_settings(options)
            events = SessionStores()  # stream resumption, each session's own (mcp_events)
            app = server.streamable_http_app(
                streamable_http_path=MCP_PATH,
                event_store=events,
                transport_security=settings,
                host=options.host,
                max_request_body_size=state.config.limits.max_message_bytes,
                max_sessions=MAX_SESSIONS,
            )
            config = uvicorn.Config(
                Guard(app, settings, options.token, events=events),
                log_config=None,  # uvicorn's records go where toold's logging sends them
                log_level="warning",
                lifespan="on",
                ws="none",
                # Connections and requests at once; past that uvicorn answers 503 itself.
                limit_concurrency=CONNECTIONS,
                timeout_graceful_shutdown=SHUTDOWN_GRACE,
                server_header=False,
            )
            stop.runner = _Uvicorn(config)
            if stop.requested:  # a signal while the workspace loaded
                return
            if options.token_printed:
                print(f"toold mcp: bearer token {options.token}", file=sys.stderr, flush=True)
            # The socket listens already: a client that reads the URL can connect now.
            print(endpoint_url(sock), flush=True)
            await stop.runner.serve(sockets=[sock])
    finally:
        sock.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def serve_mcp_http(workspace: Path, options: HttpOptions, from_tool: bool = False) -> int:
    """Entry point of ``toold mcp --http`` (its own process, with its own workspace: it
    is a long-running server itself): 0 after a signal stopped it cleanly, 2 when the
    address cannot be bound. ``from_tool``: started inside a tool call, nobody is asked."""
    try:
        sock = bind_socket(options.host, options.port)
    except OSError as exc:
        print(f"toold: cannot listen on {options.host}:{options.port}: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve_http(workspace, options, sock, from_tool))
    except KeyboardInterrupt:  # before serve_http's handlers were in place
        log.info("stopped")
    return 0
