"""The audit log: one JSON line per decision and call in .toold/audit.jsonl, secrets redacted.

Every tools/call writes two lines, so the log stays open between calls (reopened when
the file is moved or deleted, as log rotation does) and redaction skips strings that
cannot hold a secret. Long strings (a written file's content) are cut to
MAX_STRING characters: the log says what was called, it is not a second copy of the data.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REDACTED = "[REDACTED]"
MAX_STRING = 2000
# Matched against the key's words (camelCase and separators split), so "author"
# and "max_tokens" stay readable while "apiKey", "X-Api-Key" and "access_token" do not.
_SECRET_KEY = re.compile(
    r"(?:^|_)(?:pass|password|passwd|passphrase|secret|token|api_?key|auth|authorization"
    r"|cookie|credentials?|private_?key|session_?id|access_?key)(?:_|$)"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")
_SECRET_VALUE = re.compile(
    r"(sk-(ant-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:(?:password|passwd|token|secret|api[_-]?key))\s*[=:]\s*\S+)"
)
# Every match of _SECRET_VALUE contains one of these (lower-cased): a string without
# any is returned as it is, far faster than running the pattern over it.
_SECRET_HINTS = ("sk-", "gh", "akia", "xox", "bearer", "pass", "token", "secret", "api")
# A secret that straddles the cut is redacted whole when it is shorter than this.
_CUT_MARGIN = 512


@functools.lru_cache(maxsize=1024)
def is_secret_key(key: str) -> bool:
    """Whether a field named ``key`` holds a secret (api_key, password, token, ...)."""
    words = _NON_WORD.sub("_", _CAMEL.sub("_", key)).lower()
    return bool(_SECRET_KEY.search(words))


def redact(value: Any, key: str = "") -> Any:
    """A copy of ``value`` with secret-looking keys and values replaced."""
    if key and is_secret_key(key):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _redact_text(value)
    return value


def _redact_text(text: str) -> str:
    low = text.lower()
    if not any(hint in low for hint in _SECRET_HINTS):
        return text
    return _SECRET_VALUE.sub(REDACTED, text)


def shorten(value: Any) -> Any:
    """A copy of ``value`` whose strings are at most MAX_STRING characters (plus a note)."""
    if isinstance(value, dict):
        return {k: shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shorten(v) for v in value]
    if isinstance(value, str) and len(value) > MAX_STRING:
        head = _redact_text(value[: MAX_STRING + _CUT_MARGIN])[:MAX_STRING]
        return f"{head}... [{len(value)} characters]"
    return value


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

    def record(self, **entry: Any) -> None:
        """Append one entry; ``arguments`` is shortened and redacted when written."""
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
            os.write(self._open(), data)

    def _open(self) -> int:
        """The open log, reopened when the path no longer names it (rotated, deleted)."""
        try:
            info = os.stat(self.path)
            current: tuple[int, int] | None = (info.st_dev, info.st_ino)
        except FileNotFoundError:
            current = None
        if self._fd is not None and current == self._inode:
            return self._fd
        self._close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
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


def _line(entry: dict[str, Any]) -> bytes:
    if "arguments" in entry:
        entry["arguments"] = redact(shorten(entry["arguments"]))
    return (json.dumps(entry, ensure_ascii=False, default=str) + "\n").encode("utf-8")
