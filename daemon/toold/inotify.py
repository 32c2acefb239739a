"""Linux inotify read by the event loop: folder watches that cost nothing while idle.

One inotify descriptor per ``FolderWatch``, registered with ``loop.add_reader``: no
thread and no timer run until the kernel has an event, so an idle daemon is never
woken. (watchfiles, used before, checks its stop event every ``step`` ms on a worker
thread: about 100 wake-ups a second per watch.) Events are gathered until none came for
``QUIET_S`` (an editor's save is a burst: temp file, rename), at most ``DEBOUNCE_S``
after the first one, and handed over as one set of paths. Symlinks are never followed
(``IN_DONT_FOLLOW``); a recursive watch adds the folders created under it as they
appear. A queue overflow reports the watched roots themselves, so the reader rescans.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import struct
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

DEBOUNCE_S = 0.05
QUIET_S = 0.01

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_DONT_FOLLOW = 0x2000000
IN_EXCL_UNLINK = 0x4000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

CHANGES = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
WATCH_MASK = CHANGES | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)

_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _checked(result: int, what: str, path: object = None) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}", path)
    return result


class FolderWatch:
    """inotify watches on ``roots`` (folders); batches of changed paths via ``batches``.

    ``start`` raises OSError (FileNotFoundError, NotADirectoryError for a symlink) when
    a root cannot be watched.
    """

    def __init__(self, roots: Sequence[Path], *, recursive: bool) -> None:
        self.roots = list(roots)
        self.recursive = recursive
        self._fd = -1
        self._dirs: dict[int, Path] = {}
        self._pending: set[Path] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._first = 0.0  # loop time of the first event of the pending batch
        self._ready: asyncio.Queue[set[Path] | None] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> FolderWatch:
        """Install every watch; events after this returns are seen."""
        self._loop = asyncio.get_running_loop()
        self._fd = _checked(_c().inotify_init1(IN_NONBLOCK | IN_CLOEXEC), "inotify_init1")
        try:
            for root in self.roots:
                self._add(root, must_exist=True)
        except BaseException:
            self.close()
            raise
        self._loop.add_reader(self._fd, self._readable)
        return self

    def _add(self, folder: Path, *, must_exist: bool) -> None:
        raw = os.fsencode(folder)
        wd = _c().inotify_add_watch(self._fd, raw, WATCH_MASK)
        if wd < 0:
            code = ctypes.get_errno()
            if must_exist:
                raise OSError(code, os.strerror(code), os.fspath(folder))
            return  # gone again, or a symlink: nothing to watch
        self._dirs[wd] = folder
        if not self.recursive:
            return
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    self._add(Path(entry.path), must_exist=False)

    def _readable(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            if not data:
                break
            self._parse(data)
        if not self._pending or self._loop is None:
            return
        now = self._loop.time()
        if self._timer is None:
            self._first = now
        else:
            self._timer.cancel()
        deliver_at = min(self._first + DEBOUNCE_S, now + QUIET_S)
        self._timer = self._loop.call_at(deliver_at, self._deliver)

    def _parse(self, data: bytes) -> None:
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _, length = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            name = data[offset : offset + length].rstrip(b"\0")
            offset += length
            if mask & IN_Q_OVERFLOW:
                self._pending.update(self.roots)
                continue
            folder = self._dirs.get(wd)
            if folder is None:
                continue
            if mask & IN_IGNORED:
                del self._dirs[wd]
                continue
            path = folder / os.fsdecode(name) if name else folder
            self._pending.add(path)
            if self.recursive and mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO):
                self._add(path, must_exist=False)

    def _deliver(self) -> None:
        self._timer = None
        batch, self._pending = self._pending, set()
        self._ready.put_nowait(batch)

    async def batches(self) -> AsyncIterator[set[Path]]:
        """Each debounced set of changed paths, until ``close``."""
        while (batch := await self._ready.get()) is not None:
            yield batch

    def close(self) -> None:
        """Remove every watch; ``batches`` ends."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._fd >= 0:
            if self._loop is not None:
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        self._dirs.clear()
        self._ready.put_nowait(None)
