"""AcpSession: one ACP session — a bound workspace, its conversation and its running turn.

The session's guard asks through ``session/request_permission``; a request not answered
within ``permissions.ask_timeout``, an option toold did not offer, or a client that hung
up denies the call. "Always allow" and "Always deny" are remembered by the guard, as for
every front end (the exact command line for shells, else the tool). A turn runs as its
own task so ``session/cancel`` can cancel it (the runner kills the process group of every
tool it runs) while the prompt still answers ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from pathlib import Path
from typing import Any

from acp import RequestError, update_plan
from acp.helpers import update_available_commands, update_current_mode
from acp.interfaces import Client
from acp.schema import SessionMode, SessionModeState, StopReason, UsageUpdate

from toold.acp import history
from toold.acp.calls import TurnEvents
from toold.acp.client_fs import EditorFiles, editor_tools
from toold.acp.outbox import Outbox
from toold.acp.updates import (
    ANSWERS,
    CANCELLED,
    MODE_DESCRIPTIONS,
    commands,
    plan_entries,
    prompt_text,
    tool_kind,
)
from toold.agents.loop import (
    AgentContext,
    TurnLimitReached,
    agent_loop,
    current_events,
    current_tool_use,
)
from toold.agents.provider import ModelRefused, ProviderError
from toold.agents.usage import DEFAULT_CONTEXT_WINDOW, TokenUsage, UsageMeter
from toold.errors import AgentUnavailable, wire_error
from toold.gateway import ToolGateway
from toold.modes import SessionMode as OwnMode
from toold.permissions.guard import MODES, Answer, Mode
from toold.tools.base import Tool
from toold.tools.toolset import ToolSet
from toold.workspace import WorkspaceState
from toold_protocol import errors as codes
from toold_protocol import names

log = logging.getLogger(__name__)

asking: contextvars.ContextVar[AcpSession | None] = contextvars.ContextVar(
    "toold_acp_session", default=None
)
"""The session whose turn is running (its turn's task and what that starts inherit it):
where a shared workspace's permission prompt goes (toold.acp.attached)."""


def modes(current: str) -> SessionModeState:
    """toold's permission modes as ACP session modes."""
    return SessionModeState(
        current_mode_id=current,
        available_modes=[
            SessionMode(id=mode, name=mode.capitalize(), description=MODE_DESCRIPTIONS[mode])
            for mode in MODES
        ],
    )


def usage_meta(usage: TokenUsage) -> dict[str, Any]:
    """The session's token sums as ``usage_update``'s ``_meta.toold`` (ACP v1's stable
    update has no field for them; its ``Usage`` names are used)."""
    sums = {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cachedReadTokens": usage.cache_read_tokens,
        "cachedWriteTokens": usage.cache_write_tokens,
        "totalTokens": usage.total,
    }
    return {"toold": sums}


def add_user_content(messages: list[dict[str, Any]], content: list[dict[str, Any]]) -> None:
    """Append a user turn, joining the last one if it is a user turn too (after a cancel)."""
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]["content"]
        if isinstance(last, str):
            last = [{"type": "text", "text": last}]
        messages[-1]["content"] = [*last, *content]
    else:
        messages.append({"role": "user", "content": content})


def close_open_tool_uses(messages: list[dict[str, Any]]) -> None:
    """After a cancel: answer every tool_use the model is still owed a result for."""
    if not messages or messages[-1]["role"] != "assistant":
        return
    uses = [b for b in messages[-1]["content"] if b.get("type") == "tool_use"]
    if uses:
        results = [
            {"type": "tool_result", "tool_use_id": b["id"], "content": CANCELLED, "is_error": True}
            for b in uses
        ]
        messages.append({"role": "user", "content": results})


