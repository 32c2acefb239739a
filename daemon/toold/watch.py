"""Watching the workspace for outside changes: .tasks.json, toold.toml and skill folders.

watchfiles (inotify underneath) wakes us on events; there is no polling. Our own
writes come back as events too; reloading compares content, so they notify nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from toold.binding import WorkspaceState
from toold.config import CONFIG_FILE
from toold.planning.tasks import TASKS_FILE
from toold_protocol import names

log = logging.getLogger(__name__)

DEBOUNCE_MS = 50


async def _watch_root(state: WorkspaceState, report: Callable[[str], None]) -> None:
    from watchfiles import awatch

    async for changes in awatch(
        state.root, recursive=False, debounce=DEBOUNCE_MS, step=10, ignore_permission_denied=True
    ):
        touched = {Path(path).name for _, path in changes}
        if TASKS_FILE in touched:
            await asyncio.to_thread(state.tasks.reload)
        if CONFIG_FILE in touched:
            problem = await asyncio.to_thread(state.reload_config)
            if problem:
                report(problem)


def _skill_roots(state: WorkspaceState) -> list[Path]:
    roots = [d for d in state.skills.dirs if d.is_dir()]
    own = state.root / ".toold"
    if not (own / "skills").is_dir() and own.is_dir():
        roots.append(own)  # skills/ may appear later
    return roots


async def _watch_skills(state: WorkspaceState) -> None:
    from watchfiles import awatch

    roots = _skill_roots(state)
    if not roots:
        return
    last = await asyncio.to_thread(state.skills.list)
    async for _ in awatch(*roots, debounce=DEBOUNCE_MS, step=10, ignore_permission_denied=True):
        skills = await asyncio.to_thread(state.skills.list)
        if skills != last:
            last = skills
            state.push(names.SKILLS_CHANGED, {"skills": skills})


async def watch_workspace(state: WorkspaceState, report: Callable[[str], None]) -> None:
    """Run both watchers until cancelled; a watcher failure is logged, not fatal."""
    results = await asyncio.gather(
        _watch_root(state, report), _watch_skills(state), return_exceptions=True
    )
    for result in results:
        if isinstance(result, Exception):
            log.error("workspace watcher stopped: %s", result)
