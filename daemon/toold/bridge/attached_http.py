"""The engine's side of ``toold mcp --http``: a listening socket, served on the engine's workspace.

``toold mcp --http`` binds its socket and hands it to the workspace's engine (a hello of
kind ``mcp-http`` carrying the socket: toold.bridge.http_listener), then stays in the
foreground as the server's owner. The engine runs the app ``--no-daemon`` runs
(toold.bridge.mcp_http: the SDK's Streamable HTTP transport behind the Host/Origin check,
the bearer token, 415, the in-flight cap, the body cap, each session's event store) on
that socket with the WorkspaceState it already holds, so HTTP clients share the folder's
todos, tasks, jobs and "Always allow" memory with its editors and stdio clients.

To the engine's bookkeeping (toold.engine.sessions) the listener is one session of kind
``mcp`` (its client ``toold mcp --http URL``): while it serves, the engine is in use, as
while a stdio MCP client is attached. Each MCP session over HTTP is one more session of
kind ``mcp``, named by its client's ``clientInfo.name``, booked as the answer to its
``initialize`` names it and closed when it ends (a DELETE, the SDK's idle rule, the
listener's end): the HTTP guard scopes every request (``Bookings``), and the SDK runs
each handler in a copy of the context of the request that sent it, so a call is its
session's (``current``: questions and the fairness share). A call of the 2026-07-28
revision, which has no session, is the listener's. The guard asks the call's client
(McpAsker), nobody when ``toold mcp --http`` runs inside a tool call.

The listener stops when its connection closes (SIGINT or SIGTERM in ``toold mcp --http``,
its death) or the engine stops: the port closes, calls under way get the grace uvicorn
gives them, the HTTP sessions end; the engine goes on per its idle rules. The engine is
handed the token's SHA-256 only, never the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from starlette.requests import Request
from starlette.types import Message, Send

from toold.bridge.asking import McpAsker
from toold.bridge.http_listener import MCP_PATH, HttpOptions, endpoint_url
from toold.bridge.mcp_http import SESSION_IDLE, SHUTDOWN_GRACE, http_server
from toold.bridge.mcp_server import build_server
from toold.engine.attached import AttachedConnection
from toold.engine.sessions import MCP, Session, Sessions, current
from toold.fairness import caller

if TYPE_CHECKING:
    import uvicorn
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from toold.permissions.guard import Answer
    from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)

CLIENT = "toold mcp --http"
"""What the listener's hello calls its client, and its sessions' until they initialize."""
SWEEP = 60.0
"""Seconds between two looks for HTTP sessions the SDK let go idle (SESSION_IDLE)."""
SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("latin-1")

opening: contextvars.ContextVar[HttpSession | None] = contextvars.ContextVar(
    "toold_http_opening", default=None
)
"""The session a request without a session id would open (its initialize names it)."""


class HttpSession(AttachedConnection):
    """One MCP session over HTTP, as the engine's bookkeeping sees it (the SDK serves it)."""

    kind = "MCP over HTTP"

    def __init__(self, listener: McpHttpListener) -> None:
        super().__init__(listener.from_tool)
        self.listener = listener
        self.client_name = ""
        """The client's ``clientInfo.name`` (its initialize)."""

    def push(self, method: str, params: dict[str, Any]) -> None:
        """No MCP equivalent of toold's notifications: dropped, as on stdio."""
        log.debug("no MCP equivalent for %s; dropped", method)

    async def ask_user(self, tool: str, args: Any, reason: str) -> Answer | None:
        """The guard's question, to the client of the call being judged (asking)."""
        return await self.listener.asker(tool, args, reason)

    def request_stop(self, exit_code: int = 0) -> None:
        """An HTTP session ends with its listener (the engine stops): that stops."""
        self.listener.request_stop(exit_code)


@dataclass
class _Booked:
    session: Session
    in_flight: int = 0
    """Requests of the session being served (a GET stream while it is open)."""
    idle_since: float = field(default_factory=time.monotonic)


