"""ACP v2 (preview) methods on toold's agent, and the negotiation that picks v1 or v2.

A connection speaks one version, chosen by its ``initialize`` (``serve_connection``):
``protocolVersion`` 2 or more gets v2 when the opt-in is on (``toold acp --protocol 2``),
anything else the v1 agent on the Python SDK, unchanged. The SDK has no v2, so a v2
connection uses only its JSON-RPC core (``acp.connection.Connection``) with the method
table here, on the same TooldAgent and sessions as v1: what differs is how requests are
read and answered, and how updates are rendered (toold.acp.v2_client).

v2's baseline: ``session/new``, ``session/list``, ``session/resume`` (``replayFrom:
{type: start}`` replays the conversation first, as v1's ``session/load``),
``session/close``, ``session/prompt`` (answered ``{}`` once accepted; the turn ends with
an idle ``state_update`` carrying the stop reason), ``session/cancel``, and
``session/set_config_option`` for the permission mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from acp import RequestError, run_agent
from acp.connection import Connection
from acp.interfaces import Agent, Client
from acp.schema import HttpMcpServer, McpServerStdio
from acp.schema import PromptRequest as SdkPrompt
from pydantic import BaseModel, TypeAdapter

from toold import __version__
from toold.acp import v2
from toold.acp.answers import initialize_v2
from toold.acp.v2_client import MODE_CONFIG, V2Client, mode_options
from toold.acp.wire import Replayed
from toold_protocol import errors as codes

if TYPE_CHECKING:
    from toold.acp.agent import TooldAgent
    from toold.acp.session import AcpSession
    from toold.acp.wire import LineTransport

log = logging.getLogger(__name__)

UNSTABLE = True
"""The SDK (0.12) routes session/resume and session/close, stable in ACP v1 since, only
with its ``use_unstable_protocol``; toold implements no other method it gates so."""
_PROMPT_BLOCKS: Any = SdkPrompt.model_fields["prompt"].annotation  # a runtime type
PROMPT: TypeAdapter[list[Any]] = TypeAdapter(_PROMPT_BLOCKS)
"""A v2 prompt's content blocks read as the SDK's (text, links and resources keep their
shapes from v1 to v2)."""


def wants_v2(message: dict[str, Any] | None) -> bool:
    """Whether a connection's first message is an ``initialize`` asking for v2 or later."""
    if message is None or message.get("method") != "initialize":
        return False
    params = message.get("params")
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    return isinstance(version, int) and not isinstance(version, bool) and version >= 2


async def serve_connection(agent: TooldAgent, transport: LineTransport, *, allow_v2: bool) -> None:
    """Serve one client connection in the version its ``initialize`` negotiates: v2 only
    when ``allow_v2`` (the opt-in) and asked for, v1 otherwise (v1 answers version 1)."""
    first = await transport.receive()
    if first is None:
        return
    replayed = Replayed(transport, first)
    if not (allow_v2 and wants_v2(first)):
        await run_agent(
            cast(Agent, agent), replayed, use_unstable_protocol=UNSTABLE, observers=[agent.observe]
        )
        return
    server = V2Server(agent)
    connection = Connection(server.handle, replayed, listening=False)
    server.client = V2Client(connection)
    agent.on_connect(cast(Client, server.client))  # sessions take it as their client
    try:
        await connection.main_loop()
    finally:
        await server.aclose()
        await connection.close()


def mcp_servers(servers: list[v2.McpServer]) -> list[Any]:
    """v2 MCP server configurations as the SDK's (toold.acp.mcp_servers starts those);
    a transport toold does not connect to is refused, naming it."""
    found: list[Any] = []
    for server in servers:
        if server.type == "stdio" and server.command:
            env = [{"name": str(e.get("name")), "value": str(e.get("value"))} for e in server.env]
            found.append(
                McpServerStdio.model_validate(
                    {
                        "name": server.name,
                        "command": server.command,
                        "args": server.args,
                        "env": env,
                    }
                )
            )
        elif server.type == "http" and server.url:
            found.append(
                HttpMcpServer.model_validate(
                    {
                        "type": "http",
                        "name": server.name,
                        "url": server.url,
                        "headers": server.headers,
                    }
                )
            )
        else:
            raise RequestError(
                codes.INVALID_PARAMS,
                f"mcpServers: {server.name!r} of type {server.type!r} is not supported: "
                "use stdio or http",
            )
    return found


