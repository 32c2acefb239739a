"""The audit log: one JSON line per call in .toold/audit.jsonl, secrets redacted.

``ToolGateway.call`` (toold.gateway) writes one line for every call, refused or run::

    {"time": ..., "event": "call", "tool": "bash", "origin": "agent",
     "arguments": {...}, "decision": "user-allowed", "verdict": "allowed",
     "reason": "shell command", "rule": ..., "durationMs": 12.5, "outcome": "ok",
     "exitCode": 0, "jobId": ...}

``arguments`` are the ones the guard judged (validated: aliases folded, defaults filled;
as sent when they were invalid). ``decision`` is the guard's word (allowed, user-allowed,
always-allowed, denied), or ``blocked`` (a pre hook's block) or ``refused`` (arguments or
files the guard could not judge); ``verdict`` is the outcome's kind (toold.outcome: ran,
allowed, denied_by_rule, denied_by_user, refused); ``rule`` the deciding rule's text. A
call that ran adds ``durationMs``, ``outcome`` (ok or error) and ``exitCode``; ``jobId``
names the background job it started. A call cancelled while judged or running has
``outcome`` cancelled (and no verdict). The log stays open between
calls (reopened when the file is moved or deleted, as log rotation does) and redaction
(toold.permissions.redaction) skips strings that cannot hold a secret.

The log records what was decided, not the data. A string longer than MAX_STRING
characters (a written file's content, a long command) is stored as its redacted first
MAX_STRING characters, its length and the SHA-256 of its UTF-8 bytes::

    "import os ...… [65536 characters, sha256:<64 hex digits>]"

so a line costs the same whatever was written, a file can be matched to the call that
wrote it, and redaction only ever reads the excerpt (plus _CUT_MARGIN characters, so
that a secret straddling the cut goes whole). The digest tells nothing of a secret
inside a long string unless all the rest of it is known. The log is opened as a state
file (storage.open_state): never through a symlink, never a file with other hard links;
when it cannot be opened the entries are dropped and the reason logged, the tool calls
go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toold.permissions.redaction import REDACTED, is_secret_name, redact, redact_text
from toold.storage import open_state

__all__ = ["MAX_STRING", "REDACTED", "AuditLog", "is_secret_key", "redact", "shorten"]

log = logging.getLogger(__name__)

MAX_STRING = 400
"""Strings longer than this are stored as an excerpt, their length and their SHA-256."""
# A secret that straddles the cut is redacted whole when it is shorter than this.
_CUT_MARGIN = 512
is_secret_key = is_secret_name
"""Whether a field named ``key`` holds a secret (api_key, password, token, ...)."""


def shorten(value: Any) -> Any:
    """A copy of ``value`` whose long strings are a redacted excerpt, length and digest."""
    if isinstance(value, dict):
        return {k: shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shorten(v) for v in value]
    if isinstance(value, str) and len(value) > MAX_STRING:
        return _shown(value)
    return value


def _shown(value: str) -> str:
    """``value`` redacted, or a long one's redacted excerpt, length and digest (redacted
    apart: a digest is a long run with digits, which would send the whole excerpt through
    every detector)."""
    if len(value) <= MAX_STRING:
        return redact_text(value)
    head = redact_text(value[: MAX_STRING + _CUT_MARGIN])[:MAX_STRING]
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{head}… [{len(value)} characters, sha256:{digest}]"


class AuditLog:
    """Appends whole lines (O_APPEND), safe across threads and processes.

    Inside an event loop, entries are stamped when recorded but written a moment later,
    together, after the answer to the call has gone out (two loop turns on): the log
    stays off each call's critical path. Without a running loop (and on ``flush`` or
    ``close``) they are written at once. A crash loses at most the entries of the
    current loop turn.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None
        self._pending: list[dict[str, Any]] = []
        self._scheduled = False
        self._failure: str | None = None

    def record(self, **entry: Any) -> None:
        """Append one entry; its strings are shortened and redacted when written."""
        entry = {"time": datetime.now(UTC).isoformat(), **entry}
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            self._pending.append(entry)
            if loop is None or self._scheduled:
                schedule = False
            else:
                schedule = self._scheduled = True
        if loop is None:
            self.flush()
        elif schedule:
            # The first hop lands behind the call's own completion; the second behind
            # the response that completion sends.
            loop.call_soon(loop.call_soon, self.flush)

    def flush(self) -> None:
        """Write every pending entry now, in one write."""
        with self._lock:
            entries, self._pending, self._scheduled = self._pending, [], False
            if not entries:
                return
            data = b"".join(_line(entry) for entry in entries)
            try:
                os.write(self._open(), data)
            except OSError as exc:
                self._close()
                if str(exc) != self._failure:  # once per distinct cause, not per call
                    log.error(
                        "audit log %s not written (%d entries dropped): %s",
                        self.path,
                        len(entries),
                        exc,
                    )
                self._failure = str(exc)
            else:
                self._failure = None

    def _open(self) -> int:
        """The open log, reopened when the path no longer names it (rotated, deleted,
        replaced by a symlink: lstat sees the link, and open_state refuses it)."""
        try:
            info = os.lstat(self.path)
            current: tuple[int, int] | None = (info.st_dev, info.st_ino)
        except FileNotFoundError:
            current = None
        if self._fd is not None and current == self._inode:
            return self._fd
        self._close()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        fd = open_state(self.path, flags, 0o600, create_dirs=True, single_link=True)
        info = os.fstat(fd)
        self._fd, self._inode = fd, (info.st_dev, info.st_ino)
        return fd

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = self._inode = None

    def close(self) -> None:
        """Write what is pending and close the file; the next record opens it again."""
        self.flush()
        with self._lock:
            self._close()

    def __del__(self) -> None:
        self._close()


_OWN_WORDS = frozenset({"time", "event", "tool", "origin", "decision", "verdict", "outcome"})
"""Fields whose values are toold's own words: its clock, a registered tool's name, the
wire's origins and the verdict's vocabulary. Nothing of a caller's reaches them, so they
skip redaction (about half its cost per line)."""


def _line(entry: dict[str, Any]) -> bytes:
    # Every other field, not only the arguments: a verdict's reason may quote the command.
    own = {k: v for k, v in entry.items() if k in _OWN_WORDS}
    rest = redact({k: v for k, v in entry.items() if k not in _OWN_WORDS}, text=_shown)
    shown = {k: own[k] if k in own else rest[k] for k in entry}  # the entry's own order
    return (json.dumps(shown, ensure_ascii=False, default=str) + "\n").encode("utf-8")
