"""The bench scripts' own client of a server on stdio: framing, spawning and stopping.

bench.py, peers.py, runners.py and state.py talk to the daemon through this small
client rather than toold's client code, so their figures measure the daemon. They run
as scripts, so this folder is on ``sys.path`` and they import it as ``lsp``.

- ``frame``, ``write_message``, ``read_body`` and ``read_message``: LSP base-protocol
  framing (``Content-Length`` headers) on byte streams;
- ``ServerProcess``: a server spawned on stdio with its stderr in a temporary file, its
  resident memory, and a ``stop`` that says goodbye (LSP ``shutdown`` + ``exit``) and
  kills the process if that fails (also on leaving a ``with`` block); subclasses say
  how answers are read;
- ``Client``: a ``ServerProcess`` that reads answers on the caller's thread;
- ``toold_cli`` and ``private_engines``: for the benches of the shared engine, the
  console script and a runtime folder of the bench's own, its engines stopped after.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Self

Message = dict[str, Any]


def toold_argv(workspace: Path) -> list[str]:
    """``python -m toold serve --no-daemon --workspace WORKSPACE`` with this interpreter.

    ``--no-daemon``: the bench measures the daemon serving this connection itself, not
    the relay to a shared workspace engine (toold.engine), and leaves no engine behind.
    """
    ws = os.fspath(workspace)
    return [sys.executable, "-m", "toold", "serve", "--no-daemon", "--workspace", ws]


def toold_cli() -> list[str]:
    """The console script users run (``python -P -m toold`` when it is not on PATH)."""
    script = shutil.which("toold")
    return [script] if script else [sys.executable, "-P", "-m", "toold"]


@contextlib.contextmanager
def private_engines() -> Iterator[Path]:
    """The shared engine on (TOOLD_NO_DAEMON unset) under a runtime folder of our own;
    every engine started there is stopped, and the environment restored, on leaving."""
    runtime = tempfile.mkdtemp(prefix="toold-bench-", dir="/tmp")
    saved = {key: os.environ.get(key) for key in ("TOOLD_RUNTIME_DIR", "TOOLD_NO_DAEMON")}
    os.environ["TOOLD_RUNTIME_DIR"] = runtime
    os.environ.pop("TOOLD_NO_DAEMON", None)
    try:
        yield Path(runtime)
    finally:
        subprocess.run([*toold_cli(), "daemon", "stop", "--all"], capture_output=True)
        shutil.rmtree(runtime, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def initialize_params(workspace: Path, **extra: Any) -> Message:
    """Params of an LSP ``initialize`` request rooted at ``workspace``, plus ``extra``."""
    return {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {}, **extra}


# --------------------------------------------------------------------------- framing


def frame(message: Message) -> bytes:
    """One LSP base-protocol frame."""
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def write_message(stream: IO[bytes], message: Message) -> None:
    """Write one framed message and flush it."""
    stream.write(frame(message))
    stream.flush()


def read_body(stream: IO[bytes]) -> bytes | None:
    """The body of the next frame; None when the stream ends (before or within a frame)."""
    length = -1
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            if length >= 0:
                break
            continue
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = stream.read(length)
    return body if len(body) == length else None


def read_message(stream: IO[bytes]) -> Message | None:
    """The next framed message, decoded; None when the stream ends."""
    body = read_body(stream)
    if body is None:
        return None
    message: Message = json.loads(body)
    return message


# --------------------------------------------------------------------------- processes


class ServerProcess:
    """A server spawned on stdio, its stderr kept in a temporary file for error messages.

    ``send`` writes LSP frames (a subclass may frame otherwise); ``request`` (send and
    wait for the result) is up to the subclass, which reads the answers its own way.
    """

    error: type[RuntimeError] = RuntimeError
    """What this client raises when the server dies or answers with an error."""
    stop_timeout_s = 10.0
    """How long ``stop`` waits for the process to exit before killing it."""

    def __init__(self, argv: list[str], *, name: str = "toold", cwd: Path | None = None) -> None:
        self.name = name
        self.last_id = 0
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        try:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
            )
        except BaseException:
            self._stderr.close()
            raise
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_kib(self) -> int:
        """Resident set size from /proc/PID/status."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise self.error(f"{self.name}: no VmRSS in /proc/{self.pid}/status")

    def stderr_tail(self) -> str:
        """The last 2000 bytes the server wrote to stderr, decoded."""
        self._stderr.seek(0)
        return self._stderr.read()[-2000:].decode("utf-8", "replace").strip()

    def failed(self, what: str) -> RuntimeError:
        """``self.error`` saying ``NAME WHAT``, with the tail of the server's stderr."""
        tail = self.stderr_tail()
        return self.error(f"{self.name} {what}; " + (f"stderr:\n{tail}" if tail else "no stderr"))

    def send(self, message: Message) -> None:
        """Write one message (LSP framing)."""
        write_message(self.stdin, message)

    def notify(self, method: str, params: Any) -> None:
        """Send a notification."""
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def new_request(self, method: str, params: Any) -> tuple[int, Message]:
        """A request with the next id (``params`` None: left out), and that id."""
        self.last_id += 1
        message: Message = {"jsonrpc": "2.0", "id": self.last_id, "method": method}
        if params is not None:
            message["params"] = params
        return self.last_id, message

    def request(self, method: str, params: Any) -> Any:
        """Send a request and return its result, or raise ``self.error``."""
        raise NotImplementedError

    def initialize(self, params: Message, initialized: str = "initialized") -> Any:
        """``initialize``, then the ``initialized`` notification; stops the server on failure."""
        try:
            result = self.request("initialize", params)
            self.notify(initialized, {})
        except BaseException:
            self.stop()
            raise
        return result

    def say_goodbye(self) -> None:
        """Ask the server to exit: LSP ``shutdown`` + ``exit``."""
        self.request("shutdown", None)
        self.notify("exit", None)

    def stop(self) -> None:
        """Say goodbye, wait for the exit (kill it if either fails), close the streams."""
        try:
            if self.proc.poll() is None:
                self.say_goodbye()
                self.proc.wait(timeout=self.stop_timeout_s)
        except (OSError, RuntimeError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            self.stopped()
            with contextlib.suppress(OSError):  # unflushed bytes to a dead process
                self.stdin.close()
            self.stdout.close()
            self._stderr.close()

    def stopped(self) -> None:
        """Called once the process is gone, before its streams are closed."""


class Client(ServerProcess):
    """A blocking client: answers are read on the caller's thread, one message at a time."""

    def receive(self) -> Message | None:
        """The next message from the server (LSP framing), or None at the end of its output."""
        return read_message(self.stdout)

    def read(self) -> Message:
        """The next message, or ``self.error`` if the server closed its output."""
        message = self.receive()
        if message is None:
            raise self.failed("closed its output")
        return message

    def read_response(self) -> Message:
        """The next response, answering the server's own requests with null on the way."""
        while True:
            message = self.read()
            if "method" not in message:
                return message
            if "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})

    def result_of(self, response: Message, msg_id: int, method: str = "request") -> Any:
        """The result of ``response`` to request ``msg_id``, or ``self.error``."""
        if response.get("id") != msg_id:
            raise self.error(
                f"{self.name}: expected the response to {method} #{msg_id}, got {response}"
            )
        if "error" in response:
            raise self.error(f"{self.name}: {method} failed: {response['error']}")
        return response.get("result")

    def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its result."""
        msg_id, message = self.new_request(method, params)
        self.send(message)
        return self.result_of(self.read_response(), msg_id, method)
