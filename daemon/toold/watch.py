"""Watching the workspace for outside changes: .tasks.json, toold.toml and skill folders.

Every watch is a subscriber of the workspace's one watcher (``state.watcher``,
toold.watching): one inotify instance read by the event loop, so an idle daemon is never
woken, or polling where inotify cannot be had (the user is told once). Our own writes
come back as events too; reloading compares content, so they notify nothing.
A skill folder that does not exist yet is waited for by watching its nearest existing
parent (not recursively), so ``.toold/skills`` created after start-up is seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

from toold.config import CONFIG_FILE
from toold.planning.skills import is_skill_dir
from toold.planning.tasks import TASKS_FILE, TaskStoreError
from toold.watching import FolderWatch
from toold.workspace import WorkspaceState
from toold_protocol import names

log = logging.getLogger(__name__)


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


async def _watch_root(
    state: WorkspaceState, watch: FolderWatch, report: Callable[[str], None]
) -> None:
    # A flood comes as the root itself ("rescan"): the files are then re-read only when
    # their stat changed, so a rename loop in the workspace costs a stat a second.
    seen = {name: _signature(state.root / name) for name in (TASKS_FILE, CONFIG_FILE)}
    async for touched in watch.batches():
        names_ = {path.name for path in touched}
        if state.root in touched:
            for name, before in seen.items():
                if _signature(state.root / name) != before:
                    names_.add(name)
        for name in names_ & seen.keys():
            seen[name] = _signature(state.root / name)
        try:
            if TASKS_FILE in names_:
                await asyncio.to_thread(state.tasks.reload)
            if CONFIG_FILE in names_:
                # From the file: loosening changes wait for the user (WorkspaceState.reload).
                problem = await state.reload(state.overrides, from_file=True)
                if problem:
                    report(problem)
        except TaskStoreError as exc:
            report(str(exc))
        except Exception:
            log.exception("reloading after an outside change failed")


def _nearest_dir(path: Path) -> Path:
    while not is_skill_dir(path) and path.parent != path:
        path = path.parent
    return path


class _SkillWatch:
    """Skill folders watched recursively; missing ones waited for through their parents."""

    def __init__(self, state: WorkspaceState) -> None:
        self.state = state
        # A folder reached through a symlink counts as missing: nothing outside is watched.
        self.live = [d for d in state.skills.dirs if is_skill_dir(d)]
        self.missing = [d for d in state.skills.dirs if not is_skill_dir(d)]
        self.watches: list[FolderWatch] = []

    async def start(self) -> None:
        hub = self.state.watcher
        if self.live:
            self.watches.append(await hub.watch(self.live, recursive=True).start())
        parents = sorted({_nearest_dir(d) for d in self.missing})
        if parents:
            self.watches.append(await hub.watch(parents, recursive=False).start())

    def covers(self, touched: set[Path]) -> bool:
        """Whether any changed path lies in a watched skill folder."""
        return any(d == p or d in p.parents for p in touched for d in self.live)

    def stale(self) -> bool:
        """A missing folder appeared or a watched one vanished: watch again."""
        return any(is_skill_dir(d) for d in self.missing) or not all(
            is_skill_dir(d) for d in self.live
        )

    async def events(self) -> AsyncGenerator[set[Path], None]:
        queue: asyncio.Queue[set[Path]] = asyncio.Queue()

        async def forward(watch: FolderWatch) -> None:
            async for batch in watch.batches():
                queue.put_nowait(batch)

        pumps = [asyncio.ensure_future(forward(w)) for w in self.watches]
        try:
            while True:
                yield await queue.get()
        finally:
            for pump in pumps:
                pump.cancel()

    def close(self) -> None:
        for watch in self.watches:
            watch.close()


async def _watch_skills(state: WorkspaceState, started: Callable[[], None]) -> None:
    last: list[dict[str, Any]] | None = None

    async def rescan() -> None:
        nonlocal last
        skills = await asyncio.to_thread(state.skills.list)
        if last is not None and skills != last:
            state.push(names.SKILLS_CHANGED, {"skills": skills})
        last = skills

    while True:
        watch = _SkillWatch(state)
        try:
            try:
                await watch.start()
                # After the watches exist, so no change falls in between; before
                # ``started``, so a change made once watching is set is one from here.
                await rescan()
            finally:
                started()
            async with contextlib.aclosing(watch.events()) as events:
                async for touched in events:
                    if watch.stale():
                        break
                    if watch.covers(touched):
                        await rescan()
        finally:
            watch.close()


async def _watch_files(
    state: WorkspaceState, report: Callable[[str], None], started: Callable[[], None]
) -> None:
    try:
        watch = await state.watcher.watch([state.root], recursive=False).start()
    finally:
        started()
    try:
        await _watch_root(state, watch, report)
    finally:
        watch.close()


async def watch_workspace(state: WorkspaceState, report: Callable[[str], None]) -> None:
    """Run the watchers until cancelled; ``state.watching`` is set once they are in place."""
    files_ready, skills_ready = asyncio.Event(), asyncio.Event()

    async def announce() -> None:
        await files_ready.wait()
        await skills_ready.wait()
        state.watching.set()

    async def logged(watcher: Awaitable[None], what: str) -> None:
        try:
            await watcher
        except Exception:
            log.exception("the %s watcher stopped", what)

    announcer = asyncio.ensure_future(announce())
    try:
        await asyncio.gather(
            logged(_watch_files(state, report, files_ready.set), "workspace"),
            logged(_watch_skills(state, skills_ready.set), "skills"),
        )
    finally:
        announcer.cancel()
        state.watching.set()  # a failed watcher must not hold up the views waiting on it
