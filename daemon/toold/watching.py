"""One watcher per workspace: a single inotify instance shared by every folder watch,
and polling for what inotify cannot watch.

``WatchHub`` (``WorkspaceState.watcher``) owns the instance, read by the event loop
(``loop.add_reader``, one bounded read per wake-up): no thread and no timer run while
idle. ``FolderWatch`` is one subscriber (the workspace root, skills, a team mailbox):
its folders are added to and removed from the hub's instance as they come and go.
Events are gathered until none came for ``QUIET_S`` (an editor's save is a burst: temp
file, rename), at most ``DEBOUNCE_S`` after the first, and handed over as one set of
paths. A flood (more than ``MAX_PENDING`` paths, or the kernel's queue overflowing)
becomes the watched roots themselves, at most once per ``FLOOD_S``: the reader rescans.

When inotify cannot be had (``inotify_init1`` refused: instances used up, or no
inotify; ``inotify_add_watch`` refused: watches used up; a filesystem where inotify
misses changes made elsewhere), the folders concerned are polled (toold.polling) and
``notice`` is told once per cause, naming the limit and the fix. See docs/watching.md.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from toold.inotify import (
    FULL_BYTES,
    IN_IGNORED,
    IN_ISDIR,
    IN_Q_OVERFLOW,
    NEW_DIR,
    UNWATCHABLE,
    Inotify,
    parse,
    remote_filesystem,
)
from toold.polling import Change, Poller, instances_notice, remote_notice, watch_notice

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.05
QUIET_S = 0.01
FLOOD_S = 1.0
MAX_PENDING = 1000
"""Changed paths one batch holds; past that, it reports the watched roots instead."""
POLLING_ENV = "TOOLD_WATCH_POLLING"
"""Set to 1 to poll everything (a filesystem toold does not recognise as remote)."""


class _Dir:
    __slots__ = ("watches", "wd")

    def __init__(self, wd: int | None, watch: FolderWatch) -> None:
        self.wd = wd  # None: polled
        self.watches = {watch}


class WatchHub:
    """The workspace's one inotify instance (opened on first use), shared by its watches."""

    def __init__(
        self, notice: Callable[[str], None] | None = None, *, polling: bool = False
    ) -> None:
        self.notice: Callable[[str], None] = notice or (lambda message: None)
        """Tells the user (every session) why something is polled; once per cause."""
        self.polling = polling or os.environ.get(POLLING_ENV) == "1"
        self.loop: asyncio.AbstractEventLoop | None = None
        self._inotify: Inotify | None = None
        self._dirs: dict[Path, _Dir] = {}
        self._wds: dict[int, list[Path]] = {}
        self._poller = Poller(self._polled)
        self._told: set[str] = set()
        self._flood_until = 0.0  # loop time: reads are not parsed before it

    def watch(self, roots: Sequence[Path], *, recursive: bool) -> FolderWatch:
        """A new subscriber on ``roots`` (``start`` it)."""
        return FolderWatch(roots, recursive=recursive, hub=self)

    @property
    def instances(self) -> int:
        """inotify instances held: 1, or 0 while nothing is watched or all is polled."""
        return int(self._inotify is not None)

    def polled(self) -> list[Path]:
        """The folders polled rather than watched by inotify."""
        return [folder for folder, known in self._dirs.items() if known.wd is None]

    def _tell(self, cause: str, message: str) -> None:
        if cause not in self._told:
            self._told.add(cause)
            log.warning("%s", message)
            self.notice(message)

    def _instance(self) -> Inotify | None:
        running = asyncio.get_running_loop()
        if self.loop is not running:
            if self.loop is not None:  # a test's earlier loop is gone, and its watches
                self.close()
            self.loop = running
            if not self.polling:
                try:
                    self._inotify = Inotify()
                except OSError as exc:
                    self._tell("instances", instances_notice(exc))
                else:
                    self.loop.add_reader(self._inotify.fd, self._readable)
        return self._inotify

    def add(self, folder: Path, watch: FolderWatch, *, must_exist: bool, baseline: bool) -> bool:
        """Watch ``folder`` for ``watch``: False when it is no folder (OSError if
        ``must_exist``). ``baseline``: a polled folder's contents now are not news."""
        known = self._dirs.get(folder)
        if known is not None:
            known.watches.add(watch)
            return True
        inotify = self._instance()
        wd = None
        if inotify is not None:
            remote = remote_filesystem(folder)
            if remote is not None:
                self._tell(remote, remote_notice(folder, remote))
            else:
                try:
                    wd = inotify.add(folder)
                except OSError as exc:
                    if exc.errno not in UNWATCHABLE:
                        if must_exist:
                            raise
                        return False  # gone again, or a symlink: nothing to watch
                    self._tell(str(exc.errno), watch_notice(folder, exc))
        if wd is None and not self._poller.add(folder, baseline=baseline):
            if must_exist:
                raise FileNotFoundError(errno.ENOENT, "no folder to watch", os.fspath(folder))
            return False
        self._dirs[folder] = _Dir(wd, watch)
        if wd is not None:
            self._wds.setdefault(wd, []).append(folder)
        return True

    def remove(self, folder: Path, watch: FolderWatch) -> None:
        """``watch`` no longer watches ``folder``; the last one out removes the watch."""
        known = self._dirs.get(folder)
        if known is None:
            return
        known.watches.discard(watch)
        if known.watches:
            return
        del self._dirs[folder]
        if known.wd is None:
            self._poller.remove(folder)
            return
        if not self._unlist(folder, known.wd) and self._inotify is not None:
            self._inotify.remove(known.wd)

    def _unlist(self, folder: Path, wd: int) -> bool:
        """Take ``folder`` off kernel watch ``wd``; whether another folder still uses it
        (one inode reached by two paths shares its watch)."""
        paths = self._wds.get(wd, [])
        if folder in paths:
            paths.remove(folder)
        if not paths:
            self._wds.pop(wd, None)
        return bool(paths)

    def refresh(self, folder: Path) -> None:
        """After a flood (its events unread): ``folder``'s kernel watch is still its own,
        or it is dropped (gone), or moved to a new inode made at the same path."""
        known = self._dirs.get(folder)
        if known is None or known.wd is None or self._inotify is None:
            return
        try:
            wd: int | None = self._inotify.add(folder)
        except OSError:
            wd = None
        if wd == known.wd:
            return
        self._unlist(folder, known.wd)
        if wd is None:
            self._lost(folder)
            return
        known.wd = wd
        self._wds.setdefault(wd, []).append(folder)

    def _readable(self) -> None:
        assert self._inotify is not None and self.loop is not None
        data = self._inotify.read()  # one bounded read per wake-up: then the loop goes on
        if self.loop.time() < self._flood_until:
            return  # a flood: every watch rescans its roots at the window's end
        if len(data) >= FULL_BYTES:
            # More is waiting than one read holds: stop parsing for FLOOD_S (reading on,
            # at microseconds a read, so the kernel's queue never holds the loop).
            self._flood_until = self.loop.time() + FLOOD_S
            for watch in {w for known in self._dirs.values() for w in known.watches}:
                watch.flooded()
            return
        for wd, mask, name in parse(data):
            if mask & IN_Q_OVERFLOW:
                for watch in {w for known in self._dirs.values() for w in known.watches}:
                    watch.flooded()
                continue
            if mask & IN_IGNORED:
                for folder in self._wds.pop(wd, []):
                    self._lost(folder)
                continue
            fresh = bool(mask & IN_ISDIR and mask & NEW_DIR)
            for folder in list(self._wds.get(wd, ())):
                self._changed(folder, os.fsdecode(name), fresh)

    def _changed(self, folder: Path, name: str, fresh: bool) -> None:
        known = self._dirs.get(folder)
        if known is not None:
            path = folder / name if name else folder
            for watch in list(known.watches):
                watch.changed(path, fresh)

    def _lost(self, folder: Path) -> None:
        known = self._dirs.pop(folder, None)
        for watch in known.watches if known is not None else ():
            watch.lost(folder)

    def _polled(self, folder: Path, changes: list[Change] | None) -> None:
        if changes is None:  # the folder is gone, as inotify's IN_DELETE_SELF + IN_IGNORED
            self._changed(folder, "", False)
            self._lost(folder)
            return
        for name, fresh in changes:
            self._changed(folder, name, fresh)

    def close(self) -> None:
        """Stop watching and polling: the instance is closed."""
        if self._inotify is not None:
            if self.loop is not None and not self.loop.is_closed():
                self.loop.remove_reader(self._inotify.fd)
            self._inotify.close()
            self._inotify = None
        self._poller.close()
        self._dirs.clear()
        self._wds.clear()
        self.loop = None  # used again (a test's next loop): a new instance


