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
import stat
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from toold.checkpoints.index import Checkpoint, FileChange
from toold.errors import CheckpointStoreError
from toold.sandbox.paths import DIR_FLAGS, require_inside

if TYPE_CHECKING:
    from toold.checkpoints.store import CheckpointStore

log = logging.getLogger(__name__)

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEVER_WALKED = frozenset({".git", ".toold"})
"""Skipped at any depth whatever the configuration: git's and toold's own state."""
PRIVATE = 0o600
"""The mode of a baseline's objects (the file's own mode is in its checkpoint entry)."""
NAMED = 3
"""Paths a note names of each kind before it counts the rest."""
Parts = tuple[str, ...]
NONE: frozenset[str] = frozenset()
# inotify's event bits (linux/inotify.h; toold.inotify is not below this package).
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ISDIR = 0x40000000


class Watcher(Protocol):
    """An inotify instance (toold.inotify.Inotify): folders added, events read."""

    def add(self, folder: Path) -> int: ...
    def read_events(self) -> list[tuple[int, int, bytes]]: ...
    def close(self) -> None: ...


class IgnoreRules(Protocol):
    """The ignore files' rules as a walk reads them (toold.search.ignore.IgnoreRules)."""

    def loaded(self, folder: Parts) -> bool: ...
    def load(self, folder: Parts, dir_fd: int) -> None: ...
    def ignored(self, path: Parts, is_dir: bool) -> bool: ...


StatKey = tuple[int, int, int, int, int]
"""A file's size, mtime and ctime (ns), inode and permission bits: same key, same content."""


def stat_key(info: os.stat_result) -> StatKey:
    """The key of ``info``: a file whose key did not change is not read again."""
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode & 0o777)


@dataclass(frozen=True, slots=True)
class Seen:
    """One regular file as a walk saw it, and its stored content (None: not stored)."""

    key: StatKey
    digest: str | None

    @property
    def size(self) -> int:
        """Its size in bytes."""
        return self.key[0]

    @property
    def mode(self) -> int:
        """Its permission bits."""
        return self.key[4]


@dataclass
class Gaps:
    """What a walk left out: files too large, files past the total, entries past the cap."""

    too_big: list[str] = field(default_factory=list)
    past_total: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    """Entries the walk did not enter or cover: ignore files, skipped folders."""
    truncated: bool = False

    def note(self, max_file_size: int, max_entries: int) -> str | None:
        """One line for the checkpoint and the call's result; None when nothing was left out."""
        parts = []
        if self.too_big:
            parts.append(f"{_some(self.too_big)} over limits.max_file_size ({max_file_size} bytes)")
        if self.past_total:
            parts.append(f"{_some(self.past_total)} past checkpoints.max_bytes")
        if self.ignored:
            parts.append(f"{_some(self.ignored, 'ignored path')} (ignore files, skipped folders)")
        if self.truncated:
            parts.append(
                f"everything past the first {max_entries} entries (checkpoints.max_entries)"
            )
        if not parts:
            return None
        return "undo does not cover " + "; ".join(parts)

    def keys(self) -> frozenset[str]:
        """What a note says, to tell it only once in a call's result."""
        truncated = ["*"] if self.truncated else []
        return frozenset([*self.too_big, *self.past_total, *self.ignored, *truncated])


@dataclass(frozen=True, slots=True)
class Listing:
    """One folder as a walk listed it: what an incremental walk replaces when it changes."""

    files: tuple[str, ...]
    """Its regular files the walk saw (workspace-relative), stored or not."""
    folders: tuple[str, ...]
    """Its folders the walk entered (or kept)."""
    entries: int
    """Entries listed (what counts against ``checkpoints.max_entries``)."""
    own: bool
    """It holds an ignore file (or is the root of a repository): its rules are read."""
    linked: bool
    """It holds a file with more than one link: listed again by every walk."""
    too_big: tuple[str, ...] = ()
    past_total: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()


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
        walk = _Walk(self, previous.files)
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
            gaps = _gaps(listings)
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
        walk = _Walk(self, known)
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

    def _settle(self, walk: _Walk, digests: frozenset[str]) -> None:
        """Pin what a walk's snapshot names: its stored objects were held as they were
        stored; each becomes one pin."""
        fresh = digests - self._pinned
        self.store.hold(list(fresh))
        self._pinned |= fresh
        self.store.release(walk.held, sweep=False)


