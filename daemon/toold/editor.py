"""The editor on the other end of one session: messages, prompts and progress.

``Editor`` talks to the client the way toold does: ``window/showMessage`` (show_error,
show_warning), permission and confirmation prompts over ``window/showMessageRequest``
(ask_user, confirm), ``$/progress`` for a request carrying a workDoneToken (work_done,
WorkDone, and the client's cancel of it), and the contract's notifications (push). Each
is safe to call from any thread. Everything here belongs to one session, never to the
workspace: sessions sharing a workspace each talk to their own editor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import toold_protocol
from toold.config import PermissionsConfig
from toold.connection import ResponseError
from toold.rpc import dump
from toold_protocol.names import PERMISSIONS_PREVIEW

if TYPE_CHECKING:
    from toold.connection import JsonRpcConnection
    from toold.tools.base import Tool

log = logging.getLogger(__name__)

ASK_ACTIONS = {"Allow": "allow", "Always allow": "always", "Deny": "deny"}
"""A permission prompt's buttons → the guard's answers."""
ProgressToken = int | str
ERROR, WARNING = 1, 2
"""window/showMessage's MessageType (LSP's messages are written as plain JSON here:
lsprotocol's types would cost each session's process 15 MiB and ~250 ms to load)."""
PROGRESS = "$/progress"
SHOW_MESSAGE, SHOW_MESSAGE_REQUEST = "window/showMessage", "window/showMessageRequest"


class WorkDone:
    """One request's progress: ``report`` texts, then the ``outcome`` its end names
    (``done`` unless the handler says otherwise; ``cancelled`` or ``failed`` when it
    was cancelled or raised)."""

    def __init__(self, editor: Editor, token: ProgressToken | None) -> None:
        self._editor, self._token = editor, token
        self.outcome = "done"

    @property
    def reporting(self) -> bool:
        """Whether the client asked for progress (reports are dropped otherwise)."""
        return self._token is not None

    def report(self, text: str) -> None:
        """One ``$/progress`` report."""
        if self._token is not None:
            self._editor.progress(self._token, {"kind": "report", "message": text})


def _default_timeout() -> float:
    return float(PermissionsConfig().ask_timeout)


class Editor:
    """One session's editor, over its JSON-RPC connection."""

    def __init__(
        self,
        connection: JsonRpcConnection,
        *,
        tool_named: Callable[[str], Tool | None] = lambda name: None,
        prompt_timeout: Callable[[], float] = _default_timeout,
    ) -> None:
        """``tool_named`` finds the tool a prompt previews; ``prompt_timeout`` gives
        ``permissions.ask_timeout`` (both read the workspace once it is bound)."""
        self.connection = connection
        self.tool_named = tool_named
        self.prompt_timeout = prompt_timeout
        self.capabilities: dict[str, Any] | None = None
        """What the client said it can do (initialize's ``capabilities``, decoded)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop serving this session (messages from other threads are sent on it)."""
        self._cancellable: dict[ProgressToken, asyncio.Task[Any]] = {}

    def _in_loop(self, func: Callable[..., Any], *args: Any) -> None:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            func(*args)
        else:
            loop.call_soon_threadsafe(func, *args)

    # -- progress ------------------------------------------------------------------
    def progress(self, token: ProgressToken, value: Any) -> None:
        """One ``$/progress`` notification (begin, report or end)."""
        params = {"token": token, "value": value}
        self._in_loop(self.connection.notify, PROGRESS, params)

    @contextlib.contextmanager
    def work_done(self, token: ProgressToken | None, title: str) -> Iterator[WorkDone]:
        """``$/progress`` begin, reports and end for a request carrying ``token``.

        The client's ``window/workDoneProgress/cancel`` for the token cancels the
        running request (answered -32800), as ``$/cancelRequest`` does. Without a
        token nothing is sent.
        """
        done = WorkDone(self, token)
        if token is None:
            yield done
            return
        self.progress(token, {"title": title, "kind": "begin", "cancellable": True})
        task = asyncio.current_task()
        if task is not None:
            self._cancellable[token] = task
        try:
            yield done
        except asyncio.CancelledError:
            done.outcome = "cancelled"
            raise
        except Exception:
            done.outcome = "failed"
            raise
        finally:
            self._cancellable.pop(token, None)
            self.progress(token, {"kind": "end", "message": done.outcome})

    def cancel_work(self, token: ProgressToken) -> None:
        """Cancel the request whose progress ``token`` the client cancelled."""
        task = self._cancellable.get(token)
        if task is not None:
            task.cancel()
        else:
            log.warning("ignoring work done progress cancel for unknown token %s", token)

    # -- notifications -------------------------------------------------------------
    def push(self, method: str, params: dict[str, Any]) -> None:
        """Send one of the contract's notifications, validated against its model."""
        payload = dump(toold_protocol.METHODS[method].params.model_validate(params))
        self._in_loop(self.connection.notify, method, payload)

    def show_error(self, message: str, kind: int = ERROR) -> None:
        """window/showMessage an error (or a message of another ``kind``) to the user."""
        log.log(logging.ERROR if kind == ERROR else logging.WARNING, "%s", message)
        params = {"type": kind, "message": f"toold: {message}"}
        self._in_loop(self.connection.notify, SHOW_MESSAGE, params)

    def show_warning(self, message: str) -> None:
        """window/showMessage a warning to the user."""
        self.show_error(message, WARNING)

    # -- prompts -------------------------------------------------------------------
    def can_ask(self) -> bool:
        """Whether the client said it can show message requests with actions."""
        window = (self.capabilities or {}).get("window")
        return isinstance(window, dict) and window.get("showMessage") is not None

    def shows_diffs(self) -> bool:
        """Whether the client set ``experimental.toold.diffPreview`` in its capabilities."""
        experimental = (self.capabilities or {}).get("experimental")
        ours = experimental.get("toold") if isinstance(experimental, dict) else None
        return isinstance(ours, dict) and ours.get("diffPreview") is True

    async def ask_user(
        self, tool: str, args: Any, reason: str, timeout: float | None = None
    ) -> str | None:
        """Allow / Always allow / Deny a tool call: the guard's answer, None without one."""
        if not self.can_ask():
            return None
        from toold.permissions.prompt import question  # loaded with the first prompt

        message = question(tool, args, reason)
        message = await self._with_preview(message, tool, args, reason)
        wait = self.prompt_timeout() if timeout is None else timeout
        title = await self.confirm(message, list(ASK_ACTIONS), wait)
        return None if title is None else ASK_ACTIONS[title]

    async def _with_preview(self, message: str, tool: str, args: Any, reason: str) -> str:
        """Send ``permissions/preview`` to a client that shows diffs, or add the capped
        diff to the prompt's ``message`` (toold.tools.preview)."""
        found = self.tool_named(tool)
        if found is None or not found.previews:
            return message
        from toold.tools import preview

        edits = await asyncio.to_thread(preview.preview_edits, found, args)
        if edits is None:
            return message
        if not isinstance(edits, str) and self.shows_diffs():
            self.push(PERMISSIONS_PREVIEW, preview.notification(tool, reason, edits))
            return message
        return f"{message}\n\n{preview.in_message(edits)}"

    async def confirm(self, message: str, actions: list[str], timeout: float) -> str | None:
        """window/showMessageRequest offering ``actions``: the title chosen, None without one."""
        params = {
            "type": WARNING,
            "message": f"toold: {message}",
            "actions": [{"title": t} for t in actions],
        }
        asked = self.connection.send_request(SHOW_MESSAGE_REQUEST, params)
        try:
            item = await asyncio.wait_for(asked, timeout)
        except (TimeoutError, ResponseError) as exc:
            log.info("no answer to %r: %s", message, exc or "timeout")
            return None
        title = item.get("title") if isinstance(item, dict) else None
        return title if isinstance(title, str) and title in actions else None
