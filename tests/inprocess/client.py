"""The in-process tier: the daemon's own ``create_server`` and stdio transport, on a thread.

``serve_stdio`` (what ``toold serve`` runs, minus the redirect of ``sys.stdout``) reads
framed JSON-RPC from one OS pipe and writes to another; the test speaks raw frames
through the same ``WireClient`` the end-to-end tests use. No process is spawned, so a
test pays for the handler it checks and not for a Python start-up: this tier is for
handler logic. What needs a real process (exit codes, signals, stdin that is a file,
the client process dying, logs on stderr) stays in tests/e2e.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import queue
import threading
from pathlib import Path
from typing import Any, BinaryIO

from tests.e2e.wire import WireClient
from toold.server import create_server
from toold.transport import serve_stdio

STOP_S = 20.0


class InProcessClient(WireClient):
    """A ``WireClient`` whose daemon is ``serve_stdio(create_server(...))`` on a thread."""

    def __init__(self, workspace: Path | None) -> None:
        """Start the server thread; frames flow over two pipes (client → daemon, back)."""
        to_daemon_r, to_daemon_w = os.pipe()
        from_daemon_r, from_daemon_w = os.pipe()
        self._daemon_in: BinaryIO = os.fdopen(to_daemon_r, "rb", buffering=0)
        self._daemon_out: BinaryIO = os.fdopen(from_daemon_w, "wb", buffering=0)
        self._stdin: BinaryIO = os.fdopen(to_daemon_w, "wb", buffering=0)
        self._stdout: BinaryIO = os.fdopen(from_daemon_r, "rb")
        self.exit_status: queue.Queue[int | BaseException] = queue.Queue()
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._pending: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.stderr_lines: list[str] = []
        self._server = threading.Thread(
            target=self._serve, args=(workspace,), name="toold-inprocess", daemon=True
        )
        self._threads = [threading.Thread(target=self._read, daemon=True)]
        self._server.start()
        self._threads[0].start()

    def _serve(self, workspace: Path | None) -> None:
        async def main() -> int:
            return await serve_stdio(create_server(workspace), self._daemon_in, self._daemon_out)

        try:
            self.exit_status.put(asyncio.run(main()))
        except BaseException as exc:  # reported by close(), in the test's thread
            self.exit_status.put(exc)
        finally:
            # What the process's exit does for a spawned daemon: the client sees EOF.
            self._daemon_out.close()

    @property
    def proc(self) -> Any:
        """The streams ``WireClient`` reads and writes (there is no process)."""
        return self

    @property
    def stdin(self) -> BinaryIO:
        return self._stdin

    @property
    def stdout(self) -> BinaryIO:
        return self._stdout

    def close(self) -> int:
        """shutdown + exit, then end of input; returns ``serve_stdio``'s exit code."""
        try:
            if self._server.is_alive():
                with contextlib.suppress(OSError, EOFError, TimeoutError):
                    self.response(self.request("shutdown"), timeout=10)
                    self.notify("exit")
            with contextlib.suppress(OSError):
                self._stdin.close()
            status = self.exit_status.get(timeout=STOP_S)
            self._server.join(timeout=STOP_S)
            if isinstance(status, BaseException):
                raise status
            return status
        finally:
            for thread in self._threads:
                thread.join(timeout=STOP_S)
            for stream in (self._stdin, self._stdout, self._daemon_in):
                with contextlib.suppress(OSError):
                    stream.close()
