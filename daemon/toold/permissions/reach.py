"""How a deny or forbid rule on a path reaches calls of other tools (``reaching_rule``).

A rule for the call's own tool holds as rules.py's ``deny_rule`` says. A path rule
(rules.py's ``path_rule``: ``read_file(prefix:.env*)``) of any tool also holds for every
call that can reach the files it names: file tools naming them, searches of a folder
holding them, code naming them and shell lines. A shell line is resolved once for every
rule (``LineReach``): each word that may name a file, against every folder a ``cd``,
``pushd`` or ``-C DIR`` may have moved to, through the symbolic links that exist now;
globs; and what is only known at run time, which may reach anything (``shell_reaches``).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from toold.permissions.commands import Analysis
from toold.permissions.interpreters import git_arguments
from toold.permissions.rules import (
    PATH_FIELDS,
    Rule,
    Subject,
    deny_rule,
    normalise_path,
    path_rule,
)
from toold.tools.annotations import ToolAnnotations


@dataclass(frozen=True)
class Reach:
    """A deny or forbid rule that holds for a call, and how the call reaches its files."""

    rule: Rule
    how: str = ""
    """Why a rule naming another tool holds here ("" when it names this call's tool)."""

    def describe(self) -> str:
        """The rule, and how the call reaches what it names: for verdicts and prompts."""
        return f"{self.rule.source} ({self.how})" if self.how else self.rule.source


_CWD_READERS = frozenset({"rg", "ag", "ack", "rgrep"})
"""Programs that search the current folder, recursively, when given no path."""
_GREPS = frozenset({"grep", "egrep", "fgrep"})
_GIT_TREE = frozenset({"grep", "add", "stash", "archive"})
"""git subcommands that read the working tree's files."""
_CHDIR = frozenset({"cd", "pushd", "popd"})
_CHDIR_OPTIONS = ("-C", "--chdir", "--directory", "-D")
_RUNTIME_CHARS = re.compile(r"[$`{(]")
_GLOB_CHARS = re.compile(r"[*?\[]")
_QUOTE_CHARS = re.compile(r"[\'\"\\]")
_UNSEEN = ("/proc/", "/dev/fd/")
"""Absolute prefixes that lead anywhere (``/proc/self/cwd/.env``)."""


def reaching_rule(
    rules: list[Rule],
    subject: Subject,
    annotations: ToolAnnotations,
    paths: list[str] | None = None,
    root: str | None = None,
) -> Reach | None:
    """The first rule (deny or forbid) that holds for the call, from any tool.

    A rule for the call's own tool matches as ``deny_rule`` says. A path rule (see
    ``path_rule``) of any tool also holds for: every call naming a file it covers (the
    ``file_path``/``path`` argument, or ``paths``: every file of a patch); a folder search
    (``searches_folder``) of a folder it covers or one holding a file it covers — the
    search is judged, not filtered; code (``runs_code``) that mentions the pattern; and a
    shell line, as ``shell_reaches`` says. ``root``: the workspace's absolute path, so
    absolute words can be judged (without it every absolute word may name anything).
    """
    own = deny_rule(rules, subject)
    if own is not None:
        return Reach(own)
    found = [rule for rule in rules if path_rule(rule)]
    if not found:
        return None
    if subject.shell_line:
        if subject.shell is None:
            return None  # nothing runs: the guard asks about an empty command
        line = LineReach.of(subject.shell, root)
        return next((Reach(r, how) for r in found if (how := line.reaches(r))), None)
    for rule in found:
        how = _reaches(rule, subject, annotations, paths, root)
        if how is not None:
            return Reach(rule, how)
    return None


def _reaches(
    rule: Rule,
    subject: Subject,
    annotations: ToolAnnotations,
    paths: list[str] | None,
    root: str | None,
) -> str | None:
    start = [root or "."]
    if subject.folder and _path_reaches(rule, subject.value or ".", start, root):
        return f"it searches {subject.value or '.'}, which holds what the rule names"
    named = list(paths or [])
    if isinstance(subject.args, dict):
        named += [v for k in PATH_FIELDS if isinstance(v := subject.args.get(k), str) and v]
    for path in named:
        if _path_reaches(rule, path, start, root):
            return f"it names {path}"
    if annotations.runs_code and _mentions(rule, subject.value):
        return f"its code names {_pattern(rule)}"
    return None


def _pattern(rule: Rule) -> str:
    """The rule's pattern as a normalised workspace-relative path (a prefix keeps its '/')."""
    text = (rule.pattern or "").strip()
    if not text:
        return ""
    norm = normalise_path(text)
    return norm + "/" if rule.prefix and text.endswith("/") and norm != "/" else norm


def _mentions(rule: Rule, text: str) -> bool:
    """Whether ``text`` spells the rule's path as a word of its own (``cat ./.env``)."""
    pattern = _pattern(rule)
    end = "" if rule.prefix else r"(?![\w.-])"
    return re.search(rf"(?<![\w.-]){re.escape(pattern)}{end}", text) is not None


def _covers_path(rule: Rule, rel: str) -> bool:
    """Whether the rule covers ``rel`` or a file below it (``rel`` is a folder holding it)."""
    pattern = _pattern(rule)
    if rel in (".", ""):
        return True
    if rel.startswith(pattern) if rule.prefix else rel == pattern:
        return True
    return pattern.startswith(rel.rstrip("/") + "/")


def _climbs(path: str) -> bool:
    return path == ".." or path.startswith("../")


def _relative(value: str, bases: list[str] | None, root: str | None) -> list[str | None]:
    """Where ``value`` may point: workspace-relative ("." for a folder holding the
    workspace, ``/dev/null`` for a place outside it), one per possible working folder
    (absolute when ``root`` is known); None: anywhere."""
    if value.startswith("~"):
        value = posixpath.expanduser(value)
        if value.startswith("~"):
            return [None]
    if value.startswith("/"):
        return _places(value, root)
    if bases is None:
        return [None]
    out: list[str | None] = []
    for base in bases:
        joined = posixpath.normpath(posixpath.join(base, value))
        if root is not None:
            out += _places(joined, root)
        else:
            out.append(None if _climbs(joined) else joined)
    return out


def _places(path: str, root: str | None) -> list[str | None]:
    """Where an absolute path points: as written, and through the symbolic links that
    exist now (a link to .env, or to the workspace from outside it)."""
    lexical = _from_root(path, root)
    if root is None or lexical is None:
        return [lexical]
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return [None]
    return [lexical] if real == posixpath.normpath(path) else [lexical, _from_root(real, root)]


def _from_root(path: str, root: str | None) -> str | None:
    path = posixpath.normpath(path)
    if path in ("/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"):
        return "/dev/null"
    if root is None or path.startswith(_UNSEEN) or path + "/" in _UNSEEN:
        return None
    if path == root or path.startswith(root.rstrip("/") + "/"):
        return posixpath.relpath(path, root)
    return "." if root.startswith(path.rstrip("/") + "/") else "/dev/null"


def _path_reaches(rule: Rule, value: str, bases: list[str] | None, root: str | None) -> bool:
    for rel in _relative(value, bases, root):
        if rel is None or (rel != "/dev/null" and _covers_path(rule, rel)):
            return True
    return False


def _glob_may_match(rule: Rule, glob: str, literal: str) -> bool:
    pattern = _pattern(rule)
    if rule.prefix:
        return pattern.startswith(literal) or literal.startswith(pattern)
    parts = pattern.split("/")
    held = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatchcase(p, glob) for p in held)


