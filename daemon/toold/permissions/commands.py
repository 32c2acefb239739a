"""Shell command analysis: auto-safe read-only commands and the dangerous-command detector.

A command is cut into pipelines and stages at unquoted ``; & && || | newline ( )``;
the bodies of ``$( )``, backticks and ``<( )`` are analysed as commands of their
own. Wrappers (sudo, nohup, exec, command, xargs, timeout, nice, env, eval,
``find -exec``, ``VAR=value`` prefixes, shell keywords) are peeled off, so a
dangerous program is found wherever it hides. Quoted text is data: ``echo "rm -rf x"``
is not flagged, but a substitution is flagged even inside quotes.
"""

from __future__ import annotations

import os
import re
import shlex

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"})
AUTO_SAFE_PROGRAMS = frozenset(
    {"ls", "cat", "head", "tail", "wc", "echo", "pwd", "date", "which", "type", "pytest", "ruff"}
    | {"mypy"}
)
_SIMPLE_FORBIDDEN = re.compile(r"[;&|<>()\n`]|\$\(")
_SUBSTITUTION = re.compile(r"[$<>]\(([^()]*(?:\([^()]*\)[^()]*)*)\)|`([^`]*)`")
_SQL = re.compile(r"\bdrop\s+table\b|\bdelete\s+from\b", re.IGNORECASE)
_SHELL_FROM_DOWNLOAD = re.compile(
    r"(?:^|[\s;&|(])(?:sh|bash|zsh|dash|ksh|source|\.)\s+<\(\s*(?:\S*/)?(?:curl|wget)\b"
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}"})
_PLAIN_WRAPPERS = frozenset(
    {"nohup", "exec", "command", "builtin", "time", "stdbuf", "nice", "ionice", "chroot"}
)
_GIT_VALUE_OPTIONS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
_CHMOD_OPEN = frozenset({"777", "0777", "a+rwx", "ugo+rwx", "a=rwx", "ugo=rwx"})


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=False, posix=True)
    except ValueError:
        return segment.split()


def _program(word: str) -> str:
    return os.path.basename(word)


def _pipelines(text: str) -> list[list[str]]:
    """Cut at unquoted operators: a list of pipelines, each a list of stage texts."""
    pipelines: list[list[str]] = []
    stages: list[str] = []
    buf: list[str] = []
    quote = ""
    i, n = 0, len(text)

    def end_stage() -> None:
        stages.append("".join(buf))
        buf.clear()

    def end_pipeline() -> None:
        end_stage()
        pipelines.append(stages.copy())
        stages.clear()

    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if quote:
            buf.append(c)
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"' and nxt:
                buf.append(nxt)
                i += 1
        elif c == "\\" and nxt:
            buf.append(c + nxt)
            i += 1
        elif c in "'\"":
            quote = c
            buf.append(c)
        elif c == "|" and nxt != "|":
            end_stage()
            i += 1 if nxt == "&" else 0
        elif c == "&" and (nxt == ">" or (buf and buf[-1] in "<>")):
            buf.append(c)  # a redirection such as 2>&1 or &>file, not a separator
        elif c in ";&|\n()":
            end_pipeline()
            i += 1 if nxt == c and c in "&|;" else 0
        else:
            buf.append(c)
        i += 1
    end_pipeline()
    return [[s for s in p if s.strip()] for p in pipelines if any(s.strip() for s in p)]


def _expand(command: str) -> list[str]:
    """The command with substitutions blanked, then the bodies of those substitutions."""
    texts: list[str] = []
    pending = [command]
    while pending:
        text = pending.pop()
        for match in _SUBSTITUTION.finditer(text):
            pending.append(match.group(1) or match.group(2) or "")
        texts.append(_SUBSTITUTION.sub(" ", text))
    return texts


def _peel(words: list[str]) -> list[list[str]]:
    """The command and every command a wrapper runs: ``sudo -u x rm -rf /`` → both."""
    found = [words]
    while words:
        prog = _program(words[0])
        rest = words[1:]
        if _ASSIGNMENT.match(words[0]) or words[0] in _KEYWORDS:
            pass
        elif prog in ("sudo", "doas"):
            while rest and rest[0].startswith("-"):
                takes_value = rest[0] in ("-u", "-g", "-C", "-h", "-p", "-U", "-D", "-r", "-t")
                rest = rest[2:] if takes_value else rest[1:]
        elif prog in _PLAIN_WRAPPERS:
            while rest and rest[0].startswith("-"):
                rest = rest[2:] if rest[0] in ("-n", "-c", "-o", "-e", "-i", "-a") else rest[1:]
        elif prog == "timeout":
            while rest and rest[0].startswith("-"):
                rest = rest[2:] if rest[0] in ("-s", "-k", "--signal", "--kill-after") else rest[1:]
            rest = rest[1:]  # the duration
        elif prog == "xargs":
            while rest and rest[0].startswith("-"):
                takes_value = rest[0] in ("-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a")
                rest = rest[2:] if takes_value else rest[1:]
        elif prog == "env":
            while rest and (rest[0].startswith("-") or "=" in rest[0]):
                rest = rest[2:] if rest[0] in ("-u", "-C", "-S") else rest[1:]
        elif prog == "eval":
            for text in _expand(" ".join(rest)):
                for inner in _commands(text):
                    found.extend(_peel(inner))
            break
        elif prog == "find":
            found.extend(_find_exec(rest))
            break
        else:
            break
        if not rest:
            break
        words = rest
        found.append(words)
    return found


