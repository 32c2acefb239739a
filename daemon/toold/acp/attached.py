"""The engine's side of ``toold acp``: one ACP connection on the engine's shared workspace.

``toold acp`` relays each session's lines to the engine of its workspace
(toold.acp.front); the engine serves that connection here, with toold's ACP agent
(TooldAgent) on the WorkspaceState it already holds, not a second one: ACP sessions
share the engine's jobs, teammates, watcher, held configuration reload and the guard's
one "Always allow / Always deny" memory with every LSP session on the folder.

To the engine's bookkeeping (toold.engine.sessions) the connection is one session, a
``FrontEnd``: the workspace's notifications reach each of its ACP sessions (the plan,
the slash commands), and a permission prompt reaches the ACP session whose turn made
the call (``asking``), through ``session/request_permission``. A connection from inside
one of the engine's tool calls (an agent's command) is the agent's: the engine asks it
nothing (such calls are denied), and it may neither change the mode nor start MCP
servers (TooldAgent's ``from_tool``). The connection speaks the ACP version ``toold acp``
negotiated with its client (toold.acp.v2_server).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from toold.acp.agent import TooldAgent
from toold.acp.session import asking
from toold.acp.v2_server import serve_connection
from toold.acp.wire import LineTransport
from toold.engine.attached import AttachedConnection

if TYPE_CHECKING:
    from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)


class AcpConnection(AttachedConnection):
    """One ``toold acp``'s connection to the engine, as a session of the engine."""

    kind = "ACP"

    def __init__(self, state: WorkspaceState, from_tool: bool) -> None:
        super().__init__(from_tool)
        self.agent = TooldAgent(shared=state, from_tool=from_tool)

    @property
    def client_name(self) -> str:
        """The ACP client's ``clientInfo.name`` (its editor), once it initialized."""
        return self.agent.client_name

    # -- SessionEditor -------------------------------------------------------------
    def push(self, method: str, params: dict[str, Any]) -> None:
        """A shared-state notification, to each of the connection's sessions."""
        for session in list(self.agent.sessions.values()):
            session.push(method, params)

    async def ask_user(self, tool: str, args: Any, reason: str) -> str | None:
        """The guard's question, to the session whose turn made the call (None: no turn
        of this connection's is running it, so nobody is asked: denied)."""
        session = asking.get()
        if session is None or self.agent.sessions.get(session.id) is not session:
            log.info("permission prompt for %s has no ACP session to ask: denied", tool)
            return None
        return await session.ask(tool, args, reason)

    # -- serving -------------------------------------------------------------------
    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
        """Run the agent on the connection's lines until it closes or the engine stops."""
        transport = LineTransport(reader, writer)
        try:
            # The version is the one `toold acp` negotiated with the client (toold.acp.front
            # forwards an initialize of version 2 only under its --protocol 2).
            await self.serve_until_stopped(serve_connection(self.agent, transport, allow_v2=True))
        finally:
            await asyncio.shield(self.agent.aclose())
        return self.exit_code