class AcpSession:
    """One session of one ACP client."""

    def __init__(self, session_id: str, conn: Client, root: Path) -> None:
        self.id = session_id
        self.conn = conn
        self.root = root
        self.outbox = Outbox(conn, session_id)
        self.messages: list[dict[str, Any]] = []
        self.turn: asyncio.Task[str] | None = None
        self.state: WorkspaceState | None = None
        self.gateway: ToolGateway | None = None
        """The workspace's gateway with this session's tools (its MCP servers', the editor's
        files); ``require_gateway`` adds the session's own mode."""
        self.modes = OwnMode()
        """session/set_mode: this session's mode; other sessions on the engine keep theirs."""
        self.events: TurnEvents | None = None
        self.opened = contextlib.AsyncExitStack()
        """The session's workspace (toold.opening: bound and watched), closed with it."""
        self._asks = 0
        self.meter = UsageMeter(self._report_usage)
        """The session's tokens, its subagents' included (from its opening in this process:
        a loaded session's earlier turns are not counted again)."""

    def attach(
        self,
        state: WorkspaceState,
        extra_tools: list[Tool],
        editor_fs: bool,
        child_sessions: bool = False,
    ) -> None:
        """Use a bound workspace; ``extra_tools`` (MCP servers' tools) join its catalogue,
        with ``editor_fs`` read_file and write_file go through the editor, and with
        ``child_sessions`` subagents are shown as child sessions."""
        self.state = state
        files = EditorFiles(self.conn, self.id, state.root) if editor_fs else None
        if files is not None:
            extra_tools = [*extra_tools, *editor_tools(state.runtime, files)]
        toolset = ToolSet.merge(state.toolset, extra_tools) if extra_tools else state.toolset
        self.gateway = state.gateway.narrowed(toolset=toolset)
        writes = files.writes if files is not None else None
        self.events = TurnEvents(
            state.root, toolset, self.outbox, writes, child_sessions=child_sessions
        )

    # -- from the workspace --------------------------------------------------------
    def push(self, method: str, params: dict[str, Any]) -> None:
        """The workspace's notifications: TODO changes become the plan; the rest stay here."""
        if method == names.TODOS_CHANGED:
            self.outbox.put(update_plan(plan_entries(params.get("todos") or [])))
        elif method == names.SKILLS_CHANGED:
            self.outbox.put(update_available_commands(commands(params.get("skills") or [])))

    def announce_workspace(self) -> None:
        """Tell a new session's client the skills (slash commands) and any plan already there."""
        state = self.require_state()
        self.outbox.put(update_available_commands(commands(state.skills.list())))
        todos = state.todos.items()
        if todos:
            self.outbox.put(update_plan(plan_entries(todos)))

    async def ask(self, tool: str, args: Any, reason: str) -> Answer | None:
        """The guard's question as session/request_permission → allow / always / deny /
        never (Always deny, which the guard remembers) / None. A call of a subagent shown
        as a child session is asked about in that session."""
        events = self.require_events()
        shown = current_events.get()
        if isinstance(shown, TurnEvents) and shown.top() is events:
            events = shown
        call_id = current_tool_use.get()
        if call_id is None:
            self._asks += 1
            call_id = f"toold-ask-{self._asks}"
        subject = events.permission_subject(call_id, tool, args, reason)
        wait = self.require_state().config.permissions.ask_timeout
        try:
            response = await self.outbox.ask(events.session_id, subject, reason, wait)
        except (TimeoutError, ConnectionError, RequestError) as exc:
            # Never answered (permissions.ask_timeout), an error for an answer, or the
            # client is gone: denied.
            log.info("no answer to the permission request for %s: %r", tool, exc)
            events.refused(call_id)
            return None
        outcome = response.outcome
        if outcome.outcome != "selected":
            events.refused(call_id)
            return None
        answer = ANSWERS.get(str(getattr(outcome, "option_id", None)))
        if answer in ("allow", "always"):
            events.running(call_id)
        else:
            events.refused(call_id)
        return answer

    def _report_usage(self, meter: UsageMeter) -> None:
        """After each response of the session's own model: ``usage_update`` with the
        tokens now in its context, and the session's sums in ``_meta``. No cost: toold
        knows no price of the model it is pointed at (any model name, any
        Anthropic-compatible URL)."""
        if meter.last is None:
            return
        agents = self.require_state().agents
        size = getattr(agents.provider, "context_window", None) if agents is not None else None
        size = size if isinstance(size, int) else DEFAULT_CONTEXT_WINDOW
        self.outbox.put(
            UsageUpdate(
                session_update="usage_update",
                used=meter.last.total,
                size=size,
                field_meta=usage_meta(meter.total),
            )
        )

    # -- protocol ------------------------------------------------------------------
    def set_mode(self, mode_id: str) -> None:
        """session/set_mode: switch the guard's mode for this session."""
        if mode_id not in MODES:
            raise RequestError(
                codes.INVALID_PARAMS,
                f"modeId {mode_id!r} is not a toold mode: use one of {', '.join(MODES)}",
            )
        mode: Mode = mode_id  # type: ignore[assignment]
        self.modes.set(mode)
        self.outbox.put(update_current_mode(mode_id))

    def cancel(self) -> None:
        """session/cancel: stop the running turn and every tool it runs."""
        if self.turn is not None and not self.turn.done():
            self.turn.cancel()

    async def prompt(self, blocks: list[Any]) -> StopReason:
        """session/prompt: run the agent loop on the conversation; the turn's stop reason."""
        return await self.complete(self.begin(blocks))

    def check_ready(self) -> None:
        """RequestError when a prompt cannot start: one is running, or no model key."""
        state = self.require_state()
        if self.turn is not None and not self.turn.done():
            raise RequestError(
                codes.INVALID_REQUEST,
                "a prompt is already running in this session: wait or session/cancel it",
            )
        if state.agents is None:
            error = wire_error(AgentUnavailable(state.config.agent.api_key_env))
            raise RequestError(error.code, error.message, error.data)

    def begin(self, blocks: list[Any]) -> asyncio.Task[str]:
        """Start a turn on the conversation (RequestError: it cannot start); its task."""
        self.check_ready()
        state = self.require_state()
        agents = state.agents
        assert agents is not None, "check_ready refuses a workspace without a model"
        add_user_content(self.messages, self.expand_command(prompt_text(blocks)))
        ctx = AgentContext(
            provider=agents.provider,
            gateway=self.require_gateway(),
            system=agents.system_prompt,
            max_iterations=agents.max_iterations,
            drain=state.jobs.drain_notifications,
            events=self.require_events(),
            meter=self.meter,
        )
        running = asking.set(self)  # the turn's task keeps it: its prompts come here
        try:
            self.turn = asyncio.ensure_future(agent_loop(ctx, self.messages))
        finally:
            asking.reset(running)
        return self.turn

    async def complete(self, turn: asyncio.Task[str]) -> StopReason:
        """Wait for a turn begun; its stop reason once its updates are sent (RequestError:
        the model could not answer)."""
        try:
            stop = await self._finish(turn)
        finally:
            self.turn = None
            self.require_events().settle()
            await self.keep()
        await self.outbox.flush()
        return stop

    async def keep(self) -> None:
        """Write the conversation to .toold/sessions/ (for session/load)."""
        try:
            await asyncio.to_thread(history.save, self.root, self.id, list(self.messages))
        except OSError as exc:
            log.warning("session %s not kept: %s", self.id, exc)

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """session/load: take up a kept conversation and show it to the client again."""
        events = self.require_events()
        self.messages = messages
        for update in history.replay(messages, lambda name: tool_kind(*events.annotations(name))):
            self.outbox.put(update)

    async def _finish(self, turn: asyncio.Task[str]) -> StopReason:
        try:
            await turn
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the connection is closing, not a session/cancel
            self.require_events().cancel_open()
            close_open_tool_uses(self.messages)
            return "cancelled"
        except TurnLimitReached:
            return "max_turn_requests"
        except ModelRefused:
            return "refusal"
        except ProviderError as exc:
            raise RequestError(codes.INTERNAL_ERROR, f"the model could not answer: {exc}") from None
        return "end_turn"

    def expand_command(self, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``/skill what to do``: the skill's text, then what to do with it."""
        if not content or not content[0]["text"].startswith("/"):
            return content
        head, _, rest = content[0]["text"][1:].partition(" ")
        state = self.require_state()
        if head not in {s["name"] for s in state.skills.list()}:
            return content
        text = state.skills.load(head)
        task = rest.strip() or "Apply this skill to the workspace."
        first = {"type": "text", "text": f'<skill name="{head}">\n{text}\n</skill>\n\n{task}'}
        return [first, *content[1:]]

    # -- helpers -------------------------------------------------------------------
    def require_state(self) -> WorkspaceState:
        """The bound workspace (bound before the session is handed out)."""
        assert self.state is not None, "the session is attached before session/new answers"
        return self.state

    def require_gateway(self) -> ToolGateway:
        """The session's gateway: the workspace's tools and its MCP servers' tools, under
        the session's own mode (toold.modes)."""
        assert self.gateway is not None, "the session is attached before session/new answers"
        return self.modes.gateway(self.gateway)

    def require_events(self) -> TurnEvents:
        """Where the session's loop reports."""
        assert self.events is not None, "the session is attached before session/new answers"
        return self.events

    async def aclose(self) -> None:
        """Stop the turn, release the workspace (its watcher first) and stop sending."""
        self.cancel()
        await self.opened.aclose()
        await self.outbox.close()