class FolderWatch:
    """Watches of one subscriber on ``roots`` (folders); debounced batches via ``batches``.

    Without ``hub`` it has one of its own (closed with it). ``start`` raises OSError
    (FileNotFoundError, NotADirectoryError for a symlink) when a root cannot be watched.
    """

    def __init__(
        self, roots: Sequence[Path], *, recursive: bool, hub: WatchHub | None = None
    ) -> None:
        self.roots = list(roots)
        self.recursive = recursive
        self.hub = hub if hub is not None else WatchHub()
        self._own_hub = hub is None
        self._dirs: set[Path] = set()
        self._pending: set[Path] = set()
        self._flooded = False
        self._timer: asyncio.TimerHandle | None = None
        self._first = self._last = 0.0  # loop times of the pending batch's first, last event
        self._ready: asyncio.Queue[set[Path] | None] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> FolderWatch:
        """Install every watch; events after this returns are seen."""
        self._loop = asyncio.get_running_loop()
        try:
            for root in self.roots:
                self._add(root, must_exist=True, baseline=True)
        except BaseException:
            self.close()
            raise
        return self

    def _add(self, folder: Path, *, must_exist: bool, baseline: bool, again: bool = False) -> None:
        """Watch ``folder`` (and, recursive, its subfolders; ``again``: look through the
        ones already watched too, for subfolders missed)."""
        if folder in self._dirs:
            if not again:
                return
            self.hub.refresh(folder)
            if folder not in self._dirs:
                return  # gone during the flood
        elif self.hub.add(folder, self, must_exist=must_exist, baseline=baseline):
            self._dirs.add(folder)
        else:
            return
        if not self.recursive:
            return
        try:
            with os.scandir(folder) as entries:
                subfolders = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for sub in subfolders:
            self._add(Path(sub), must_exist=False, baseline=baseline, again=again)

    # -- from the hub --------------------------------------------------------------------
    def changed(self, path: Path, fresh: bool) -> None:
        """``path`` changed (``fresh``: a folder new there, watched too when recursive)."""
        if self.recursive and fresh:
            self._add(path, must_exist=False, baseline=False)
        if not self._flooded:
            self._pending.add(path)
            if len(self._pending) > MAX_PENDING:
                self.flooded()
                return
        self._arm()

    def flooded(self) -> None:
        """Too many changes to name: the batch becomes the roots (the reader rescans)."""
        self._flooded = True
        self._pending.clear()
        self._arm()

    def lost(self, folder: Path) -> None:
        """``folder`` is no longer watched (it went away)."""
        self._dirs.discard(folder)

    # -- batches ---------------------------------------------------------------------------
    def _arm(self) -> None:
        loop = self._loop
        assert loop is not None
        self._last = loop.time()
        if self._timer is None:  # one timer per batch, never one per event
            self._first = self._last
            self._timer = loop.call_at(self._last + QUIET_S, self._due)

    def _due(self) -> None:
        loop = self._loop
        assert loop is not None
        if self._flooded:
            at = self._first + FLOOD_S
        else:
            at = min(self._first + DEBOUNCE_S, self._last + QUIET_S)
        if loop.time() < at:
            self._timer = loop.call_at(at, self._due)
            return
        self._timer = None
        if self._flooded and self.recursive:
            for root in self.roots:  # folders made during the flood were not seen
                self._add(root, must_exist=False, baseline=False, again=True)
        batch = set(self.roots) if self._flooded else self._pending
        self._pending, self._flooded = set(), False
        self._ready.put_nowait(batch)

    async def batches(self) -> AsyncIterator[set[Path]]:
        """Each debounced set of changed paths, until ``close``."""
        while (batch := await self._ready.get()) is not None:
            yield batch

    def close(self) -> None:
        """Remove every watch of this subscriber; ``batches`` ends."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for folder in self._dirs:
            self.hub.remove(folder, self)
        self._dirs.clear()
        if self._own_hub:
            self.hub.close()
        self._ready.put_nowait(None)