@dataclass
class LineReach:
    """What a shell line may reach, worked out once for every rule (``shell_reaches``)."""

    text: str
    places: dict[str, str] = field(default_factory=dict)
    """Each workspace-relative place a word may name ("." for the whole workspace), and
    the word."""
    globs: list[tuple[str, str, str]] = field(default_factory=list)
    """Each workspace-relative glob: (glob, its literal start, the word)."""
    anywhere: str | None = None
    """Why the line may reach any file (None: only what ``places`` and ``globs`` say)."""

    @classmethod
    def of(cls, analysis: Analysis, root: str | None = None) -> LineReach:
        """Resolve every word of the line that may name a file, once."""
        reach = cls(analysis.text)
        if analysis.unresolved:
            reach.anywhere = f"part of it is only known at run time ({analysis.unresolved[0]})"
            return reach
        if any(layer.stdin_args for r in analysis.commands for layer in r.layers):
            reach.anywhere = "its arguments are read at run time (xargs)"
            return reach
        bases = _working_folders(analysis, root)
        for value, text in dict.fromkeys(_file_words(analysis)):
            if value is None and (_RUNTIME_CHARS.search(text) or not _GLOB_CHARS.search(text)):
                reach.anywhere = f"{text!r} is only known at run time"
            elif value is None:
                reach._glob(text, bases, root)
            else:
                reach._word(value, value, bases, root)
            if reach.anywhere:
                return reach
        return reach

    def _word(self, value: str, word: str, bases: list[str] | None, root: str | None) -> None:
        for rel in _relative(value, bases, root):
            if rel is None:
                self.anywhere = f"{word!r} may name any file"
                return
            if rel != "/dev/null":
                self.places.setdefault(rel, word)

    def _glob(self, text: str, bases: list[str] | None, root: str | None) -> None:
        glob = _QUOTE_CHARS.sub("", text)
        literal = _GLOB_CHARS.split(glob, 1)[0]
        if bases is None or glob.startswith(("/", "~")) or ".." in glob.split("/"):
            # Judged by where it looks: the folder it starts from holds what it matches.
            self._word(posixpath.dirname(literal) or ".", text, bases, root)
            return
        for base in bases:
            rel = _from_root(base, root) if root is not None else base
            if rel is None:
                self.anywhere = f"the glob {text!r} may match any file"
                return
            if rel != "/dev/null":
                prefix = "" if rel == "." else rel + "/"
                self.globs.append((prefix + glob, prefix + literal, text))

    def reaches(self, rule: Rule) -> str | None:
        """How the line may reach what ``rule`` covers; None when it cannot."""
        if _mentions(rule, self.text):
            return f"it names {_pattern(rule) or 'every path'}"
        if self.anywhere:
            return self.anywhere
        for rel, word in self.places.items():
            if _covers_path(rule, rel):
                return f"{word!r} may reach it"
        for glob, literal, word in self.globs:
            if _glob_may_match(rule, glob, literal):
                return f"the glob {word!r} may match it"
        return None


