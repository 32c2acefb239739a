"""An asyncio loop on a thread, so the async SDK clients (MCP, ACP) serve a sync test body.

The LSP clients of the suite are synchronous (a reader thread and a queue); the mcp and
acp SDKs are async. anyio's blocking portal runs one event loop on a thread and enters
an async context manager in a task of its own, so the SDKs' task groups open and close
in the same task, as they require.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

T = TypeVar("T")

CALL_TIMEOUT_S = 60.0
"""The longest one request may take (a loaded CI machine, a cold import in the agent)."""


class Loop:
    """One event loop thread; what is entered in it is left, in reverse, by ``close``."""

    def __init__(self) -> None:
        """Start the loop's thread."""
        self._stack = contextlib.ExitStack()
        self.portal: BlockingPortal = self._stack.enter_context(start_blocking_portal("asyncio"))

    def enter(self, cm: AbstractAsyncContextManager[T]) -> T:
        """Enter ``cm`` on the loop; it is exited by ``close``."""
        return self._stack.enter_context(self.portal.wrap_async_context_manager(cm))

    def run(self, call: Callable[[], Awaitable[T]], timeout: float = CALL_TIMEOUT_S) -> T:
        """Await ``call()`` on the loop and return its value; TimeoutError after ``timeout``."""

        async def bounded() -> T:
            with anyio.fail_after(timeout):
                return await call()

        return self.portal.call(bounded)

    def close(self) -> None:
        """Exit what was entered, then stop the loop."""
        self._stack.close()
