"""Walking the workspace from directory descriptors, in sorted order, with the skip list.

The one way every listing and search tool reaches files. The start is opened with
sandbox.paths.open_in_workspace (no symlink followed on the way, the opened folder
checked to lie in the workspace); below it every folder is opened relative to its
parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY`` and every file relative to its
folder's with ``O_NOFOLLOW``. A folder or file swapped for a symlink mid-walk is
therefore refused (skipped), never followed: no name or byte from outside reaches a
result, whatever races the walk.
"""

from __future__ import annotations

import logging
import os
import posixpath
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from toold.sandbox.paths import (
    DIR_FLAGS,
    open_in_workspace,
    refuse_link,
    require_inside,
    workspace_relative,
)
from toold.search.ignore import IgnoreRules

log = logging.getLogger(__name__)

SKIP_DIRS = frozenset({".git", ".pytest_cache", ".venv", "__pycache__", "node_modules", ".toold"})
MAX_DEPTH = 256
"""Folders deeper below the start are not entered (each level holds one descriptor)."""
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class FoundFile:
    """A regular file the walk stands on; ``folder`` stays open until the walk moves on."""

    rel: str
    """Path below the walk's start, posix (the file's name when the start is the file)."""
    path: str
    """Workspace-relative posix path."""
    folder: int
    name: str

    def read(self, max_bytes: int) -> bytes | None:
        """The file's bytes, opened relative to its folder without following a symlink.

        None when it is no longer a regular file (a link or FIFO swapped in), is gone,
        or holds more than ``max_bytes``.
        """
        try:
            fd = os.open(self.name, _FILE_FLAGS, dir_fd=self.folder)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
                return None
            data = os.read(fd, info.st_size + 1) if info.st_size else b""
            while len(data) <= max_bytes:  # it grew (or st_size was 0): read to its end
                more = os.read(fd, max_bytes + 1 - len(data))
                if not more:
                    break
                data += more
        except OSError:
            return None
        finally:
            os.close(fd)
        return data if len(data) <= max_bytes else None


class _Folders:
    """Descriptors of the folders along one path below the start, reused between neighbours.

    Only the current path's folders are open (one descriptor a level), so a walk in
    sorted order opens each folder once.
    """

    def __init__(self, start_fd: int, workspace: str) -> None:
        self.fds = [start_fd]
        self.parts: list[str] = []
        self.workspace = workspace

    def enter(self, parts: Sequence[str]) -> int:
        """The descriptor of the folder ``parts`` below the start; OSError when refused."""
        keep = 0
        limit = min(len(parts), len(self.parts))
        while keep < limit and self.parts[keep] == parts[keep]:
            keep += 1
        while len(self.parts) > keep:
            os.close(self.fds.pop())
            self.parts.pop()
        for part in parts[keep:]:
            fd = os.open(part, DIR_FLAGS, dir_fd=self.fds[-1])  # ELOOP/ENOTDIR on a link
            self.fds.append(fd)
            self.parts.append(part)
            require_inside(fd, self.workspace, part)
        return self.fds[-1]

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.pop())