class _Walk:
    """One walk of the tree: what it saw, what it stored, what it left out."""

    def __init__(self, baseline: Baseline, known: dict[str, Seen]) -> None:
        store = baseline.store
        self.store, self.known = store, known
        self.skip_dirs = baseline.skip_dirs
        self.ignore_files = baseline.ignore_files
        self.rules = baseline.rules()
        self.max_file_size, self.max_bytes = store.max_file_size, store.max_bytes
        self.room = store.max_entries
        self.covered = 0
        self.files: dict[str, Seen] = {}
        self.folders: set[str] = set()
        self.gaps = Gaps()
        self.held: list[str] = []
        """Digests this walk stored (held as they were stored)."""
        self.reused: list[str] = []
        """Digests of files unchanged since the last walk (held when the walk ends)."""
        self.watch = baseline.watch
        self.watched = self.watch is not None
        """Every folder walked was watched before it was listed (no watch refused)."""
        self.listings: dict[str, Listing] = {}
        self.listed: set[str] = set()
        """The folders this walk listed (an incremental walk's are in ``listings`` too)."""
        self.wds: dict[int, str] = {}

    def relist(self, root_fd: int, path: str, root: str, named: set[str]) -> bool:
        """List the folder ``path`` again (its listing replaced, its files stat'ed), its
        folders that are new or ``named`` by an event walked whole, those gone dropped;
        False when it cannot be opened (a full walk tells what happened)."""
        parts = tuple(path.split("/")) if path else ()
        old = self.listings.pop(path)
        for file in old.files:
            self.files.pop(file, None)
        try:
            fd = _open_below(root_fd, parts, root)
        except OSError:
            return False
        try:
            ruled = False
            for depth in range(len(parts)):  # the rules of the folders above it
                above = parts[:depth]
                listing = self.listings.get("/".join(above))
                if listing is None:
                    return False  # not listed after all (unreadable): a full walk tells
                if listing.own:
                    ruled = True
                    if not self.rules.loaded(above):
                        above_fd = _open_below(root_fd, above, root)
                        try:
                            self.rules.load(above, above_fd)
                        finally:
                            os.close(above_fd)
            stay = frozenset(f for f in old.folders if f.rpartition("/")[2] not in named)
            for renewed in set(old.folders) - stay:
                self._drop(renewed)  # walked whole below, if it is still there
            self.folder(fd, parts, root, ruled, stay)
        except OSError:
            return False
        finally:
            os.close(fd)
        now = self.listings.get(path)
        if now is None:
            return False
        for gone in stay - set(now.folders):
            self._drop(gone)
        return True

    def _drop(self, path: str) -> None:
        """Forget the folder ``path`` and everything below it (gone, or walked anew)."""
        self.folders.discard(path)
        listing = self.listings.pop(path, None)
        if listing is None:
            return
        for file in listing.files:
            self.files.pop(file, None)
        for below in listing.folders:
            self._drop(below)

    def folder(
        self, fd: int, parts: Parts, root: str, ruled: bool = False, stay: frozenset[str] = NONE
    ) -> None:
        """Walk the folder ``parts`` (open as ``fd``), its entries in sorted order;
        ``ruled``: an ignore file lies in a folder above (its rules are read); ``stay``:
        folders in it kept as the last walk saw them (not entered)."""
        path = "/".join(parts)
        if self.watch is not None:
            try:  # before listing it: a change made after its entries are read is queued
                self.wds[self.watch.add(Path(root, *parts))] = path
            except OSError:
                self.watched = False  # fs.inotify.max_user_watches used up: walk each call
        self.listed.add(path)
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return  # gone, or unreadable: nothing in it is covered
        # Rules are read, and asked, only below a folder that has an ignore file (or a
        # repository's exclude file at the root): most folders have none.
        names = self.ignore_files
        own = any(e.name in names or (not parts and e.name == ".git") for e in entries)
        if own and not self.rules.loaded(parts):
            self.rules.load(parts, fd)
        files: list[str] = []
        folders: list[str] = []
        ignored: list[str] = []
        linked = False
        try:
            linked = self._entries(
                fd, parts, root, ruled or own, stay, entries, files, folders, ignored
            )
        finally:
            missing = [f for f in files if self.files[f].digest is None]
            big = tuple(f for f in missing if self.files[f].size > self.max_file_size)
            over = tuple(f for f in missing if self.files[f].size <= self.max_file_size)
            self.listings[path] = Listing(
                tuple(files), tuple(folders), len(entries), own, linked, big, over, tuple(ignored)
            )

    def _entries(
        self,
        fd: int,
        parts: Parts,
        root: str,
        ruled: bool,
        stay: frozenset[str],
        entries: list[os.DirEntry[str]],
        files: list[str],
        folders: list[str],
        ignored: list[str],
    ) -> bool:
        """Walk a folder's ``entries`` (what ``folder`` listed), noting its own files,
        folders and ignored entries; whether a file of it has more than one link."""
        linked = False
        prefix = "/".join(parts) + "/" if parts else ""
        for entry in entries:
            if self.room <= 0:
                self.gaps.truncated = True
                return linked
            self.room -= 1
            name = entry.name
            if name[0] in ".gG" and _never_walked(name):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if name in self.skip_dirs or (
                        ruled and self.rules.ignored((*parts, name), True)
                    ):
                        self.gaps.ignored.append(prefix + name + "/")
                        ignored.append(prefix + name + "/")
                        continue
                    self.folders.add(prefix + name)
                    folders.append(prefix + name)
                    if prefix + name not in stay:
                        self._enter(fd, name, (*parts, name), root, ruled)
                elif entry.is_file(follow_symlinks=False):
                    if ruled and self.rules.ignored((*parts, name), False):
                        self.gaps.ignored.append(prefix + name)
                        ignored.append(prefix + name)
                        continue
                    info = entry.stat(follow_symlinks=False)
                    self._file(fd, name, prefix + name, info)
                    files.append(prefix + name)
                    linked = linked or info.st_nlink > 1
            except OSError:
                continue  # swapped for a link or gone mid-walk: not covered
        return linked

    def _enter(self, parent: int, name: str, path: Parts, root: str, ruled: bool) -> None:
        fd = os.open(name, DIR_FLAGS, dir_fd=parent)  # ELOOP on a link swapped in
        try:
            require_inside(fd, root, "/".join(path))
            self.folder(fd, path, root, ruled)
        finally:
            os.close(fd)

    def _file(self, folder: int, name: str, path: str, info: os.stat_result) -> None:
        """Keep the file's entry: the known one when its stat is unchanged, else read it."""
        known = self.known.get(path)
        digest = known.digest if known is not None else None
        if known is None or digest is None or known.key != stat_key(info):
            seen = self._read(folder, name, path, info)
        elif self.covered + known.size > self.max_bytes:
            seen = replace(known, digest=None)  # an earlier file grew: past the total now
        else:
            self.reused.append(digest)
            self.covered += known.size
            self.files[path] = known
            return
        if seen.digest is None:
            (self.gaps.too_big if seen.size > self.max_file_size else self.gaps.past_total).append(
                path
            )
        else:
            self.covered += seen.size
        self.files[path] = seen

    def _read(self, folder: int, name: str, path: str, info: os.stat_result) -> Seen:
        """The file's entry with its content stored (when within the caps)."""
        seen = Seen(stat_key(info), None)
        if info.st_size > self.max_file_size or self.covered + info.st_size > self.max_bytes:
            return seen
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
        with os.fdopen(fd, "rb") as fh:
            opened = os.fstat(fh.fileno())
            if not stat.S_ISREG(opened.st_mode):
                raise OSError(f"{path} is not a regular file")
            data = fh.read(self.max_file_size + 1)
        if len(data) > self.max_file_size:
            return seen
        key = stat_key(opened)
        try:
            # Private (0600), whatever the file's mode: the checkpoint records its mode,
            # and .toold holds copies of files that may be secret.
            digest = self.store.keep(self.held, data, PRIVATE)
        except OSError as exc:  # the store, not the file: no walk can go on
            raise CheckpointStoreError(
                f"cannot store {path} in {self.store.folder}: {exc}"
            ) from exc
        return Seen(key, digest)


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


