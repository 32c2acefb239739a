"""toold's per-user state outside every workspace: secret keys and remembered answers.

A workspace folder is the agent's to write (and a cloned repository's), so what must
outlive a session and stay out of its reach lives here: ``$TOOLD_STATE_DIR`` if set,
else ``$XDG_STATE_HOME/toold``, else ``~/.local/state/toold``. The folder is made 0700
and must be a real folder of this user; every file in it is 0600, written atomically,
and never opened through a symlink. A sandboxed runner (bwrap, docker) does not show it
to tool calls; with the subprocess runner an agent's command runs as the user and could
read it like any other file of the user's.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from pathlib import Path

STATE_ENV = "TOOLD_STATE_DIR"
"""Overrides the state folder (tests give each run its own)."""
KEY_BYTES = 32
MAX_STATE_FILE = 1 << 20
"""A remembered-answers file is at most this long; a longer one is not read."""


class UserStateError(OSError):
    """The state folder or one of its files cannot be trusted; the message names the fix."""


def state_dir() -> Path:
    """The owner-only state folder (created 0700 when missing)."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        folder = Path(explicit)
    else:
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(
            os.path.expanduser("~"), ".local", "state"
        )
        folder = Path(base) / "toold"
    folder = Path(os.path.abspath(folder))
    with contextlib.suppress(FileExistsError):
        os.makedirs(folder.parent, 0o700, exist_ok=True)
        os.mkdir(folder, 0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise UserStateError(
            f"{folder} is not a folder of yours (a symlink, a file, or another user's): "
            f"remove it, or set ${STATE_ENV} to a folder of your own"
        )
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder


def workspace_name(root: Path) -> str:
    """A file name for the workspace at ``root`` (a hash of its resolved path)."""
    return hashlib.sha256(os.fsencode(root)).hexdigest()[:32]


def read_private(path: Path) -> bytes | None:
    """The bytes of the state file ``path`` (made 0600); None when missing. A symlink,
    another user's file or one larger than MAX_STATE_FILE is UserStateError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserStateError(f"cannot read {path} ({exc.strerror}): remove it") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise UserStateError(f"{path} is not a file of yours: remove it")
        if info.st_size > MAX_STATE_FILE:
            raise UserStateError(f"{path} is larger than {MAX_STATE_FILE} bytes: remove it")
        if info.st_mode & 0o077:
            os.fchmod(fh.fileno(), 0o600)  # ours: close it rather than refuse
        return fh.read(MAX_STATE_FILE + 1)


def write_private(path: Path, data: bytes, *, replace: bool = True) -> bool:
    """Write ``path`` (0600) atomically: temp file, fsync, then rename (``replace``) or
    link, which fails when the file exists (False: another writer came first)."""
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = folder / f".{path.name}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def secret_key(name: str) -> bytes:
    """The user's secret key ``name`` (32 random bytes), created once, 0600."""
    path = state_dir() / name
    for _ in range(2):
        data = read_private(path)
        if data is not None:
            if len(data) != KEY_BYTES:
                raise UserStateError(
                    f"{path} is not a toold key ({len(data)} bytes, not {KEY_BYTES}): move it "
                    "away (toold makes a new one; what the old one signed is then refused)"
                )
            return data
        try:
            write_private(path, secrets.token_bytes(KEY_BYTES), replace=False)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise UserStateError(f"cannot create the key {path}: {exc}") from None
    raise UserStateError(f"cannot create the key {path}: it keeps disappearing")
