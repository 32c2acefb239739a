"""Atomic file writes (temp file, fsync, rename) and per-path locks."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


@contextlib.contextmanager
def path_lock(path: Path) -> Iterator[None]:
    """Serialise read-modify-write cycles on one path within this process."""
    key = os.fspath(path)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        yield


def atomic_write_at(dir_fd: int, name: str, data: bytes, *, durable: bool = True) -> None:
    """Replace ``name`` in the folder ``dir_fd`` with ``data``: readers see old or new, never half.

    The data goes to a temp file next to it (``.{name}.<random>.tmp``, created with
    O_EXCL and O_NOFOLLOW) that is renamed over ``name``; the file keeps its mode.
    ``durable`` also fsyncs the file and the folder, so the write survives a power loss,
    not only a crash of this process.
    """
    fd, tmp = _create_temp(dir_fd, name)
    try:
        try:
            with contextlib.suppress(FileNotFoundError):
                old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISREG(old.st_mode):
                    os.fchmod(fd, old.st_mode & 0o7777)
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


def _create_temp(dir_fd: int, name: str) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, flags, 0o644, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, looping on short writes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """atomic_write_at for a path: a crash leaves the old file or the new one."""
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        atomic_write_at(dir_fd, path.name, data, durable=durable)
    finally:
        os.close(dir_fd)


def atomic_write_text(path: Path, text: str) -> None:
    """UTF-8 text version of atomic_write_bytes."""
    atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def file_lock(lock_path: Path) -> Iterator[None]:
    """An exclusive advisory lock shared with other processes (flock on ``lock_path``)."""
    import fcntl

    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with path_lock(lock_path):
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
