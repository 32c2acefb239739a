"""Where a shell word points: inside the workspace or out of it (checked lexically).

The file tools refuse paths outside the workspace; the shell must not be a side door.
A word names a path outside when it is absolute (except /dev/null and the standard
streams), starts with ``~``, or climbs above the root with ``..`` (normalised lexically
against the workspace root) — as a whole, after ``=`` (``--file=/etc/x``) or as the value
of a short option (``-f/etc/x``). Symbolic links inside the workspace are not followed.
A word bash computes at run time is inside only when it is a glob whose text stays
inside; for programs that read no paths, only when it reads no secret variable.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re

from toold.permissions.shell import Script

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


def escapes(path: str) -> bool:
    """Whether ``path``, resolved lexically against the workspace root, lies outside it.

    Absolute paths (except the standard streams and /dev/null), ``~`` paths and
    relative paths whose ``..`` components climb above the root are outside.
    """
    if path in DEVICES:
        return False
    if path.startswith(("/", "~")):
        return True
    norm = posixpath.normpath(path) if path else path
    return norm == ".." or norm.startswith("../")


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
