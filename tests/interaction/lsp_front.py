"""The LSP front end in process: any toold method, raw wire JSON, no process started.

``InProcessDaemon`` runs ``serve_stdio(create_server(...))`` (what ``toold serve`` runs,
minus the redirect of ``sys.stdout``) on a thread, reading framed JSON-RPC from one OS
pipe and writing to another, with the options ``toold serve`` passes on
(``--max-message-bytes``) and an ``initialize`` that names no ``processId`` (the daemon
would watch this very process). It is a ``WireClient``, so a test speaks to it as it
spoke to a spawned ``toold serve``: ``call``/``request``/``response`` for any method of
toold's table (tools/list in each format, tools/call as user or agent, todos, tasks,
jobs, skills, checkpoints), ``notification`` for what the daemon pushes, ``send`` and
``send_raw`` for malformed frames, and a reply to the daemon's own requests (a
permission prompt). The handlers are the daemon's: the same session class, method
table, connection and framing transport. No process is spawned, so a test pays for the
handler it checks and not for a Python start-up.

What needs a process stays in tests/e2e: exit codes of ``toold serve``, signals, stdin
that is a file, the client process dying, logs, flags, the relay to the shared engine.
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


class InProcessDaemon(WireClient):
    """An in-process daemon, as ``toold serve --workspace W [--max-message-bytes N]``."""

    def __init__(self, workspace: Path | None, *, max_message_bytes: int | None = None) -> None:
        """Start serving on a thread; frames flow over two pipes (client → daemon, back).
        ``initialize`` is the test's to send."""
        self._max_message_bytes = max_message_bytes
        self._status: int | None = None
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
            server = create_server(workspace, max_message_bytes=self._max_message_bytes)
            return await serve_stdio(server, self._daemon_in, self._daemon_out)

        try:
            self.exit_status.put(asyncio.run(main()))
        except BaseException as exc:  # re-raised by close(), in the test's thread
            self.exit_status.put(exc)
        finally:
            self._daemon_out.close()  # what a process's exit does: the client sees EOF

    @property
    def proc(self) -> Any:
        """The streams ``WireClient`` reads and writes (there is no process)."""
        return self

    @property
    def stdin(self) -> BinaryIO:
        """The client's end of the pipe the daemon reads."""
        return self._stdin

    @property
    def stdout(self) -> BinaryIO:
        """The client's end of the pipe the daemon writes."""
        return self._stdout

    def initialize(self, **params: Any) -> dict[str, Any]:
        """initialize + initialized, with no ``processId`` unless the test names one."""
        params.setdefault("processId", None)
        return super().initialize(**params)

    def wait_exit(self, timeout: float = STOP_S) -> int:
        """``serve_stdio``'s status once the daemon ends by itself (``exit``, end of input)."""
        status = self.exit_status.get(timeout=timeout)
        self.exit_status.put(status)  # close() reads it again
        self._server.join(timeout)
        if isinstance(status, BaseException):
            raise status
        return status

    def close(self) -> int:
        """shutdown + exit (when still serving), then end of input; ``serve_stdio``'s
        status, once known (a second close answers the same)."""
        if self._status is None:
            self._status = self._stop()
        return self._status

    def _stop(self) -> int:
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

    @property
    def closed(self) -> bool:
        """The daemon's status is known (the test or the fixture closed it)."""
        return self._status is not None
