"""Where a workspace's engine lives: its socket, locks, pid file and log.

Everything sits in one owner-only folder: ``$TOOLD_RUNTIME_DIR`` if set, else
``$XDG_RUNTIME_DIR/toold`` (when that folder exists), else ``/tmp/toold-$UID``. A
workspace's files are named by a hash of its resolved path, so a workspace of any path
length fits in a socket address (a runtime folder too long for one is refused). The
folder must be a real directory owned by this user with no access for anyone else; one
that is not (another user's ``/tmp/toold-0``, a symlink) is refused, never used.
Standard library only: the light client imports this.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

RUNTIME_ENV = "TOOLD_RUNTIME_DIR"
"""Overrides the runtime folder (tests give each run its own)."""
SOCKET_PATH_MAX = 107
"""Longest path a Unix socket address holds on Linux (sun_path, without its NUL)."""


class RuntimeDirError(OSError):
    """The runtime folder cannot be trusted or created; the message says why and the fix."""


def runtime_dir() -> Path:
    """The owner-only folder holding every engine's socket (created 0700 when missing)."""
    explicit = os.environ.get(RUNTIME_ENV)
    if explicit:
        folder = Path(explicit)
    elif os.path.isdir(os.environ.get("XDG_RUNTIME_DIR") or "/nonexistent"):
        folder = Path(os.environ["XDG_RUNTIME_DIR"]) / "toold"
    else:
        folder = Path(f"/tmp/toold-{os.getuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise RuntimeDirError(f"cannot create the engine folder {folder}: {exc}") from None
    _check_private(folder)
    return folder


def _check_private(folder: Path) -> None:
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise RuntimeDirError(
            f"{folder} is not a folder (a symlink or a file): remove it, or set ${RUNTIME_ENV}"
        )
    if info.st_uid != os.getuid():
        raise RuntimeDirError(
            f"{folder} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}): "
            f"its engines are not yours; set ${RUNTIME_ENV} to a folder of your own"
        )
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)  # ours: close it rather than refuse


def open_private(path: Path, flags: int) -> int:
    """Open one of the engine's files, never through a symlink: a descriptor on a regular
    file of this user (created 0600 with O_CREAT; else FileNotFoundError when missing),
    or RuntimeDirError naming the fix.

    Another process of this user (an agent's command) can replace a pid file or log by a
    symlink to a file elsewhere; the engine would truncate or append to it.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        raise  # without O_CREAT: the caller's "none yet"
    except OSError as exc:
        raise RuntimeDirError(
            f"cannot open {path} ({exc.strerror}): remove it (a symlink, folder or file of "
            "someone else's is never used) and try again"
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        os.close(fd)
        raise RuntimeDirError(f"{path} is not a regular file of yours: remove it and try again")
    os.set_blocking(fd, True)
    return fd


def workspace_key(workspace: Path) -> str:
    """A short stable name for a workspace (its resolved path, hashed)."""
    resolved = os.fsencode(os.path.realpath(workspace))
    return hashlib.sha256(resolved).hexdigest()[:20]


def engine_keys(folder: Path) -> list[str]:
    """The keys of every engine that has run in the runtime ``folder`` (its pid files;
    whether one still runs is the pid file's lock: ``attach.engine_pid``)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(name[: -len(".pid")] for name in names if name.endswith(".pid"))


class EnginePaths:
    """The files of one workspace's engine (a plain class: the command line skips the
    import of dataclasses)."""

    def __init__(self, workspace: Path, folder: Path, key: str) -> None:
        self.workspace = workspace
        """The workspace, resolved."""
        self.folder = folder
        """The runtime folder."""
        self.key = key
        """The workspace's name in the runtime folder."""

    @classmethod
    def of(cls, workspace: Path) -> EnginePaths:
        """The engine files of ``workspace`` (the runtime folder is created and checked)."""
        resolved = Path(os.path.realpath(workspace))
        paths = cls(resolved, runtime_dir(), workspace_key(resolved))
        if len(os.fsencode(paths.socket)) > SOCKET_PATH_MAX:
            raise RuntimeDirError(
                f"the engine socket {paths.socket} is longer than a Unix socket address "
                f"allows ({SOCKET_PATH_MAX} bytes): set ${RUNTIME_ENV} to a shorter folder"
            )
        return paths

    @classmethod
    def keyed(cls, folder: Path, key: str, workspace: Path | None = None) -> EnginePaths:
        """The files of the engine named ``key`` in ``folder`` (found there, not from a
        workspace: ``workspace`` is what it serves as far as known, for messages)."""
        return cls(workspace or folder / key, folder, key)

    @property
    def socket(self) -> Path:
        """The Unix socket the engine listens on."""
        return self.folder / f"{self.key}.sock"

    @property
    def start_lock(self) -> Path:
        """Held by a client while it starts an engine: two starts end with one engine."""
        return self.folder / f"{self.key}.start.lock"

    @property
    def pid_file(self) -> Path:
        """The engine's pid; the engine holds an exclusive lock on it for its whole life."""
        return self.folder / f"{self.key}.pid"

    @property
    def log(self) -> Path:
        """The engine's log (its stderr)."""
        return self.folder / f"{self.key}.log"
