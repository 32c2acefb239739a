"""``toold acp`` through the engines: the client's one connection, each session served
by the engine of its workspace.

The ACP client speaks to this process on stdin/stdout (toold.acp.wire). A session's
workspace is its ``session/new`` or ``session/load`` ``cwd`` (or ``--workspace``); this
process attaches to that workspace's engine (``attach``, kind ``acp``, starting one if
none runs) over one connection per workspace, and the engine runs toold's agent there on
its shared workspace (toold.acp.attached). Here messages only move:

- ``initialize`` is answered here, once, in the version negotiated (2 only under
  ``--protocol 2``), and replayed to each engine as it is attached with that version
  (so each knows the client's capabilities and speaks the same version);
  ``authenticate`` is refused here as the agent refuses it; ``session/list`` reads the
  sessions kept in the folder asked about, or in every attached workspace when none is
  named.
- ``session/new``, ``session/load`` and ``session/resume`` go to the engine of their
  workspace; a later request or notification naming a ``sessionId`` goes to the engine
  holding it (until ``session/close`` answers). Each
  request forwarded gets this side's own id on that connection, and its answer goes
  back under the client's id.
- What an engine asks the client (``session/request_permission``, ``fs/*``,
  ``terminal/*``) gets a fresh id on the client's connection, and the client's answer
  goes back to that engine under the engine's id; ``session/update`` passes as it is.
- An engine that ends (stopped, crashed) fails what it owed the client and its sessions
  are forgotten: a request naming one is answered with an error saying to load it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from pathlib import Path
from typing import Any

from acp import RequestError

from toold.acp import history
from toold.acp.answers import (
    initialize_answer,
    negotiated,
    no_auth_methods,
    unknown_session,
    workspace_folder,
)
from toold.acp.history import RESOURCE_NOT_FOUND
from toold.acp.wire import READ_LIMIT, LineTransport
from toold.engine.attach import EngineError, attach
from toold_protocol import errors as codes

log = logging.getLogger(__name__)

Message = dict[str, Any]
OPENING = ("session/new", "session/load", "session/resume")
"""The requests that name a workspace (their ``cwd``) and so an engine."""


class Upstream:
    """One engine's connection: the sessions of one workspace."""

    def __init__(self, workspace: Path, transport: LineTransport, log_path: Path) -> None:
        self.workspace = workspace
        self.transport = transport
        self.log_path = log_path
        self.ids = itertools.count(1)
        self.waiting: dict[int, tuple[Any, str, str | None] | asyncio.Future[Message]] = {}
        """Our requests the engine has not answered: the client's id, the method and the
        session it opens; or, for the front's own ``initialize``, a future."""
        self.reading: asyncio.Task[None] | None = None

    async def request(self, method: str, params: Any, answer: Any) -> None:
        """Send a request whose answer goes to the client under ``answer`` (a Future:
        to the front itself)."""
        number = next(self.ids)
        self.waiting[number] = answer
        await self.transport.send(
            {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        )


class Front:
    """The router between the ACP client and the engines of its sessions' workspaces."""

    def __init__(
        self, client: LineTransport, workspace: Path | None, *, allow_v2: bool = False
    ) -> None:
        self.client = client
        self.allow_v2 = allow_v2
        """``--protocol 2``: a client asking for ACP v2 gets it."""
        self.workspace = workspace
        """``--workspace``: every session on this folder's engine, whatever its cwd."""
        self.initialize: Message = {"protocolVersion": 1}
        """The client's initialize params, replayed to each engine attached."""
        self.upstreams: dict[Path, asyncio.Future[Upstream]] = {}
        self.routes: dict[str, Upstream] = {}
        """Each open session's engine connection."""
        self.lost: dict[str, Path] = {}
        """Sessions whose engine ended: a request naming one says to load it again."""
        self.asked: dict[int, tuple[Upstream, Any]] = {}
        """Requests of an engine to the client: our id → the engine and its id."""
        self.client_ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- the client's side -----------------------------------------------------------
    async def run(self) -> None:
        """Route the client's messages until it hangs up."""
        while (message := await self.client.receive()) is not None:
            try:
                await self._from_client(message)
            except Exception:  # one odd message never ends the connection
                log.exception("could not route a message of the client")

    async def _from_client(self, message: Message) -> None:
        method, number = message.get("method"), message.get("id")
        if not isinstance(method, str):
            await self._answer_of_client(message)
            return
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            await self._notification(method, params, message)
            return
        if method in OPENING:
            # Attaching may start an engine: meanwhile the client's other sessions go on.
            self._spawn(self._open(method, params, number))
            return
        try:
            await self._request(method, params, number)
        except RequestError as exc:
            await self._error(number, exc)

    async def _request(self, method: str, params: Message, number: Any) -> None:
        if method == "initialize":
            version = negotiated(params, self.allow_v2)
            self.initialize = {**params, "protocolVersion": version}
            result = initialize_answer(version)
            await self.client.send({"jsonrpc": "2.0", "id": number, "result": result})
            return
        if method == "authenticate":
            raise no_auth_methods(str(params.get("methodId")))
        if method == "session/list":
            await self._list(params, number)
            return
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise RequestError(codes.METHOD_NOT_FOUND, f"Method not found: {method}")
        upstream = self._route(session_id)
        closing = session_id if method == "session/close" else None  # unrouted once closed
        await upstream.request(method, params, (number, method, closing))

    async def _notification(self, method: str, params: Message, message: Message) -> None:
        session_id = params.get("sessionId")
        upstream = self.routes.get(session_id) if isinstance(session_id, str) else None
        if upstream is None:
            log.debug("dropping the notification %s: no session to route it to", method)
            return
        await upstream.transport.send(message)

    async def _answer_of_client(self, message: Message) -> None:
        """The client's answer to a request an engine made: back to that engine."""
        number = message.get("id")
        entry = self.asked.pop(number, None) if isinstance(number, int) else None
        if entry is None:
            log.debug("dropping an answer to no request of ours: %r", number)
            return
        upstream, theirs = entry
        await upstream.transport.send({**message, "id": theirs})

    def _route(self, session_id: str) -> Upstream:
        upstream = self.routes.get(session_id)
        if upstream is not None:
            return upstream
        lost = self.lost.get(session_id)
        if lost is not None:
            raise RequestError(
                RESOURCE_NOT_FOUND,
                f"sessionId {session_id!r}: the toold engine of {lost} ended it; "
                "session/load it to go on",
            )
        raise unknown_session(session_id)

    async def _open(self, method: str, params: Message, number: Any) -> None:
        """session/new or session/load, on the engine of the session's workspace."""
        session_id = params.get("sessionId") if method != "session/new" else None
        try:
            if isinstance(session_id, str) and session_id in self.routes:
                raise RequestError(
                    codes.INVALID_PARAMS,
                    f"session {session_id} is already open on this connection",
                )
            root = self._root(params.get("cwd"))
            upstream = await self._upstream(root)
            if isinstance(session_id, str):
                # Routed before the answer: a load replays the session as updates first.
                self.routes[session_id] = upstream
                self.lost.pop(session_id, None)
            await upstream.request(method, params, (number, method, session_id))
        except RequestError as exc:
            await self._error(number, exc)

    def _root(self, cwd: Any) -> Path:
        if not isinstance(cwd, str):
            raise RequestError(codes.INVALID_PARAMS, "cwd: an absolute path is required")
        root = workspace_folder(cwd)
        return self.workspace if self.workspace is not None else root

    async def _list(self, params: Message, number: Any) -> None:
        """session/list: the sessions kept in the folder named (or in every attached one)."""
        cwd = params.get("cwd")
        if self.workspace is not None:
            roots = [self.workspace]
        elif isinstance(cwd, str):
            roots = [workspace_folder(cwd)]
        else:
            roots = [root for root, opened in self.upstreams.items() if attached(opened)]
        found = []
        for root in roots:
            found += await asyncio.to_thread(history.listed, root)
        found.sort(key=lambda s: s.updated_at or "", reverse=True)
        sessions = [s.model_dump(mode="json", by_alias=True, exclude_none=True) for s in found]
        await self.client.send({"jsonrpc": "2.0", "id": number, "result": {"sessions": sessions}})

    async def _error(self, number: Any, exc: RequestError) -> None:
        await self.client.send({"jsonrpc": "2.0", "id": number, "error": exc.to_error_obj()})

    # -- the engines' side -----------------------------------------------------------
    async def _upstream(self, root: Path) -> Upstream:
        """The connection to ``root``'s engine, attached (and initialized) on first use."""
        opened = self.upstreams.get(root)
        ready = attached(opened)
        if ready is not None:
            return ready
        if opened is None or opened.done():  # none yet, or the last attempt failed
            opened = asyncio.ensure_future(self._attach(root))
            self.upstreams[root] = opened
        try:
            return await asyncio.shield(opened)
        except EngineError as exc:
            raise RequestError(codes.INTERNAL_ERROR, str(exc)) from None

    async def _attach(self, root: Path) -> Upstream:
        hello = {"client": "toold acp", "clientProcessId": os.getpid()}
        engine = await asyncio.to_thread(attach, root, "acp", hello)
        # The hello's reader took its one line: the engine says nothing more until asked.
        engine.reader.close()
        engine.writer.close()
        reader, writer = await asyncio.open_unix_connection(sock=engine.sock, limit=READ_LIMIT)
        upstream = Upstream(root, LineTransport(reader, writer), engine.paths.log)
        upstream.reading = self._spawn(self._read(upstream))
        ready: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        await upstream.request("initialize", self.initialize, ready)
        answer = await ready
        if "error" in answer:
            writer.close()
            raise EngineError(f"the toold engine for {root} refused ACP: {answer['error']}")
        log.info("attached to the engine of %s (pid %s)", root, engine.reply.get("pid"))
        return upstream

    async def _read(self, upstream: Upstream) -> None:
        """Route the engine's messages to the client until the engine hangs up."""
        try:
            while (message := await upstream.transport.receive()) is not None:
                try:
                    await self._from_engine(upstream, message)
                except Exception:
                    log.exception("could not route a message of the engine")
        finally:
            await self._ended(upstream)

    async def _from_engine(self, upstream: Upstream, message: Message) -> None:
        number = message.get("id")
        if "method" not in message:  # an answer to one of our requests
            waiting = upstream.waiting.pop(number, None) if isinstance(number, int) else None
            if isinstance(waiting, asyncio.Future):
                if not waiting.done():
                    waiting.set_result(message)
            elif waiting is not None:
                theirs, method, loading = waiting
                if method == "session/new" and isinstance(message.get("result"), dict):
                    session_id = message["result"].get("sessionId")
                    if isinstance(session_id, str):
                        self.routes[session_id] = upstream
                elif method in OPENING and "error" in message and loading is not None:
                    self.routes.pop(loading, None)  # a load or resume that failed
                elif method == "session/close" and "result" in message and loading is not None:
                    self.routes.pop(loading, None)
                await self.client.send({**message, "id": theirs})
            return
        if "id" in message:  # the engine asks the client: a fresh id on the client's side
            ours = next(self.client_ids)
            self.asked[ours] = (upstream, number)
            message = {**message, "id": ours}
        await self.client.send(message)

    async def _ended(self, upstream: Upstream) -> None:
        """The engine hung up: fail what it owed, forget its sessions and requests."""
        if attached(self.upstreams.get(upstream.workspace)) is upstream:
            del self.upstreams[upstream.workspace]
        why = (
            f"the toold engine of {upstream.workspace} ended the connection (stopped, or it "
            f"crashed: see its log {upstream.log_path})"
        )
        for waiting in upstream.waiting.values():
            if isinstance(waiting, asyncio.Future):
                if not waiting.done():
                    waiting.set_result({"error": why})
                continue
            error = RequestError(codes.INTERNAL_ERROR, why)
            with contextlib.suppress(Exception):
                await self._error(waiting[0], error)
        upstream.waiting.clear()
        for session_id, routed in list(self.routes.items()):
            if routed is upstream:
                del self.routes[session_id]
                self.lost[session_id] = upstream.workspace
        for ours, (asker, _) in list(self.asked.items()):
            if asker is upstream:
                del self.asked[ours]
        await upstream.transport.close()

    # -- the end ---------------------------------------------------------------------
    def _spawn(self, work: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self) -> None:
        """Hang up on every engine (each ends the sessions it served for this client)."""
        for opened in list(self.upstreams.values()):
            upstream = attached(opened)
            if upstream is not None:
                await upstream.transport.close()
            else:
                opened.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)


def attached(opened: asyncio.Future[Upstream] | None) -> Upstream | None:
    """The engine connection ``opened`` made, None while it is being made or if it failed."""
    if opened is None or not opened.done() or opened.cancelled() or opened.exception():
        return None
    return opened.result()
