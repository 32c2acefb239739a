"""V2Client: an ACP v2 client as toold's sessions see a client, rendering their events.

A session reports the same events whatever the version (toold.acp.calls: the SDK's v1
update models, and ``CommandEvent`` for a shell call's output); the outbox hands them
here on a v2 connection (toold.acp.outbox is the one place that picks). Rendered:

- message chunks get a ``messageId``: one per run of chunks of one kind, so the model's
  text before and after a tool call are two messages;
- ``tool_call`` and ``tool_call_update`` become ``tool_call_update`` upserts carrying only
  the fields the event set (omitted = unchanged); a text diff becomes ``changes`` plus a
  ``git_patch``; a call ended by a cancelled turn is ``cancelled`` (v1: failed);
- a shell call gets a display terminal: a ``terminal`` reference in the call's content,
  ``terminal_update`` (command, cwd), ``terminal_output_chunk``s of what it prints, and
  ``terminal_update`` with its exit status (the whole output as a snapshot when nothing
  was streamed);
- ``plan`` → ``plan_update`` (plan id ``todos``), commands' input gets ``type: text``, a
  mode change → ``config_option_update``; ``usage_update`` is unchanged.

Permission questions carry a ``title`` and ``description`` and the call as ``subject``,
between ``state_update``s ``requires_action`` and ``running``.
"""

from __future__ import annotations

import asyncio
import base64
import difflib
import logging
import signal
import uuid
from typing import Any

from acp.connection import Connection
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    AvailableCommandsUpdate,
    ContentToolCallContent,
    CurrentModeUpdate,
    DeniedOutcome,
    FileEditToolCallContent,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
    UserMessageChunk,
)
from pydantic import ValidationError

from toold.acp import v2
from toold.acp.updates import MODE_DESCRIPTIONS, PERMISSION_OPTIONS, Cancelled, CommandEvent
from toold.permissions.guard import MODES

log = logging.getLogger(__name__)

PLAN_ID = "todos"
"""toold keeps one plan per workspace: its TODO list."""
MODE_CONFIG = "mode"
"""The config option that holds toold's permission mode."""
ENDED = ("completed", "failed", "cancelled")


def mode_options(current: str) -> list[v2.ConfigOption]:
    """toold's permission modes as v2's one ``select`` config option of category mode."""
    return [
        v2.ConfigOption(
            config_id=MODE_CONFIG,
            name="Permission mode",
            category="mode",
            current_value=current,
            options=[
                v2.ConfigSelectOption(
                    value=mode, name=mode.capitalize(), description=MODE_DESCRIPTIONS[mode]
                )
                for mode in MODES
            ],
        )
    ]


def encoded(text: str) -> str:
    """Text as v2 terminal bytes (base64 of its UTF-8)."""
    return base64.b64encode(text.encode("utf-8", "replace")).decode("ascii")


def exit_status(code: int | None) -> v2.ExitStatus:
    """An exit code as v2's exit status (a negative code: the signal that ended it)."""
    if code is not None and code < 0:
        try:
            return v2.ExitStatus(exit_code=None, signal=signal.Signals(-code).name)
        except ValueError:
            return v2.ExitStatus(exit_code=None)
    return v2.ExitStatus(exit_code=code)


def diff(item: FileEditToolCallContent) -> v2.Diff:
    """v1's whole-file diff as v2's changes and git patch (absolute paths)."""
    path = item.path
    added = item.old_text is None
    change = v2.DiffChange(operation="add" if added else "modify", path=path, file_type="text")
    before = (item.old_text or "").splitlines(keepends=True)
    after = item.new_text.splitlines(keepends=True)
    hunks = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in list(difflib.unified_diff(before, after, n=3))[2:]
    )
    if not hunks:
        return v2.Diff(changes=[change])
    head = f"diff --git {path} {path}\n"
    head += "new file mode 100644\n--- /dev/null\n" if added else f"--- {path}\n"
    return v2.Diff(changes=[change], patch=v2.DiffPatch(text=f"{head}+++ {path}\n{hunks}"))


