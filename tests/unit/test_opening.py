"""open_workspace: bound and watched inside the block, released after it, even when cancelled."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toold.opening import open_workspace
from toold.workspace import WorkspaceState

WAIT_S = 10.0


def _quiet(method: str, params: dict[str, Any]) -> None:
    """Notifications nobody listens to here."""


def test_the_workspace_is_watched_inside_the_block_and_released_after(workspace: Path) -> None:
    reports: asyncio.Queue[str] = asyncio.Queue()

    async def main() -> tuple[WorkspaceState, str]:
        async with open_workspace(workspace, push=_quiet, report=reports.put_nowait) as state:
            await asyncio.wait_for(state.watching.wait(), WAIT_S)
            # An outside edit is seen by the watcher, whose problems go to ``report``.
            (workspace / "toold.toml").write_text("[permissions\n", encoding="utf-8")
            problem = await asyncio.wait_for(reports.get(), WAIT_S)
            await state.jobs.submit("sleep 30", timeout=60, task_id="sleeper")
            assert state.jobs.get("sleeper")["status"] == "running"
        return state, problem

    state, problem = asyncio.run(main())
    assert "toold.toml" in problem and "keeping the previous configuration" in problem
    assert state.root == workspace.resolve()
    assert state.jobs.get("sleeper")["status"] == "cancelled"  # released: its jobs stopped


def test_a_front_end_cancelled_repeatedly_still_releases_its_workspace(workspace: Path) -> None:
    async def main() -> dict[str, Any]:
        opened: asyncio.Future[WorkspaceState] = asyncio.Future()

        async def front_end() -> None:
            async with open_workspace(workspace, push=_quiet, report=print) as state:
                await state.jobs.submit("sleep 30", timeout=60, task_id="sleeper")
                opened.set_result(state)
                await asyncio.Event().wait()  # serving until cancelled (SIGTERM)

        serving = asyncio.ensure_future(front_end())
        state = await asyncio.wait_for(opened, WAIT_S)
        # Cancelled again and again while it releases the workspace (as an anyio task
        # group delivers a cancellation, or the loop closing): the release goes on.
        while not serving.done():
            serving.cancel()
            await asyncio.sleep(0)  # a step of the loop, not a wait for time
        with pytest.raises(asyncio.CancelledError):
            await serving
        return state.jobs.get("sleeper")

    assert asyncio.run(main())["status"] == "cancelled"