def shell_reaches(rule: Rule, analysis: Analysis, root: str | None = None) -> str | None:
    """How a shell line may reach the files a path rule names; None when it cannot.

    Fail closed, on the parse: the line reaches them when it spells the rule's path as a
    word anywhere (in quotes, code for ``sh -c`` or ``python -c``, a heredoc); when any
    word or redirection target of any command (wrappers' programs included) names a
    covered file or a folder holding one, resolved against every folder a ``cd``,
    ``pushd`` or ``-C DIR`` may have moved to (``..`` and absolute words through the
    workspace root: ``/`` holds everything) and through the symbolic links that exist;
    when a glob may match one; when anything is only known at run time (an expansion, a
    substitution, xargs, a program name, code the parse cannot read); and when a
    recursive search gets no folder (``grep -r KEY``, ``rg KEY``, ``git grep``: the
    current folder). What a program opens by itself (a build, a script) is not seen: the
    sandbox, not the guard, bounds that.
    """
    return LineReach.of(analysis, root).reaches(rule)


def _file_words(analysis: Analysis) -> list[tuple[str | None, str]]:
    """Every word that may name a file: (static value or None, text as written)."""
    words: list[tuple[str | None, str]] = [
        (r.target.value, r.target.text) for r in analysis.script.redirects if r.target
    ]
    for resolved in analysis.commands:
        command = resolved.command
        words += [(w.value, w.text) for w in command.words]
        words += [(w.value, w.text) for _, w in command.assignments]
        for layer in resolved.layers:
            texts = layer.texts if len(layer.texts) == len(layer.args) else [""] * len(layer.args)
            words += [
                (a, t or "$?") if a is None else (a, t)
                for a, t in zip(layer.args, texts, strict=True)
            ]
            if _reads_current_folder(layer):
                words.append((".", "."))
    out: list[tuple[str | None, str]] = []
    for value, text in words:
        out.append((value, text))
        if value is None:
            continue
        if "=" in value:
            out.append((value.split("=", 1)[1], text))
        if value.startswith("-") and not value.startswith("--") and len(value) > 2:
            out += [(value[k:], text) for k in range(2, len(value))]
    return out


def _reads_current_folder(layer: Any) -> bool:
    """Whether a search with no folder given reads the current one (grep -r KEY, rg KEY)."""
    given = [a for a in layer.args if a is None or not a.startswith("-")]
    if layer.program in _CWD_READERS:
        return len(given) <= 1
    if layer.program in _GREPS:
        recursive = any(
            a is not None
            and (
                a in ("--recursive", "--dereference-recursive")
                or (a.startswith("-") and not a.startswith("--") and set(a[1:]) & {"r", "R"})
            )
            for a in layer.args
        )
        return recursive and len(given) <= 1
    if layer.program == "find":  # its folders come before the first expression
        return not layer.args or (layer.args[0] or "").startswith(("-", "(", "!"))
    if layer.program == "git":
        sub = [a for a in git_arguments(layer.args) if a is None or not a.startswith("-")]
        return bool(sub) and (sub[0] is None or sub[0] in _GIT_TREE)
    return False


def _working_folders(analysis: Analysis, root: str | None) -> list[str] | None:
    """Every folder the line's words may be relative to (absolute when ``root`` is known;
    None: one only known at run time)."""
    start = root or "."
    bases, current = [start], start
    for resolved in analysis.commands:
        for layer in resolved.layers:
            for target in _chdir_targets(layer):
                if target is None or target == "-" or target.startswith("~"):
                    return None
                if target.startswith("/") and root is None:
                    return None
                current = posixpath.normpath(posixpath.join(current, target))
                if root is None and _climbs(current):
                    return None
                bases += [current, posixpath.normpath(posixpath.join(start, target))]
    return list(dict.fromkeys(bases))


def _chdir_targets(layer: Any) -> list[str | None]:
    """The folders a program moves to: ``cd DIR``, ``pushd``, ``popd``, ``-C DIR``..."""
    targets: list[str | None] = []
    if layer.program in _CHDIR:
        given = [a for a in layer.args if a is None or not a.startswith("-") or a == "-"]
        targets.append(given[0] if given and layer.program != "popd" else None)
    for i, arg in enumerate(layer.args):
        if arg in _CHDIR_OPTIONS and i + 1 < len(layer.args):
            targets.append(layer.args[i + 1])
        elif arg is not None and arg.startswith(("--chdir=", "--directory=")):
            targets.append(arg.split("=", 1)[1])
    return targets
