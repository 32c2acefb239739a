"""TurnEvents: the agent loop's events of one session as ACP ``session/update``s.

Text chunks become ``agent_message_chunk``; each tool call a ``tool_call`` (pending,
with its kind, title, locations and raw input), then ``tool_call_update``s: the output
so far while a command runs, and the outcome: ``completed`` or ``failed`` with the
command's output as text, or for a tool that writes a file a ``diff`` of the whole file
before and after (read from the workspace; never a file outside it or through a link).

With a client that shows subagents (``clientCapabilities.subagents``), a ``subagent`` call
starts a child session: ``subagent_update`` on the parent announces it (title, the task,
state ``running``), the subagent's text and tool calls are updates of the child's own
``sessionId``, and a last ``subagent_update`` says it is ``idle``. Other clients see only
the ``subagent`` call, as before.
"""

from __future__ import annotations

import os
import stat
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from acp import start_tool_call, update_agent_message_text, update_tool_call
from acp.schema import FileEditToolCallContent, ToolCallLocation, ToolCallUpdate, ToolKind

from toold.acp.outbox import Outbox
from toold.acp.updates import (
    CANCELLED,
    SHOWN_CHARS,
    Cancelled,
    CommandEvent,
    locations,
    output_text,
    path_argument,
    text_content,
    tool_kind,
)
from toold.acp.updates import tool_title as title_of
from toold.agents.loop import LoopEvents
from toold.outcome import ToolOutcome
from toold.tools.annotations import ToolAnnotations
from toold.tools.toolset import ToolSet

DIFF_BYTES = 1_048_576
"""Files larger than this are not shown as a diff."""


@dataclass
class OpenCall:
    """A tool call the client has been told about and that has not finished."""

    name: str
    kind: ToolKind
    title: str
    locations: list[ToolCallLocation]
    before: str | None = None
    """The written file's text before the call (None: it did not exist or is not shown)."""
    output: str = ""
    """The end of a command's output so far: what an update shows, and one character more
    (so it is shown as cut), never all of it (a command may print gigabytes)."""
    nested: bool = False
    """Made by a subagent: its loop reports no outcome, the turn's end settles it."""
    command: str | None = None
    """A shell call's command line (its output goes to a display terminal in ACP v2)."""


