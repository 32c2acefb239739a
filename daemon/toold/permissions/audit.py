"""The audit log: one JSON line per decision and call in .toold/audit.jsonl, secrets redacted."""

from __future__ import annotations

import json
import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REDACTED = "[REDACTED]"
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
        return _SECRET_VALUE.sub(REDACTED, value)
    return value


class AuditLog:
    """Appends whole lines (O_APPEND, one write each), safe across threads and processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def record(self, **entry: Any) -> None:
        """Append one entry; ``arguments`` is redacted."""
        if "arguments" in entry:
            entry["arguments"] = redact(entry["arguments"])
        entry = {"time": datetime.now(UTC).isoformat(), **entry}
        line = (json.dumps(entry, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
