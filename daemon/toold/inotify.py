"""Linux inotify through libc: one instance, its watches, and its events in bounded reads.

Only the kernel interface lives here; toold.watching shares one ``Inotify`` among every
folder watch of a workspace and falls back to polling (toold.polling) when the kernel
refuses. ``read_events`` reads once (at most ``READ_BYTES``), never until EAGAIN: a
flood of events must not hold the event loop (a rename loop in the workspace once froze
another session's read_file for 14.8 s). Symlinks are never followed (``IN_DONT_FOLLOW``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from pathlib import Path

READ_BYTES = 64 * 1024
"""One read per wake-up: about 2,000 events with short names, a few ms of parsing."""
FULL_BYTES = READ_BYTES - 4096
"""A read this long filled the buffer (an event is 16 bytes plus its name): more wait."""

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
NEW_DIR = IN_CREATE | IN_MOVED_TO
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)

UNWATCHABLE = frozenset({errno.ENOSPC, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP})
"""inotify_add_watch errors that mean "poll this folder" rather than "it is not there":
ENOSPC is fs.inotify.max_user_watches used up; the others, a filesystem without inotify."""

REMOTE_FILESYSTEMS = {
    0x6969: "NFS",
    0x517B: "SMB",
    0xFF534D42: "CIFS",
    0xFE534D42: "SMB2",
    0x65735546: "FUSE",
    0x01021997: "9p",
    0x00C36400: "Ceph",
    0x6A656A63: "virtiofs",
}
"""statfs f_type of filesystems whose changes made elsewhere inotify never sees."""

_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def filesystem_type(folder: Path) -> int | None:
    """statfs's f_type of ``folder``'s filesystem (None when statfs fails)."""
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if _c().statfs(os.fsencode(folder), buf) != 0:
        return None
    word = buf.raw[: ctypes.sizeof(ctypes.c_long)]  # f_type comes first
    return int.from_bytes(word, sys.byteorder, signed=True) & 0xFFFFFFFF


def remote_filesystem(folder: Path) -> str | None:
    """The name of ``folder``'s filesystem when inotify misses changes made elsewhere."""
    f_type = filesystem_type(folder)
    return None if f_type is None else REMOTE_FILESYSTEMS.get(f_type)


def limit(name: str) -> str:
    """``/proc/sys/fs/inotify/<name>`` (max_user_instances, max_user_watches), or "?"."""
    try:
        return Path("/proc/sys/fs/inotify", name).read_text().strip()
    except OSError:
        return "?"


def parse(data: bytes) -> list[tuple[int, int, bytes]]:
    """The events in ``data``, read from an instance: (wd, mask, name)."""
    events = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        wd, mask, _, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        events.append((wd, mask, data[offset : offset + length].rstrip(b"\0")))
        offset += length
    return events


class Inotify:
    """One inotify instance: ``add``/``remove`` watches, ``read_events`` in bounded reads."""

    def __init__(self) -> None:
        """Raises OSError (EMFILE: max_user_instances used up; ENOSYS: no inotify)."""
        fd = _c().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"inotify_init1: {os.strerror(code)}")
        self.fd = fd

    def add(self, folder: Path) -> int:
        """Watch ``folder`` (never through a symlink); its watch descriptor, or OSError."""
        wd = int(_c().inotify_add_watch(self.fd, os.fsencode(folder), WATCH_MASK))
        if wd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), os.fspath(folder))
        return wd

    def remove(self, wd: int) -> None:
        """Stop watching ``wd`` (already gone with its folder: nothing to do)."""
        _c().inotify_rm_watch(self.fd, wd)

    def read(self) -> bytes:
        """One read (at most ``READ_BYTES``); b"" when no event is waiting."""
        try:
            return os.read(self.fd, READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return b""

    def read_events(self) -> list[tuple[int, int, bytes]]:
        """The events of one read: (wd, mask, name); [] when none is waiting."""
        return parse(self.read())

    def close(self) -> None:
        """Close the instance: every watch goes with it."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
