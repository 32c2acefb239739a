"""TooldAgent: the ACP methods (initialize, session/new, prompt, cancel, set_mode) and serving.

ACP is newline-delimited JSON-RPC on stdin/stdout. Before the connection starts, the
process's own fds 0 and 1 are moved aside: the protocol keeps private copies, fd 0
becomes /dev/null and fd 1 a copy of stderr, so nothing a tool, a worker or a library
prints can corrupt the protocol stream.

By default ``toold acp`` serves each session on the engine of its workspace
(toold.acp.front relays, the engine runs this agent on its shared workspace:
toold.acp.attached). With ``--no-daemon`` (TOOLD_NO_DAEMON=1) this process runs the
agent itself and each session opens its workspace (toold.opening). Either way a
connection speaks ACP v1 on the SDK, or v2 (``--protocol 2``, toold.acp.v2_server).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.connection import StreamDirection, StreamEvent
from acp.interfaces import Client
from acp.schema import (
    ClientCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    ResumeSessionResponse,
    SetSessionModeResponse,
)

from toold.acp import history
from toold.acp.answers import (
    initialize_response,
    no_auth_methods,
    unknown_session,
    workspace_folder,
)
from toold.acp.session import AcpSession, modes
from toold.acp.v2_server import serve_connection
from toold.acp.wire import READ_LIMIT, LineTransport
from toold.opening import open_workspace
from toold_protocol import errors as codes

if TYPE_CHECKING:
    from toold.acp.mcp_servers import McpServerLink
    from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 10.0


class TooldAgent:
    """An ACP agent whose sessions each bind a toold workspace, or share one (the engine's)."""

    def __init__(
        self,
        workspace: Path | None = None,
        *,
        shared: WorkspaceState | None = None,
        from_tool: bool = False,
    ) -> None:
        self.workspace = shared.root if shared is not None else workspace
        """``--workspace``: bind this folder for every session instead of its cwd (an
        engine's agent: the engine's workspace)."""
        self.shared = shared
        """The engine's bound workspace, which every session uses (None: each opens its own)."""
        self.from_tool = from_tool
        """The client runs inside a tool call (an agent's command): nobody is asked, and it
        may neither change the permission mode nor start MCP servers."""
        self.conn: Client | None = None
        self.client_capabilities = ClientCapabilities()
        self.client_name = ""
        """initialize's ``clientInfo.name`` (what ``toold daemon list`` shows)."""
        self.child_sessions = False
        """The client shows subagents as child sessions: its initialize's
        ``clientCapabilities.subagents`` (ACP v1 since November 2026; the SDK 0.12 drops
        the field, so it is read from the message itself: ``observe``)."""
        self.sessions: dict[str, AcpSession] = {}
        self.links: dict[str, list[McpServerLink]] = {}
        self._warming: asyncio.Future[Any] | None = None

    def on_connect(self, conn: Client) -> None:
        """The SDK hands over the connection to the client."""
        self.conn = conn

    def observe(self, event: StreamEvent) -> None:
        """The SDK's stream observer: what the client's initialize says that the SDK's
        models leave out (``clientCapabilities.subagents``)."""
        message = event.message
        if event.direction != StreamDirection.INCOMING or message.get("method") != "initialize":
            return
        params = message.get("params")
        capabilities = params.get("clientCapabilities") if isinstance(params, dict) else None
        subagents = capabilities.get("subagents") if isinstance(capabilities, dict) else None
        self.child_sessions = isinstance(subagents, dict)  # {}: supported; absent, null: not

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Version 1, what toold's sessions support, and no auth methods (keys come from
        the environment or toold.toml)."""
        if client_capabilities is not None:
            self.client_capabilities = client_capabilities
        if client_info is not None:
            self.client_name = client_info.name
        return initialize_response()

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        """No auth methods are offered, so none can be chosen."""
        raise no_auth_methods(method_id)

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        """Bind the workspace at ``cwd``, start the session's MCP servers, announce skills."""
        session = await self.open_session(uuid.uuid4().hex, cwd, mcp_servers)
        session.announce_workspace()
        mode = session.require_state().guard.mode
        return NewSessionResponse(session_id=session.id, modes=modes(mode))

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        """Take up a session kept in .toold/sessions/: its conversation is replayed as
        updates before the answer, and the next prompt goes on from it."""
        session, messages = await self._take_up(session_id, cwd, mcp_servers)
        session.resume(messages)
        await session.outbox.flush()
        session.announce_workspace()
        return LoadSessionResponse(modes=modes(session.require_state().guard.mode))

    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        """Take up a kept session without replaying it (the client shows it already): the
        next prompt goes on from its conversation."""
        session, messages = await self._take_up(session_id, cwd, mcp_servers)
        session.messages = messages
        session.announce_workspace()
        return ResumeSessionResponse(modes=modes(session.require_state().guard.mode))

    async def _take_up(
        self, session_id: str, cwd: str, mcp_servers: list[Any] | None
    ) -> tuple[AcpSession, list[dict[str, Any]]]:
        """A kept session opened again (session/load, session/resume) and its conversation;
        RequestError when it is open on this connection already or cannot be read."""
        if session_id in self.sessions:
            raise RequestError(
                codes.INVALID_PARAMS, f"session {session_id} is already open on this connection"
            )
        root = self.workspace or workspace_folder(cwd)
        messages = await asyncio.to_thread(history.load, root, session_id)
        return await self.open_session(session_id, cwd, mcp_servers), messages

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """End a session: its turn cancelled, its MCP servers stopped (it stays kept, for
        session/load or session/resume)."""
        session = self.require_session(session_id)
        del self.sessions[session_id]
        for link in self.links.pop(session_id, []):
            await link.close()
        await session.aclose()
        return CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """The sessions kept in the workspace at ``cwd`` (or ``--workspace``), latest first."""
        if self.workspace is not None:
            root: Path | None = self.workspace
        else:
            root = workspace_folder(cwd) if cwd is not None else None
        sessions = await asyncio.to_thread(history.listed, root) if root is not None else []
        return ListSessionsResponse(sessions=sessions)

    async def open_session(
        self, session_id: str, cwd: str, mcp_servers: list[Any] | None
    ) -> AcpSession:
        """A session on the workspace at ``cwd`` (or ``--workspace``) with its MCP servers."""
        root = workspace_folder(cwd)
        if self.workspace is not None:
            root = self.workspace
        if mcp_servers and self.from_tool:
            raise RequestError(
                codes.INVALID_PARAMS,
                "mcpServers from inside a tool call (an agent's command) are refused: the "
                "MCP servers a session starts are the user's to give, from the editor",
            )
        session = AcpSession(session_id, self.require_conn(), root)
        links: list[McpServerLink] = []
        tools: list[Any] = []
        if mcp_servers:
            # The mcp SDK takes a second to import: only sessions with servers pay for it.
            from toold.acp.mcp_servers import start_servers

            try:
                links, tools = await start_servers(list(mcp_servers), root)
            except (RuntimeError, ValueError) as exc:
                await session.outbox.close()
                raise RequestError(codes.INVALID_PARAMS, str(exc)) from None
        if self.shared is not None:
            state = self.shared  # the engine's: its prompts reach us through the engine
        else:
            # Released by session.aclose (toold.opening): its watcher, jobs and sandboxes.
            # A client inside a tool call is the agent's: nobody is asked (refused).
            ask = None if self.from_tool else session.ask
            opening = open_workspace(root, push=session.push, report=log.error, ask=ask)
            state = await session.opened.enter_async_context(opening)
        fs = self.client_capabilities.fs
        editor_fs = bool(fs and fs.read_text_file and fs.write_text_file)
        use_fs = editor_fs and state.config.acp.use_client_fs
        session.attach(state, tools, use_fs, child_sessions=self.child_sessions)
        with contextlib.suppress(TimeoutError):
            # Skills and toold.toml are announced once changes to them are seen.
            await asyncio.wait_for(state.watching.wait(), WATCH_TIMEOUT_S)
        self.sessions[session.id] = session
        for link in links:  # their calls' time limits: the workspace's, reloads included
            link.limits = lambda: session.require_state().config.limits
        self.links[session.id] = links
        if state.agents is not None:
            # The model SDK takes seconds to import: ready it before the first prompt.
            self._warming = asyncio.ensure_future(state.agents.provider.prepare())
        return session

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        """Run one turn; its stop reason (a cancelled turn answers ``cancelled``)."""
        stop = await self.require_session(session_id).prompt(prompt)
        return PromptResponse(stop_reason=stop)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """session/cancel (a notification): an unknown session is ignored."""
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def set_session_mode(
        self, mode_id: str, session_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        """Switch the permission mode (an engine's: the workspace's, as permissions/setMode)."""
        session = self.require_session(session_id)
        if self.from_tool:
            raise RequestError(
                codes.INVALID_REQUEST,
                "session/set_mode from inside a tool call (an agent's command) is refused: "
                "change the mode from your editor",
            )
        session.set_mode(mode_id)
        return SetSessionModeResponse()

    def require_session(self, session_id: str) -> AcpSession:
        """The session of that id; RequestError saying how to get one."""
        session = self.sessions.get(session_id)
        if session is None:
            raise unknown_session(session_id)
        return session

    def require_conn(self) -> Client:
        """The connection (set by the SDK before any request arrives)."""
        assert self.conn is not None, "on_connect runs before the first request"
        return self.conn

    async def aclose(self) -> None:
        """End every session: turns cancelled, MCP servers and workspaces closed."""
        for session_id, session in list(self.sessions.items()):
            for link in self.links.pop(session_id, []):
                await link.close()
            await session.aclose()
        self.sessions.clear()


def protocol_streams() -> tuple[int, int]:
    """Private copies of stdin/stdout for the protocol; fd 0 → /dev/null, fd 1 → stderr."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return read_fd, write_fd


async def open_streams(
    read_fd: int, write_fd: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """asyncio streams over the protocol's fds (pipes, as editors start agents)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve(
    workspace: Path | None, *, private: bool = False, from_tool: bool = False, protocol: int = 1
) -> None:
    """Serve ACP on the process's stdin/stdout until the client hangs up: through the
    engines, or (``private``) with the agent in this process; ``protocol`` 2 lets a client
    negotiate ACP v2."""
    main = asyncio.current_task()
    if main is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    reader, writer = await open_streams(*protocol_streams())
    # toold's transport frames and checks the client's lines (toold.acp.wire).
    client = LineTransport(reader, writer)
    if not private:
        from toold.acp.front import Front

        front = Front(client, workspace, allow_v2=protocol >= 2)
        try:
            await front.run()
        finally:
            await asyncio.shield(front.aclose())
        return
    agent = TooldAgent(workspace, from_tool=from_tool)
    try:
        # v1: the SDK routes the methods an agent defines; v2: toold.acp.v2_server.
        await serve_connection(agent, client, allow_v2=protocol >= 2)
    finally:
        await asyncio.shield(agent.aclose())


def serve_acp(
    workspace: Path | None, *, private: bool = False, from_tool: bool = False, protocol: int = 1
) -> int:
    """Entry point of ``toold acp``: 0 when the client closed the connection, 2 for a
    ``--workspace`` that is not a folder. ``private``: no engine, the agent runs here;
    ``from_tool``: this process runs inside a tool call (nobody is asked); ``protocol``:
    the highest ACP version offered (2: the v2 preview, to a client that asks for it)."""
    if workspace is not None and not workspace.is_dir():
        print(f"toold: --workspace {workspace} is not a folder", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(workspace, private=private, from_tool=from_tool, protocol=protocol))
    except (KeyboardInterrupt, asyncio.CancelledError):
        log.info("stopped")
    return 0
