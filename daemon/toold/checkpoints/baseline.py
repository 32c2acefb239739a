"""Undo for shell calls: the workspace's files as toold last saw them, kept in the store.

A call that changes files through a shell or code (bash, background_run's job,
python_repl: a tool whose annotations say ``shell`` or ``runs_code``) names no files, so
the gateway cannot snapshot them as it does a file tool's. Instead, around such a call:

- before it, a walk of the tree's stat (no content read) brings the baseline up to
  date: a file that is new, or whose size, mtime, ctime, inode or mode differ from what
  the baseline holds, is read and stored in the checkpoint store's content-addressed
  objects; an unchanged file costs one ``lstat``. Only the first call reads the tree.
- after it, the same walk; the files created, changed (content or mode) and deleted and
  the folders created and removed since the walk before become one checkpoint, their
  old contents already stored. A background job's is recorded when the job ends.

Where inotify works (``watcher``: an instance of the baseline's own), each folder is
watched before the walk lists it, and the walk is incremental: the queued events are
drained (synchronously, before anything is decided) and only the folders that had one are
listed and their files stat'ed again; a folder that appeared (or an event named as a
folder) is walked whole, a watch added before it is listed; everything else is kept from
the last walk. A quiet tree costs a drain of the queue, not a walk. Folders holding a file
with more than one link are listed every time (a write through its other name has no
event here). A queue overflow, a refused watch, the entry cap, ``checkpoints.max_bytes``
reached, a changed ignore file (or ``.git/info/exclude``, stat'ed each time) or a watched
folder that cannot be opened sends it back to a full walk. inotify has no event for a write
through a shared ``mmap``: it is seen when the writer lets go of the file (its close, at
the latest its exit, is an event).

Bounded, and never silently: ``.git/``, ``.toold/``, the folders the searches skip
(toold.search.walk.SKIP_DIRS) and what the ignore files ignore (toold.search.ignore)
are not walked; a file over ``limits.max_file_size``, and files past
``checkpoints.max_bytes`` of covered content, are not stored; past
``checkpoints.max_entries`` entries the walk stops. What was left out is written in the
checkpoint (``uncovered``) and told once in the call's result. Symlinks and special
files are not covered; the walk never follows a link (every folder and file is opened
from its folder's descriptor with ``O_NOFOLLOW``).

The baseline's objects are held in the store while a snapshot names them, so a sweep of
this process never removes them; objects no snapshot and no checkpoint names go.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toold.checkpoints.index import Checkpoint, FileChange
from toold.checkpoints.walk import (
    Gaps,
    IgnoreRules,
    Listing,
    Seen,
    StatKey,
    Walk,
    Watcher,
    gaps_of,
    stat_key,
)
from toold.errors import CheckpointStoreError
from toold.sandbox.paths import DIR_FLAGS

if TYPE_CHECKING:
    from toold.checkpoints.store import CheckpointStore

log = logging.getLogger(__name__)

# inotify's event bits (linux/inotify.h; toold.inotify is not below this package).
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ISDIR = 0x40000000


@dataclass
class Snapshot:
    """The tree at one moment: its covered files and its folders (workspace-relative)."""

    files: dict[str, Seen]
    folders: set[str]
    gaps: Gaps
    digests: frozenset[str]
    """The objects its files' contents are (held in the store while it lives)."""
    listings: dict[str, Listing] = field(default_factory=dict)
    """Every folder walked, by path ("" the root): what an incremental walk starts from."""
    refs: int = 1


