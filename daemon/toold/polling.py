"""Polling the folders inotify cannot watch: stat snapshots compared every ``POLL_S``.

The fallback of toold.watching when inotify is refused (instances or watches used up, a
filesystem without inotify). A sweep runs on a thread of its own, never on the event
loop, and stats at most ``MAX_ENTRIES`` entries: past that, the next sweep goes on
where this one stopped, so a huge watched set is covered more slowly, never at more
cost. Changes come out as inotify's do: the folder and the names that changed in it.
The notices here say why a folder is polled, naming the limit and the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from toold.inotify import limit

log = logging.getLogger(__name__)

POLL_S = 1.0
"""Seconds between sweeps: changes are seen within about this much."""
MAX_ENTRIES = 20_000
"""Entries stat'ed per sweep at most (about 20 ms of system time)."""

Entry = tuple[int, int, int, bool]
"""An entry as last seen: inode, mtime in ns, size, whether it is a folder."""
Snapshot = dict[str, Entry]
Change = tuple[str, bool]
"""A name that changed in a folder, and whether it is a folder new there."""
Report = Callable[[Path, list[Change] | None], None]
"""A polled folder's changes (None: the folder itself is gone)."""

EVERY = f"polled every {POLL_S:g} s instead"
STILL_SEEN = "outside edits (.tasks.json, toold.toml, skills, team mailboxes) are still seen"
RESTART = "then restart toold's engine (toold daemon stop)"


def _descriptors_left() -> bool:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        return len(os.listdir("/proc/self/fd")) < soft - 1
    except OSError:
        return True


def instances_notice(exc: OSError) -> str:
    """Why everything is polled: ``inotify_init1`` failed with ``exc``."""
    if exc.errno != errno.EMFILE:
        return f"inotify is not available here ({exc.strerror}): the workspace is {EVERY}"
    if not _descriptors_left():  # EMFILE is also this process's own descriptor limit
        return f"toold's engine has no file descriptor left (ulimit -n): the workspace is {EVERY}"
    return (
        f"this user's inotify instances are used up (fs.inotify.max_user_instances = "
        f"{limit('max_user_instances')}): the workspace is {EVERY}; {STILL_SEEN}. Fix: "
        f"sudo sysctl fs.inotify.max_user_instances=1024 (keep it in /etc/sysctl.d/), {RESTART}"
    )


def watch_notice(folder: Path, exc: OSError) -> str:
    """Why ``folder`` is polled: ``inotify_add_watch`` failed with ``exc``."""
    if exc.errno != errno.ENOSPC:
        return f"{folder} cannot be watched with inotify ({exc.strerror}): it is {EVERY}"
    return (
        f"this user's inotify watches are used up (fs.inotify.max_user_watches = "
        f"{limit('max_user_watches')}): the folders toold could not watch are {EVERY}; "
        f"{STILL_SEEN}. Fix: sudo sysctl fs.inotify.max_user_watches=524288 (keep it in "
        f"/etc/sysctl.d/), {RESTART}"
    )


def remote_notice(folder: Path, filesystem: str) -> str:
    """Why ``folder`` is polled: it is on a remote ``filesystem``."""
    return (
        f"{folder} is on {filesystem}, where inotify misses changes made elsewhere: it is {EVERY}"
    )


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def snapshot(folder: Path) -> Snapshot | None:
    """Every entry of ``folder``, symlinks not followed; None when it is no folder now."""
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except OSError:
        return None
    found: Snapshot = {}
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone between the listing and the stat
                found[entry.name] = (
                    st.st_ino,
                    st.st_mtime_ns,
                    st.st_size,
                    stat.S_ISDIR(st.st_mode),
                )
    except OSError:
        return None
    finally:
        os.close(fd)
    return found


def differences(old: Snapshot, new: Snapshot) -> list[Change]:
    """The names added, removed or changed between two snapshots of one folder."""
    changes = []
    for name, entry in new.items():
        before = old.get(name)
        if before != entry:
            fresh = entry[3] and (before is None or before[0] != entry[0] or not before[3])
            changes.append((name, fresh))
    changes += [(name, False) for name in old.keys() - new.keys()]
    return changes


def _scan(folders: list[Path]) -> list[tuple[Path, Snapshot | None]]:
    return [(folder, snapshot(folder)) for folder in folders]


class Poller:
    """Folders polled every ``POLL_S``; ``report`` hears each one's changes, on the loop."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self._dirs: dict[Path, Snapshot] = {}
        self._cursor = 0
        self._task: asyncio.Task[None] | None = None
        self._pool: ThreadPoolExecutor | None = None

    def __contains__(self, folder: Path) -> bool:
        return folder in self._dirs

    def __len__(self) -> int:
        return len(self._dirs)

    def add(self, folder: Path, *, baseline: bool) -> bool:
        """Poll ``folder``: with ``baseline`` from what is there now (False when it is no
        folder), else from empty (a new folder: what is in it is news)."""
        found = snapshot(folder) if baseline else {}
        if found is None:
            return False
        self._dirs[folder] = found
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="toold-poll")
        return True

    def remove(self, folder: Path) -> None:
        """Stop polling ``folder``."""
        self._dirs.pop(folder, None)

    async def _run(self) -> None:
        while self._dirs:
            await asyncio.sleep(POLL_S)
            try:
                await self.sweep()
            except Exception:
                log.exception("polling the watched folders failed")

    def _next_batch(self) -> list[Path]:
        folders = list(self._dirs)
        start = self._cursor % len(folders)
        ordered = folders[start:] + folders[:start]
        batch: list[Path] = []
        budget = MAX_ENTRIES
        for folder in ordered:
            budget -= len(self._dirs[folder]) + 1
            if batch and budget < 0:
                break
            batch.append(folder)
        self._cursor = start + len(batch)
        return batch

    async def sweep(self) -> None:
        """Compare one bounded batch of folders with their last snapshots."""
        if not self._dirs:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="toold-poll")
        loop = asyncio.get_running_loop()
        scanned = await loop.run_in_executor(self._pool, _scan, self._next_batch())
        for folder, found in scanned:
            old = self._dirs.get(folder)
            if old is None:
                continue  # no longer polled
            if found is None:
                del self._dirs[folder]
                self.report(folder, None)
                continue
            self._dirs[folder] = found
            changes = differences(old, found)
            if changes:
                self.report(folder, changes)

    def close(self) -> None:
        """Stop polling everything."""
        self._dirs.clear()
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._pool is not None:
            with contextlib.suppress(RuntimeError):
                self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
