"""Calls that could reach past the guard later: a write to toold's own configuration
(toold.toml, .toold/), which could loosen the rules, and a write into .git/, whose hooks
and config run code outside any sandbox. The guard asks before either (toold.permissions.
guard), and no "Always allow" answers it.
"""

from __future__ import annotations

from typing import Any

from toold.permissions.commands import PROTECTED
from toold.permissions.interpreters import git_arguments
from toold.permissions.rules import PATH_FIELDS, Subject, normalise_path
from toold.tools.annotations import ToolAnnotations

SELF_ESCALATION = "it could change toold's own configuration (toold.toml, .toold/)"
GIT_CODE = "it writes into .git/, whose hooks and config run code later, outside any sandbox"


def loosens_guard(
    subject: Subject, annotations: ToolAnnotations, paths: list[str] | None = None
) -> bool:
    """Whether an agent's call could write toold.toml or .toold/ (and so loosen the guard).

    A tool that writes paths is judged by every file it names (``paths``, else its path
    argument); one that says it writes but names none it can be judged by fails closed.
    """
    if subject.shell is not None:
        return not subject.shell.read_only and subject.shell.touches()
    if annotations.writes_path:
        if paths is None:
            paths = [subject.value] if _names_a_path(subject.args) else []
        if not paths:
            return True
        return any(protected(path) for path in paths)
    if annotations.runs_code:
        return any(name in subject.value for name in PROTECTED)
    return False


def writes_git(
    subject: Subject, annotations: ToolAnnotations, paths: list[str] | None = None
) -> bool:
    """Whether a call may write into ``.git/`` (a hook, ``core.fsmonitor`` or
    ``core.hooksPath`` there runs code when the user next runs git): a file tool naming a
    path there, or a shell command that is not read-only and may name ``.git`` (a word, a
    redirection, a glob or a word only known at run time) or runs ``git config``. Inside
    bwrap and docker those files are read-only anyway; under the subprocess and local
    runners this is the only wall."""
    if subject.shell is not None:
        shell = subject.shell
        if shell.read_only:
            return False
        return shell.touches((".git",), components=True) or any(
            layer.program == "git" and git_arguments(layer.args)[:1] == ["config"]
            for resolved in shell.commands
            for layer in resolved.layers
        )
    if not annotations.writes_path:
        return False
    if paths is None:
        paths = [subject.value] if _names_a_path(subject.args) else []
    return any(_in_git(path) for path in paths)


def _in_git(path: str) -> bool:
    normal = normalise_path(path).lower()
    return normal == ".git" or normal.startswith(".git/")


def protected(path: str) -> bool:
    """Whether ``path`` (workspace-relative) is toold.toml or inside .toold/."""
    normal = normalise_path(path).lower()
    return normal in PROTECTED or normal.startswith(".toold/")


def _names_a_path(args: Any) -> bool:
    return isinstance(args, dict) and any(
        isinstance(args.get(name), str) and args.get(name) for name in PATH_FIELDS
    )
