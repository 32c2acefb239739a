"""A raw-wire JSON-RPC client for end-to-end tests, independent of toold's own code.

It frames bytes itself, reads on a thread into a queue, and lets tests assert on
the exact JSON the daemon sends, or send malformed frames on purpose.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT = 20.0


class WireClient:
    """Spawns ``python -m toold serve`` and exchanges framed JSON with it."""

    def __init__(
        self, workspace: Path | None, *extra_args: str, env: Mapping[str, str] | None = None
    ) -> None:
        """``env`` replaces the daemon's environment (default: this process's)."""
        argv = [sys.executable, "-m", "toold", "serve", *extra_args]
        if workspace is not None:
            argv += ["--workspace", os.fspath(workspace)]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workspace or Path.cwd(),
            env=None if env is None else dict(env),
        )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._pending: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.stderr_lines: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._drain_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # -- transport -------------------------------------------------------
    def _read(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line or not line.endswith(b"\n"):  # end, or a frame torn by a kill
                    self.messages.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length is not None, "daemon sent a frame without Content-Length"
            body = stream.read(length)
            if len(body) < length:
                self.messages.put(None)
                return
            self.messages.put(json.loads(body))

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line.decode("utf-8", "replace"))

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        """Frame and write one JSON value."""
        body = json.dumps(message).encode("utf-8")
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    # -- messages --------------------------------------------------------
    def next_message(self, match: Any, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The first message (kept or new) for which ``match(msg)`` is true."""
        for i, msg in enumerate(self._pending):
            if match(msg):
                return self._pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"no matching message within {timeout}s; stderr: {self.stderr()}"
                )
            try:
                msg = self.messages.get(timeout=remaining)
            except queue.Empty:
                continue
            if msg is None:
                raise EOFError(f"daemon closed stdout; stderr: {self.stderr()}")
            if match(msg):
                return msg
            self._pending.append(msg)

    def request(self, method: str, params: Any = None, *, msg_id: Any = None) -> Any:
        """Send a request; returns its id."""
        msg_id = next(self._ids) if msg_id is None else msg_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def response(self, msg_id: Any, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The response (result or error) to request ``msg_id``."""
        return self.next_message(
            lambda m: "method" not in m and m.get("id") == msg_id, timeout=timeout
        )

    def call(self, method: str, params: Any = None, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """Request and return the result; fails the test on an error response."""
        reply = self.response(self.request(method, params), timeout=timeout)
        assert "error" not in reply, reply
        return reply["result"]

    def notification(self, method: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The next notification named ``method``."""
        return self.next_message(lambda m: m.get("method") == method and "id" not in m, timeout)

    def initialize(self, **params: Any) -> dict[str, Any]:
        """initialize + initialized; returns the initialize result."""
        base: dict[str, Any] = {"processId": os.getpid(), "capabilities": {}}
        base.update(params)
        result = self.call("initialize", base)
        self.notify("initialized", {})
        return result

    def tool(self, name: str, origin: str = "user", **arguments: Any) -> dict[str, Any]:
        """tools/call result; the test acts as a person (origin "user") unless told otherwise."""
        params = {"name": name, "arguments": arguments, "origin": origin}
        return self.call("tools/call", params)

    def job_finished(self, job_id: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The params of the jobs/finished notification of ``job_id``."""
        params: dict[str, Any] = self.next_message(
            lambda m: m.get("method") == "jobs/finished" and m["params"]["jobId"] == job_id,
            timeout,
        )["params"]
        return params

    def stderr(self) -> str:
        return "".join(self.stderr_lines)[-4000:]

    def close(self) -> int:
        """shutdown + exit when still running; returns the exit status."""
        try:
            if self.proc.poll() is None:
                try:
                    self.response(self.request("shutdown"), timeout=10)
                    self.notify("exit")
                    self.proc.wait(timeout=10)
                except (OSError, EOFError, TimeoutError, subprocess.TimeoutExpired):
                    self.proc.kill()
            return self.proc.wait(timeout=10)
        finally:
            for thread in self._threads:
                thread.join(timeout=10)
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()


def job_id_of(result: dict[str, Any]) -> str:
    """The job id of a successful background_run result."""
    assert result["isError"] is False, result
    match = re.fullmatch(r"Submitted background task ([A-Za-z0-9]{8})", result["content"])
    assert match, result
    return match.group(1)


def daemon_log(client: WireClient, workspace: Path) -> str:
    """What the daemon logged: ``toold serve``'s stderr, then the log of the workspace's
    engine, where a session's lines go on the default path."""
    from toold.engine.location import EnginePaths

    log = EnginePaths.of(workspace).log
    return client.stderr() + (log.read_text(errors="replace") if log.is_file() else "")