class Baseline:
    """The covered tree of one store's workspace; ``begin`` and ``finish`` wrap a call."""

    def __init__(
        self,
        store: CheckpointStore,
        skip_dirs: frozenset[str],
        rules: Callable[[], IgnoreRules],
        ignore_files: tuple[str, ...],
        watcher: Callable[[], Watcher] | None = None,
    ) -> None:
        self.store = store
        self.skip_dirs = skip_dirs
        self.ignore_files = ignore_files
        """The names of ignore files: ``rules`` are read only below a folder holding one."""
        self.rules = rules
        """A fresh set of ignore rules for each walk (the ignore files may change)."""
        self._current: Snapshot | None = None
        self._live: list[Snapshot] = []
        """Snapshots still referenced: the current one and those of calls not finished."""
        self._pinned: set[str] = set()
        """The union of the live snapshots' digests, each held once in the store: a walk
        and a drop change it by set operations, never by a loop over the whole tree."""
        self._lock = threading.Lock()
        self._told: frozenset[str] = frozenset()
        self.watch: Watcher | None = None
        """Every covered folder, watched: a folder with no event is as the current snapshot
        saw it, and only the others are listed again. None: every walk is a full one."""
        self._watched_all = False
        self._wds: dict[int, str] = {}
        """The folder each watch descriptor watches (a moved folder keeps its descriptor)."""
        self._exclude: StatKey | None = None
        """.git/info/exclude's stat when the current snapshot was made."""
        if watcher is not None:
            try:
                self.watch = watcher()
            except OSError:
                self.watch = None  # no instance to be had: every call walks twice
            else:
                weakref.finalize(self, self.watch.close)

    # -- around a call --------------------------------------------------------------------
    def begin(self) -> Snapshot:
        """The tree before a call (its changed files stored), held until ``finish``."""
        with self._lock:
            snapshot = self._advance()
            snapshot.refs += 1
            return snapshot

    def finish(
        self, before: Snapshot, tool: str, origin: str
    ) -> tuple[Checkpoint | None, str | None]:
        """Record what changed since ``before`` as one checkpoint (None: nothing did), and
        the note of what undo does not cover when the call's result has not told it yet."""
        try:
            with self._lock:
                try:
                    after = self._advance()
                except (OSError, CheckpointStoreError) as exc:  # the call's result stands
                    log.warning("%s by %s: no checkpoint recorded: %s", tool, origin, exc)
                    return None, f"no checkpoint of this call was recorded: {exc}"
                changes, created, removed = _compare(before, after, self.store.workspace)
                note = after.gaps.note(self.store.max_file_size, self.store.max_entries)
                new = after.gaps.keys() - self._told
                self._told |= after.gaps.keys()
            checkpoint = None
            if changes or created or removed:
                checkpoint = self.store.record_shell(
                    changes, tool, origin, created=created, removed=removed, uncovered=note
                )
            return checkpoint, note if new else None
        finally:
            with self._lock:
                self._unref(before)

    def discard(self, snapshot: Snapshot) -> None:
        """Let go of a snapshot ``begin`` gave for a call that never ran (cancelled)."""
        with self._lock:
            self._unref(snapshot)

    def _unref(self, snapshot: Snapshot) -> None:
        """One reference to ``snapshot`` fewer (under the lock); at none, the objects no
        live snapshot names are let go (removed unless a checkpoint names them)."""
        snapshot.refs -= 1
        if snapshot.refs > 0:
            return
        self._live.remove(snapshot)
        still: frozenset[str] = frozenset().union(*(s.digests for s in self._live))
        gone = self._pinned - still
        self._pinned = set(still)
        if gone:
            self.store.release(list(gone))

    def close(self) -> None:
        """Stop watching and let go of the current snapshot (the workspace closes): its
        copies no checkpoint names leave the store; a later call walks the tree anew."""
        with self._lock:
            watch, self.watch = self.watch, None
            self._watched_all = False
            current, self._current = self._current, None
            if current is not None:
                self._unref(current)
        if watch is not None:
            watch.close()

    def _advance(self) -> Snapshot:
        """The tree now (under the lock) becomes the current snapshot; the old one is
        dropped. Unchanged (no event, nothing linked): the current snapshot itself."""
        previous = self._current
        dirty = self._drain()  # before anything is decided: a change made until now is seen
        exclude = _exclude_key(self.store.workspace)
        if exclude != self._exclude:
            dirty = None  # .git/info/exclude is not watched: its rules may have changed
        snapshot = None
        try:
            if previous is not None and dirty is not None and self._watched_all:
                if not dirty and not any(entry.linked for entry in previous.listings.values()):
                    return previous
                snapshot = self._update(previous, dirty)
            if snapshot is None:
                snapshot = self._walk(previous.files if previous is not None else {})
        except BaseException:
            self._watched_all = False  # the events drained are lost: the next walk is full
            raise
        self._exclude = exclude
        self._current = snapshot
        self._live.append(snapshot)
        if previous is not None:
            self._unref(previous)
        return snapshot

    def _drain(self) -> dict[str, set[str]] | None:
        """Every queued event read: the folders that had one, each with the names of the
        folders in it an event named (walked whole); None when a full walk is needed."""
        if self.watch is None:
            return None
        dirty: dict[str, set[str]] = {}
        full = False
        while events := self.watch.read_events():
            for wd, mask, raw in events:
                if mask & IN_Q_OVERFLOW:
                    full = True  # events were lost: nothing is known of what changed
                    continue
                path = self._wds.get(wd)
                if path is None or full:
                    continue  # a folder no longer in the tree (moved out, removed)
                if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                    if not path:
                        full = True  # the root itself
                        continue
                    # The folder went (or its watch did): its parent lists it again, and
                    # walks it whole if it is still there (its watch added anew).
                    parent, _, name = path.rpartition("/")
                    dirty.setdefault(parent, set()).add(name)
                    continue
                name = os.fsdecode(raw)
                if name in self.ignore_files or (not path and name == ".git"):
                    full = True  # the rules of folders with no event may have changed
                    continue
                names = dirty.setdefault(path, set())
                if mask & IN_ISDIR and name:
                    names.add(name)
        return None if full else dirty

    def _update(self, previous: Snapshot, dirty: dict[str, set[str]]) -> Snapshot | None:
        """``previous`` with the ``dirty`` folders (and the linked ones) listed again, the
        folders new in them walked whole; None when only a full walk can tell."""
        if previous.gaps.past_total or previous.gaps.truncated:
            return None  # which files fit depends on the whole walk's order
        listings = dict(previous.listings)
        for path, listing in listings.items():
            if listing.linked:
                dirty.setdefault(path, set())
        walk = Walk(self, previous.files)
        walk.files, walk.folders = dict(previous.files), set(previous.folders)
        walk.listings = listings
        root = os.fspath(self.store.workspace)
        settled = False
        try:
            root_fd = os.open(root, DIR_FLAGS)
            try:
                for path in sorted(dirty, key=lambda p: p.split("/") if p else []):
                    if path not in listings or path in walk.listed:
                        continue  # gone with a folder above, or walked whole already
                    if not walk.relist(root_fd, path, root, dirty[path]):
                        return None
            finally:
                os.close(root_fd)
            if walk.gaps.truncated or not walk.watched:
                return None
            if sum(listing.entries for listing in listings.values()) > self.store.max_entries:
                return None
            digests = frozenset(s.digest for s in walk.files.values() if s.digest is not None)
            stored = sum(s.size for s in walk.files.values() if s.digest is not None)
            gaps = gaps_of(listings)
            if gaps.past_total or stored > self.store.max_bytes:
                return None
            self._settle(walk, digests)
            settled = True
            self._wds.update(walk.wds)
            return Snapshot(walk.files, walk.folders, gaps, digests, listings)
        finally:
            if not settled:  # its objects are held by the full walk that follows
                self.store.release(walk.held, sweep=False)

    # -- the walk -------------------------------------------------------------------------
    def _walk(self, known: dict[str, Seen]) -> Snapshot:
        """Stat every covered entry, storing the files whose stat changed since ``known``."""
        walk = Walk(self, known)
        root = os.fspath(self.store.workspace)
        digests: frozenset[str] = frozenset()
        try:
            fd = os.open(root, DIR_FLAGS)
            try:
                walk.folder(fd, (), root)
            finally:
                os.close(fd)
        finally:
            digests = frozenset(walk.reused).union(walk.held)
            self._settle(walk, digests)
        self._watched_all = walk.watched and not walk.gaps.truncated
        self._wds = walk.wds
        return Snapshot(walk.files, walk.folders, walk.gaps, digests, walk.listings)

    def _settle(self, walk: Walk, digests: frozenset[str]) -> None:
        """Pin what a walk's snapshot names: its stored objects were held as they were
        stored; each becomes one pin."""
        fresh = digests - self._pinned
        self.store.hold(list(fresh))
        self._pinned |= fresh
        self.store.release(walk.held, sweep=False)


