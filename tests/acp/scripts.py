"""What the ACP tests' scripted model says, shared by the Python and TypeScript SDK clients'
tests: a Messages API that reports known token counts (``MeteredModel``), the
``usage_update`` those counts make, and a subagent's script."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from tests.agents.conftest import ModelServer

STREAMED_OUTPUT = 7
"""Output tokens of a streamed reply: the scripted server's ``message_delta`` reports 7,
and the SDK takes the delta's count over the start's."""


class MeteredModel(ModelServer):
    """The scripted Messages API whose replies report the queued usages, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.usages: deque[dict[str, int]] = deque()
        self._lock = threading.Lock()

    def _next(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, payload = super()._next(body)
        with self._lock:
            if status == 200 and self.usages:
                payload["usage"] = {"output_tokens": STREAMED_OUTPUT, **self.usages.popleft()}
        return status, payload


def context(usage: dict[str, int]) -> int:
    """What a response leaves in the context: all it read, cached or not, and wrote."""
    return sum(usage.values()) + STREAMED_OUTPUT


def sums(*usages: dict[str, int]) -> dict[str, int]:
    """``_meta.toold`` of a usage_update after these responses."""
    total = {
        k: sum(u.get(k, 0) for u in usages)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    }
    return {
        "inputTokens": total["input_tokens"],
        "outputTokens": len(usages) * STREAMED_OUTPUT,
        "cachedReadTokens": total["cache_read_input_tokens"],
        "cachedWriteTokens": total["cache_creation_input_tokens"],
        "totalTokens": sum(context(u) for u in usages),
    }


def update(usage: dict[str, int], *so_far: dict[str, int]) -> dict[str, Any]:
    """The usage_update after the response ``usage``, ``so_far`` the session's responses."""
    return {
        "sessionUpdate": "usage_update",
        "used": context(usage),
        "size": 200_000,
        "_meta": {"toold": sums(*so_far)},
    }


TASK = "Write the answer to out.txt\nIt is 42."


def script(model: ModelServer) -> None:
    """The main agent delegates; the subagent writes a file (asked) and answers."""
    model.tool_use(("subagent", {"task": TASK, "agent_type": "general-purpose"}))
    model.tool_use(("write_file", {"file_path": "out.txt", "content": "42\n"}), text="Writing.")
    model.text("Wrote it.")
    model.text("The subagent wrote out.txt.")


def child_announced(child: str) -> dict[str, Any]:
    """The parent's ``subagent_update`` announcing ``script``'s subagent as session ``child``."""
    return {
        "sessionUpdate": "subagent_update",
        "sessionId": child,
        "title": "general-purpose: Write the answer to out.txt",
        "description": TASK,
        "state": {"state": "running"},
        "_meta": {"toold": {"toolCallId": "toolu_0001"}},
    }


def child_idle(child: str) -> dict[str, Any]:
    """The parent's ``subagent_update`` once the child session's work is done."""
    return {"sessionUpdate": "subagent_update", "sessionId": child, "state": {"state": "idle"}}
