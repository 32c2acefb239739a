"""Where a shell word points: inside the workspace or out of it.

The file tools refuse paths outside the workspace; the shell must not be a side door.
A word names a path outside when it is absolute (except /dev/null and the standard
streams), starts with ``~``, or climbs above the root with ``..`` (normalised lexically
against the workspace root) — as a whole, after ``=`` (``--file=/etc/x``) or as the value
of a short option (``-f/etc/x``). While the guard judges a call (``judging_in(root)``),
a relative word is also resolved where it leads: its existing part is followed through
symbolic links as the kernel would (``link/x`` with ``link -> /tmp/d``, a link to a link,
``link/../x``), a glob through the names it matches, and what ends outside the real root,
or cannot be resolved, is outside.
A word bash computes at run time is inside only when it is a glob whose text stays
inside; for programs that read no paths, only when it reads no secret variable.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import glob
import os
import posixpath
import re
import stat
from collections.abc import Iterator
from contextvars import ContextVar
from itertools import islice

from toold.permissions.shell import Script
from toold.sandbox.paths import PATH_MAX

DEVICES = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"})
"""Absolute paths a command may name and still stay inside the workspace."""
_EXPANSION = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?!$-]))")
_PUBLIC_VARIABLES = frozenset(
    {"HOME", "PWD", "OLDPWD", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TERM", "HOSTNAME"}
    | {"VIRTUAL_ENV", "?", "#"}
)
"""Variables that hold no secret; any other ``$NAME`` may print the daemon's API keys."""
_RUNTIME = re.compile(r"[$`{(]")
_QUOTES = re.compile(r"[\'\"\\]")
_GLOB_CHAR = re.compile(r"[*?\[]")
_PROCESS_SUBSTITUTION = re.compile(r"^[<>]\(.*\)$", re.DOTALL)


class _Root:
    """The workspace root of one check; its real path is resolved on first need (a file
    tool's call never needs it: only shell words are followed), then kept for the check."""

    __slots__ = ("_real", "given")

    def __init__(self, given: str) -> None:
        self.given = given
        self._real: str | None = None

    @property
    def real(self) -> str:
        if self._real is None:
            self._real = _real_root(self.given)
        return self._real


_ROOT: ContextVar[_Root | None] = ContextVar("toold_judged_root", default=None)
MAX_GLOB_MATCHES = 1000
"""A glob word matching more names than this is outside (each match is resolved)."""
_MAX_HOPS = 40
_NAME_MAX = 255
"""Symlinks followed for one word before it counts as a loop (Linux's limit)."""


@contextlib.contextmanager
def judging_in(root: str | os.PathLike[str] | None) -> Iterator[None]:
    """Within this block, relative words are also judged by where they lead from ``root``
    (the workspace; None: lexically only). The guard wraps each check in it."""
    token = _ROOT.set(None if root is None else _Root(os.fspath(root)))
    try:
        yield
    finally:
        _ROOT.reset(token)


def judged_root() -> str | None:
    """The real workspace root paths are judged against now (None outside ``judging_in``)."""
    root = _ROOT.get()
    return None if root is None else root.real


def judging() -> bool:
    """Whether words are judged by where they lead now (within ``judging_in``)."""
    return _ROOT.get() is not None


def _real_root(root: str) -> str:
    try:
        return os.path.realpath(root)
    except (OSError, ValueError):
        return root  # its words then resolve against the path as given


def escapes(path: str) -> bool:
    """Whether ``path``, resolved against the workspace root, lies outside it.

    Absolute paths (except the standard streams and /dev/null), ``~`` paths and
    relative paths whose ``..`` components climb above the root are outside; within
    ``judging_in``, so is one whose existing part leads out through a symlink.
    """
    if path in DEVICES:
        return False
    if path.startswith(("/", "~")):
        return True
    norm = posixpath.normpath(path) if path else path
    if norm == ".." or norm.startswith("../"):
        return True
    root = judged_root()
    return root is not None and bool(path) and leads_outside(root, path)