class Tree:
    """A workspace path opened for walking: a folder, one regular file, or neither.

    FileNotFoundError or NotADirectoryError when nothing is there; PermissionError
    (``Symlink detected in path chain``) when the path or one of its folders is a link.
    Use as a context manager: it holds descriptors.
    """

    def __init__(self, workspace: Path, path: str, *, respect_ignores: bool = False) -> None:
        self.workspace = workspace
        self.rel = workspace_relative(workspace, path)
        """The start, workspace-relative ("." for the workspace itself)."""
        self.kind = "other"
        self._folders: _Folders | None = None
        self._parent: int | None = None
        self._name = ""
        self._base: tuple[str, ...] = () if self.rel == "." else tuple(self.rel.split("/"))
        self._ignores: IgnoreRules | None = None
        if respect_ignores:
            self._ignores = self._ancestor_rules(workspace, self._base)
        root = os.fspath(workspace)
        if self.rel == ".":
            fd = open_in_workspace(workspace, ".", DIR_FLAGS)
            self._folders, self.kind = _Folders(fd, root), "folder"
            return
        parent, self._name = posixpath.split(self.rel)
        pfd = open_in_workspace(workspace, parent or ".", DIR_FLAGS)
        try:
            self._open_start(pfd, root)
        finally:
            if self._parent is None:  # only a file start keeps its folder open
                os.close(pfd)

    def _open_start(self, pfd: int, root: str) -> None:
        """Set ``kind`` (and the folder's or the file's descriptors) from the entry ``_name``
        in ``pfd``; ``_parent`` is set to ``pfd`` only when the start is a regular file."""
        mode = os.stat(self._name, dir_fd=pfd, follow_symlinks=False).st_mode
        where = os.path.join(root, self.rel)
        if stat.S_ISLNK(mode):
            raise PermissionError(f"Symlink detected in path chain: {where}")
        if stat.S_ISDIR(mode):
            fd = refuse_link(pfd, self._name, where, DIR_FLAGS)
            folders = _Folders(fd, root)
            try:
                require_inside(fd, root, self.rel)
            except BaseException:
                folders.close()
                raise
            self._folders, self.kind = folders, "folder"
        elif stat.S_ISREG(mode):
            self._parent, self.kind = pfd, "file"

    @staticmethod
    def _ancestor_rules(workspace: Path, base: tuple[str, ...]) -> IgnoreRules:
        """The rules of the folders above the start, from the workspace root down."""
        rules = IgnoreRules()
        for depth in range(len(base)):
            try:
                fd = open_in_workspace(workspace, "/".join(base[:depth]) or ".", DIR_FLAGS)
            except OSError:
                break  # the start itself will fail to open and say why
            try:
                rules.load(base[:depth], fd)
            finally:
                os.close(fd)
        rules.lift(base)
        return rules

    def _skipped(self, parts: tuple[str, ...], fd: int | None, is_dir: bool) -> bool:
        """Whether ignore rules drop the entry ``parts`` (below the start); ``fd`` is its
        folder's descriptor when its rules may not be read yet."""
        rules = self._ignores
        if rules is None:
            return False
        folder = self._base + parts[:-1]
        if fd is not None and not rules.loaded(folder):
            rules.load(folder, fd)
        return rules.ignored(self._base + parts, is_dir)

    @property
    def start(self) -> Path:
        """The absolute path the walk starts at (its lexical form: names only)."""
        return self.workspace / self.rel

    def _joined(self, rel: str) -> str:
        return rel if self.rel == "." else f"{self.rel}/{rel}"

    def files(
        self, *, skip_dirs: frozenset[str] = SKIP_DIRS, include_hidden: bool = True
    ) -> Iterator[FoundFile]:
        """Regular files below the start (or the start itself when it is a file).

        Order is os.walk's with names sorted: a folder's files first, then each
        sub-folder in turn (the order ``walk_key`` sorts by). Symlinks are never
        followed nor yielded; ``skip_dirs`` apply only below the start, so an
        explicit start inside one is searched.
        """
        if self._parent is not None:
            yield FoundFile(self._name, self.rel, self._parent, self._name)
            return
        folders = self._folders
        if folders is None:
            return
        pending: list[tuple[str, ...]] = [()]
        while pending:
            parts = pending.pop()
            if len(parts) > MAX_DEPTH:
                log.warning("not descending past %d folders: %s", MAX_DEPTH, "/".join(parts))
                continue
            try:
                fd = folders.enter(parts)
                with os.scandir(fd) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue  # gone, or swapped for a link: refused
            subdirs: list[tuple[str, ...]] = []
            for entry in entries:
                name = entry.name
                if not include_hidden and name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if name not in skip_dirs and not self._skipped((*parts, name), fd, True):
                            subdirs.append((*parts, name))
                    elif entry.is_file(follow_symlinks=False):
                        if self._skipped((*parts, name), fd, False):
                            continue
                        rel = "/".join((*parts, name))
                        yield FoundFile(rel, self._joined(rel), fd, name)
                except OSError:
                    continue
            pending.extend(reversed(subdirs))

    def select(self, rels: Iterable[str]) -> Iterator[FoundFile]:
        """The files ``rels`` (paths below the start, in walk order), each reached the same
        way as ``files`` reaches it; those that cannot be are skipped."""
        folders = self._folders
        if folders is None:
            return
        for rel in rels:
            *parts, name = rel.split("/")
            if len(parts) > MAX_DEPTH or not name:
                continue
            try:
                fd = folders.enter(parts)
                if self._ignores is not None and self._select_skips(folders, tuple(parts), name):
                    continue
            except OSError:
                continue
            yield FoundFile(rel, self._joined(rel), fd, name)

    def _select_skips(self, folders: _Folders, parts: tuple[str, ...], name: str) -> bool:
        """Whether ignore rules drop ``parts/name``: a folder on the way, or the file.
        ``folders`` has entered ``parts``, so ``folders.fds[i]`` is the folder ``parts[:i]``
        (entering a shorter path here would close the descriptor the caller holds)."""
        fds = folders.fds
        for depth in range(len(parts)):
            if self._skipped(parts[: depth + 1], fds[depth], True):
                return True
        return self._skipped((*parts, name), fds[len(parts)], False)

    def close(self) -> None:
        """Close every descriptor."""
        if self._folders is not None:
            self._folders.close()
            self._folders = None
        if self._parent is not None:
            os.close(self._parent)
            self._parent = None

    def __enter__(self) -> Tree:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def lstat_in_workspace(workspace: Path, path: str) -> os.stat_result:
    """The entry ``path`` names, never through a symlink: its folder is opened with
    open_in_workspace and the entry lstat'ed relative to it; a symlink is PermissionError.

    FileNotFoundError names the workspace-relative path when nothing is there.
    """
    rel = workspace_relative(workspace, path)
    parent, name = posixpath.split(rel)
    try:
        fd = open_in_workspace(workspace, parent or ".", DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"Path not found: {rel}") from None
    try:
        info = os.stat(name or ".", dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"Path not found: {rel}") from None
    finally:
        os.close(fd)
    if stat.S_ISLNK(info.st_mode):
        where = os.path.join(workspace, rel)
        raise PermissionError(
            f"Symlink detected in path chain: {where} (file_info never follows one)"
        )
    return info


def walk_key(rel_posix: str) -> tuple[tuple[int, str], ...]:
    """Sort key reproducing Tree.files' order for start-relative posix paths."""
    *folders, name = rel_posix.split("/")
    return (*((1, f) for f in folders), (0, name))
