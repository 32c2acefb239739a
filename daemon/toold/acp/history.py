"""Sessions kept in ``.toold/sessions/<id>.json`` so ``session/load`` can replay them.

A session's conversation (the model's messages: text, tool_use and tool_result blocks)
is written after every prompt, atomically and never through a link (toold.storage).
Loading replays it as the updates the client saw live: user and agent message chunks,
each tool call and its outcome. Ids are toold's own (32 hex digits), so a requested id
can never name a path outside the folder. A kept file is parsed before it is used (an
object whose ``messages`` are user and assistant turns of text or content blocks): one
that is not is an error naming what is wrong, and session/list leaves it out.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from acp import (
    RequestError,
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import SessionInfo
from pydantic import BaseModel, ConfigDict, ValidationError

from toold.acp.updates import output_text, text_content, tool_title
from toold.errors import field_problems
from toold.storage import atomic_write_text, now, read_state, state_names
from toold.workspace import STATE_DIR
from toold_protocol import errors as codes

RESOURCE_NOT_FOUND = RequestError.resource_not_found().code
"""ACP's code for a session (or other resource) that does not exist."""

log = logging.getLogger(__name__)

SESSIONS = "sessions"
_ID = re.compile(r"[0-9a-f]{32}")

Kind = Callable[[str], Any]
"""A tool's ACP kind by name (the session's catalogue decides it)."""


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "assistant"]
    content: str | list[_Block]


class Kept(BaseModel):
    """A kept session file: the conversation, and when and where it was."""

    model_config = ConfigDict(extra="allow")
    messages: list[_Message]
    cwd: str | None = None
    updatedAt: str | None = None


def parse(raw: bytes) -> Kept:
    """A kept file's content; ValueError naming what is wrong with it."""
    try:
        return Kept.model_validate_json(raw)
    except ValidationError as exc:
        problems = "; ".join(field_problems(exc, "the file", show_input=False)[:3])
        raise ValueError(f"not a kept session: {problems}") from None


def session_file(root: Path, session_id: str) -> Path:
    """Where a session is kept; RequestError for an id toold never gave."""
    if not _ID.fullmatch(session_id):
        raise RequestError(
            codes.INVALID_PARAMS,
            f"sessionId {session_id!r} is not a toold session id (32 hex digits)",
        )
    return root / STATE_DIR / SESSIONS / f"{session_id}.json"


def save(root: Path, session_id: str, messages: list[dict[str, Any]]) -> None:
    """Write the conversation (whole, atomically) with when and where it was."""
    payload = {"version": 1, "cwd": str(root), "updatedAt": now(), "messages": messages}
    text = json.dumps(payload, ensure_ascii=False, default=str)
    atomic_write_text(session_file(root, session_id), text, create_dirs=True)


def load(root: Path, session_id: str) -> list[dict[str, Any]]:
    """The conversation kept for ``session_id``; RequestError when there is none."""
    path = session_file(root, session_id)
    try:
        kept = parse(read_state(path))
    except FileNotFoundError:
        raise RequestError(
            RESOURCE_NOT_FOUND,
            f"session {session_id} is not kept in {path.parent}: start a new one",
        ) from None
    except (OSError, ValueError) as exc:
        raise RequestError(
            codes.INTERNAL_ERROR,
            f"session {session_id} cannot be read ({exc}): start a new one, or remove {path}",
        ) from None
    return [m.model_dump() for m in kept.messages]


def listed(root: Path) -> list[SessionInfo]:
    """session/list: the sessions kept in the workspace, the latest first."""
    found: list[SessionInfo] = []
    for name in state_names(root / STATE_DIR / SESSIONS):
        session_id = name.removesuffix(".json")
        if not _ID.fullmatch(session_id) or not name.endswith(".json"):
            continue
        try:
            kept = parse(read_state(session_file(root, session_id)))
        except (OSError, ValueError) as exc:
            log.warning("skipping kept session %s: %s", name, exc)
            continue
        found.append(
            SessionInfo(
                session_id=session_id,
                cwd=kept.cwd or str(root),
                title=title([m.model_dump() for m in kept.messages]),
                updated_at=kept.updatedAt,
            )
        )
    return sorted(found, key=lambda s: s.updated_at or "", reverse=True)


def title(messages: list[dict[str, Any]]) -> str | None:
    """A session's title: the start of its first prompt."""
    for message in messages:
        if message.get("role") == "user":
            for block in _blocks(message.get("content")):
                if block.get("type") == "text" and block.get("text"):
                    line = str(block["text"]).strip().splitlines()[0]
                    return line[:80]
    return None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def replay(messages: list[dict[str, Any]], kind_of: Kind) -> list[Any]:
    """The session/update ``update``s that show the conversation again, in order."""
    updates: list[Any] = []
    for message in messages:
        user = message.get("role") == "user"
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                text = str(block["text"])
                updates.append(
                    update_user_message_text(text) if user else update_agent_message_text(text)
                )
            elif kind == "tool_use":
                name, args = str(block.get("name")), block.get("input") or {}
                shown = kind_of(name)
                updates.append(
                    start_tool_call(
                        str(block.get("id")),
                        tool_title(name, args, shell=shown == "execute"),
                        kind=shown,
                        status="pending",
                        raw_input=args,
                    )
                )
            elif kind == "tool_result":
                text = output_text(block.get("content"))
                updates.append(
                    update_tool_call(
                        str(block.get("tool_use_id")),
                        status="failed" if block.get("is_error") else "completed",
                        content=[text_content(text)] if text else None,
                    )
                )
    return updates
