"""The base of tools that act inside the bound workspace, and their one way to touch files.

Reads and writes go through sandbox.paths.open_in_workspace, so no symlink is
followed even when one is swapped in after a check, and the opened file is checked
to lie in the workspace; listings and searches walk from descriptors (search.walk).
There is deliberately no "check a path, then open it" helper here. Appends refuse a
file with other hard links (another name of it may lie outside); whole-file writes
replace the file atomically instead.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from pathlib import Path
from typing import Any, ClassVar

from toold.config import TooldConfig
from toold.sandbox.paths import open_in_workspace, workspace_relative
from toold.storage import atomic_write_at, write_all
from toold.tools.base import Tool

_READ = os.O_RDONLY | os.O_NONBLOCK  # a FIFO must not block the open
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
_FOLDER = os.O_RDONLY | os.O_DIRECTORY


# Past this many bytes per call (limits.max_file_size, files.max_content_size), file
# tools take the worker thread like everything else.
INLINE_MAX_BYTES = 4 * 1024 * 1024


class WorkspaceTool(Tool):
    """A tool that needs the workspace from its runtime."""

    inline: ClassVar[bool] = False
    """Bounded work on one file or folder: runs on the event loop when that is safe."""

    def runs_inline(self, args: Any) -> bool:
        """Inline tools, on a local filesystem, with the configured sizes kept small.

        A network or FUSE filesystem can stall any call, so there every call takes a
        worker thread; so does any call when the size limits allow large files.
        """
        runtime = self.runtime
        if not self.inline or runtime is None or not runtime.local_filesystem:
            return False
        limits, files = runtime.config.limits, runtime.config.files
        return max(limits.max_file_size, files.max_content_size) <= INLINE_MAX_BYTES

    @property
    def workspace(self) -> Path:
        """The bound workspace root (resolved)."""
        if self.runtime is None:
            raise RuntimeError(
                f"{self.name} is not bound to a workspace: use get_handlers(workspace=...)"
            )
        return self.runtime.workspace

    @property
    def config(self) -> TooldConfig:
        """The workspace's configuration (defaults when unbound)."""
        return self.runtime.config if self.runtime is not None else TooldConfig()

    def ignores(self, args: Any) -> bool:
        """Whether a search leaves out what ignore files ignore: ``search.respect_gitignore``,
        unless the call's ``include_ignored`` asks for everything."""
        return self.config.search.respect_gitignore and not getattr(args, "include_ignored", False)

    def lexical_path(self, path: str) -> Path:
        """The absolute path ``path`` names, checked lexically only (a lock's key)."""
        return self.workspace / workspace_relative(self.workspace, path)

    def read_bytes(self, path: str, max_size: int, fix: str) -> bytes:
        """The bytes of a regular file; over ``max_size`` is a ValueError ending in ``fix``."""
        try:
            fd = open_in_workspace(self.workspace, path, _READ)
        except (FileNotFoundError, NotADirectoryError):
            rel = workspace_relative(self.workspace, path)
            raise FileNotFoundError(f"File not found: {rel}") from None
        # Checked before fdopen, which refuses a folder naming the descriptor, not the path.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            _require_file(info.st_mode, workspace_relative(self.workspace, path))
        with os.fdopen(fd, "rb") as fh:
            if info.st_size > max_size:
                raise _too_large(info.st_size, max_size, fix)
            data = fh.read(info.st_size + 1)
            if len(data) > info.st_size:  # it grew meanwhile: still bounded
                data += fh.read(max_size + 1 - len(data))
        if len(data) > max_size:
            raise _too_large(len(data), max_size, fix)
        return data

    def write_bytes(
        self,
        path: str,
        data: bytes,
        *,
        append: bool = False,
        create_dirs: bool = True,
        durable: bool = False,
    ) -> str:
        """Replace (atomically) or append to a file; returns its workspace-relative path."""
        rel = workspace_relative(self.workspace, path)
        if rel == ".":
            raise IsADirectoryError(f"Is a directory: {rel}")
        parent, name = posixpath.split(rel)
        try:
            dir_fd = open_in_workspace(
                self.workspace, parent or ".", _FOLDER, create_parents=create_dirs
            )
        except NotADirectoryError:
            raise NotADirectoryError(f"A parent of {rel} is a file, not a folder") from None
        except FileNotFoundError:
            raise FileNotFoundError(
                f"Parent folder does not exist: {parent}; "
                "create it first (files.create_dirs is false)"
            ) from None
        try:
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                mode = None
            if mode is not None and stat.S_ISLNK(mode):
                raise PermissionError(
                    f"Symlink detected in path chain: {os.path.join(self.workspace, rel)}"
                )
            if mode is not None:
                _require_file(mode, rel)
            if append:
                _append(self.workspace, rel, data)
            else:
                atomic_write_at(dir_fd, name, data, durable=durable)
        finally:
            os.close(dir_fd)
        return rel


def _append(workspace: Path, rel: str, data: bytes) -> None:
    try:
        fd = open_in_workspace(workspace, rel, _APPEND, single_link=True)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise ValueError(f"Not a file: {rel}") from None
        raise
    try:
        _require_file(os.fstat(fd).st_mode, rel)
        write_all(fd, data)
    finally:
        os.close(fd)


def _require_file(mode: int, rel: str) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"Is a directory: {rel} (list it with list_dir or glob)")
    if not stat.S_ISREG(mode):
        raise ValueError(f"Not a file: {rel} (a device, FIFO or socket)")


def _too_large(size: int, max_size: int, fix: str) -> ValueError:
    return ValueError(f"File too large: {size} bytes (max: {max_size}); {fix}")