def leads_outside(root: str, path: str) -> bool:
    """Whether the relative ``path``, followed from the real folder ``root`` as the kernel
    would (symlinks as they come, then ``..``), ends outside ``root``.

    What does not exist is taken as written. A glob is judged by every name it matches
    (more than MAX_GLOB_MATCHES: outside). A NUL, a path past PATH_MAX, one that cannot be
    encoded or resolved: outside. Never raises.
    """
    if "\x00" in path or len(path) > PATH_MAX:
        return True
    try:
        if _GLOB_CHAR.search(path):
            found = list(islice(glob.iglob(path, root_dir=root), MAX_GLOB_MATCHES + 1))
            if len(found) > MAX_GLOB_MATCHES:
                return True
            return any(_outside(root, match) for match in [path, *found])
        return _outside(root, path)
    except (OSError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return True


def _outside(root: str, path: str) -> bool:
    real = _follow(root, path, [0])
    return real != root and not real.startswith(root.rstrip("/") + "/")


def _follow(current: str, path: str, hops: list[int]) -> str:
    """``path`` followed from the real folder ``current`` as the kernel walks it (the
    folders above ``current`` are not looked at again: realpath would lstat each)."""
    for name in path.split("/"):
        if name in ("", "."):
            continue
        if name == "..":
            current = posixpath.dirname(current)
            continue
        step = posixpath.join(current, name)
        if len(name) > _NAME_MAX:  # no such entry can exist: spare the system call
            current = step
            continue
        try:
            is_link = stat.S_ISLNK(os.lstat(step).st_mode)
        except OSError:  # missing, or not a folder: nothing below it can lead anywhere
            is_link = False
        if not is_link:
            current = step
            continue
        hops[0] += 1
        if hops[0] > _MAX_HOPS:
            raise OSError(errno.ELOOP, "too many levels of symbolic links", step)
        target = os.readlink(step)
        current = _follow("/" if target.startswith("/") else current, target, hops)
    return current


def names_outside(word: str) -> bool:
    """Whether a word names a path outside the workspace: whole, after ``=``, or as the
    value of a short option (``-f/etc/x``)."""
    candidates = [word]
    if "=" in word:
        candidates.append(word.split("=", 1)[1])
    if word.startswith("-") and not word.startswith("--"):
        candidates += [word[k:] for k in range(2, len(word))]
    return any(escapes(c) for c in candidates if c)


def runtime_word_inside(text: str, paths: bool) -> bool:
    """Whether a word bash computes at run time (``text`` as written) stays harmless.

    A process substitution is a pipe. For a program that reads no paths, any word but one
    that reads the environment (``$KEY``: the daemon's secrets) is fine. For one that
    does, only a glob (no expansion or substitution) whose text stays inside is.
    """
    if _PROCESS_SUBSTITUTION.match(text):
        return True
    if not paths:  # a glob such as ~/.ssh/* still lists names outside
        return all(
            (braced or plain) in _PUBLIC_VARIABLES for braced, plain in _EXPANSION.findall(text)
        ) and (bool(_RUNTIME.search(text)) or not names_outside(_QUOTES.sub("", text)))
    return not _RUNTIME.search(text) and not names_outside(_QUOTES.sub("", text))


LOOP_WORD = re.compile(r'^"?\$\{?(\w+)\}?"?$')


def loop_paths(script: Script) -> frozenset[str]:
    """Variables of ``for`` loops over paths inside the workspace, assigned nowhere else."""
    assigned = [n for c in script.commands for n, _ in c.assignments]
    mentioned = {v for c in script.commands for v in c.argv if v}
    return frozenset(
        name
        for name, items in script.loops
        if assigned.count(name) == 1
        and name not in mentioned
        and items
        and all(
            runtime_word_inside(w.text, True) if w.value is None else not names_outside(w.value)
            for w in items
        )
    )


def names_any(value: str, names: tuple[str, ...]) -> bool:
    """Whether a path component of ``value`` is, or as a glob matches, one of ``names``."""
    for part in (p for p in value.split("/") if p):
        if part in names or (
            _GLOB_CHAR.search(part) and any(fnmatch.fnmatchcase(n, part) for n in names)
        ):
            return True
    return False
