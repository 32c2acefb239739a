"""Shell command analysis: auto-safe read-only commands and the dangerous-command detector.

Commands are split into simple commands at ``; & | && || newline`` and inside
``$( )`` and backticks; wrappers such as sudo, nohup, exec, command, xargs,
timeout, nice and ``find -exec`` are peeled off, so a dangerous program is found
wherever it hides.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"})
AUTO_SAFE_PROGRAMS = frozenset(
    {"ls", "cat", "head", "tail", "wc", "echo", "pwd", "date", "which", "type", "pytest", "ruff"}
    | {"mypy"}
)
_SIMPLE_FORBIDDEN = re.compile(r"[;&|<>()\n`]|\$\(")
_SUBSTITUTION = re.compile(r"\$\(([^()]*(?:\([^()]*\)[^()]*)*)\)|`([^`]*)`")
_SEPARATORS = re.compile(r"\|\||&&|[;&\n]")
_SQL = re.compile(r"\bdrop\s+table\b|\bdelete\s+from\b", re.IGNORECASE)


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=False, posix=True)
    except ValueError:
        return segment.split()


def _program(word: str) -> str:
    return os.path.basename(word)


def _peel(words: list[str]) -> list[list[str]]:
    """The command(s) a wrapper runs: ``sudo -u x rm -rf /`` → ``rm -rf /``."""
    found = [words]
    while words:
        prog = _program(words[0])
        rest = words[1:]
        if prog in ("sudo", "doas"):
            while rest and rest[0].startswith("-"):
                takes_value = rest[0] in ("-u", "-g", "-C", "-h", "-p", "-U")
                rest = rest[2:] if takes_value else rest[1:]
        elif prog in ("nohup", "exec", "command", "builtin", "time", "stdbuf", "nice", "ionice"):
            while rest and rest[0].startswith("-"):
                rest = rest[2:] if rest[0] in ("-n", "-c", "-o", "-e", "-i") else rest[1:]
        elif prog == "timeout":
            while rest and rest[0].startswith("-"):
                rest = rest[2:] if rest[0] in ("-s", "-k", "--signal", "--kill-after") else rest[1:]
            rest = rest[1:]  # the duration
        elif prog == "xargs":
            while rest and rest[0].startswith("-"):
                rest = (
                    rest[2:] if rest[0] in ("-I", "-n", "-P", "-L", "-d", "-E", "-s") else rest[1:]
                )
        elif prog == "env":
            while rest and (rest[0].startswith("-") or "=" in rest[0]):
                rest = rest[1:]
        elif (prog == "find" and "-exec" in rest) or (prog == "find" and "-execdir" in rest):
            marker = "-exec" if "-exec" in rest else "-execdir"
            inner = rest[rest.index(marker) + 1 :]
            inner = inner[: inner.index(";")] if ";" in inner else inner
            inner = [w for w in inner if w not in ("+", "{}")]
            if inner:
                found.append(inner)
            break
        else:
            break
        if not rest:
            break
        words = rest
        found.append(words)
    return found


def split_commands(command: str) -> list[list[str]]:
    """Every simple command, including those inside substitutions, as word lists."""
    pieces: list[str] = []
    pending = [command]
    while pending:
        text = pending.pop()
        for match in _SUBSTITUTION.finditer(text):
            pending.append(match.group(1) or match.group(2) or "")
        stripped = _SUBSTITUTION.sub(" ", text)
        for chunk in _SEPARATORS.split(stripped):
            pieces.extend(chunk.split("|"))
    return [w for w in (_words(p.strip()) for p in pieces if p.strip()) if w]


def _short_flags(args: list[str]) -> str:
    return "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))


def _dangerous_words(words: list[str]) -> str | None:
    prog = _program(words[0])
    args = words[1:]
    if prog == "env":
        return "an env prefix"
    if prog == "rm" and ("--recursive" in args or set("rR") & set(_short_flags(args))):
        return "recursive rm"
    if prog in SHELLS and "-c" in args:
        return f"{prog} -c"
    if prog == "git" and args:
        sub, rest = args[0], args[1:]
        if sub == "push" and (
            set(rest) & {"--force", "--force-with-lease", "--delete", "--mirror", "--prune"}
            or set("fd") & set(_short_flags(rest))
            or any(a.startswith("+") or (a.startswith(":") and len(a) > 1) for a in rest)
            or any(a.startswith("--force") for a in rest)
        ):
            return "git push that rewrites or deletes remote history"
        if sub == "clean" and ("--force" in rest or "f" in _short_flags(rest)):
            return "git clean -f"
        if sub == "reset" and "--hard" in rest:
            return "git reset --hard"
    if prog == "chmod" and any(a in ("777", "a+rwx", "ugo+rwx") for a in args):
        return "chmod 777"
    if prog.startswith("mkfs"):
        return "mkfs"
    if prog == "dd" and any(a.startswith("if=") for a in args):
        return "dd if="
    if prog == "find" and "-delete" in args:
        return "find -delete"
    return None


def dangerous_reason(command: str) -> str | None:
    """Why the command is dangerous, or None."""
    if _SQL.search(command):
        return "destructive SQL"
    segments = split_commands(command)
    for words in segments:
        for inner in _peel(words):
            reason = _dangerous_words(inner)
            if reason:
                return reason
    # curl/wget piped into a shell (or an interpreter reading stdin).
    for pipeline in _SEPARATORS.split(_SUBSTITUTION.sub(" ", command)):
        stages = [_words(s) for s in pipeline.split("|")]
        programs = [_program(_peel(s)[-1][0]) if s else "" for s in stages]
        for before, after in itertools.pairwise(programs):
            if before in ("curl", "wget") and (after in SHELLS or after.startswith("python")):
                return f"{before} piped to {after}"
    return None


def is_simple(command: str) -> bool:
    """No operators, redirections, subshells or substitutions."""
    return not _SIMPLE_FORBIDDEN.search(command)


def is_auto_safe(command: str) -> bool:
    """A simple, read-only command on the spec's list (or a read-only git command)."""
    if not is_simple(command):
        return False
    words = _words(command)
    if not words:
        return False
    prog, args = _program(words[0]), words[1:]
    if prog in AUTO_SAFE_PROGRAMS:
        return True
    if prog.startswith("python") and args[:2] == ["-m", "pytest"]:
        return True
    if prog == "npm" and (args[:1] == ["test"] or args[:2] in (["run", "lint"], ["run", "test"])):
        return True
    if prog == "git" and args:
        if args[0] in ("diff", "log", "show", "status"):
            return True
        if args[0] == "branch":
            listing = {"-a", "-r", "-v", "-vv", "--list", "--all", "--remotes", "--show-current"}
            return all(a in listing for a in args[1:])
    return False
