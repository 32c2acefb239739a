"""Per-call context that reaches a tool without widening its signature.

A contextvar carries it into the tool's coroutine and into worker threads
(asyncio.to_thread copies the context), so ``report_progress`` works from both.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CallContext:
    """Who asked for the call and where its progress and side results go."""

    origin: str = "agent"
    progress: Callable[[str], None] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


current_call: ContextVar[CallContext | None] = ContextVar("toold_call", default=None)


def report_progress(text: str) -> None:
    """Send a progress message for the running call, if anyone listens."""
    ctx = current_call.get()
    if ctx is not None and ctx.progress is not None and text:
        ctx.progress(text)


def set_exit_code(code: int | None, *, timed_out: bool = False) -> None:
    """Record the exit status of the command the running call started."""
    ctx = current_call.get()
    if ctx is not None:
        ctx.meta["exit_code"] = code
        ctx.meta["timed_out"] = timed_out


def failed(text: str) -> str:
    """Mark the running call as failed (``isError``) and return ``text`` unchanged.

    For tools whose spec answers a failure with text (``Error: ...``, "unavailable"):
    the text stays the result, the flag travels in the call's meta (also back from a
    sandbox worker) and the dispatch (toold.dispatch) turns it into ``is_error``.
    """
    ctx = current_call.get()
    if ctx is not None:
        ctx.meta["is_error"] = True
    return text
