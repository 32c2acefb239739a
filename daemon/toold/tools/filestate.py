"""FileTracker: what an agent has seen of each workspace file, so it never edits one blind.

An agent's edit or overwrite of an existing file goes through only when the agent read
that file (read_file) or wrote it through toold, and the file on disk is still what it
was then: same size, same modification time and same content hash (the hash because a
modification time may not move between two writes within one clock tick). The state is
taken from the disk at the moment of the check, through ``open_in_workspace``: a file
swapped for a symlink since it was read cannot be opened and counts as changed.

The tracker also serialises an agent's writing calls per file (``serialised``), so two
edits of one file sent at once cannot both pass the check against the same version.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import stat
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

from toold.errors import FileChangedError
from toold.sandbox.paths import open_in_workspace, workspace_relative

_READ = os.O_RDONLY | os.O_NONBLOCK
_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileState:
    """A file as it was seen: size, modification time (ns) and SHA-256 of its bytes."""

    size: int
    mtime_ns: int
    sha256: str


class FileTracker:
    """The files of one workspace its agents have read or written through toold."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._seen: dict[str, FileState] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    def relative(self, path: str) -> str | None:
        """``path`` as the tracker keys it; None when it is not a workspace path."""
        try:
            return workspace_relative(self.workspace, path)
        except (PermissionError, ValueError):
            return None

    # -- the disk ------------------------------------------------------------------------
    def stat(self, rel: str) -> tuple[int, int] | None:
        """(size, mtime_ns) of a regular file, None when there is none or it cannot be seen."""
        try:
            fd = open_in_workspace(self.workspace, rel, _READ)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
        finally:
            os.close(fd)
        return (info.st_size, info.st_mtime_ns) if stat.S_ISREG(info.st_mode) else None

    def current(self, rel: str, hash_size: int | None = None) -> FileState | None:
        """The file's state now; None when no file is there. OSError: cannot be read
        as a regular file inside the workspace (a symlink, a folder, a device). With
        ``hash_size``, the content is hashed only when the file has that size (else its
        ``sha256`` is ""): a file of another size has changed, however large it is."""
        try:
            fd = open_in_workspace(self.workspace, rel, _READ)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise IsADirectoryError(f"not a regular file: {rel}")
            if hash_size is not None and info.st_size != hash_size:
                return FileState(info.st_size, info.st_mtime_ns, "")
            digest = hashlib.sha256()
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
        return FileState(info.st_size, info.st_mtime_ns, digest.hexdigest())

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
                now = self.current(rel, hash_size=-1 if seen is None else seen.size)
            except OSError:
                now = FileState(-1, -1, "")  # a link or a non-file where a file was: changed
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
        self, paths: Iterable[str], before: dict[str, tuple[int, int] | None] | None = None
    ) -> None:
        """Record the current state of ``paths`` as seen. With ``before`` (``stat`` taken
        before a read), a file that changed while it was read is forgotten instead: which
        version the agent saw is unknown."""
        for path in paths:
            rel = self.relative(path)
            if rel is None:
                continue
            try:
                now = self.current(rel)
            except OSError:
                now = None
            expected = None if before is None else before.get(rel)
            if now is None or (before is not None and expected != (now.size, now.mtime_ns)):
                self._seen.pop(rel, None)
            else:
                self._seen[rel] = now

    def snapshot(self, paths: Iterable[str]) -> dict[str, tuple[int, int] | None]:
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
