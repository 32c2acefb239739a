"""Mailboxes: one append-only JSONL file per agent under ``.toold/mailboxes/``.

Each line is one message ``{id, from, to, content, type, timestamp, inReplyTo}``.
Appends take a lock and write whole lines in one write; readers keep a byte
offset, leave a line without its newline for later, and skip a torn line
instead of crashing.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import string
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toold.storage import file_lock

log = logging.getLogger(__name__)

MAIN = "main"
_ALPHABET = string.ascii_letters + string.digits


def new_message(
    sender: str, to: str, content: str, kind: str = "request", in_reply_to: str | None = None
) -> dict[str, Any]:
    """A message with a fresh 12-character id and a UTC timestamp."""
    return {
        "id": "".join(secrets.choice(_ALPHABET) for _ in range(12)),
        "from": sender,
        "to": to,
        "content": content,
        "type": kind,
        "timestamp": datetime.now(UTC).isoformat(),
        "inReplyTo": in_reply_to,
    }


class Mailboxes:
    """The mailbox folder of one workspace."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, agent: str) -> Path:
        """The JSONL file of ``agent``."""
        return self.folder / f"{agent}.jsonl"

    def append(self, message: dict[str, Any]) -> None:
        """Deliver ``message`` to its recipient's mailbox."""
        line = (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")
        self.folder.mkdir(parents=True, exist_ok=True)
        with file_lock(self.folder / ".lock"):
            fd = os.open(self.path(message["to"]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def size(self, agent: str) -> int:
        """Current end of ``agent``'s mailbox (where a new reader starts)."""
        try:
            return self.path(agent).stat().st_size
        except FileNotFoundError:
            return 0

    def read_from(self, agent: str, offset: int) -> tuple[list[dict[str, Any]], int]:
        """Complete messages after ``offset`` and the offset after the last of them."""
        try:
            with self.path(agent).open("rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except FileNotFoundError:
            return [], offset
        end = data.rfind(b"\n") + 1
        messages = []
        for raw in data[:end].splitlines():
            if not raw.strip():
                continue
            try:
                message = json.loads(raw)
            except ValueError:
                log.warning("skipping a torn line in %s's mailbox", agent)
                continue
            if isinstance(message, dict):
                messages.append(message)
        return messages, offset + end
