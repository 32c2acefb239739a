"""The parts of the workspace's ``.git`` a sandboxed command may not write.

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

The layout is read when the sandbox is built; a workspace whose ``.git`` appears or
changes shape later gets a fresh sandbox before its next call (see ``GitLayout``). The
call that ran ``git init`` itself could still write the new repository's config.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

PROTECTED_FILES = ("config",)
PROTECTED_DIRS = ("hooks", "info")
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


def git_layout(workspace: Path) -> tuple[str, ...]:
    """A cheap fingerprint of what ``protected_binds`` depends on (a few lstat calls)."""
    gitdir = os.path.join(workspace, ".git")
    kind = _kind(gitdir)
    if kind != "dir":
        return (kind,)
    parts = [kind]
    for root in (gitdir, *_modules(gitdir)):
        parts += [f"{root}/{n}:{_kind(os.path.join(root, n))}" for n in PROTECTED_FILES]
        parts += [f"{root}/{n}:{_kind(os.path.join(root, n))}" for n in PROTECTED_DIRS]
    return tuple(parts)


def stand_ins(folder: Path) -> tuple[str, str]:
    """An empty file and an empty folder in ``folder``, bound where a part is missing."""
    empty_dir = folder / "empty-dir"
    empty_dir.mkdir(mode=0o555, exist_ok=True)
    empty_file = folder / "empty-file"
    empty_file.touch(mode=0o444, exist_ok=True)
    return str(empty_file), str(empty_dir)


def protected_binds(workspace: Path, folder: Path) -> list[Bind]:
    """The mounts, in order, that make ``.git``'s code-running parts read-only
    (``folder``: the sandbox's own temporary folder, for the stand-ins)."""
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
    else:
        hint = (
            f"[toold: only the workspace and /tmp are writable in the {runner} sandbox; "
            'set execution.tool_runner = "subprocess" in toold.toml to run tools unsandboxed]'
        )
    return f"{result}\n{hint}"
