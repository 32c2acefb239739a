"""The parts of the workspace a sandboxed command may not write: ``.git``'s code-running
parts, and toold's own records in ``.toold``.

Git on the host runs what ``.git/config`` names (``core.fsmonitor``, ``core.pager``,
filter drivers, aliases) and what ``.git/hooks`` holds, at the user's next ``git status``
or ``git commit``: a command that writes them runs code outside the sandbox later. The
bwrap and docker sandboxes therefore bind ``config``, ``hooks`` and ``info`` (and those
of ``.git/modules/*``) read-only over the read-write workspace, while objects, refs and
the index stay writable, so ``git commit`` works inside. ``.git`` itself is pinned (a
mount point cannot be renamed, removed or replaced); a ``.git`` file (a worktree or a
submodule's pointer) is bound read-only whole. A protected part that is missing gets an
empty read-only stand-in (an empty file or folder appears on the host), so a command
cannot create it either.

The layout is read when the sandbox is built; a workspace whose ``.git`` appears, changes
shape or is replaced later gets a fresh sandbox before its next call
(``protected_layout``); the call that made it (``git init``), unprotected meanwhile, is
vetted when it ends: a new repository that would run commands is moved aside
(``vet_new_repository``).

``.toold`` holds what the user reads and what toold brings back: the audit log, undo's
checkpoints, background jobs' records and logs, and ACP sessions' history (``session/load``
replays it to the agent as the conversation so far). A command that rewrote them would
forge the audit, make undo restore its content, or put words in the user's mouth. The
sandboxes pin ``.toold`` and bind those records read-only (``record_binds``); missing ones
are made first (0700 folders, an empty 0600 audit log), so the sandbox sees the real thing.
The rest of ``.toold`` stays writable: ``outputs/`` (a cut call's whole output, written
from its worker), ``skills/``, the TODO list and tasks (an agent's own through its tools;
the guard asks before an agent's call writes anywhere in ``.toold``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
import subprocess
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PROTECTED_FILES = ("config",)
PROTECTED_DIRS = ("hooks", "info")
STATE_DIR = ".toold"
RECORD_DIRS = ("checkpoints", "jobs", "sessions")
RECORD_FILES = ("audit.jsonl",)
MODULES_LIMIT = 64
"""Submodules whose config and hooks are protected (``.git/modules/*``, one level)."""


@dataclass(frozen=True)
class Bind:
    """One mount over the workspace: ``source`` at ``target``, read-only or not."""

    source: str
    target: str
    read_only: bool


def _kind(path: str) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file"


def _modules(gitdir: str) -> list[str]:
    try:
        names = sorted(os.listdir(os.path.join(gitdir, "modules")))
    except OSError:
        return []
    found = [os.path.join(gitdir, "modules", n) for n in names[:MODULES_LIMIT]]
    return [path for path in found if _kind(path) == "dir"]


def protected_layout(workspace: Path, pins: list[int] | None = None) -> tuple[str, ...]:
    """A cheap fingerprint of what ``protected_binds`` depends on (a few lstat calls): the
    kind and identity of ``.git``, ``.toold`` and each protected part. A bind holds the file
    it was made on, and removing a mount point on the host detaches it inside: when one is
    replaced (``git init`` again, the audit log rotated, ``.toold`` removed and made again),
    the next call gets a fresh sandbox. With ``pins`` (when the sandbox is built), each part
    found is also held open there (O_PATH) for the sandbox's life, so that its inode number
    cannot pass to its replacement and hide it (``close_pins``)."""
    gitdir = os.path.join(workspace, ".git")
    state = os.path.join(workspace, STATE_DIR)
    paths = [gitdir, state]
    if _kind(gitdir) == "dir":
        for root in (gitdir, *_modules(gitdir)):
            paths += [os.path.join(root, n) for n in PROTECTED_FILES + PROTECTED_DIRS]
    paths += [os.path.join(state, n) for n in RECORD_DIRS + RECORD_FILES]
    return tuple(_identity(path, pins) for path in paths)


def _identity(path: str, pins: list[int] | None) -> str:
    """``path``'s kind, device and inode ("missing" when there is nothing), held open in
    ``pins`` when given."""
    try:
        if pins is None:
            info = os.lstat(path)
        else:
            fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            pins.append(fd)
            info = os.fstat(fd)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{stat.S_IFMT(info.st_mode)}:{info.st_dev}:{info.st_ino}"


def close_pins(pins: list[int]) -> None:
    """Close what ``protected_layout`` held open (the sandbox is gone)."""
    while pins:
        with contextlib.suppress(OSError):
            os.close(pins.pop())


def stand_ins(folder: Path) -> tuple[str, str]:
    """An empty file and an empty folder in ``folder``, bound where a part is missing."""
    empty_dir = folder / "empty-dir"
    empty_dir.mkdir(mode=0o555, exist_ok=True)
    empty_file = folder / "empty-file"
    empty_file.touch(mode=0o444, exist_ok=True)
    return str(empty_file), str(empty_dir)


def protected_binds(workspace: Path, folder: Path) -> list[Bind]:
    """The mounts, in order, that make ``.git``'s code-running parts and toold's records
    read-only (``folder``: the sandbox's own temporary folder, for the stand-ins)."""
    return _git_binds(workspace, folder) + record_binds(workspace)


def make_records(workspace: Path) -> None:
    """Make ``.toold`` and its records where they are missing (before the layout is read
    and the view built, so that both hold the real ones); never through a link."""
    state = os.path.join(workspace, STATE_DIR)
    _make(state, folder=True)
    try:
        fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # a link or a file: toold's own storage refuses it; nothing is made in it
    try:
        for name in RECORD_DIRS:
            _make(name, folder=True, dir_fd=fd)
        for name in RECORD_FILES:
            _make(name, folder=False, dir_fd=fd)
    finally:
        os.close(fd)


def record_binds(workspace: Path) -> list[Bind]:
    """``.toold`` pinned, and its records read-only; what is missing is made first."""
    make_records(workspace)
    state = os.path.join(workspace, STATE_DIR)
    if _kind(state) != "dir":
        return []  # a link: toold's own storage refuses it, and reads nothing through it
    binds = [Bind(state, state, read_only=False)]
    parts = [(n, "dir") for n in RECORD_DIRS] + [(n, "file") for n in RECORD_FILES]
    for name, kind in parts:
        path = os.path.join(state, name)
        if _kind(path) == kind:
            binds.append(Bind(path, path, read_only=True))
    return binds


def _make(path: str, folder: bool, dir_fd: int | None = None) -> None:
    """Create ``path`` (0700 folder, or empty 0600 file; in ``dir_fd`` when given) unless
    something is there; never through a link."""
    try:
        if folder:
            os.mkdir(path, 0o700, dir_fd=dir_fd)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(path, flags, 0o600, dir_fd=dir_fd))
    except FileExistsError:
        pass
    except OSError as exc:
        log.warning("could not make %s for the sandbox to protect: %s", path, exc)


def _git_binds(workspace: Path, folder: Path) -> list[Bind]:
    gitdir = os.path.join(workspace, ".git")
    kind = _kind(gitdir)
    if kind == "file":
        return [Bind(gitdir, gitdir, read_only=True)]
    if kind != "dir":
        return []  # none yet (or a link we cannot pin): a later layout change renews
    empty_file, empty_dir = stand_ins(folder)
    binds = [Bind(gitdir, gitdir, read_only=False)]
    for root in (gitdir, *_modules(gitdir)):
        for name, empty in [(n, empty_file) for n in PROTECTED_FILES] + [
            (n, empty_dir) for n in PROTECTED_DIRS
        ]:
            path = os.path.join(root, name)
            found = _kind(path)
            if found == "missing":
                binds.append(Bind(empty, path, read_only=True))
            elif found != "link":  # a link's target is bound by what it names, if visible
                binds.append(Bind(path, path, read_only=True))
    return binds


READ_ONLY = "Read-only file system"
_GIT_PART = re.compile(r"\.git/(?:modules/[^\s:'\"]+/)?(?:config|hooks|info)\b")
_RECORD = re.compile(r"\.toold\b")


def read_only_hint(result: object, runner: str) -> object:
    """``result`` (a tool's text) with a line naming the way out when a write failed
    because the sandbox made its target read-only."""
    if not isinstance(result, str) or READ_ONLY not in result:
        return result
    lines = [line for line in result.splitlines() if READ_ONLY in line]
    if any(_GIT_PART.search(line) for line in lines):
        hint = (
            f"[toold: .git/config, .git/hooks and .git/info are read-only in the {runner} "
            "sandbox, so that nothing a command writes there runs on your machine at the "
            "next git command; change them outside toold, or set execution.tool_runner = "
            '"subprocess" in toold.toml to run tools unsandboxed]'
        )
    elif any(_RECORD.search(line) for line in lines):
        hint = (
            f"[toold: toold's records in .toold (the audit log, checkpoints, jobs, "
            f"sessions) are read-only in the {runner} sandbox, and .toold cannot be moved "
            "or removed: only toold writes them]"
        )
    else:
        hint = (
            f"[toold: only the workspace and /tmp are writable in the {runner} sandbox; "
            'set execution.tool_runner = "subprocess" in toold.toml to run tools unsandboxed]'
        )
    return f"{result}\n{hint}"


SAFE_KEYS = re.compile(
    r"(core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|"
    r"precomposeunicode|symlinks)|user\.(name|email)|init\.defaultbranch|"
    r"extensions\.objectformat|remote\.[^\n]*\.(url|pushurl|fetch)|"
    r"branch\.[^\n]*\.(remote|merge|rebase))"
)
"""What a repository made inside a sandbox may configure: data git init, clone and
``git config user.*`` write; nothing that names a command, a hook folder or a helper."""


def _unsafe_config(config: str) -> list[str]:
    try:
        done = subprocess.run(
            ["git", "config", "--file", config, "--null", "--list"],  # parses, runs nothing
            capture_output=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ["(unreadable)"]
    if done.returncode != 0:
        return ["(unreadable)"] if os.path.exists(config) else []
    entries = [e.decode(errors="replace") for e in done.stdout.split(b"\0") if e]
    keys = [entry.partition("\n")[0] for entry in entries]
    return [key for key in keys if not SAFE_KEYS.fullmatch(key.lower())]


def vet_new_repository(workspace: Path, result: object) -> object:
    """A ``.git`` made by a call whose sandbox could not protect it yet (none existed when
    the sandbox was built): if its config names anything that runs commands, or its hooks
    hold anything but git's samples, it is moved aside before git on the host can run it;
    ``result`` then says so. Nothing of the user's is lost: the repository is the call's."""
    gitdir = os.path.join(workspace, ".git")
    kind = _kind(gitdir)
    if kind == "missing":
        return result
    if kind != "dir":  # a pointer to a git folder the command chose: never vetted enough
        found = [f".git is a {kind}"]
    else:
        found = [f"config: {key}" for key in _unsafe_config(os.path.join(gitdir, "config"))]
        try:
            hooks = os.listdir(os.path.join(gitdir, "hooks"))
        except OSError:
            hooks = []
        found += [f"hook: {name}" for name in sorted(hooks) if not name.endswith(".sample")]
    if not found:
        return result
    aside = f"{gitdir}-quarantined-by-toold-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    try:
        os.rename(gitdir, aside)
    except OSError as exc:
        log.error("a new repository runs commands (%s) and could not be moved: %s", found, exc)
        note = f"[toold: {gitdir} runs commands ({', '.join(found)}); moving it aside failed]"
    else:
        log.warning("a new repository runs commands (%s): moved to %s", found, aside)
        note = (
            f"[toold: the repository this command created would run commands in git on "
            f"your machine ({', '.join(found[:5])}); it was moved to {os.path.basename(aside)}]"
        )
    return f"{result}\n{note}" if isinstance(result, str) else result


async def vetting(workspace: Path, layout: tuple[str, ...], call: Awaitable[Any]) -> Any:
    """Await ``call``; when the sandbox's view had no ``.git`` (``layout``) and none existed
    as the call began, vet the ``.git`` it leaves, even if it fails or is cancelled."""
    had_git = not layout or not layout[0].endswith(":missing")
    if had_git or os.path.lexists(os.path.join(workspace, ".git")):
        return await call
    try:
        result = await call
    except BaseException:
        vet_new_repository(workspace, None)
        raise
    return vet_new_repository(workspace, result)