class Bookings:
    """The HTTP sessions of one listener in the engine's bookkeeping, by the SDK's session
    id. The HTTP guard (mcp_http.Guard) scopes every request here: a request of a session
    runs as that session's (``current``, ``caller``: the SDK runs its handlers in a copy
    of the context of the request that sent the message); a request that opens one books
    it as its answer names it; a DELETE, the endpoint's 404 (the SDK no longer knows
    it), the SDK's idle rule (``expire``) or the listener's end closes it."""

    def __init__(self, listener: McpHttpListener) -> None:
        self.listener = listener
        self.live: dict[str, _Booked] = {}

    @contextlib.contextmanager
    def scoped(self, request: Request, send: Send) -> Iterator[Send]:
        """Serve one request as its session's; the ``send`` to answer it with."""
        named = request.headers.get(MCP_SESSION_ID_HEADER)
        booked = self.live.get(named) if named is not None else None
        if named is None:
            with self._opening(send) as sending:
                yield sending
        elif booked is not None:
            with self._in_session(named, booked, request, send) as sending:
                yield sending
        else:  # unknown: the SDK answers 404
            yield send

    @contextlib.contextmanager
    def _opening(self, send: Send) -> Iterator[Send]:
        front = HttpSession(self.listener)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", []):
                    if name.lower() == SESSION_HEADER:
                        self._book(value.decode("latin-1"), front)
            await send(message)

        named = opening.set(front)
        try:
            yield sending
        finally:
            opening.reset(named)

    @contextlib.contextmanager
    def _in_session(
        self, named: str, booked: _Booked, request: Request, send: Send
    ) -> Iterator[Send]:
        ended = False
        # Only the endpoint's answer says the session ended: a 404 for another path (a
        # stray request naming the session) leaves it the SDK's, and so the engine's.
        endpoint = request.url.path == MCP_PATH

        async def sending(message: Message) -> None:
            nonlocal ended
            if message["type"] == "http.response.start" and endpoint:
                status = message["status"]
                ended = status == 404 or (request.method == "DELETE" and status < 300)
            await send(message)

        booked.in_flight += 1
        session, share = current.set(booked.session), caller.set(booked.session.id)
        try:
            yield sending
        finally:
            caller.reset(share)
            current.reset(session)
            booked.in_flight -= 1
            booked.idle_since = time.monotonic()
            if ended:
                self.close(named)

    def _book(self, named: str, front: HttpSession) -> None:
        if named in self.live:
            return
        listener = self.listener
        session = listener.sessions.open(MCP, front, listener.peer_pid, CLIENT)
        self.live[named] = _Booked(session)
        log.info("session %d: an MCP session over HTTP on %s", session.id, listener.url)

    def close(self, named: str) -> None:
        """Close the booking of the SDK's session ``named`` (it ended)."""
        booked = self.live.pop(named, None)
        if booked is not None:
            self.listener.sessions.close(booked.session)
            log.info("session %d ended (over HTTP)", booked.session.id)

    def expire(self, now: float) -> None:
        """Close the sessions the SDK has let go by now: no request for SESSION_IDLE (and a
        sweep's margin, so that the SDK's reaping comes first)."""
        for named, booked in list(self.live.items()):
            if not booked.in_flight and now - booked.idle_since > SESSION_IDLE + SWEEP:
                self.close(named)

    def close_all(self) -> None:
        """The listener ended: so did its sessions."""
        for named in list(self.live):
            self.close(named)


class McpHttpListener(AttachedConnection):
    """``toold mcp --http``'s listening socket, served by the engine as a session."""

    kind = "MCP over HTTP"

    def __init__(
        self,
        state: WorkspaceState,
        from_tool: bool,
        hello: dict[str, Any],
        listener: int,
        sessions: Sessions,
        peer_pid: int,
    ) -> None:
        super().__init__(from_tool)
        self.socket = socket.socket(fileno=listener)
        """Owned from here: closed as the listener ends."""
        self.state = state
        self.sessions = sessions
        self.peer_pid = peer_pid
        # The hello was checked (toold.engine.peers): a host, names, a digest or none.
        self.options = HttpOptions(hello["host"], allowed_hosts=list(hello.get("allowedHosts", [])))
        digest = hello.get("tokenDigest")
        self.token = None if digest is None else bytes.fromhex(digest)
        self.url = endpoint_url(self.socket)
        self.client_name = f"{CLIENT} {self.url}"
        self.asker = McpAsker(state)
        self.bookings = Bookings(self)

    # -- SessionEditor (the rest: AttachedConnection) -----------------------------------
    def push(self, method: str, params: dict[str, Any]) -> None:
        """No MCP equivalent of toold's notifications: dropped, as on stdio."""
        log.debug("no MCP equivalent for %s; dropped", method)

    async def ask_user(self, tool: str, args: Any, reason: str) -> Answer | None:
        """The question of a call that has no session (2026-07-28), to its client."""
        return await self.asker(tool, args, reason)

    # -- serving -------------------------------------------------------------------
    async def _named(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Middleware: name a session by its client's initialize (``daemon status``)."""
        front = opening.get()
        if front is not None and ctx.method == "initialize" and isinstance(ctx.params, dict):
            info = ctx.params.get("clientInfo")
            name = info.get("name") if isinstance(info, dict) else None
            if isinstance(name, str):
                front.client_name = name[:200]
        return await call_next(ctx)

    async def serve(self) -> int:
        """Serve MCP over HTTP on the socket until it is stopped (``request_stop``), then
        close it; the exit status (1: it failed, or the engine stopped it)."""
        server = build_server(self.state)
        server.middleware.append(self._named)
        max_body = self.state.config.limits.max_message_bytes
        runner, guard = http_server(server, self.options, self.token, max_body, self.bookings)
        serving = asyncio.ensure_future(self._run(runner))
        stop = asyncio.ensure_future(self._stop.wait())
        sweeping = asyncio.ensure_future(self._sweep())
        log.info("serving MCP over HTTP on %s", self.url)
        try:
            await asyncio.wait({serving, stop}, return_when=asyncio.FIRST_COMPLETED)
            if serving.done():
                self.exit_code = 1  # it ended unasked: uvicorn could not serve (logged)
            else:
                # Stop accepting, end open streams as if their clients hung up, give
                # calls under way uvicorn's grace, then cancel what is left.
                runner.should_exit = True
                guard.stop()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(serving), SHUTDOWN_GRACE + 1)
        finally:
            for task in (stop, sweeping, serving):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                try:
                    await serving
                except Exception:
                    log.exception("the %s listener failed", self.kind)
                    self.exit_code = 1
            self.close()
            self.bookings.close_all()
            log.info("stopped serving MCP over HTTP on %s", self.url)
        return self.exit_code

    async def _run(self, runner: uvicorn.Server) -> None:
        try:
            await runner.serve(sockets=[self.socket])
        except SystemExit as exc:  # uvicorn's answer to a socket it cannot serve
            raise RuntimeError(f"uvicorn could not serve {self.url} (exit {exc.code})") from None

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP)
            self.bookings.expire(time.monotonic())

    def close(self) -> None:
        """Close the listening socket (the port closes once its owner's copy is gone)."""
        self.socket.close()
