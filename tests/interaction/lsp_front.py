"""The LSP front end in process: any toold method, raw wire JSON, no process started.

``InProcessDaemon`` is tests/inprocess's client (``serve_stdio(create_server(...))`` on a
thread, framed JSON over two OS pipes) with the options ``toold serve`` passes on
(``--max-message-bytes``) and an ``initialize`` that names no ``processId`` (the daemon
would watch this very process). It is a ``WireClient``, so a test speaks to it as it
spoke to a spawned ``toold serve``: ``call``/``request``/``response`` for any method of
toold's table (tools/list in each format, tools/call as user or agent, todos, tasks,
jobs, skills, checkpoints), ``notification`` for what the daemon pushes, ``send`` and
``send_raw`` for malformed frames, and a reply to the daemon's own requests (a
permission prompt). The handlers are the daemon's: the same session class, method
table, connection and framing transport.

What needs a process stays in tests/e2e: exit codes of ``toold serve``, signals, stdin
that is a file, the client process dying, logs, flags, the relay to the shared engine.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.inprocess.client import InProcessClient
from toold.server import create_server
from toold.transport import serve_stdio


class InProcessDaemon(InProcessClient):
    """An in-process daemon, as ``toold serve --workspace W [--max-message-bytes N]``."""

    def __init__(self, workspace: Path | None, *, max_message_bytes: int | None = None) -> None:
        """Start serving on a thread; ``initialize`` is the test's to send."""
        self._max_message_bytes = max_message_bytes
        self._status: int | None = None
        super().__init__(workspace)

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

    def initialize(self, **params: Any) -> dict[str, Any]:
        """initialize + initialized, with no ``processId`` unless the test names one."""
        params.setdefault("processId", None)
        return super().initialize(**params)

    def wait_exit(self, timeout: float = 20.0) -> int:
        """``serve_stdio``'s status once the daemon ends by itself (``exit``, end of input)."""
        status = self.exit_status.get(timeout=timeout)
        self.exit_status.put(status)  # close() reads it again
        self._server.join(timeout)
        if isinstance(status, BaseException):
            raise status
        return status

    def close(self) -> int:
        """shutdown + exit (when still serving); ``serve_stdio``'s status, once known."""
        if self._status is None:
            self._status = super().close()
        return self._status

    @property
    def closed(self) -> bool:
        """The daemon's status is known (the test or the fixture closed it)."""
        return self._status is not None
