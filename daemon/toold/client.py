"""A small synchronous JSON-RPC client: to the workspace's engine, or a private daemon.

Used by the command line (``toold tools``, ``toold call``, ``toold jobs``); editors use
their own LSP clients. It imports nothing heavy (no pygls, lsprotocol or pydantic), so
attaching to a running engine costs little more than Python's own start.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path
from typing import IO, Any

from toold.terminal import visible
from toold_protocol import errors

NO_DAEMON_ENV = "TOOLD_NO_DAEMON"
"""Set to 1: every command behaves as with ``--no-daemon`` (a private daemon)."""
ERROR, WARNING = 1, 2
"""window/showMessage's types that a command-line client shows."""


def no_daemon_requested() -> bool:
    """Whether the environment asks for a private daemon (``TOOLD_NO_DAEMON=1``)."""
    return os.environ.get(NO_DAEMON_ENV, "") not in ("", "0")


def shown_message(message: dict[str, Any], warnings: bool) -> str | None:
    """The text of a window/showMessage error for the user (an invalid toold.toml, say),
    and with ``warnings`` of a warning (tools not sandboxed here, a limit that does not
    bind): an engine logs to a file, while a private daemon logs them to the user's
    stderr itself, so a command shows warnings only when an engine serves it."""
    params = message.get("params")
    if message.get("method") != "window/showMessage" or not isinstance(params, dict):
        return None
    shown = (ERROR, WARNING) if warnings else (ERROR,)
    return visible(str(params.get("message", ""))) if params.get("type") in shown else None


class RpcError(Exception):
    """A JSON-RPC error response."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


def write_frame(stream: IO[bytes], message: dict[str, Any]) -> None:
    """Write one Content-Length framed message."""
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    stream.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    stream.flush()


def read_frame(stream: IO[bytes]) -> dict[str, Any] | None:
    """Read one framed message; None at end of stream."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if length is None:
        raise RpcError(errors.PARSE_ERROR, "frame without Content-Length from the daemon")
    result: dict[str, Any] = json.loads(stream.read(length))
    return result


class RpcClient:
    """LSP-framed JSON-RPC over a pair of byte streams: initialize, requests, notifications."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace.resolve()
        self._ids = itertools.count(1)
        self._reader: IO[bytes] | None = None
        self._writer: IO[bytes] | None = None
        self.server_info: dict[str, Any] = {}
        self.notifications: list[dict[str, Any]] = []
        """Notifications received while waiting for answers, oldest first."""

    def __enter__(self) -> RpcClient:
        raise NotImplementedError

    def __exit__(self, *exc: object) -> None:
        raise NotImplementedError

    def _initialize(self) -> None:
        result = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": self.workspace.as_uri(),
                "capabilities": {},
                "clientInfo": {"name": "toold-cli"},
            },
        )
        self.server_info = result.get("serverInfo", {})
        self.notify("initialized", {})

    def _ended(self) -> RpcError:
        return RpcError(errors.DAEMON_EXITED, "the daemon exited before answering")

    def notify(self, method: str, params: Any) -> None:
        """Send a notification."""
        assert self._writer is not None
        write_frame(self._writer, {"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its response; server requests get a null answer."""
        assert self._reader is not None and self._writer is not None
        msg_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            write_frame(self._writer, message)
        except OSError:
            raise self._ended() from None
        while True:
            reply = read_frame(self._reader)
            if reply is None:
                raise self._ended()
            if "method" in reply:
                self._received(reply)
                continue
            if reply.get("id") != msg_id:
                continue
            if "error" in reply:
                err = reply["error"]
                raise RpcError(err.get("code", 0), err.get("message", ""), err.get("data"))
            return reply.get("result")

    def _received(self, message: dict[str, Any]) -> None:
        assert self._writer is not None
        if "id" in message:  # a request from the daemon: we have no UI to offer
            write_frame(self._writer, {"jsonrpc": "2.0", "id": message["id"], "result": None})
        else:
            self.notifications.append(message)

    def wait_notification(self, method: str, **match: Any) -> dict[str, Any]:
        """The params of the first ``method`` notification whose params hold ``match``
        (one received already counts); RpcError when the daemon ends first."""
        assert self._reader is not None
        while True:
            for message in self.notifications:
                params = message.get("params") or {}
                if message["method"] == method and all(
                    params.get(k) == v for k, v in match.items()
                ):
                    self.notifications.remove(message)
                    return dict(params)
            reply = read_frame(self._reader)
            if reply is None:
                raise self._ended()
            if "method" in reply:
                self._received(reply)


class DaemonClient(RpcClient):
    """Spawn a private ``toold serve --no-daemon`` for a workspace and speak to it over stdio."""

    def __init__(self, workspace: Path, *, command: list[str] | None = None) -> None:
        super().__init__(workspace)
        # -P: the launch folder is never put on sys.path (a local toold/ or logging.py).
        self.command = command or [sys.executable, "-P", "-m", "toold", "serve", "--no-daemon"]
        self._proc: Any = None
        """The private daemon (a subprocess.Popen, imported only for it)."""

    def __enter__(self) -> DaemonClient:
        import subprocess

        self._proc = subprocess.Popen(
            [*self.command, "--workspace", os.fspath(self.workspace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._reader, self._writer = self._proc.stdout, self._proc.stdin
        self._initialize()
        return self

    def __exit__(self, *exc: object) -> None:
        import subprocess

        proc = self._proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                self.request("shutdown", None)
                self.notify("exit", None)
            proc.wait(timeout=10)
        except (OSError, RpcError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


class EngineClient(RpcClient):
    """A session on the workspace's engine (started when none runs), over its socket.

    Closing the connection ends the session; the engine, and any background job the
    session started, go on.
    """

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace)
        self._attached: Any = None

    def __enter__(self) -> EngineClient:
        from toold.engine.attach import EngineError, attach

        if not self.workspace.is_dir():
            raise RpcError(errors.INVALID_PARAMS, f"workspace {self.workspace} is not a folder")
        try:
            self._attached = attach(self.workspace, "session", {"client": "toold-cli"})
        except (EngineError, OSError) as exc:
            raise RpcError(errors.DAEMON_EXITED, str(exc)) from None
        self._reader, self._writer = self._attached.reader, self._attached.writer
        # Not waited for: its answer is skipped while the first request's is awaited, so
        # attaching costs one round trip less.
        params = {"processId": os.getpid(), "capabilities": {}, "clientInfo": {"name": "toold-cli"}}
        write_frame(
            self._writer,
            {"jsonrpc": "2.0", "id": next(self._ids), "method": "initialize", "params": params},
        )
        self.notify("initialized", {})
        return self

    def _ended(self) -> RpcError:
        log = self._attached.paths.log if self._attached is not None else "?"
        return RpcError(
            errors.DAEMON_EXITED,
            f"the toold engine for {self.workspace} exited before answering; see its log {log}",
        )

    def __exit__(self, *exc: object) -> None:
        if self._attached is not None:
            self._attached.close()


def connect(workspace: Path, *, private: bool) -> RpcClient:
    """The engine's client, or with ``private`` a short-lived daemon of our own."""
    return DaemonClient(workspace) if private else EngineClient(workspace)