def read_shown(root: Path, path: str | None) -> str | None:
    """A workspace file's text for a diff: None outside the workspace, through a link,
    for a non-file, a large or a non-UTF-8 file."""
    if path is None:
        return None
    try:
        target = (root / path).resolve()
        target.relative_to(root)
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > DIFF_BYTES:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(DIFF_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def proposal(name: str, args: Any, before: str | None) -> str | None:
    """The text write_file or edit_file would leave (None: not foreseeable here)."""
    if not isinstance(args, dict):
        return None
    if name == "write_file" and isinstance(args.get("content"), str):
        return (before or "") + args["content"] if args.get("append") else args["content"]
    old, new = args.get("old_text"), args.get("new_text")
    if name == "edit_file" and before is not None and isinstance(old, str) and old in before:
        return before.replace(old, str(new), 1)
    return None


def failed(outcome: ToolOutcome) -> bool:
    """Whether a call failed: an error, a timeout or a command that exited non-zero."""
    return outcome.is_error or outcome.timed_out or outcome.exit_code not in (None, 0)


class TurnEvents(LoopEvents):
    """Reports one session's tool calls and text to its client, through its outbox."""

    def __init__(
        self,
        root: Path,
        toolset: ToolSet,
        outbox: Outbox,
        editor_writes: dict[str, tuple[str | None, str]] | None = None,
        *,
        child_sessions: bool = False,
        parent: TurnEvents | None = None,
    ) -> None:
        self.root = root
        self.toolset = toolset
        self.outbox = outbox
        self.open: dict[str, OpenCall] = {}
        self.editor_writes = editor_writes if editor_writes is not None else {}
        """Writes made through the editor (toold.acp.client_fs): their text before and after."""
        self.child_sessions = child_sessions
        """The client shows subagents as child sessions (``clientCapabilities.subagents``)."""
        self.parent = parent
        """A child session's: the events of the session that announced it."""

    @property
    def session_id(self) -> str:
        """The session these events are updates of."""
        return self.outbox.session_id

    def top(self) -> TurnEvents:
        """The events of the client's own session (a child session's: its root's)."""
        return self if self.parent is None else self.parent.top()

    def annotations(self, name: str) -> tuple[str, ToolAnnotations]:
        """A tool's canonical name and annotations (an unknown name: the defaults)."""
        tool = self.toolset.get(name)
        return (tool.name, tool.annotations) if tool is not None else (name, ToolAnnotations())

    def text(self, chunk: str) -> None:
        """Stream the model's text."""
        if chunk:
            self.outbox.put(update_agent_message_text(chunk))

    def tool_started(self, call_id: str, name: str, args: Any) -> None:
        """Announce the call: pending until the guard lets it run."""
        self.announce(call_id, name, args)

    def announce(self, call_id: str, name: str, args: Any) -> OpenCall:
        """Send ``tool_call`` for a call the client has not seen; the call's record."""
        if call_id in self.open:
            return self.open[call_id]
        canonical, annotations = self.annotations(name)
        call = OpenCall(
            name=canonical,
            kind=tool_kind(canonical, annotations),
            title=title_of(canonical, args, shell=annotations.shell),
            locations=locations(self.root, args),
        )
        if annotations.writes_path:
            call.before = read_shown(self.root, path_argument(args))
        command = args.get("command") if isinstance(args, dict) else None
        if annotations.shell and isinstance(command, str):
            call.command = command
        self.open[call_id] = call
        self.outbox.put(
            start_tool_call(
                call_id,
                call.title,
                kind=call.kind,
                status="pending",
                locations=call.locations,
                raw_input=args,
            )
        )
        return call

    def permission_subject(self, call_id: str, name: str, args: Any, reason: str) -> ToolCallUpdate:
        """The ``toolCall`` of a permission request for this call (announced first): why
        toold asks and, for a file write it can foresee, the diff it would make."""
        nested = call_id not in self.open
        call = self.announce(call_id, name, args)
        call.nested = call.nested or nested
        content: list[Any] = []
        path = path_argument(args)
        proposed = proposal(call.name, args, call.before)
        if proposed is not None and path is not None:
            absolute = str(Path(path) if Path(path).is_absolute() else self.root / path)
            content.append(
                FileEditToolCallContent(
                    type="diff", path=absolute, old_text=call.before, new_text=proposed
                )
            )
        content.append(text_content(f"toold asks because: {reason}"))
        return ToolCallUpdate(
            tool_call_id=call_id,
            title=call.title,
            kind=call.kind,
            status="pending",
            locations=call.locations,
            raw_input=args,
            content=content,
        )

    def running(self, call_id: str) -> None:
        """The guard let the call run."""
        if call_id in self.open:
            self.outbox.put(update_tool_call(call_id, status="in_progress"))

    def refused(self, call_id: str) -> None:
        """The user refused a subagent's call (a main-loop call ends in tool_finished)."""
        call = self.open.get(call_id)
        if call is not None and call.nested:
            del self.open[call_id]
            self.outbox.put(update_tool_call(call_id, status="failed"))

    def settle(self) -> None:
        """The turn ended: subagents' calls still shown as running are done."""
        for call_id, call in list(self.open.items()):
            if call.nested:
                del self.open[call_id]
                self.outbox.put(update_tool_call(call_id, status="completed"))

    def tool_progress(self, call_id: str, text: str) -> None:
        """A command's output so far (from any thread)."""
        call = self.open.get(call_id)
        if call is None:
            return
        call.output += text if text.endswith("\n") else text + "\n"
        call.output = call.output[-(SHOWN_CHARS + 1) :]
        update = update_tool_call(
            call_id, status="in_progress", content=[text_content(call.output)]
        )
        if call.command is None:
            self.outbox.put(update)
            return
        printed = text if text.endswith("\n") else text + "\n"
        self.outbox.put(CommandEvent(call_id, call.command, str(self.root), update, printed))

    def tool_finished(self, call_id: str, name: str, args: Any, outcome: ToolOutcome) -> None:
        """The outcome: text, or the file's diff for a tool that wrote one."""
        call = self.open.pop(call_id, None) or OpenCall(name, "other", name, [])
        text = output_text(outcome.content)
        content: list[Any] = []
        path = path_argument(args)
        before, after = call.before, None
        if call_id in self.editor_writes:
            before, after = self.editor_writes.pop(call_id)
        elif path is not None and outcome.written:  # it ran, and wrote what it names
            after = read_shown(self.root, path)
        if after is not None and path is not None:
            absolute = str(Path(path) if Path(path).is_absolute() else self.root / path)
            content.append(
                FileEditToolCallContent(type="diff", path=absolute, old_text=before, new_text=after)
            )
        if text:
            content.append(text_content(text))
        update = update_tool_call(
            call_id,
            status="failed" if failed(outcome) else "completed",
            content=content,
            raw_output=raw_output(outcome),
        )
        if call.command is None or not outcome.ran:
            self.outbox.put(update)
            return
        end = CommandEvent(call_id, call.command, str(self.root), update, exited=True)
        self.outbox.put(replace(end, exit_code=outcome.exit_code, output=text))

    def cancel_open(self, why: str | None = None) -> None:
        """The turn was cancelled (``why`` None), or a subagent failed (``why``): every call
        still open failed (ACP v2 shows a cancelled one as ``cancelled``)."""
        for call_id in list(self.open):
            self.open.pop(call_id)
            text = [text_content(why or CANCELLED)]
            update = update_tool_call(call_id, status="failed", content=text)
            self.outbox.put(update if why is not None else Cancelled(update))

    # -- subagents as child sessions -------------------------------------------------
    def subagent(self, call_id: str, agent_type: str, task: str) -> TurnEvents | None:
        """A child session for the subagent ``call_id`` starts, announced on this session
        (None: the client does not show subagents)."""
        if not self.child_sessions:
            return None
        child = TurnEvents(
            self.root,
            self.toolset,
            self.outbox.child(uuid.uuid4().hex),
            self.editor_writes,
            child_sessions=True,
            parent=self,
        )
        line = task.strip().splitlines()[0] if task.strip() else agent_type
        announce = subagent_update(child.session_id, {"state": "running"})
        announce["title"] = f"{agent_type}: {line[:80]}" + ("…" if len(line) > 80 else "")
        announce["description"] = task[:SHOWN_CHARS]
        announce["_meta"] = {"toold": {"toolCallId": call_id}}
        self.outbox.put(announce)
        return child

    def ended(self, error: str | None) -> None:
        """A child session's subagent ended: its open calls are settled (failed, with
        ``error`` as their text) and its parent's ``subagent_update`` says it is idle."""
        if self.parent is None:
            return
        if error is None:
            self.settle()
        else:
            self.cancel_open(error)
        self.parent.outbox.put(subagent_update(self.session_id, {"state": "idle"}))


def subagent_update(child_id: str, state: dict[str, str]) -> dict[str, Any]:
    """ACP v1's ``subagent_update`` (stable since November 2026; the Python SDK 0.12 has no
    model of it): the child session ``child_id`` and its work state."""
    return {"sessionUpdate": "subagent_update", "sessionId": child_id, "state": state}


def raw_output(outcome: ToolOutcome) -> Any:
    """A finished call's ``rawOutput``: its content, with the diagnostics the edit
    introduced or fixed beside it when a language server checked its files."""
    if outcome.diagnostics is None:
        return outcome.content
    found = outcome.diagnostics.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"content": outcome.content, "diagnostics": found}
