"""HeldFolder: a checkpoint folder opened once, then checked against its path on each use.

Opening a state folder (toold.storage.open_state) walks its absolute path from ``/``
one component at a time: a dozen system calls, three times per checkpointed write. The
store keeps the folder open instead and, on each use, asks the kernel where the folder
it holds now lies (``/proc/self/fd/N``, one readlink). The descriptor is used only when
that is exactly the folder's path; otherwise (moved, removed, replaced, a symlink put in
the way, no ``/proc``) it is dropped and the folder opened afresh through open_state,
which refuses a symlink anywhere on the way. The kernel names a folder by its real
path, without links, so the answer is the one a fresh walk would give: the same folder,
reached with no symlink. Each use gets a duplicate of the descriptor, which it closes:
a folder reopened by another thread never closes one still in use.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from toold.sandbox.paths import DIR_FLAGS, refuse_link
from toold.storage import PRIVATE_DIR, PRIVATE_FILE, file_lock, open_state


class HeldFolder:
    """A private (0700) state folder held open between uses."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._expected = os.path.abspath(path)
        self._fd: int | None = None
        self._lock = threading.Lock()

    def open(self) -> int:
        """A new descriptor of the folder (the caller closes it), made if missing and
        made 0700 if it is wider: objects hold copies of files that may be private."""
        with self._lock:
            fd = self._fd
            if fd is None or not self._still_there(fd):
                self._drop()
                fd = self._fd = self._fresh()
            if stat.S_IMODE(os.fstat(fd).st_mode) != PRIVATE_DIR:
                os.fchmod(fd, PRIVATE_DIR)
            return os.dup(fd)

    @contextlib.contextmanager
    def lock(self, name: str, *, wait: bool = True, folder: int | None = None) -> Iterator[None]:
        """An exclusive lock on the file ``name`` in this folder, shared with other
        processes: toold.storage.file_lock's flock, the file opened in the folder held
        instead of by walking its path (``folder``: a descriptor ``open`` gave the
        caller, used as it is). With ``wait`` False, BlockingIOError at once when
        another thread or process holds it (each use opens the file anew, and flock
        excludes every other open of it, this process's too)."""
        held = self.open() if folder is None else folder
        try:
            fd = refuse_link(
                held, name, f"{self._expected}/{name}", os.O_RDWR | os.O_CREAT, PRIVATE_FILE
            )
        except PermissionError:
            fd = None  # a link: file_lock refuses it in its own words
        finally:
            if folder is None:
                os.close(held)
        if fd is None:
            with file_lock(self.path / name, wait=wait):
                yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            yield
        finally:
            os.close(fd)

    def _still_there(self, fd: int) -> bool:
        """Whether the folder held is the one at its path, reached without a symlink."""
        try:
            return os.readlink(f"/proc/self/fd/{fd}") == self._expected
        except OSError:
            return False  # no /proc: every use walks the path again

    def _fresh(self) -> int:
        try:  # made once: walking the path a second time to make it is for the first use
            return open_state(self.path, DIR_FLAGS)
        except FileNotFoundError:
            return open_state(self.path, DIR_FLAGS, create_dirs=True)

    def _drop(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def close(self) -> None:
        """Let go of the descriptor (the next use opens the folder again)."""
        with self._lock:
            self._drop()

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
