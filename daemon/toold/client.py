"""A small synchronous JSON-RPC client that starts a daemon and talks to it over stdio.

Used by the command line (``toold tools``, ``toold call``); editors use their own
LSP clients. It imports nothing heavy, so the CLI starts fast.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from toold_protocol import errors


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


class DaemonClient:
    """Spawn ``toold serve`` for a workspace and speak LSP-framed JSON-RPC to it."""

    def __init__(self, workspace: Path, *, command: list[str] | None = None) -> None:
        self.workspace = workspace.resolve()
        # -P: the launch folder is never put on sys.path (a local toold/ or logging.py).
        self.command = command or [sys.executable, "-P", "-m", "toold", "serve"]
        self._ids = itertools.count(1)
        self._proc: subprocess.Popen[bytes] | None = None
        self.server_info: dict[str, Any] = {}

    def __enter__(self) -> DaemonClient:
        self._proc = subprocess.Popen(
            [*self.command, "--workspace", os.fspath(self.workspace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
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
        return self

    def __exit__(self, *exc: object) -> None:
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

    def notify(self, method: str, params: Any) -> None:
        """Send a notification."""
        assert self._proc is not None and self._proc.stdin is not None
        write_frame(self._proc.stdin, {"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its response; server requests get a null answer."""
        assert self._proc is not None and self._proc.stdin and self._proc.stdout
        msg_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        write_frame(self._proc.stdin, message)
        while True:
            reply = read_frame(self._proc.stdout)
            if reply is None:
                raise RpcError(errors.DAEMON_EXITED, "the daemon exited before answering")
            if "method" in reply:
                if "id" in reply:  # a request from the daemon: we have no UI to offer
                    write_frame(
                        self._proc.stdin, {"jsonrpc": "2.0", "id": reply["id"], "result": None}
                    )
                continue
            if reply.get("id") != msg_id:
                continue
            if "error" in reply:
                err = reply["error"]
                raise RpcError(err.get("code", 0), err.get("message", ""), err.get("data"))
            return reply.get("result")
