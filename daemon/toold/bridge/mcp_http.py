"""``toold mcp --http``: the server ``toold mcp`` serves, over Streamable HTTP.

The SDK's own transport (``Server.streamable_http_app``: sessions, SSE, both protocol
revisions, its body cap and its Host/Origin checks) run by uvicorn on the socket that
``toold mcp --http`` binds (toold.bridge.http_listener), loopback by default. In front
of it, in this order, every request meets:

1. the SDK's Host/Origin check (DNS rebinding): a browser page on another site that
   resolves its name to 127.0.0.1 gets 421 (Host) or 403 (Origin), token or not;
2. the bearer token, compared in constant time: 401 with ``WWW-Authenticate``;
3. a POST that is not JSON: 415 (the SDK itself would say 400);
4. the cap on requests in flight (``bridge.inflight.MAX_IN_FLIGHT``, as on stdio): one
   POST more gets 503 with ``Retry-After`` (HTTP cannot stop reading one client only).

Then the SDK's app refuses a body over ``[limits] max_message_bytes`` (413), an unknown
session (404), a wrong ``Accept`` (406) or method (405). The workspace's engine serves
this app on the socket the process hands it (toold.bridge.attached_http, on its shared
workspace); with ``--no-daemon`` the process opens the workspace and serves it itself
(``serve_mcp_http``, ``mcp_server.mcp_workspace``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import resource
import signal
import socket
import sys
from collections.abc import Generator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toold.bridge.http_listener import (
    LOOPBACK_NAMES,
    MCP_PATH,
    HttpOptions,
    bind_socket,
    endpoint_url,
    is_loopback,
    token_digest,
)
from toold.bridge.inflight import MAX_IN_FLIGHT
from toold.bridge.mcp_events import SessionStores
from toold.bridge.mcp_server import mcp_workspace
from toold_protocol import errors as codes

log = logging.getLogger(__name__)

MAX_SESSIONS = 256
"""Sessions open at once; one more is refused (503) until one ends or idles out."""
CONNECTIONS = 4 * MAX_SESSIONS
"""Open connections at most (a session's GET stream holds one while it lasts)."""
SHUTDOWN_GRACE = 5
"""Seconds a stop waits for calls under way before they are cancelled."""
SESSION_IDLE = 30 * 60
"""Seconds a session lives with no request (the SDK's default): then the SDK ends it."""
DISCONNECT: Message = {"type": "http.disconnect"}


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


class RequestScopes(Protocol):
    """What serves each request in a scope of its own (toold.bridge.attached_http's
    bookings: the engine's session a request belongs to)."""

    def scoped(self, request: Request, send: Send) -> AbstractContextManager[Send]:
        """Serve one request within the block; the ``send`` to answer it with."""


def _is_json(request: Request) -> bool:
    media_type = request.headers.get("content-type", "").partition(";")[0]
    return media_type.strip().lower() == "application/json"


class Guard:
    """ASGI middleware in front of the SDK's app: Host/Origin, the token, the cap."""

    def __init__(
        self,
        app: ASGIApp,
        settings: TransportSecuritySettings,
        token: bytes | None,
        cap: int = MAX_IN_FLIGHT,
        events: SessionStores | None = None,
        scopes: RequestScopes | None = None,
    ) -> None:
        self.app = app
        self.events = events
        """The event store the SDK's app was built with: told each request's session."""
        self.scopes = scopes
        """Told each request that passed (in the engine: its session's bookkeeping)."""
        self.origin_check = TransportSecurityMiddleware(settings)
        self.token = token
        """The token's digest (http_listener.token_digest); None: no token."""
        self.cap = cap
        self.in_flight = 0
        self._stopped = asyncio.get_running_loop().create_future()
        """Done once ``stop`` was called: the requests under way end."""

    def stop(self) -> None:
        """End every request under way as if its client had hung up (an open SSE stream
        would hold a graceful stop for SHUTDOWN_GRACE), and refuse any that comes."""
        if not self._stopped.done():
            self._stopped.set_result(None)

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
        if refused is None and self._stopped.done():
            refused = _json_error(503, "toold is stopping this server")
        if refused is not None:
            await refused(scope, receive, send)
            return
        self.in_flight += posted
        try:
            with contextlib.ExitStack() as scoped:
                sending = send
                if self.events is not None:
                    named = request.headers.get(MCP_SESSION_ID_HEADER)
                    sending = scoped.enter_context(self.events.scoped(named, sending))
                if self.scopes is not None:
                    sending = scoped.enter_context(self.scopes.scoped(request, sending))
                await self.app(scope, self._until_stopped(receive), sending)
        finally:
            self.in_flight -= posted

    def _until_stopped(self, receive: Receive) -> Receive:
        """``receive``, answering ``http.disconnect`` once ``stop`` was called."""
        stopped = self._stopped

        async def receiving() -> Message:
            if stopped.done():
                return DISCONNECT
            getting = asyncio.ensure_future(receive())
            try:
                await asyncio.wait({getting, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getting.done():
                    getting.cancel()
            if getting.cancelled():
                return DISCONNECT
            return getting.result()

        return receiving

    def _check_token(self, request: Request) -> Response | None:
        if self.token is None:
            return None
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            token_digest(presented.strip()), self.token
        ):
            return None
        # RFC 6750 §3: no error code when the request carried no credentials.
        challenge = 'Bearer realm="toold"'
        if scheme:
            challenge += ', error="invalid_token"'
        return _json_error(401, "a valid bearer token is required", {"WWW-Authenticate": challenge})


def connection_bound() -> int:
    """Connections open at once past which a new one is closed as it comes: CONNECTIONS,
    or a quarter of this process's descriptors when that is fewer (the engine's tools,
    editors and watches need the rest)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return CONNECTIONS if soft == resource.RLIM_INFINITY else max(1, min(CONNECTIONS, soft // 4))


def _bounded(bound: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol, closing a connection past ``bound`` open ones at once, and
    one that sends nothing within uvicorn's keep-alive timeout. uvicorn accepts every
    connection (``limit_concurrency`` answers 503 to requests, after the accept) and keeps
    a silent one forever, and the token is checked per request: anyone on the machine
    could take all of the process's descriptors (the workspace's engine's)."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class Bounded(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > bound:
                transport.close()  # uvicorn's connection_lost tidies up
                return
            # The timer uvicorn arms between two requests, armed before the first too.
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

    return Bounded


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: they are the process's (serve_http's, or the
    engine's), and uvicorn re-raises SIGTERM after a graceful stop, which would kill the
    process before the workspace is released."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Signals are this process's; uvicorn only watches should_exit."""
        yield


def http_server(
    server: Server[Any],
    options: HttpOptions,
    token: bytes | None,
    max_body: int,
    scopes: RequestScopes | None = None,
) -> tuple[uvicorn.Server, Guard]:
    """The uvicorn server (not started) of the SDK's Streamable HTTP app of ``server``,
    behind the Guard; ``token`` is the bearer token's digest (None: no token), ``max_body``
    the workspace's ``[limits] max_message_bytes``, ``scopes`` the Guard's RequestScopes."""
    settings = security_settings(options)
    events = SessionStores()  # stream resumption, each session's own (mcp_events)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        event_store=events,
        transport_security=settings,
        host=options.host,
        max_request_body_size=max_body,
        max_sessions=MAX_SESSIONS,
        session_idle_timeout=SESSION_IDLE,
    )
    guard = Guard(app, settings, token, events=events, scopes=scopes)
    config = uvicorn.Config(
        guard,
        log_config=None,  # uvicorn's records go where toold's logging sends them
        log_level="warning",
        lifespan="on",
        ws="none",
        # Connections and requests at once; past that uvicorn answers 503 itself.
        limit_concurrency=CONNECTIONS,
        http=_bounded(connection_bound()),
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
        server_header=False,
    )
    return _Uvicorn(config), guard


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
    """Open ``workspace`` (mcp_workspace, as ``--no-daemon`` does on stdio: the guard asks
    the client) and serve MCP over HTTP on ``sock`` until SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    stop = _Stop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig)
    try:
        async with mcp_workspace(workspace, from_tool=from_tool) as (state, server):
            token = None if options.token is None else token_digest(options.token)
            max_body = state.config.limits.max_message_bytes
            stop.runner, _ = http_server(server, options, token, max_body)
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
    """Entry point of ``toold mcp --http --no-daemon`` (the process opens the workspace and
    serves it): 0 after a signal stopped it cleanly, 2 when the address cannot be bound.
    ``from_tool``: started inside a tool call, nobody is asked."""
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
