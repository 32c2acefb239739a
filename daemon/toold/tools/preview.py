"""What a permission prompt shows of a call that changes files: its diff, and the files whole.

A previewing tool (``Tool.previews``: write_file, edit_file, str_replace, multi_edit,
apply_patch) says what a call would change (``Tool.preview``, from the disk now). A client
that advertised ``experimental.toold.diffPreview`` gets it as the ``permissions/preview``
notification just before the prompt (``notification``), to open in a diff editor; any
other client gets the unified diff in the prompt's text, capped (``in_message``), with
every control character and bidirectional override shown as an escape (``visible``): the
content is the agent's, and a carriage return, a terminal escape sequence or a U+202E
could otherwise hide or reorder what the user is asked to allow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toold.terminal import visible
from toold.tools.base import FileEdit, Tool, diff_of

MESSAGE_DIFF_CHARS = 4_000
"""Most characters of diff a prompt's message carries."""
FILE_MAX_BYTES = 1 << 20
"""Larger files are left out of ``files`` (their diff still goes)."""
NOTIFIED_DIFF_CHARS = 1 << 20
"""Most characters of diff the notification carries."""


def capped(text: str, limit: int) -> str:
    """``text`` cut at ``limit`` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... ({len(text) - limit} more characters)"


def preview_edits(tool: Tool | None, args: Any) -> list[FileEdit] | str | None:
    """The call's edits; the reason as text when they cannot be known (the call would fail
    the same way); None for a tool that does not preview."""
    if tool is None or not tool.previews:
        return None
    try:
        edits = tool.preview(args)
    except Exception as exc:  # the prompt still asks; it says why there is no diff
        return f"(no preview: {type(exc).__name__}: {exc})"
    return None if edits is None else [e for e in edits if e.before != e.after]


def in_message(preview: Sequence[FileEdit] | str) -> str:
    """What the prompt's text adds: the diff, controls made visible, capped at
    MESSAGE_DIFF_CHARS."""
    if isinstance(preview, str):
        return capped(visible(preview), MESSAGE_DIFF_CHARS)
    return capped(visible(diff_of(preview)), MESSAGE_DIFF_CHARS) or "(no changes)"


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8")


def notification(tool: str, reason: str, edits: Sequence[FileEdit]) -> dict[str, Any]:
    """``permissions/preview`` params: the diff and each text file up to FILE_MAX_BYTES."""
    files = []
    for edit in edits:
        sizes = [len(d) for d in (edit.before, edit.after) if d is not None]
        if max(sizes, default=0) > FILE_MAX_BYTES:
            continue
        try:
            original, modified = _text(edit.before), _text(edit.after)
        except UnicodeDecodeError:
            continue  # a binary file: its diff line says so
        files.append({"path": edit.path, "original": original, "modified": modified})
    diff = capped(diff_of(edits), NOTIFIED_DIFF_CHARS)
    return {"tool": tool, "reason": reason, "diff": diff, "files": files}
