"""The daemon's side of the worker protocol (see toold.sandbox.worker).

Requests go out as one JSON line; progress lines are forwarded to the running call's
CallContext as they arrive; the answer is a result (with the call's meta: exit code,
timeout) or an exception rebuilt under its own class name.
"""

from __future__ import annotations

import builtins
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from toold.tools.context import current_call, report_progress

if TYPE_CHECKING:
    from toold.config import TooldConfig
    from toold.tools.base import Tool

READ_LIMIT = 256 * 1024 * 1024
"""Longest line a worker may send (a result is one line)."""
_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""Built once: json.dumps with options builds an encoder on every call."""


def take_line(buffer: bytearray, eof: bool, who: str) -> bytes | None:
    """The next line a worker sent, taken off ``buffer``; at its output's end what is
    left (maybe b""); None while a line is still coming. WorkerLost past READ_LIMIT: a
    worker (or what runs beside it) cannot make the daemon hold an endless line."""
    end = buffer.find(b"\n")
    if end >= 0 or eof:
        size = end + 1 if end >= 0 else len(buffer)
        line = bytes(buffer[:size])
        del buffer[:size]
        return line
    if len(buffer) > READ_LIMIT:
        raise WorkerLost(f"the {who} worker sent a line over {READ_LIMIT} bytes")
    return None


class SandboxError(RuntimeError):
    """The sandbox could not run the call (not the tool failing)."""


class SandboxUnavailable(SandboxError):
    """The runner's sandbox cannot start here; the message names the fix."""


class WorkerLost(SandboxError):
    """The worker died before answering."""


class _ConfigCache:
    """The configuration as JSON text, recomputed only when the object changes."""

    def __init__(self) -> None:
        self._config: TooldConfig | None = None
        self._text = ""

    def text(self, config: TooldConfig) -> str:
        if config is not self._config:
            self._text = _ENCODER.encode(config.model_dump(mode="json"))
            self._config = config
        return self._text


_configs = _ConfigCache()


def shareable(tool: Tool) -> bool:
    """Whether ``tool``'s calls may share a worker, one after the other: it runs no
    command or code the caller chose and reaches nothing outside the workspace (its
    annotations say so; a tool that says nothing gets a worker of its own per call, as do
    bash and the code runners). Its work is toold's own code on files (grep's ripgrep
    runs with toold's arguments and ends within the call; the worker kills whatever is
    left before the next call), which leaves nothing in the worker that a later call
    could see but caches of what it may read anyway."""
    marks = tool.annotations
    return not (marks.open_world or marks.runs_code or marks.shell)


@dataclass(frozen=True)
class Request:
    """A call's request, to be sent as one line (see ``line``)."""

    head: str
    """The request's JSON object without its closing brace."""
    config: str
    """The configuration's JSON text."""

    def line(self, known: str | None = None) -> bytes:
        """The line for a worker that has the configuration ``known``: the configuration
        is left out when it is the same (the worker keeps the one it was sent last)."""
        if known == self.config:
            return f"{self.head}}}\n".encode()
        # Spliced in as it was encoded once (an object's last member).
        return f'{self.head}, "config": {self.config}}}\n'.encode()


def encode_request(tool: Tool, args: Any, workspace: Path, config: TooldConfig) -> Request:
    """The request for ``tool``; the tool's own runtime wins over the sandbox's."""
    from toold.tools.registry import BuiltinToolProvider

    if BuiltinToolProvider.get_tool_class(tool.name) is not type(tool):
        raise SandboxError(
            f"{tool.name} is not a registered tool class, so a worker cannot rebuild it; "
            "register it with BuiltinToolProvider.register_tool in an imported module, "
            "or set sandboxable = False to run it in the daemon"
        )
    runtime = tool.runtime
    if runtime is not None:
        workspace, config = runtime.workspace, runtime.config
    ctx = current_call.get()
    request = {
        "tool": tool.name,
        "args": to_jsonable_python(args, fallback=str),
        "workspace": str(workspace),
        "origin": ctx.origin if ctx is not None else "agent",
        "reuse": shareable(tool),
    }
    return Request(_ENCODER.encode(request)[:-1], _configs.text(config))


class RemoteError(Exception):
    """Base of stand-ins for worker exceptions whose class cannot be rebuilt here."""


def _exception_class(module: str, name: str) -> type[Exception] | None:
    # Only classes already loaded here: a worker's answer never imports anything.
    source = builtins if module == "builtins" else sys.modules.get(module)
    found = getattr(source, name, None) if source is not None else None
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


def rebuild_exception(payload: Any) -> Exception:
    """The worker's exception as the same class (or a stand-in with the same name)."""
    if not isinstance(payload, dict):
        return WorkerLost(f"malformed error from the worker: {payload!r:.200}")
    name = str(payload.get("type") or "Exception")
    message = str(payload.get("message") or "")
    cls = _exception_class(str(payload.get("module") or ""), name)
    if cls is not None:
        try:
            exc = cls(message)
        except Exception:
            exc = None
        if exc is not None and str(exc) == message:
            return exc
    # Same name and message, so the result still reads "Error: <Name>: <message>".
    stand_in = type(name, (RemoteError,), {"__module__": __name__})
    return stand_in(message)


def _flag(value: Any) -> bool:
    return type(value) is bool


WORKER_META: dict[str, Callable[[Any], bool]] = {
    "exit_code": lambda value: value is None or type(value) is int,
    "timed_out": _flag,
    "is_error": _flag,
}
"""The call meta a worker may report, and the check of its value: what a tool sets in
the worker (toold.tools.context). The daemon's own keys (a job's id, whether a question
was sent) are never a worker's to set."""


def apply_meta(meta: Any) -> None:
    """Copy the worker's call meta (exit code, timed_out, is_error) into the daemon's
    CallContext; any other key, or a value of another type, is dropped."""
    ctx = current_call.get()
    if ctx is None or not isinstance(meta, dict):
        return
    for key, valid in WORKER_META.items():
        if key in meta and valid(meta[key]):
            ctx.meta[key] = meta[key]


async def read_answer(readline: Callable[[], Awaitable[bytes]], who: str) -> Any:
    """Forward progress lines; return the result or raise the tool's exception."""
    return (await read_reply(readline, who))[0]


async def read_reply(readline: Callable[[], Awaitable[bytes]], who: str) -> tuple[Any, bool]:
    """read_answer's result, and whether the worker offered to serve another call."""
    while True:
        line = await readline()
        if not line:
            raise WorkerLost(f"the {who} worker exited without an answer")
        try:
            message = json.loads(line)
        except ValueError:
            raise WorkerLost(f"the {who} worker sent a malformed line: {line[:200]!r}") from None
        if not isinstance(message, dict):
            raise WorkerLost(f"the {who} worker sent a malformed line: {line[:200]!r}")
        if "progress" in message:
            report_progress(str(message["progress"]))
        elif "result" in message:
            apply_meta(message.get("meta"))
            return message["result"], message.get("next") is True
        elif "error" in message:
            raise rebuild_exception(message["error"])
