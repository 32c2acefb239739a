"""toold's own state files: opened without following symlinks, written atomically, locked.

Every state file (``.toold/`` and everything in it, ``.tasks.json``, ``.team.json``)
is reached through ``open_state``: the absolute path is walked from ``/`` one
component at a time with ``O_NOFOLLOW`` (sandbox.paths.open_in_workspace's walk), so
a symlinked ``.toold``, job log or mailbox is refused with an error naming it and
nothing is read or written through it. The workspace root is resolved when it is
bound, so a legitimate state path holds no symlink at all. Folders on the way are
created with ``mkdirat`` (which never follows a link either) when asked to.

State is private: folders are created 0700 and files 0600 (atomic writes make an
existing file 0600 too, keeping its owner's bits), and the first time a process
touches a ``.toold`` folder that is open to others (made by an older toold, or by
hand), everything in it is tightened so (``make_private``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import stat
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from toold.sandbox.paths import DIR_FLAGS, open_in_workspace, refuse_link

log = logging.getLogger(__name__)

_ROOT = Path("/")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
STATE_DIR = ".toold"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def now() -> str:
    """UTC ISO-8601 timestamp, as state files (tasks, job records) store it."""
    return datetime.now(UTC).isoformat()


def check_name(kind: str, name: object) -> str:
    """``name`` when it can name a state file (a job id, a skill); else ValueError.

    Checked where a name is read (from a file, a message, a tool call), not only where
    it is written: ``/``, ``..`` and leading dots never reach a path.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"Invalid {kind}: {name!r} (use letters, digits, '_', '-' and '.', "
            "starting with a letter or digit, at most 128 characters)"
        )
    return name


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


@contextlib.contextmanager
def path_lock(path: Path) -> Iterator[None]:
    """Serialise read-modify-write cycles on one path within this process."""
    with _lock_of(path):
        yield


def _lock_of(path: Path) -> threading.Lock:
    """This process's lock of ``path`` (one per path, made on first use)."""
    with _locks_guard:
        return _locks.setdefault(os.fspath(path), threading.Lock())


def atomic_write_at(
    dir_fd: int,
    name: str,
    data: bytes,
    *,
    durable: bool = True,
    private: bool = False,
    mode: int | None = None,
    umask: bool = False,
) -> None:
    """Replace ``name`` in the folder ``dir_fd`` with ``data``: readers see old or new, never half.

    The data goes to a temp file next to it (``.{name}.<random>.tmp``, created with
    O_EXCL and O_NOFOLLOW) that is renamed over ``name``; the file keeps its mode, or
    with ``private`` (a state file) only its owner's bits, and is 0600 at the least.
    ``mode`` gives the new file that mode instead (narrowed by the umask with ``umask``),
    never wider at any moment. ``durable`` also fsyncs the file and the folder, so the
    write survives a power loss, not only a crash of this process.
    """
    if mode is not None:
        first = mode & 0o777 if umask else PRIVATE_FILE
    else:
        first = PRIVATE_FILE if private else 0o644
    fd, tmp = _create_temp(dir_fd, name, first)
    try:
        try:
            if mode is not None:
                if not umask:
                    os.fchmod(fd, mode)
            else:
                _keep_mode(fd, dir_fd, name, private)
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if durable:
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)


def _keep_mode(fd: int, dir_fd: int, name: str, private: bool) -> None:
    """Give the new file the mode of the one it replaces (only its owner's bits if private)."""
    with contextlib.suppress(FileNotFoundError):
        old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISREG(old.st_mode):
            mode = stat.S_IMODE(old.st_mode)
            os.fchmod(fd, (mode & 0o700) | PRIVATE_FILE if private else mode)


def _create_temp(dir_fd: int, name: str, mode: int) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, flags, mode, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, looping on short writes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def open_state(
    path: Path,
    flags: int = os.O_RDONLY,
    mode: int = PRIVATE_FILE,
    *,
    create_dirs: bool = False,
    single_link: bool = False,
) -> int:
    """A descriptor of the state file (or folder, with ``O_DIRECTORY``) ``path``.

    No symlink anywhere in ``path`` is followed: one is PermissionError naming the file
    and the fix. ``create_dirs`` makes missing folders on the way (0700); ``single_link``
    refuses a file with other hard links (for appends: another name may lie elsewhere).
    """
    absolute = os.path.abspath(path)
    _tighten_once(absolute)
    try:
        if create_dirs:
            _make_dirs(absolute if flags & os.O_DIRECTORY else os.path.dirname(absolute))
        return open_in_workspace(
            _ROOT,
            os.path.relpath(absolute, _ROOT),
            flags,
            mode,
            create_parents=create_dirs,  # only should a folder vanish after _make_dirs
            single_link=single_link,
        )
    except PermissionError as exc:
        raise PermissionError(
            f"Refusing toold state file {path}: {exc}; toold never follows a symlink in its "
            "state (.toold, .tasks.json, .team.json): remove the link"
        ) from None