def _find_exec(args: list[str]) -> list[list[str]]:
    """The commands of every ``-exec``/``-execdir``/``-ok`` clause of find."""
    commands: list[list[str]] = []
    for i, word in enumerate(args):
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[str] = []
            for w in args[i + 1 :]:
                if w in (";", "+"):
                    break
                if w not in ("{}", "\\"):
                    inner.append(w)
            if inner:
                commands.extend(_peel(inner))
    return commands


def _commands(text: str) -> list[list[str]]:
    return [w for p in _pipelines(text) for s in p if (w := _words(s))]


def split_commands(command: str) -> list[list[str]]:
    """Every simple command, including those inside substitutions, as word lists."""
    return [words for text in _expand(command) for words in _commands(text)]


def command_variants(command: str) -> list[str]:
    """Each simple command and each command a wrapper runs, as space-joined words."""
    return [" ".join(inner) for words in split_commands(command) for inner in _peel(words)]


def simple_commands(command: str) -> list[str]:
    """Each simple command (including substitutions) as space-joined words."""
    return [" ".join(words) for words in split_commands(command)]


def _short_flags(args: list[str]) -> str:
    return "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))


def _git_subcommand(args: list[str]) -> tuple[str, list[str]]:
    """Skip git's global options (``-C dir``, ``-c k=v``, ``--no-pager``...)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GIT_VALUE_OPTIONS else 1
    return (args[i], args[i + 1 :]) if i < len(args) else ("", [])


def _dangerous_git(args: list[str]) -> str | None:
    sub, rest = _git_subcommand(args)
    if sub == "push" and (
        set(rest) & {"--delete", "--mirror", "--prune"}
        or any(a.startswith("--force") for a in rest)
        or set("fd") & set(_short_flags(rest))
        or any(a.startswith("+") or (a.startswith(":") and len(a) > 1) for a in rest)
    ):
        return "git push that rewrites or deletes remote history"
    if sub == "clean" and ("--force" in rest or "f" in _short_flags(rest)):
        return "git clean -f"
    if sub == "reset" and "--hard" in rest:
        return "git reset --hard"
    return None


def _dangerous_words(words: list[str]) -> str | None:
    prog = _program(words[0])
    args = words[1:]
    if prog == "env":
        return "an env prefix"
    if prog == "rm" and ("--recursive" in args or set("rR") & set(_short_flags(args))):
        return "recursive rm"
    if prog in SHELLS and "c" in _short_flags(args):
        return f"{prog} -c"
    if prog == "git":
        return _dangerous_git(args)
    if prog == "chmod" and _CHMOD_OPEN & set(args):
        return "chmod 777"
    if prog.startswith("mkfs"):
        return "mkfs"
    if prog == "dd" and any(a.startswith("if=") for a in args):
        return "dd if="
    if prog == "find" and "-delete" in args:
        return "find -delete"
    return None


def _download_piped_to_shell(text: str) -> str | None:
    for stages in _pipelines(text):
        programs = [_program(_peel(w)[-1][0]) if (w := _words(s)) else "" for s in stages]
        for i, before in enumerate(programs):
            if before not in ("curl", "wget"):
                continue
            for after in programs[i + 1 :]:
                if after in SHELLS or after.startswith("python"):
                    return f"{before} piped to {after}"
    return None


def dangerous_reason(command: str) -> str | None:
    """Why the command is dangerous, or None."""
    if _SQL.search(command):
        return "destructive SQL"
    if _SHELL_FROM_DOWNLOAD.search(command):
        return "a downloaded script run by a shell"
    for words in split_commands(command):
        for inner in _peel(words):
            reason = _dangerous_words(inner) if inner else None
            if reason:
                return reason
    for text in _expand(command):
        reason = _download_piped_to_shell(text)
        if reason:
            return reason
    return None


def is_simple(command: str) -> bool:
    """No operators, redirections, subshells or substitutions."""
    return not _SIMPLE_FORBIDDEN.search(command)


def _git_branch_listing(args: list[str]) -> bool:
    listing = {"-a", "-r", "-v", "-vv", "--all", "--remotes", "--show-current", "--no-color"}
    patterns_allowed = "--list" in args or "-l" in args
    return all(
        a in listing or a in ("--list", "-l") or (patterns_allowed and not a.startswith("-"))
        for a in args
    )


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
        if any(a.startswith("--output") for a in args):
            return False
        if args[0] in ("diff", "log", "show", "status"):
            return True
        if args[0] == "branch":
            return _git_branch_listing(args[1:])
    return False