class V2Server:
    """The v2 methods of one connection, on a TooldAgent."""

    def __init__(self, agent: TooldAgent) -> None:
        self.agent = agent
        self.client: V2Client | None = None
        self.turns: set[asyncio.Task[None]] = set()
        self.methods: dict[str, Callable[[dict[str, Any]], Awaitable[BaseModel | None]]] = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/resume": self.resume_session,
            "session/list": self.list_sessions,
            "session/close": self.close_session,
            "session/prompt": self.prompt,
            "session/cancel": self.cancel,
            "session/set_config_option": self.set_config_option,
        }

    async def handle(self, method: str, params: Any, is_notification: bool) -> Any:
        """Route one request or notification (the SDK's Connection turns RequestError and
        pydantic's ValidationError into JSON-RPC errors)."""
        handler = self.methods.get(method)
        if handler is None:
            if is_notification:
                return None
            raise RequestError(codes.METHOD_NOT_FOUND, f"Method not found: {method} (ACP v2)")
        result = await handler(params if isinstance(params, dict) else {})
        return v2.dump(result) if result is not None else None

    def require_client(self) -> V2Client:
        """The connection's client (set before the first message is read)."""
        assert self.client is not None, "serve_connection sets the client first"
        return self.client

    async def initialize(self, params: dict[str, Any]) -> BaseModel:
        """Version 2, v2's capability shapes, no auth methods."""
        request = v2.InitializeRequest.model_validate(params)
        if request.info is not None:
            self.agent.client_name = request.info.name
        return initialize_v2(__version__)

    async def new_session(self, params: dict[str, Any]) -> BaseModel:
        """A session on the workspace at ``cwd``; the mode as its config option."""
        request = v2.NewSessionRequest.model_validate(params)
        created = await self.agent.new_session(
            cwd=request.cwd, mcp_servers=mcp_servers(request.mcp_servers)
        )
        session = self.agent.require_session(created.session_id)
        return v2.NewSessionResponse(
            session_id=session.id, config_options=mode_options(self.mode(session))
        )

    async def resume_session(self, params: dict[str, Any]) -> BaseModel:
        """A kept session taken up; ``replayFrom: {type: start}`` replays it first. The
        session's state (idle) precedes the answer."""
        request = v2.ResumeSessionRequest.model_validate(params)
        replay = request.replay_from
        if replay is not None and replay.type != "start":
            raise RequestError(
                codes.INVALID_PARAMS,
                f"replayFrom type {replay.type!r} is not supported: use start, or omit it",
            )
        servers = mcp_servers(request.mcp_servers)
        if replay is None:
            await self.agent.resume_session(request.cwd, request.session_id, servers)
        else:
            await self.agent.load_session(request.cwd, request.session_id, servers)
        session = self.agent.require_session(request.session_id)
        await session.outbox.flush()
        await self.require_client().state(session.id, "idle")
        return v2.ResumeSessionResponse(config_options=mode_options(self.mode(session)))

    async def list_sessions(self, params: dict[str, Any]) -> BaseModel:
        """The sessions kept in the workspace at ``cwd`` (or ``--workspace``)."""
        request = v2.ListSessionsRequest.model_validate(params)
        listed = await self.agent.list_sessions(cwd=request.cwd)
        return v2.ListSessionsResponse.model_validate(
            {"sessions": [s.model_dump(by_alias=True, exclude_none=True) for s in listed.sessions]}
        )

    async def close_session(self, params: dict[str, Any]) -> BaseModel:
        """End a session (it stays kept for session/resume)."""
        request = v2.SessionRequest.model_validate(params)
        await self.agent.close_session(request.session_id)
        return v2.Empty()

    async def prompt(self, params: dict[str, Any]) -> BaseModel:
        """Accept a prompt: ``user_message`` and ``running`` are sent, the answer is
        ``{}``, and the turn goes on; it ends with an idle ``state_update``."""
        request = v2.PromptRequest.model_validate(params)
        blocks = PROMPT.validate_python(request.prompt)
        session = self.agent.require_session(request.session_id)
        client = self.require_client()
        await session.outbox.flush()  # what was queued before precedes the prompt
        # Checked and started at once (no second prompt slips in); the turn's first
        # update waits for the model, long after these two.
        begun = session.begin(blocks)
        message = v2.WholeMessage(
            session_update="user_message",
            message_id=client.new_message(session.id, "user_message"),
            content=request.prompt,
        )
        await client.send(session.id, message)
        await client.state(session.id, "running")
        turn = asyncio.ensure_future(self._turn(session, begun))
        self.turns.add(turn)
        turn.add_done_callback(self.turns.discard)
        return v2.Empty()

    async def _turn(self, session: AcpSession, begun: asyncio.Task[str]) -> None:
        """Wait for the turn; its end as an idle ``state_update`` with the stop reason. A
        model that could not answer says why in an ``agent_message`` first."""
        client = self.require_client()
        try:
            stop = await session.complete(begun)
        except RequestError as exc:
            message_id = client.new_message(session.id, "agent_message")
            failure = v2.WholeMessage(
                session_update="agent_message",
                message_id=message_id,
                content=[{"type": "text", "text": f"toold: {exc}"}],
            )
            await client.send(session.id, failure)
            stop = "end_turn"
        with contextlib.suppress(ConnectionError):  # the client may be gone by now
            await client.state(session.id, "idle", stop)

    async def cancel(self, params: dict[str, Any]) -> None:
        """session/cancel (a notification): the turn ends with stop reason cancelled."""
        request = v2.SessionRequest.model_validate(params)
        await self.agent.cancel(request.session_id)

    async def set_config_option(self, params: dict[str, Any]) -> BaseModel:
        """The ``mode`` option: the session's permission mode."""
        request = v2.SetConfigOptionRequest.model_validate(params)
        if request.config_id != MODE_CONFIG or not isinstance(request.value, str):
            raise RequestError(
                codes.INVALID_PARAMS,
                f"configId {request.config_id!r}: toold's one option is {MODE_CONFIG!r}, "
                "whose value is a mode id",
            )
        await self.agent.set_session_mode(request.value, request.session_id)
        session = self.agent.require_session(request.session_id)
        return v2.SetConfigOptionResponse(config_options=mode_options(self.mode(session)))

    @staticmethod
    def mode(session: AcpSession) -> str:
        """The session's permission mode: its own, or the workspace's."""
        return session.modes.mode or session.require_state().guard.mode

    async def aclose(self) -> None:
        """The connection ended: turns still waiting to report are dropped."""
        for turn in list(self.turns):
            turn.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self.turns, return_exceptions=True)
