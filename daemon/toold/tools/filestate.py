"""FileTracker: what an agent has seen of each workspace file, so it never edits one blind.

An agent's edit or overwrite of an existing file goes through only when the agent read
that file (read_file) or wrote it through toold, and the file on disk is still what it
was then: same size and same content hash (the hash because a modification time may not
move between two writes within one clock tick). The state is taken from the disk at the
moment of the check, through ``open_in_workspace``: a file swapped for a symlink since it
was read cannot be opened and counts as changed.

The content is hashed again only when the file's stat may hide a change (git's racy-entry
rule, FileState.proves): a file whose device, inode, size, mtime and ctime are all what
they were when it was hashed, and whose last change was clearly before that hash, still
holds the bytes hashed. Nothing the sandboxed worker reports is used: the daemon stats.
A read run on the event loop holds its files open over the read (``held``): one walk per
file, and after the read the descriptor's stat and name (``/proc/self/fd``) tell whether
the name still leads to the same, unchanged file.

The tracker also serialises an agent's writing calls per file (``serialised``), so two
edits of one file sent at once cannot both pass the check against the same version.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import stat
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from toold.errors import FileChangedError
from toold.sandbox.paths import open_in_workspace, workspace_relative

_READ = os.O_RDONLY | os.O_NONBLOCK
_CHUNK = 1 << 20

RACY_NS = 3_000_000_000
"""How much older than the moment of hashing a file's last change (mtime or ctime) must be
for its stat to vouch for its content: timestamps advance in ticks (a jiffy, FAT's 2 s), a
rewrite within the tick of the last change can leave every stat field as it was; the
margin also absorbs a network filesystem's clock running a little behind ours."""


class FileStat(NamedTuple):
    """What a file's stat says of which file it is and of its last change."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, info: os.stat_result) -> FileStat:
        """The fields of an ``os.stat_result`` that change when the file does."""
        return cls(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@dataclass(frozen=True)
class FileState:
    """A file as it was seen: its stat, the SHA-256 of its bytes ("" when not hashed) and
    whether its last change was clearly before the hash (``settled``)."""

    stat: FileStat
    sha256: str
    settled: bool = False

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        return self.stat.size

    def proves(self, now: FileStat) -> bool:
        """Whether a file whose stat is ``now`` still holds the bytes hashed: same file,
        same stat, and no change in the hash's timestamp tick (any later write or utime
        sets ctime past the moment of hashing, which the kernel's clock cannot repeat)."""
        return self.settled and bool(self.sha256) and now == self.stat


class Held(NamedTuple):
    """A file opened before a read: its descriptor, stat and name (``/proc/self/fd``)."""

    fd: int
    stat: FileStat
    name: str


def _name_of(fd: int) -> str:
    """Where ``fd``'s file is now ("(deleted)" appended once its name is gone), or ""
    without /proc."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


class FileTracker:
    """The files of one workspace its agents have read or written through toold."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._seen: dict[str, FileState] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}
        self.clock: Callable[[], int] = time.time_ns
        """The wall clock file timestamps are taken from (ns), for FileState.settled."""
        self.hashed = 0
        """How many times a file's content was hashed: the cost the stat rule saves."""

    def relative(self, path: str) -> str | None:
        """``path`` as the tracker keys it; None when it is not a workspace path."""
        try:
            return workspace_relative(self.workspace, path)
        except (PermissionError, ValueError):
            return None

    # -- the disk ------------------------------------------------------------------------
    def stat(self, rel: str) -> FileStat | None:
        """FileStat of a regular file, None when there is none or it cannot be seen."""
        try:
            fd = open_in_workspace(self.workspace, rel, _READ)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
        finally:
            os.close(fd)
        return FileStat.of(info) if stat.S_ISREG(info.st_mode) else None

    def current(
        self, rel: str, hash_size: int | None = None, known: FileState | None = None
    ) -> FileState | None:
        """The file's state now; None when no file is there. OSError: cannot be read
        as a regular file inside the workspace (a symlink, a folder, a device). With
        ``hash_size``, the content is hashed only when the file has that size (else its
        ``sha256`` is ""): a file of another size has changed, however large it is.
        ``known`` is returned as it is when its stat proves the content unchanged."""
        started = self.clock()  # before the fstat: a change after it is not "settled"
        try:
            fd = open_in_workspace(self.workspace, rel, _READ)
        except FileNotFoundError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise IsADirectoryError(f"not a regular file: {rel}")
            now = FileStat.of(info)
            if known is not None and known.proves(now):
                return known
            if hash_size is not None and info.st_size != hash_size:
                return FileState(now, "")
            return self._hashed(fd, now, started)
        finally:
            os.close(fd)

    def _hashed(self, fd: int, now: FileStat, started: int) -> FileState:
        """The state of the file ``fd`` whose stat is ``now``, taken after ``started``."""
        digest = hashlib.sha256()
        size, offset = min(_CHUNK, now.size + 1), 0  # a small file: one read, then its end
        while chunk := os.pread(fd, size, offset):
            digest.update(chunk)
            offset += len(chunk)
        self.hashed += 1
        # ctime too: utime can date mtime back, never ctime (it is set to the clock).
        settled = max(now.mtime_ns, now.ctime_ns) < started - RACY_NS
        return FileState(now, digest.hexdigest(), settled)

    # -- checking and remembering -------------------------------------------------------
    def require_seen(self, paths: Iterable[str]) -> None:
        """Refuse (FileChangedError) when an existing file among ``paths`` was not read, or
        changed since it was last read or written through toold; a missing file passes."""
        for path in paths:
            rel = self.relative(path)
            if rel is None:
                continue  # the tool refuses the path itself, with its own message
            seen = self._seen.get(rel)
            try:  # never hash a file only to refuse it (a planted huge one took seconds)
                now = self.current(rel, -1 if seen is None else seen.size, seen)
            except OSError:
                now = FileState(FileStat(-1, -1, -1, -1, -1), "")  # a link or a non-file
            if now is None:
                continue  # creating a file needs no reading first
            if seen is None:
                raise FileChangedError(
                    f"{rel} has not been read in this session; read it (read_file) "
                    "before editing or overwriting it"
                )
            if (now.size, now.sha256) != (seen.size, seen.sha256):
                raise FileChangedError(
                    f"{rel} changed since it was last read; read it again before editing"
                )

    def remember(
        self, paths: Iterable[str], before: dict[str, FileStat | None] | None = None
    ) -> None:
        """Record the current state of ``paths`` as seen. With ``before`` (``snapshot``
        taken before a read), a file that changed while it was read (any stat field,
        the inode too) is forgotten instead: which version the agent saw is unknown."""
        for path in paths:
            rel = self.relative(path)
            if rel is None:
                continue
            try:
                now = self.current(rel, known=self._seen.get(rel))
            except OSError:
                now = None
            if now is None or (before is not None and before.get(rel) != now.stat):
                self._seen.pop(rel, None)
            else:
                self._seen[rel] = now

    @contextlib.contextmanager
    def held(self, paths: Iterable[str]) -> Iterator[dict[str, Held | None]]:
        """Each regular file among ``paths`` opened before a read and held open over it,
        for ``remember_held``: ``snapshot`` and ``remember`` in one walk of each path
        instead of two. The descriptors are closed on leaving."""
        found: dict[str, Held | None] = {}
        try:
            for path in paths:
                rel = self.relative(path)
                if rel is not None and rel not in found:  # one descriptor per file
                    found[rel] = self._hold(rel)
            yield found
        finally:
            for one in found.values():
                if one is not None:
                    os.close(one.fd)

    def _hold(self, rel: str) -> Held | None:
        try:
            fd = open_in_workspace(self.workspace, rel, _READ)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode):
                return Held(fd, FileStat.of(info), _name_of(fd))
        except OSError:
            pass
        os.close(fd)
        return None

    def remember_held(self, held: dict[str, Held | None]) -> None:
        """``remember`` for the reads of ``held``: a file whose stat changed over the read,
        or whose name no longer leads to it (replaced, moved: ``/proc/self/fd``), is
        forgotten, which version the agent saw being unknown."""
        for rel, one in held.items():
            try:
                now = None if one is None else self._after(rel, one)
            except OSError:
                now = None
            if now is None:
                self._seen.pop(rel, None)
            else:
                self._seen[rel] = now

    def _after(self, rel: str, one: Held) -> FileState | None:
        """The state of a file held over a read, None when it changed meanwhile."""
        known = self._seen.get(rel)
        if not one.name:  # no /proc: only a new walk tells where the name leads now
            try:
                now = self.current(rel, known=known)
            except OSError:
                return None
            return now if now is not None and now.stat == one.stat else None
        started = self.clock()
        if FileStat.of(os.fstat(one.fd)) != one.stat or _name_of(one.fd) != one.name:
            return None
        if known is not None and known.proves(one.stat):
            return known
        return self._hashed(one.fd, one.stat, started)

    def snapshot(self, paths: Iterable[str]) -> dict[str, FileStat | None]:
        """``stat`` of each path before a read, for ``remember``."""
        found = {}
        for path in paths:
            rel = self.relative(path)
            if rel is not None:
                found[rel] = self.stat(rel)
        return found

    # -- one writer per file ------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def serialised(self, paths: Iterable[str]) -> AsyncIterator[None]:
        """Hold every path's lock (in sorted order: no deadlock between two calls)."""
        keys = sorted({rel for p in paths if (rel := self.relative(p)) is not None})
        counted: list[str] = []
        acquired: list[asyncio.Lock] = []
        try:
            for key in keys:
                lock = self._locks.setdefault(key, asyncio.Lock())
                self._users[key] = self._users.get(key, 0) + 1
                counted.append(key)
                await lock.acquire()
                acquired.append(lock)
            yield
        finally:
            for lock in reversed(acquired):
                lock.release()
            for key in counted:
                self._users[key] -= 1
                if not self._users[key]:  # nobody holds or waits: the table stays small
                    del self._users[key], self._locks[key]
