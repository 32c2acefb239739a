"""Method names of wire contract v1, importable without pydantic (the daemon's fast path)."""

from __future__ import annotations

TOOLS_LIST = "tools/list"
TOOLS_CALL = "tools/call"

CLIENT_REQUESTS: tuple[str, ...] = (TOOLS_LIST, TOOLS_CALL)
"""Requests a client sends to the daemon."""

SERVER_NOTIFICATIONS: tuple[str, ...] = ()
"""Notifications the daemon pushes to the client."""

ALL_METHODS: frozenset[str] = frozenset(CLIENT_REQUESTS + SERVER_NOTIFICATIONS)
