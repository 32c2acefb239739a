"""What a front end served by the engine over its own SDK shares: ``toold acp``'s and
``toold mcp``'s connections (toold.acp.attached, toold.bridge.attached).

Each is one session of the engine (a ``FrontEnd``, toold.engine.sessions) and its own
editor (the workspace's messages to it go to the connection itself). The engine ends
one with ``request_stop``; ``serve_until_stopped`` runs the SDK's server until the
client hangs up or that stop comes, and cancels it on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any, Self

log = logging.getLogger(__name__)


class AttachedConnection:
    """The bookkeeping an SDK-served connection shares: its stop flag and exit code."""

    kind = "attached"
    """What the connection's failures are logged as (``the ACP connection failed``)."""

    def __init__(self, from_tool: bool) -> None:
        self.from_tool = from_tool
        """The client runs inside one of the engine's tool calls: it is asked nothing."""
        self.client_process_id: int | None = None
        self.execution_events = False
        self.exit_code = 0
        self._stop = asyncio.Event()

    # -- FrontEnd ------------------------------------------------------------------
    @property
    def editor(self) -> Self:
        """Where the workspace's messages to this connection go: here."""
        return self

    @property
    def initialized(self) -> bool:
        """Always ready for the workspace's messages (each connection sorts out its own)."""
        return True

    def request_stop(self, exit_code: int = 0) -> None:
        """End the connection (the engine stops): its running calls are cancelled."""
        if not self._stop.is_set():
            self.exit_code = exit_code
            self._stop.set()

    # -- SessionEditor -------------------------------------------------------------
    def show_error(self, message: str) -> None:
        """No message to show over these protocols: logged, as ``--no-daemon`` does."""
        log.error("%s", message)

    def show_warning(self, message: str) -> None:
        """No message to show: logged."""
        log.warning("%s", message)

    def can_ask(self) -> bool:
        """Whether a question may go out: the connection's ``ask_user`` decides."""
        return True

    async def confirm(self, message: str, actions: list[str], timeout: float) -> str | None:
        """These front ends ask about tool calls only (an editor is asked about reloads)."""
        return None

    # -- serving -------------------------------------------------------------------
    async def serve_until_stopped(self, work: Coroutine[Any, Any, None]) -> bool:
        """Run ``work`` (the SDK's server) until it ends or ``request_stop``; cancelled
        then. Whether it failed (logged here)."""
        running = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({running, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                try:
                    await running
                except Exception:
                    log.exception("the %s connection failed", self.kind)
                    return True
        return False