def tool_content(items: list[Any]) -> list[v2.ContentItem | v2.Diff | v2.TerminalRef]:
    """v1 tool-call content as v2's (text and diffs; toold uses no client terminals)."""
    found: list[v2.ContentItem | v2.Diff | v2.TerminalRef] = []
    for item in items:
        if isinstance(item, FileEditToolCallContent):
            found.append(diff(item))
        elif isinstance(item, ContentToolCallContent) and isinstance(
            item.content, TextContentBlock
        ):
            found.append(v2.ContentItem(content=v2.TextContent(text=item.content.text)))
    return found


def tool_call(update: ToolCallStart | ToolCallProgress | ToolCallUpdate) -> dict[str, Any]:
    """The fields a v1 tool call event gave (None in v1 is not sent: unchanged)."""
    fields: dict[str, Any] = {"tool_call_id": update.tool_call_id}
    for name in ("title", "kind", "status", "raw_input", "raw_output"):
        value = getattr(update, name)
        if value is not None:
            fields[name] = value
    if update.locations is not None:
        fields["locations"] = [v2.Location(path=x.path, line=x.line) for x in update.locations]
    if update.content is not None:
        fields["content"] = tool_content(list(update.content))
    return fields


class V2Client:
    """The client of one v2 connection: renders the sessions' events, asks permissions."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._message: dict[str, tuple[str, str]] = {}
        """Per session: the kind and id of the message chunks are being added to."""
        self._terminals: dict[str, tuple[str, bool]] = {}
        """Per open shell call: its terminal id, and whether output was streamed to it."""

    async def send(self, session_id: str, *updates: v2.Wire) -> None:
        """session/update notifications, in order."""
        for update in updates:
            params = {"sessionId": session_id, "update": v2.dump(update)}
            await self.connection.send_notification("session/update", params)

    async def state(self, session_id: str, state: str, stop: str | None = None) -> None:
        """A ``state_update``: running, idle (with the stop reason ending a turn), or
        requires_action."""
        update = v2.StateUpdate.model_validate({"state": state})
        if stop is not None:
            update.stop_reason = stop  # type: ignore[assignment]
        await self.send(session_id, update)

    def new_message(self, session_id: str, kind: str) -> str:
        """A fresh message id; later chunks of ``kind`` join that message."""
        message_id = f"msg_{uuid.uuid4().hex[:16]}"
        self._message[session_id] = (kind, message_id)
        return message_id

    async def session_update(self, session_id: str, update: Any) -> None:
        """One event of a session, rendered as v2 updates."""
        rendered = self.render(session_id, update)
        if not rendered:
            log.debug("no v2 update for %s", type(update).__name__)
        await self.send(session_id, *rendered)

    def render(self, session_id: str, update: Any) -> list[v2.Wire]:
        """v2 updates for one event (what the v1 path would send as ``update``)."""
        if isinstance(update, UserMessageChunk | AgentMessageChunk | AgentThoughtChunk):
            return self._chunk(session_id, update)
        self._message.pop(session_id, None)  # anything else ends the message
        if isinstance(update, CommandEvent):
            return self._command(update)
        if isinstance(update, ToolCallStart | ToolCallProgress):
            return self._tool_call(update)
        if isinstance(update, Cancelled):
            return self._tool_call(update.update.model_copy(update={"status": "cancelled"}))
        if isinstance(update, AgentPlanUpdate):
            entries = [
                v2.PlanEntry(content=e.content, priority=e.priority, status=e.status)
                for e in update.entries
            ]
            return [v2.PlanUpdate(plan=v2.PlanItems(plan_id=PLAN_ID, entries=entries))]
        if isinstance(update, AvailableCommandsUpdate):
            commands = [
                v2.Command(
                    name=c.name,
                    description=c.description,
                    input=v2.CommandInput(hint=c.input.root.hint) if c.input else None,
                )
                for c in update.available_commands
            ]
            return [v2.AvailableCommandsUpdate(available_commands=commands)]
        if isinstance(update, CurrentModeUpdate):
            return [v2.ConfigOptionUpdate(config_options=mode_options(update.current_mode_id))]
        if isinstance(update, UsageUpdate):
            usage = v2.UsageUpdate(used=update.used, size=update.size)
            if update.field_meta is not None:
                usage.meta = update.field_meta
            return [usage]
        return []  # v1-only events (subagent_update: v2 has no child sessions)

    def _chunk(
        self, session_id: str, update: UserMessageChunk | AgentMessageChunk | AgentThoughtChunk
    ) -> list[v2.Wire]:
        kind = update.session_update
        current = self._message.get(session_id)
        message_id = current[1] if current and current[0] == kind else None
        message_id = message_id or self.new_message(session_id, kind)
        block = update.content
        text = block.text if isinstance(block, TextContentBlock) else f"[{block.type}]"
        chunk = v2.MessageChunk(
            session_update=kind, message_id=message_id, content=v2.TextContent(text=text)
        )
        return [chunk]

    def _tool_call(self, update: ToolCallStart | ToolCallProgress) -> list[v2.Wire]:
        fields = tool_call(update)
        opened = self._terminals.get(update.tool_call_id)
        if opened is None or update.status not in ENDED:
            return [v2.ToolCallUpdate(**fields)]
        # A shell call that ended without its outcome (cancelled): its terminal exited.
        del self._terminals[update.tool_call_id]
        fields["content"] = [v2.TerminalRef(terminal_id=opened[0]), *fields.get("content", [])]
        exited = v2.TerminalUpdate(terminal_id=opened[0], exit_status=v2.ExitStatus())
        return [exited, v2.ToolCallUpdate(**fields)]

    def _command(self, event: CommandEvent) -> list[v2.Wire]:
        rendered: list[v2.Wire] = []
        opened = self._terminals.get(event.call_id)
        if opened is None:
            opened = (f"term_{event.call_id}", False)
            reference = [v2.TerminalRef(terminal_id=opened[0])]
            rendered += [
                v2.ToolCallUpdate(tool_call_id=event.call_id, content=reference),
                v2.TerminalUpdate(terminal_id=opened[0], command=event.command, cwd=event.cwd),
            ]
        terminal_id, streamed = opened
        if event.printed:
            data = encoded(event.printed)
            rendered.append(v2.TerminalOutputChunk(terminal_id=terminal_id, data=data))
            streamed = True
        self._terminals[event.call_id] = (terminal_id, streamed)
        if not event.exited:
            return rendered
        del self._terminals[event.call_id]
        end = v2.TerminalUpdate(terminal_id=terminal_id, exit_status=exit_status(event.exit_code))
        if not streamed:
            end.output = v2.TerminalOutput(data=encoded(event.output))
        fields = tool_call(event.update)
        # The output is in the terminal; the call keeps what else it had (a diff).
        kept = [c for c in fields.get("content", []) if not isinstance(c, v2.ContentItem)]
        fields["content"] = [v2.TerminalRef(terminal_id=terminal_id), *kept]
        return [*rendered, end, v2.ToolCallUpdate(**fields)]

    async def ask(
        self, session_id: str, subject: ToolCallUpdate, reason: str, timeout: float
    ) -> RequestPermissionResponse:
        """The guard's question as v2's session/request_permission, the session
        ``requires_action`` while it waits; the answer as the SDK's (v1) response.
        TimeoutError after ``timeout``; an outcome toold does not know is no approval."""
        fields = tool_call(subject)
        # The question's text goes in title/description, not in the call's content.
        fields["content"] = [c for c in fields.get("content", []) if isinstance(c, v2.Diff)]
        request = v2.RequestPermissionRequest(
            session_id=session_id,
            title=f"Allow {subject.title or 'this call'}?",
            description=f"toold asks because: {reason}",
            subject=v2.ToolCallSubject(tool_call=v2.ToolCall(**fields)),
            options=[
                v2.PermissionOption(option_id=o.option_id, name=o.name, kind=o.kind)
                for o in PERMISSION_OPTIONS
            ],
        )
        await self.state(session_id, "requires_action")
        try:
            raw = await asyncio.wait_for(
                self.connection.send_request("session/request_permission", v2.dump(request)),
                timeout,
            )
        except Exception:
            # No answer (none in time, or an error for one): denied, and the turn goes on.
            await self.state(session_id, "running")
            raise
        await self.state(session_id, "running")
        try:
            answer = v2.RequestPermissionResponse.model_validate(raw)
        except ValidationError:
            log.info("a permission answer toold cannot read: %r", raw)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        option = answer.outcome.option_id
        if answer.outcome.outcome == "selected" and option is not None:
            allowed = AllowedOutcome(outcome="selected", option_id=option)
            return RequestPermissionResponse(outcome=allowed)
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
