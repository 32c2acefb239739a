"""open_workspace(): the one way a front end opens a workspace and lets it go.

Every front end (the engine, ``toold serve --no-daemon``, ``toold mcp``, each ACP
session) serves a workspace the same way: bind it on a worker thread (loading the tools
and probing the runner take a while), watch it for outside changes, serve, and at the
end stop the watcher and release what it holds (``WorkspaceState.aclose``), whatever
cancels the front end meanwhile. What differs between them is only where the
workspace's messages go: the callbacks passed in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from toold.workspace import Asker, Confirm, Push, Report, WorkspaceState

T = TypeVar("T")


@contextlib.asynccontextmanager
async def open_workspace(
    root: Path,
    *,
    push: Push,
    report: Report,
    overrides: dict[str, Any] | None = None,
    execution_events: bool = False,
    ask: Asker | None = None,
    warn: Report | None = None,
    confirm: Confirm | None = None,
) -> AsyncIterator[WorkspaceState]:
    """The workspace at ``root``, bound and watched while the block runs, released after.

    ``push`` carries the workspace's notifications (toold_protocol.names); ``report``
    shows the user a problem (an invalid configuration at start, a reload or the tasks
    file failing after an outside change); ``ask`` is the guard's question (None: a
    call that needs an answer is refused), ``warn`` shows warnings and ``confirm`` asks
    about loosening reloads (None: they stay held). ``overrides`` are the editor's
    settings over toold.toml; ``execution_events`` sends the runner's events.
    """

    def bound() -> WorkspaceState:
        from toold.assembly import bind  # on the worker thread: the tools load off the loop

        return bind(
            root, overrides, push, report, execution_events, ask=ask, warn=warn, confirm=confirm
        )

    state = await asyncio.to_thread(bound)
    from toold.watch import watch_workspace  # loaded with the workspace, just now

    watcher = asyncio.ensure_future(watch_workspace(state, report))
    try:
        yield state
    finally:
        await to_the_end(_release(state, watcher))


async def _release(state: WorkspaceState, watcher: asyncio.Future[None]) -> None:
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await watcher  # the watcher's own failures were logged where they happened
    await state.aclose()


async def to_the_end(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even when the caller is cancelled meanwhile (a front end
    stopping on SIGTERM must still stop its jobs and sandboxes); such a cancellation is
    raised once the work is done."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            # Either the caller was cancelled (the work goes on: wait again) or the work
            # itself was (the loop is closing): the loop's condition tells which.
            cancelled = True
    result = task.result()
    if cancelled:
        raise asyncio.CancelledError
    return result
