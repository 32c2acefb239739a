"""A daemon session for ``toold run``: requests, and every notification kept from the start.

A thread reads the daemon's stdout from the moment it starts, so a notification that
arrives before a script waits for it (``jobs/finished`` of a quick job) is still there
when the wait step runs. Requests from the daemon (a permission prompt) get a null
answer: a CI run has nobody to ask.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toold.client import RpcError, no_daemon_requested, read_frame, shown_message, write_frame

Message = dict[str, Any]


class SessionClosed(ConnectionError):
    """The daemon exited (or closed its output) before answering."""


class DaemonSession:
    """``toold serve`` for a workspace, spoken to over framed stdio."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace.resolve()
        # -P: the launch folder is never put on sys.path (a local toold/ or logging.py).
        command = [sys.executable, "-P", "-m", "toold", "serve"]
        self._proc = subprocess.Popen(
            [*command, "--workspace", os.fspath(self.workspace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._ids = itertools.count(1)
        self._changed = threading.Condition()
        self._responses: dict[Any, Message] = {}
        self._notifications: list[Message] = []
        self._seen: list[Message] = []
        self._closed = False
        self._sent: set[str] = set()
        """Lifecycle messages sent (a replayed file may bring its own shutdown and exit)."""
        self._write_lock = threading.Lock()
        self._warnings = not no_daemon_requested()
        """An engine serves it: its warnings are shown here (a private daemon logs them)."""
        self._reader = threading.Thread(target=self._read, name="toold-run-reader", daemon=True)
        self._reader.start()

    # -- the wire ------------------------------------------------------------------------
    def _read(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        try:
            while (message := read_frame(stdout)) is not None:
                self._received(message)
        except (OSError, ValueError, RpcError):
            pass  # a torn frame ends the session as the end of output does
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _received(self, message: Message) -> None:
        if "method" in message and "id" in message:
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            return
        shown = shown_message(message, self._warnings)
        if shown is not None:
            print(shown, file=sys.stderr)
        with self._changed:
            if "method" in message:
                self._notifications.append(message)
                self._seen.append(message)
            else:
                self._responses[message.get("id")] = message
            self._changed.notify_all()

    def send(self, message: Message) -> None:
        """Write one message (a request, a notification or an answer) as it is."""
        assert self._proc.stdin is not None
        if message.get("method") in ("shutdown", "exit"):
            self._sent.add(message["method"])
        try:
            with self._write_lock:
                write_frame(self._proc.stdin, message)
        except OSError as exc:
            raise SessionClosed(f"the daemon is gone: {exc}") from None

    def response(self, msg_id: Any) -> Message:
        """The response to request ``msg_id`` (waits for it)."""
        with self._changed:
            while msg_id not in self._responses:
                if self._closed:
                    raise SessionClosed("the daemon exited before answering")
                self._changed.wait()
            return self._responses.pop(msg_id)

    def request(self, method: str, params: Any = None) -> Message:
        """Send a request of our own and return its response message (result or error)."""
        msg_id = f"toold-run-{next(self._ids)}"
        message: Message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.response(msg_id)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- notifications -------------------------------------------------------------------
    def take_notification(
        self, predicate: Callable[[Message], bool], timeout: float
    ) -> Message | None:
        """The earliest notification received since the start that ``predicate`` accepts,
        removed so that no other wait takes it; None after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for i, message in enumerate(self._notifications):
                    if predicate(message):
                        return self._notifications.pop(i)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return None
                self._changed.wait(remaining)

    def seen(self) -> list[Message]:
        """Every notification received so far, taken or not."""
        with self._changed:
            return list(self._seen)

    # -- life ----------------------------------------------------------------------------
    def initialize(self) -> Message:
        """initialize + initialized, as an editor would (processId: this process)."""
        reply = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": self.workspace.as_uri(),
                "capabilities": {},
                "clientInfo": {"name": "toold-run"},
            },
        )
        if "error" in reply:
            raise SessionClosed(f"initialize failed: {json.dumps(reply['error'])}")
        self.notify("initialized", {})
        return reply

    @property
    def exited(self) -> bool:
        """Whether the daemon process has ended."""
        return self._proc.poll() is not None

    def close(self) -> int:
        """shutdown and exit, those not sent yet; the daemon's exit status."""
        proc = self._proc
        try:
            if "shutdown" not in self._sent and "exit" not in self._sent:
                self.request("shutdown")
            if "exit" not in self._sent:
                self.notify("exit")
            proc.wait(timeout=60)
        except (SessionClosed, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            self._reader.join(timeout=10)
        return proc.returncode

    def __enter__(self) -> DaemonSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