def _compare(
    before: Snapshot, after: Snapshot, workspace: Path
) -> tuple[list[FileChange], list[str], list[str]]:
    """The files and folders that changed from ``before`` to ``after`` (covered ones)."""
    changes: list[FileChange] = []
    for path, new in after.files.items():
        old = before.files.get(path)
        if old is new:
            continue  # unchanged: the walk kept the same entry
        if new.digest is None or (old is not None and old.digest is None):
            continue  # not covered on one side: told in the note
        if old is None:
            changes.append(FileChange(path, None, new.digest, None, new.mode))
        elif old.digest != new.digest or old.mode != new.mode:
            changes.append(FileChange(path, old.digest, new.digest, old.mode, new.mode))
    truncated = before.gaps.truncated or after.gaps.truncated
    for path, old in before.files.items():
        if path in after.files or old.digest is None:
            continue
        if truncated and os.path.lexists(workspace / path):
            continue  # past the cap this time, not deleted
        changes.append(FileChange(path, old.digest, None, old.mode, None))
    created = sorted(after.folders - before.folders)
    removed = sorted(
        p
        for p in before.folders - after.folders
        if not (truncated and os.path.lexists(workspace / p))
    )
    return changes, created, removed


def _exclude_key(workspace: Path) -> StatKey | None:
    """The stat key of the repository's exclude file (None: none)."""
    try:
        return stat_key(os.stat(workspace / ".git" / "info" / "exclude", follow_symlinks=False))
    except OSError:
        return None
