"""The workspace one LSP session serves, and the configuration changes its editor sends.

``WorkspaceBinding``: by default the session opens the workspace itself after
``initialize`` (toold.opening.open_workspace, bound on a worker thread so initialize is
answered at once) and lets it go when the session closes; given an already-bound
WorkspaceState it serves that one and leaves it open, so several sessions can share one
workspace. ``ConfigReloads``: ``workspace/didChangeConfiguration`` applied in the order
sent, off the loop; requests received meanwhile wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toold.editor import Editor
    from toold.workspace import WorkspaceState


class WorkspaceBinding:
    """The session's workspace: opened by it, or shared with other sessions."""

    def __init__(
        self,
        editor: Editor,
        root: Path | None = None,
        state: WorkspaceState | None = None,
        on_bound: Callable[[WorkspaceState], None] = lambda state: None,
    ) -> None:
        """``editor`` gets the workspace's messages and prompts; ``on_bound`` runs once
        the session's own workspace is bound."""
        self._editor = editor
        self._state = state
        self._on_bound = on_bound
        self.owns_state = state is None
        """Whether this session binds the workspace (and so closes it at its end)."""
        self.root = (state.root if state is not None else root or Path.cwd()).resolve()
        self._binding: asyncio.Future[None] | None = None
        self._opened = contextlib.AsyncExitStack()
        """The workspace this session opened (toold.opening), closed at its end."""

    @property
    def state(self) -> WorkspaceState:
        """The bound workspace (await ``bound()`` first)."""
        if self._state is None:
            raise RuntimeError("the workspace is not bound yet")
        return self._state

    @property
    def current(self) -> WorkspaceState | None:
        """The bound workspace, None before it is."""
        return self._state

    def start_binding(
        self, root: Path, overrides: dict[str, Any] | None, execution_events: bool = False
    ) -> None:
        """Open the workspace in the background (bound on a worker thread), so initialize
        answers at once."""
        self.root = root.resolve()
        self._binding = asyncio.ensure_future(self.bind_workspace(overrides, execution_events))

    async def bound(self) -> None:
        """Wait until the workspace is bound (a no-op after the first time)."""
        if self._binding is None:
            if self._state is None:
                self.start_binding(self.root, None)
            else:  # a shared workspace, bound by its owner
                self._binding = asyncio.get_running_loop().create_future()
                self._binding.set_result(None)
        assert self._binding is not None
        await self._binding

    async def bind_workspace(
        self, overrides: dict[str, Any] | None = None, execution_events: bool = False
    ) -> None:
        """Open the workspace at ``root`` (toold.opening) until the session closes."""
        from toold.opening import open_workspace  # light: the tools load on its worker thread

        editor = self._editor
        # Capabilities are known by now (binding follows initialize) and never change:
        # a client that cannot show message requests makes the guard non-interactive.
        can_ask = editor.can_ask()
        opening = open_workspace(
            self.root,
            push=editor.push,
            report=editor.show_error,
            overrides=overrides,
            execution_events=execution_events,
            ask=editor.ask_user if can_ask else None,
            warn=editor.show_warning,
            confirm=editor.confirm if can_ask else None,
        )
        self._state = await self._opened.enter_async_context(opening)
        self.root = self._state.root
        self._on_bound(self._state)

    async def binding_settled(self) -> None:
        """Wait for a workspace binding in progress to end (bound or failed)."""
        if self._binding is not None:
            await asyncio.wait([self._binding])

    async def close(self) -> None:
        """Let go of a workspace this session opened: its watcher, jobs and sandboxes (a
        shared one was never entered here, so it stays open for its owner)."""
        if self._binding is not None and not self._binding.done():
            self._binding.cancel()  # still binding: nothing is opened yet, and nothing will be
        await self._opened.aclose()


class ConfigReloads:
    """``workspace/didChangeConfiguration``, applied in order; requests wait for it."""

    def __init__(self, binding: WorkspaceBinding, editor: Editor, from_tool: bool) -> None:
        """``from_tool``: the client runs inside a tool call, so its changes never apply."""
        self._binding = binding
        self._editor = editor
        self._from_tool = from_tool
        self._last: asyncio.Future[str | None] | None = None

    async def applied(self) -> None:
        """Wait until the changes sent so far are applied."""
        last = self._last
        if last is not None and not last.done():
            await asyncio.shield(last)

    async def reload(self, overrides: dict[str, Any] | None, *, joining: bool = False) -> None:
        """Apply a change off the loop (a runner may probe bwrap or Docker for seconds).
        ``joining``: the session's initial settings on a workspace bound before it came;
        invalid ones refuse agents' calls until valid settings apply, as at a start."""
        if self._from_tool:
            self._editor.show_warning(
                "configuration not applied: it came from inside a tool call (an agent's "
                "command), which may not change the workspace's settings"
            )
            return
        previous = self._last
        state = self._binding.state

        async def apply() -> str | None:
            if previous is not None:  # changes apply in the order they were sent
                await asyncio.wait([previous])
            return await state.reload(overrides, joining=joining)  # a user action

        self._last = asyncio.ensure_future(apply())
        problem = await asyncio.shield(self._last)
        if problem:
            self._editor.show_error(problem)
