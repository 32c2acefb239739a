"""safe_path and open_in_workspace: the workspace boundary every file and search tool passes.

``safe_path`` checks a path (lexically, then for symlinks on the way) and returns it;
between that check and the tool's ``open`` a symlink can still be swapped in.
``open_in_workspace`` closes that gap: it opens the path one component at a time
from a descriptor of the workspace, each with ``O_NOFOLLOW``, so no symlink is ever
followed, and checks where the opened file lies.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import stat
from pathlib import Path

_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\|//)")
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""A folder opened to descend from: never through a symlink."""


PATH_MAX = 4096
"""Longest path the tools take (Linux's PATH_MAX, in characters)."""


def _checked(workspace: Path, path: str | os.PathLike[str]) -> tuple[str, str, list[str]]:
    """The lexical checks: (workspace root, normalised candidate, its parts below root)."""
    raw = os.fspath(path)
    if len(raw) > PATH_MAX:  # also keeps a huge path out of the error messages below
        raise PermissionError(
            f"Path is {len(raw)} characters long; paths stop at {PATH_MAX}: {raw[:60]!r}..."
        )
    if "\x00" in raw:
        raise PermissionError(f"NUL bytes are not allowed in paths: {raw!r}")
    if raw.startswith("~"):
        raise PermissionError(f"Home-relative paths are not allowed: '{raw}'")
    if os.path.isabs(raw) or _WINDOWS_ABSOLUTE.match(raw):
        raise PermissionError(f"Absolute paths are not allowed: '{raw}'")
    root = os.fspath(workspace)
    candidate = os.path.normpath(os.path.join(root, raw))
    if candidate == root:
        return root, candidate, []
    prefix = root.rstrip(os.sep) + os.sep
    if not candidate.startswith(prefix):
        raise PermissionError(f"Path '{raw}' escapes workspace {workspace}")
    return root, candidate, candidate[len(prefix) :].split(os.sep)


def workspace_relative(workspace: Path, path: str | os.PathLike[str]) -> str:
    """``path`` normalised below the workspace, posix style ("." for the root).

    Only the lexical checks (PermissionError as safe_path raises it): the form messages
    name a file by, and what open_in_workspace will walk.
    """
    parts = _checked(workspace, path)[2]
    return "/".join(parts) if parts else "."


def safe_path(workspace: Path, path: str | os.PathLike[str]) -> Path:
    """Resolve ``path`` inside ``workspace`` or raise PermissionError.

    Checks, in the spec's order: home-relative, absolute, escaping the workspace,
    then any existing symlink in the chain. ``workspace`` must already be resolved.
    """
    root, candidate, parts = _checked(workspace, path)
    current = root
    for part in parts:
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            break  # missing: nothing below it exists, so no link either
        if stat.S_ISLNK(mode):
            raise PermissionError(f"Symlink detected in path chain: {current}")
    return Path(candidate)


def open_in_workspace(
    workspace: Path,
    path: str | os.PathLike[str],
    flags: int = os.O_RDONLY,
    mode: int = 0o644,
    *,
    create_parents: bool = False,
    single_link: bool = False,
) -> int:
    """A descriptor of ``path`` opened without following any symlink, or PermissionError.

    Runs safe_path's lexical checks, then walks from the workspace with ``openat`` and
    ``O_NOFOLLOW`` on every component, so a symlink swapped in after a check is refused
    (``Symlink detected in path chain``) instead of followed. ``create_parents`` makes
    missing folders on the way (``mkdirat``, which never follows a link either).
    ``single_link`` refuses a regular file with more than one hard link: another name of
    it may lie outside the workspace, so in-place writes (append) must not go through.
    Finally the opened file's real path must lie in the workspace (``/proc/self/fd``),
    which catches a folder moved out from under the walk. The caller closes the fd.
    """
    root, candidate, parts = _checked(workspace, path)
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    current = root
    try:
        for part in parts[:-1]:
            current = os.path.join(current, part)
            child = _step(dir_fd, part, current, create_parents)
            os.close(dir_fd)
            dir_fd = child
        if not parts:
            fd = os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        else:
            current = candidate
            fd = _open_last(dir_fd, parts[-1], current, flags, mode, create_parents)
    finally:
        os.close(dir_fd)
    try:
        _check_opened(fd, root, candidate, single_link)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step(dir_fd: int, part: str, current: str, create: bool) -> int:
    """A descriptor of the folder ``part`` in ``dir_fd``; never through a symlink."""
    try:
        try:
            return os.open(part, DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=dir_fd)
            return os.open(part, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(dir_fd, part)):
            raise PermissionError(f"Symlink detected in path chain: {current}") from None
        raise