def _make_dirs(folder: str) -> None:
    """Create ``folder`` and its missing parents 0700, never through a symlink."""
    missing: list[str] = []
    while True:
        try:
            fd = open_in_workspace(_ROOT, os.path.relpath(folder, _ROOT), DIR_FLAGS)
            break
        except FileNotFoundError:
            parent = os.path.dirname(folder)
            if parent == folder:
                raise
            missing.append(os.path.basename(folder))
            folder = parent
    try:
        for name in reversed(missing):
            folder = os.path.join(folder, name)
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, PRIVATE_DIR, dir_fd=fd)
            child = refuse_link(fd, name, folder, DIR_FLAGS)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


_tightened: set[str] = set()
_tightened_guard = threading.Lock()


def _tighten_once(absolute: str) -> None:
    """make_private the ``.toold`` folder ``absolute`` lies in, once per process."""
    index = (absolute + "/").find(f"/{STATE_DIR}/")
    if index < 0:
        return
    folder = absolute[: index + 1 + len(STATE_DIR)]
    with _tightened_guard:
        if folder in _tightened:
            return
        _tightened.add(folder)
    try:
        make_private(Path(folder))
    except FileNotFoundError:
        pass
    except OSError as exc:  # the open that follows says what is wrong
        log.debug("not tightening %s: %s", folder, exc)


def make_private(folder: Path) -> None:
    """Make the state folder ``folder`` private when it is open to others (wider than
    0700): its folders 0700, its files 0600 (their owner's bits kept).

    Never through a symlink (one in the tree is left as it is); a file with other hard
    links is left too, its other name may lie anywhere.
    """
    top = open_in_workspace(_ROOT, os.path.relpath(os.path.abspath(folder), _ROOT), DIR_FLAGS)
    try:
        if not os.fstat(top).st_mode & 0o077:
            return
        for _, _, files, dir_fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            _chmod_private(dir_fd, PRIVATE_DIR)
            for name in files:
                _tighten_file(dir_fd, name)
    finally:
        os.close(top)


def _tighten_file(dir_fd: int, name: str) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:  # a symlink, a socket, a file its owner cannot read
        return
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            _chmod_private(fd, PRIVATE_FILE)
    finally:
        os.close(fd)


def _chmod_private(fd: int, least: int) -> None:
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    private = (mode & 0o700) | least
    if private != mode:
        os.fchmod(fd, private)


def make_state_dir(path: Path) -> None:
    """Create the state folder ``path`` and its parents, never through a symlink."""
    os.close(open_state(path, DIR_FLAGS, create_dirs=True))


def read_state(path: Path) -> bytes:
    """The bytes of the state file ``path`` (FileNotFoundError when absent)."""
    fd = open_state(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PermissionError(f"Refusing toold state file {path}: not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def state_names(folder: Path) -> list[str]:
    """The names in the state folder ``folder``, sorted ([] when it does not exist)."""
    try:
        fd = open_state(folder, DIR_FLAGS)
    except FileNotFoundError:
        return []
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def remove_state(path: Path) -> None:
    """Remove the state file ``path`` if it is there (a symlink there goes, not its target)."""
    try:
        dir_fd = open_state(path.parent, DIR_FLAGS)
    except FileNotFoundError:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_bytes(
    path: Path, data: bytes, *, durable: bool = True, create_dirs: bool = False
) -> None:
    """atomic_write_at for a state path: a crash leaves the old file or the new one.

    The folder is opened with open_state (no symlink followed); a symlink at ``path``
    itself is refused (PermissionError naming it). Should one be swapped in after that
    check, the rename replaces the link: it is never written through.
    """
    dir_fd = open_state(path.parent, DIR_FLAGS, create_dirs=create_dirs)
    try:
        refuse_symlink_at(dir_fd, path)
        atomic_write_at(dir_fd, path.name, data, durable=durable, private=True)
    finally:
        os.close(dir_fd)


def refuse_symlink_at(dir_fd: int, path: Path) -> None:
    """PermissionError naming ``path`` when its name in the folder ``dir_fd`` is a symlink."""
    try:
        mode = os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise PermissionError(
            f"Refusing toold state file {path}: it is a symlink; toold never follows a "
            "symlink in its state (.toold, .tasks.json, .team.json): remove the link"
        )


def atomic_write_text(path: Path, text: str, *, create_dirs: bool = False) -> None:
    """UTF-8 text version of atomic_write_bytes."""
    atomic_write_bytes(path, text.encode("utf-8"), create_dirs=create_dirs)


@contextlib.contextmanager
def file_lock(lock_path: Path, *, wait: bool = True) -> Iterator[None]:
    """An exclusive advisory lock shared with other processes (flock on ``lock_path``).

    The lock file and its folders are created through open_state: never through a link.
    With ``wait`` False, BlockingIOError at once when a thread or a process holds it
    (so the event loop can take it without ever waiting on another process).
    """
    import fcntl

    lock = _lock_of(lock_path)
    if not lock.acquire(blocking=wait):
        raise BlockingIOError(f"{lock_path} is held by another thread")
    try:
        fd = open_state(lock_path, os.O_RDWR | os.O_CREAT, create_dirs=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            yield
        finally:
            os.close(fd)
    finally:
        lock.release()
