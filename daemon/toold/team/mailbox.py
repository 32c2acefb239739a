"""Mailboxes: one append-only JSONL file per agent under ``.toold/mailboxes/``.

Each line is one message ``{id, from, to, content, type, timestamp, inReplyTo}``.
Appends take a lock, cut a torn tail left by a writer that died mid-append, and
write the whole line before returning. Readers keep a byte offset that is always
just past a newline, leave a line without its newline for later, and skip a torn
line instead of crashing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import string
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toold.storage import file_lock, make_state_dir, open_state, write_all
from toold.team.registry import check_teammate_name

log = logging.getLogger(__name__)

MAIN = "main"
_ALPHABET = string.ascii_letters + string.digits
_CHUNK = 64 * 1024


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


def _line_start(fd: int, pos: int) -> int:
    """The offset just past the last newline before ``pos`` in ``fd`` (0 when there is none)."""
    while pos > 0:
        low = max(0, pos - _CHUNK)
        cut = os.pread(fd, pos - low, low).rfind(b"\n")
        if cut >= 0:
            return low + cut + 1
        pos = low
    return 0


def _whole_lines_end(fd: int, size: int) -> int:
    """The end of the last complete line among the first ``size`` bytes of ``fd``."""
    if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
        return _line_start(fd, size)
    return size


def _read_all(fd: int, pos: int, count: int) -> bytes:
    """Up to ``count`` bytes of ``fd`` from ``pos`` (fewer only at the end of the file)."""
    parts = []
    while count > 0:
        part = os.pread(fd, count, pos)
        if not part:
            break
        parts.append(part)
        pos += len(part)
        count -= len(part)
    return b"".join(parts)


class Mailboxes:
    """The mailbox folder of one workspace."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, agent: str) -> Path:
        """The JSONL file of ``agent`` (a name read from a file or message is checked here)."""
        return self.folder / f"{check_teammate_name(agent)}.jsonl"

    def append(self, message: dict[str, Any]) -> None:
        """Deliver ``message`` to its recipient's mailbox; return once the whole line is written.

        A writer killed in the middle of a large append (SIGKILL interrupts a write
        between pages) leaves a torn tail: part of a line and no newline. Glued to
        it, the next message would be lost in one unparseable line. So under the
        lock, before writing, a tail that does not end in a newline is cut back to
        the last newline, rather than fenced off by starting the new line with a
        newline: the torn line belongs to an append that never returned, so nothing
        acknowledged is in it, and the file stays whole lines (the torn garbage is not
        kept for every reader to trip over). Cutting is safe for readers: their
        offsets are always just past a newline (``read_from`` stops at one,
        ``size`` ends before an unfinished tail) and a torn tail holds no newline,
        so no reader's offset is in the part cut off, and readers only read bytes
        before a newline, which are never cut. A write that fails part way (a full
        disk) is cut back the same way before the error is raised.
        """
        line = (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")
        path = self.path(message["to"])
        make_state_dir(self.folder)
        with file_lock(self.folder / ".lock"):
            # No symlink followed, and no write through a second (hard) link.
            fd = open_state(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, single_link=True)
            try:
                size = os.fstat(fd).st_size
                end = _whole_lines_end(fd, size)
                if end != size:
                    log.warning(
                        "cutting a torn tail of %d bytes from %s's mailbox",
                        size - end,
                        message["to"],
                    )
                    os.ftruncate(fd, end)
                try:
                    write_all(fd, line)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, end)
                    raise
            finally:
                os.close(fd)

    def size(self, agent: str) -> int:
        """Where a new reader of ``agent``'s mailbox starts: the end of its last whole line.

        Not the file size: an unfinished tail (an append in flight, or a torn one that
        the next append cuts) is left for the reader to pick up once it is whole.
        """
        try:
            fd = open_state(self.path(agent))
        except FileNotFoundError:
            return 0
        try:
            return _whole_lines_end(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)

    def read_from(self, agent: str, offset: int) -> tuple[list[dict[str, Any]], int]:
        """Complete messages after ``offset`` and the offset after the last of them.

        Only bytes before a newline that is already there are read: those never
        change, while an unfinished tail may be cut and rewritten by ``append``
        under a reader that holds no lock. An offset in the middle of a line or past
        the end (never one this class hands out: those are just past a newline) is
        moved back to the start of its line, or to the end of the last whole line,
        so the message written next is not skipped.
        """
        try:
            fd = open_state(self.path(agent))
        except FileNotFoundError:
            return [], offset
        try:
            end = _whole_lines_end(fd, os.fstat(fd).st_size)
            start = min(max(offset, 0), end)
            if start > 0 and os.pread(fd, 1, start - 1) != b"\n":
                start = _line_start(fd, start)
            data = _read_all(fd, start, end - start)
            data = data[: data.rfind(b"\n") + 1]
        finally:
            os.close(fd)
        messages = []
        for raw in data.splitlines():
            if not raw.strip():
                continue
            try:
                message = json.loads(raw)
            except ValueError:
                log.warning("skipping a torn line in %s's mailbox", agent)
                continue
            if isinstance(message, dict):
                messages.append(message)
        return messages, start + len(data)
