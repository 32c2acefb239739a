"""What an ACP client is shown of toold: tool calls, plans, commands, and prompts read back.

A tool call's ``kind`` comes from the tool's own annotations (toold.tools.annotations)
and, where they say nothing more precise, from its name's words (``delete``, ``move``,
``todo`` ...): an MCP server's tool with default annotations is ``other``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    ContentToolCallContent,
    EmbeddedResourceContentBlock,
    PermissionOption,
    PlanEntry,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
    ToolCallProgress,
    ToolKind,
    UnstructuredCommandInput,
)

from toold.permissions.guard import Answer
from toold.tools.annotations import ToolAnnotations

SHOWN_CHARS = 20_000
"""A tool's output shown in the editor: its last characters (the model gets all of it)."""

PERMISSION_OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Deny", kind="reject_once"),
    PermissionOption(option_id="reject_always", name="Always deny", kind="reject_always"),
]
"""session/request_permission's options; their ids are ACP's option kinds."""

ANSWERS: dict[str, Answer] = {
    "allow_once": "allow",
    "allow_always": "always",
    "reject_once": "deny",
    "reject_always": "never",
}
"""An option the user picked → the guard's answer (the guard remembers always and never)."""


@dataclass(frozen=True)
class CommandEvent:
    """A shell call's new output or its end, as the session reports it: v1 clients are
    shown ``update`` (the call's content: the output's tail); a v2 client gets the
    command's own display terminal (toold.acp.v2_client)."""

    call_id: str
    command: str
    cwd: str
    """The folder the command runs in (the workspace: absolute)."""
    update: ToolCallProgress
    printed: str = ""
    """What the command printed since the last event."""
    exited: bool = False
    exit_code: int | None = None
    output: str = ""
    """At the end: the call's whole output as the model got it."""


@dataclass(frozen=True)
class Cancelled:
    """A tool call ended by a cancelled turn: v1 clients are shown ``update`` (failed),
    ACP v2's status says ``cancelled``."""

    update: ToolCallProgress


CANCELLED = "Cancelled by the user."
"""What a call ended by a cancelled turn shows (and the model is told)."""

MODE_DESCRIPTIONS = {
    "default": "Ask before edits and before commands that are not read-only",
    "auto": "Run shell commands that are not dangerous without asking; ask before edits",
    "plan": "Read-only: every call that could change something is refused",
    "bypass": "Run every call without asking",
}
"""toold's permission modes, as a client shows them (v1 session modes, v2 config options)."""

_PRIORITIES = {"high": "high", "urgent": "high", "low": "low"}
_STATUSES = {"done": "completed", "in_progress": "in_progress"}


def _words(name: str) -> set[str]:
    return set(name.lower().replace("-", "_").replace(".", "_").split("_"))


def tool_kind(name: str, annotations: ToolAnnotations) -> ToolKind:
    """ACP's kind of a tool (read, edit, delete, move, search, execute, fetch, think, other)."""
    words = _words(name)
    if getattr(annotations, "shell", False) or annotations.runs_code:
        return "execute"
    changes = not annotations.read_only
    if changes and words & {"delete", "remove", "rm", "unlink"}:
        return "delete"
    if changes and words & {"move", "rename", "mv"}:
        return "move"
    if annotations.writes_path:
        return "edit"
    if getattr(annotations, "searches_folder", False):
        return "search"
    if annotations.open_world and (annotations.read_only or words & {"http", "fetch", "web"}):
        return "fetch"
    if words & {"todo", "task", "plan", "think"}:
        return "think"
    if annotations.read_only:
        return "search" if words & {"grep", "glob", "search", "find"} else "read"
    if changes and words & {"edit", "write", "replace", "patch"}:
        return "edit"
    return "other"


def path_argument(args: Any) -> str | None:
    """The file or folder a call names (``file_path`` or ``path``), if any."""
    if not isinstance(args, dict):
        return None
    value = args.get("file_path") or args.get("path")
    return value if isinstance(value, str) and value else None


def tool_title(name: str, args: Any, *, shell: bool = False) -> str:
    """A one-line title: ``Run `make test``` (for a shell: ``shell``, from its annotations),
    ``Read file notes.txt``, ``Grep 'TODO'``. Any other tool's title starts with its own
    name, so an MCP server's tool with a ``command`` is never shown as toold's shell."""
    label = name.replace("__", ": ").replace("_", " ").strip().capitalize() or name
    if not isinstance(args, dict):
        return label
    command = args.get("command")
    if shell and isinstance(command, str) and command.strip():
        line = command.strip().splitlines()[0]
        return f"Run `{line[:80]}`" + ("…" if len(line) > 80 or "\n" in command.strip() else "")
    path = path_argument(args)
    if path is not None:
        return f"{label} {path}"
    for key in ("pattern", "query", "url", "task", "skill_name", "text", "command"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return f"{label} {value[:80]!r}" if key != "url" else f"{label} {value[:120]}"
    return label


def locations(root: Path, args: Any) -> list[ToolCallLocation]:
    """The absolute path a call touches (ACP wants absolute paths), with its line if given."""
    path = path_argument(args)
    if path is None:
        return []
    absolute = Path(path) if Path(path).is_absolute() else root / path
    line = args.get("offset") if isinstance(args, dict) else None
    if isinstance(line, int) and not isinstance(line, bool) and line > 0:
        return [ToolCallLocation(path=str(absolute), line=line)]
    return [ToolCallLocation(path=str(absolute))]


def output_text(content: Any) -> str:
    """A tool's result as text: strings stay, content blocks' text joins, the rest is JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and "type" in b for b in content):
        return "\n".join(str(b.get("text", f"[{b['type']}]")) for b in content)
    return json.dumps(content, indent=2, ensure_ascii=False, default=str)


def text_content(text: str) -> ContentToolCallContent:
    """Tool call content holding text (its tail when long)."""
    if len(text) > SHOWN_CHARS:
        text = "…" + text[-SHOWN_CHARS:]
    return ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=text))


def plan_entries(todos: list[dict[str, Any]]) -> list[PlanEntry]:
    """toold's TODO items (todo_write) as an ACP plan: every item, in order."""
    return [
        PlanEntry(
            content=str(item.get("task", "")),
            priority=_PRIORITIES.get(str(item.get("priority", "")).lower(), "medium"),
            status=_STATUSES.get(str(item.get("status", "")), "pending"),
        )
        for item in todos
    ]


def commands(skills: list[dict[str, Any]]) -> list[AvailableCommand]:
    """Each skill as a slash command (``/name what to do``)."""
    return [
        AvailableCommand(
            name=str(skill["name"]),
            description=str(skill.get("description") or "A toold skill"),
            input=AvailableCommandInput(
                root=UnstructuredCommandInput(hint="what to do with this skill")
            ),
        )
        for skill in skills
    ]


def prompt_text(blocks: list[Any]) -> list[dict[str, Any]]:
    """An ACP prompt as the model's content blocks: text, links and embedded files as text."""
    content: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            text = block.text
        elif isinstance(block, ResourceContentBlock):
            text = f"[{block.name}]({block.uri})"
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            resource = block.resource
            body = resource.text.rstrip("\n")
            text = f'<context uri="{resource.uri}">\n{body}\n</context>'
        else:
            kind = getattr(block, "type", type(block).__name__)
            text = f"[a {kind} block was attached; toold reads text only]"
        if text:
            content.append({"type": "text", "text": text})
    return content