def _open_last(dir_fd: int, name: str, current: str, flags: int, mode: int, create: bool) -> int:
    if create and flags & os.O_DIRECTORY:
        return _step(dir_fd, name, current, create)
    return refuse_link(dir_fd, name, current, flags, mode)


def refuse_link(dir_fd: int, name: str, where: str, flags: int, mode: int = 0o644) -> int:
    """``name`` in the folder ``dir_fd``, opened with ``O_NOFOLLOW``.

    A symlink there is PermissionError ``Symlink detected in path chain: <where>``;
    other errors (missing, not a folder) pass through. The one descriptor-relative
    open under open_in_workspace, the walk of the search tools and toold's state files.
    """
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (
            exc.errno in (errno.EEXIST, errno.ENOTDIR) and _is_link(dir_fd, name)
        ):
            raise PermissionError(f"Symlink detected in path chain: {where}") from None
        raise


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _check_opened(fd: int, root: str, candidate: str, single_link: bool) -> None:
    info = os.fstat(fd)
    if single_link and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise PermissionError(
            f"Refusing to write through a file with {info.st_nlink} hard links: {candidate} "
            "(another name of it may lie outside the workspace)"
        )
    require_inside(fd, root, candidate)


def require_inside(fd: int, root: str, what: str) -> None:
    """PermissionError unless the file ``fd`` lies in ``root`` (``/proc/self/fd``).

    Catches a folder moved out from under a walk; without /proc the O_NOFOLLOW walk
    is the whole defence.
    """
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return
    prefix = root.rstrip(os.sep) + os.sep
    if real != root and not real.startswith(prefix):
        raise PermissionError(f"Path '{what}' was moved out of workspace {root}")


# Filesystems whose calls finish in microseconds unless the disk itself fails; network
# and FUSE filesystems (nfs, cifs, fuse.sshfs, ...) can stall for as long as they like.
LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "bcachefs", "jfs", "nilfs2"}
    | {"tmpfs", "ramfs", "overlay"}
)


def filesystem_type(path: Path) -> str | None:
    """The type of the filesystem ``path`` lies on (``/proc/self/mountinfo``), or None.

    Remembered per path and device: a sandbox's worker builds a runtime, and asks, for
    every call, and its mount table (fifty binds) costs more to read than a small call.
    A mount over the path changes its device, so the answer is read again."""
    target = os.fspath(path)
    try:
        device = os.stat(target).st_dev
    except OSError:
        return _filesystem_type.__wrapped__(target, -1)  # read each time: nothing to key
    return _filesystem_type(target, device)


@functools.lru_cache(maxsize=64)
def _filesystem_type(target: str, device: int) -> str | None:
    """filesystem_type of ``target`` as ``device`` holds it (the key; unused otherwise)."""
    best, kind = "", None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                fields = line.split()
                if "-" not in fields:
                    continue
                mount = fields[4].encode("latin-1", "replace").decode("unicode_escape")
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, kind = mount, fields[fields.index("-") + 1]
    except OSError:
        return None
    return kind


def relative_posix(workspace: Path, target: Path) -> str:
    """Workspace-relative posix form of an absolute path inside the workspace."""
    rel = os.path.relpath(target, workspace)
    return Path(rel).as_posix()
