"""The stat walk of a workspace for undo of shell calls (toold.checkpoints.baseline).

A walk lists each covered folder (watched first, when the baseline has an inotify
instance), keeps a file's entry from the last walk when its stat did not change and reads
and stores it otherwise; it notes what it left out (``Gaps``) and each folder's listing
(``Listing``), from which an incremental walk re-lists only the folders that changed.
Nothing is followed through a link: every folder and file is opened from its folder's
descriptor with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from toold.errors import CheckpointStoreError
from toold.sandbox.paths import DIR_FLAGS, require_inside
from toold.terminal import one_line

if TYPE_CHECKING:
    from toold.checkpoints.baseline import Baseline

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEVER_WALKED = frozenset({".git", ".toold"})
"""Skipped at any depth whatever the configuration: git's and toold's own state."""
PRIVATE = 0o600
"""The mode of a baseline's objects (the file's own mode is in its checkpoint entry)."""
NAMED = 3
"""Paths a note names of each kind before it counts the rest."""
Parts = tuple[str, ...]
NONE: frozenset[str] = frozenset()


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


class Walk:
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
            fd = open_below(root_fd, parts, root)
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
                        above_fd = open_below(root_fd, above, root)
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


def open_below(root_fd: int, parts: Parts, root: str) -> int:
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


def gaps_of(listings: dict[str, Listing]) -> Gaps:
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
    refuse (toold.checkpoints.restore.never_restored: any case, trailing dots or blanks)."""
    folded = name.partition(":")[0].rstrip(". ").lower()
    return folded in NEVER_WALKED or folded == "git~1"


def _some(paths: list[str], kind: str = "file") -> str:
    """``n files (a, b, c, ...)`` for a note, each unprintable character escaped."""
    named = ", ".join(_printable(p) for p in paths[:NAMED])
    more = ", ..." if len(paths) > NAMED else ""
    count = f"{len(paths)} {kind}" + ("s" if len(paths) != 1 else "")
    return f"{count} ({named}{more})"


def _printable(path: str) -> str:
    return one_line(path)[:100]