def _open_below(root_fd: int, parts: Parts, root: str) -> int:
    """The folder ``parts`` below the root, opened one name at a time, never through a
    link (ELOOP on one swapped in)."""
    fd = os.dup(root_fd)
    try:
        for depth, name in enumerate(parts):
            sub = os.open(name, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = sub
            require_inside(fd, root, "/".join(parts[: depth + 1]))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _exclude_key(workspace: Path) -> StatKey | None:
    """The stat key of the repository's exclude file (None: none)."""
    try:
        return stat_key(os.stat(workspace / ".git" / "info" / "exclude", follow_symlinks=False))
    except OSError:
        return None


def _gaps(listings: dict[str, Listing]) -> Gaps:
    """What the walks that made ``listings`` left out, in a full walk's order."""
    gaps = Gaps()
    for listing in listings.values():
        gaps.too_big += listing.too_big
        gaps.past_total += listing.past_total
        gaps.ignored += listing.ignored
    for found in (gaps.too_big, gaps.past_total, gaps.ignored):
        found.sort(key=lambda p: p.rstrip("/").split("/"))
    return gaps


def _never_walked(name: str) -> bool:
    """Whether the entry ``name`` is ``.git`` or ``.toold`` in a spelling a restore would
    refuse (toold.checkpoints.store.never_restored: any case, trailing dots or blanks)."""
    folded = name.partition(":")[0].rstrip(". ").lower()
    return folded in NEVER_WALKED or folded == "git~1"


def _some(paths: list[str], kind: str = "file") -> str:
    """``n files (a, b, c, ...)`` for a note, each unprintable character escaped."""
    named = ", ".join(_printable(p) for p in paths[:NAMED])
    more = ", ..." if len(paths) > NAMED else ""
    count = f"{len(paths)} {kind}" + ("s" if len(paths) != 1 else "")
    return f"{count} ({named}{more})"


def _printable(path: str) -> str:
    if path.isprintable():
        return path[:100]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)[:100]
