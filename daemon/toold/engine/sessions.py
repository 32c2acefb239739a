"""The engine's sessions: who is attached, and where the shared workspace's messages go.

The workspace is bound once, for the engine; its callbacks land here. Shared state
(``todos/changed``, ``tasks/changed``, ``skills/changed``, ``jobs/finished``,
``team/message``) and warnings go to every session; a permission prompt goes to the
session whose call needs it (``current``, a context variable each session's tasks
inherit), and is denied as before when that session cannot ask or runs inside one of
the engine's tool calls (an agent's client would approve its own calls); ``$/progress``
stays with the session that owns the token, because each session is a server of its own.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from toold.permissions.guard import CannotAsk
from toold_protocol.names import EXECUTION_EVENT

log = logging.getLogger(__name__)

ACP = "acp"
"""The kind of a ``toold acp`` connection: ACP's newline-delimited JSON on the socket."""
MCP = "mcp"
"""The kind of a ``toold mcp`` session: the MCP client's stdio, handed over as an editor's
is, served by the MCP SDK's server (toold.bridge.attached)."""


class SessionEditor(Protocol):
    """What the shared workspace tells, and asks, one session's client."""

    def push(self, method: str, params: dict[str, Any]) -> None:
        """A notification of the contract (toold_protocol.names)."""

    def show_error(self, message: str) -> None:
        """Show the user an error."""

    def show_warning(self, message: str) -> None:
        """Show the user a warning."""

    def can_ask(self) -> bool:
        """Whether the client can put a question to its user."""

    async def ask_user(self, tool: str, args: Any, reason: str) -> str | None:
        """The user's answer to a permission prompt (allow, always, deny, never), or None."""

    async def confirm(self, message: str, actions: list[str], timeout: float) -> str | None:
        """The action the user chose, or None."""


class FrontEnd(Protocol):
    """A session's server as the engine sees it: an LspSession, an ACP or an MCP connection."""

    @property
    def from_tool(self) -> bool:
        """The client runs inside one of the engine's tool calls (an agent's command)."""

    @property
    def client_name(self) -> str:
        """What the client called itself (``clientInfo.name``)."""

    @property
    def client_process_id(self) -> int | None:
        """The process the session follows, if any."""

    @property
    def execution_events(self) -> bool:
        """Whether the client asked for the runner's ``execution/event``s."""

    @property
    def editor(self) -> SessionEditor:
        """Where the workspace's messages to this session go."""

    @property
    def initialized(self) -> bool:
        """Whether notifications may go to the client yet."""

    def request_stop(self, exit_code: int = 0) -> None:
        """End the session (the engine stops)."""


@dataclass
class Session:
    """One attached client: an editor through ``toold serve``, the command line, an ACP
    client through ``toold acp`` or an MCP client through ``toold mcp``."""

    id: int
    kind: str
    """``stdio`` (``toold serve`` handed its stdout over), ``session`` (framed on the
    socket), ``acp`` (a ``toold acp``'s connection, ACP lines on the socket) or ``mcp``
    (``toold mcp`` handed its stdio over)."""
    server: FrontEnd
    peer_pid: int
    client: str = ""
    """What the client called itself in its hello (``toold call``, ``toold serve``)."""
    started: float = field(default_factory=time.time)

    def describe(self) -> dict[str, Any]:
        """The session as ``toold daemon status --json`` shows it."""
        return {
            "id": self.id,
            "kind": self.kind,
            "peerPid": self.peer_pid,
            "client": self.server.client_name or self.client,
            "startedAt": self.started,
        }


current: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "toold_session", default=None
)
"""The session whose request is running (set on each session's task; its requests inherit it)."""


class Sessions:
    """The live sessions and the shared workspace's callbacks into them."""

    def __init__(self) -> None:
        self._live: dict[int, Session] = {}
        self._ids = itertools.count(1)
        self.on_end: Callable[[Session], None] | None = None
        """Called once as each session ends (the engine ends what it started)."""

    def open(self, kind: str, server: FrontEnd, peer_pid: int, client: str) -> Session:
        """Register a new session (the caller sets ``current`` in its task)."""
        session = Session(next(self._ids), kind, server, peer_pid, client)
        self._live[session.id] = session
        return session

    def close(self, session: Session) -> None:
        """Forget a session that ended (``on_end`` hears of it, once)."""
        if self._live.pop(session.id, None) is not None and self.on_end is not None:
            self.on_end(session)

    def current_id(self) -> int | None:
        """The id of the session whose request runs in this context, None outside any."""
        session = current.get()
        return None if session is None else session.id

    def __len__(self) -> int:
        return len(self._live)

    def all(self) -> list[Session]:
        """A snapshot of the live sessions (safe to iterate from any thread)."""
        return list(self._live.values())

    # -- the workspace's callbacks -------------------------------------------------------
    def push(self, method: str, params: dict[str, Any]) -> None:
        """A shared-state notification: to every session that has initialized
        (``execution/event`` only to those whose initialize asked for it)."""
        events = method == EXECUTION_EVENT
        for session in self.all():
            if events and not session.server.execution_events:
                continue
            if session.server.initialized:
                try:
                    session.server.editor.push(method, params)
                except Exception:
                    log.exception("could not send %s to session %d", method, session.id)

    def show_error(self, message: str) -> None:
        """A problem with the shared configuration: every session is told."""
        log.error("%s", message)
        for session in self.all():
            if session.server.initialized:
                session.server.editor.show_error(message)

    def warn(self, message: str) -> None:
        """A warning about the shared workspace: every session is told."""
        log.warning("%s", message)
        for session in self.all():
            if session.server.initialized:
                session.server.editor.show_warning(message)

    async def ask(self, tool: str, arguments: Any, reason: str) -> str | None:
        """A permission prompt, to the session whose call asks: its answer, None when
        none came (the session ended); CannotAsk when no one can be asked (the call is
        denied as non-interactive, by rule with its remedy, as in a private daemon)."""
        session = current.get()
        if session is None or not _asks_the_user(session):
            raise CannotAsk(tool)
        if session.id not in self._live:
            log.info("permission prompt for %s: its session ended: denied", tool)
            return None
        return await session.server.editor.ask_user(tool, arguments, reason)

    async def confirm(self, message: str, actions: list[str], timeout: float) -> str | None:
        """A question about the shared configuration, to the newest session that can ask
        one (ACP and MCP have no such question: their clients are asked about tool calls
        only); CannotAsk when no session can ask one."""
        for session in reversed(self.all()):
            if session.kind in (ACP, MCP):
                continue
            if session.server.initialized and _asks_the_user(session):
                return await session.server.editor.confirm(message, actions, timeout)
        raise CannotAsk("the configuration's change")


def _asks_the_user(session: Session) -> bool:
    """Whether a question to ``session`` reaches a person: its client can show one and
    runs outside the engine's tool calls (an agent's client would answer for itself)."""
    return session.server.editor.can_ask() and not session.server.from_tool
