"""Allow and deny rules (``tool``, ``tool(prefix:TEXT*)``, ``tool(TEXT)``) matched to what runs.

A rule is matched against the call's ``Subject``: for shell tools the parsed command
line (commands.py), for other tools one value of the validated arguments, a path
normalised to its workspace-relative form (``./.env``, ``a/../.env`` and ``.env/``
are all ``.env``). Which tools are shells, and which search a folder, their annotations
say (toold.tools.annotations: ``shell``, ``searches_folder``). Rules name tools, so a
call is also read the way the builtin of its name is: a rule written for ``bash`` is
never read more loosely because another tool took that name (both readings are the
stricter ones).

Shell rules see each simple command normalised: the program reduced to its basename,
assignments dropped, wrappers unwrapped (every program they run is matched too),
quotes and whitespace normalised, git's global options (``-c``, ``-C``, ``--git-dir``,
``--no-pager``...) removed before the subcommand. A deny rule also counts as matched,
failing closed, when a program name cannot be resolved, when the rule's program
appears in code the parse cannot see (``sh -c``, ``| sh``, ``eval``...), or when that
program gets arguments only known at run time (``$X``, ``xargs``). An allow rule
covers a shell line only when it parses completely, nothing in it is unresolvable, no
redirection writes (except to /dev/null) and every command (and every program a wrapper
runs, through ``sudo``/``doas``/``chroot`` only when the rule names them) is covered.

Deny and forbid rules reach further than the tool they name (``reaching_rule``): a shell
rule holds for every shell tool (``bash(...)`` stops ``background_run`` too), and a rule
on a path (``read_file(prefix:.env*)``) holds for every call that can reach that path:
file tools naming it, searches of a folder holding it, code naming it and shell lines
(``shell_reaches`` says how a path rule matches a shell line). Allow rules never widen.
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from toold.permissions.commands import Analysis, Resolved, analyse, changes_behaviour
from toold.permissions.interpreters import git_arguments
from toold.permissions.readonly import PROGRAMS
from toold.permissions.shell import Word
from toold.tools.annotations import ToolAnnotations

PATH_FIELDS = ("file_path", "path")
_MATCH_FIELDS = ("command", "file_path", "path", "name", "to_agent", "task_id", "skill_name")
_ALIASES = {"command": ("command", "cmd", "input"), "file_path": ("file_path", "path")}
_RULE = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_PRIVILEGE = frozenset({"sudo", "doas", "chroot"})
"""Wrappers an allow rule for the program they run does not cover: they change who runs it."""
_PLAIN_WRAPPERS = frozenset(
    {"sudo", "doas", "env", "command", "builtin", "exec", "nice", "ionice", "timeout"}
    | {"nohup", "stdbuf", "time", "chroot", "setsid", "coproc"}
)


def normalise_path(value: str) -> str:
    """A path as the file tools resolve it, lexically: ``./a/../.env/`` → ``.env``."""
    if not value:
        return value
    return posixpath.normpath(value)


def shell_command(args: Any) -> str | None:
    """The command of a shell call; None when missing or given under two names."""
    if isinstance(args, str):
        return args
    if not isinstance(args, dict):
        return None
    given = [args[k] for k in _ALIASES["command"] if k in args]
    if len(given) != 1 or not isinstance(given[0], str):
        return None
    return given[0]


def annotations_of(tool: str) -> ToolAnnotations:
    """The annotations of the builtin named ``tool`` (canonical name); the defaults (not
    safe: asks) for any other name."""
    from toold.tools.registry import BuiltinToolProvider

    found = BuiltinToolProvider.tool_classes().get(tool)
    return found.annotations if found is not None else ToolAnnotations()


def match_value(tool: str, args: Any, shell_line: bool | None = None) -> str:
    """What a rule is matched against: the command, a normalised path or a name, else JSON.

    ``shell_line``: whether the call is a shell's (None: as the builtin of that name).
    """
    if shell_line is None:
        shell_line = annotations_of(tool.lower()).shell
    if shell_line:
        return shell_command(args) or ""
    if isinstance(args, dict):
        for name in _MATCH_FIELDS:
            if args.get(name) is not None:
                value = str(args[name])
                return normalise_path(value) if name in PATH_FIELDS else value
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Subject:
    """A call as the rules see it: the tool, its match value and, for shells, the parse."""

    tool: str
    args: Any
    value: str
    shell: Analysis | None
    ambiguous: bool = False
    """Two names of one argument were given (``file_path`` and ``path``)."""
    shell_line: bool = False
    """Read as a shell's call: rules match each command of the parsed line."""
    folder: bool = False
    """Read as a folder search: a deny rule below the folder denies it."""

    @classmethod
    def of(cls, tool: str, args: Any, annotations: ToolAnnotations | None = None) -> Subject:
        """Parse and classify the call once for every question the guard asks.

        ``annotations`` are the called tool's (None: the builtin's of that name); the
        builtin of that name's count too, so neither reading is ever the looser one.
        """
        name = tool.lower()
        builtin = annotations_of(name)
        own = annotations if annotations is not None else builtin
        shell_line = own.shell or builtin.shell
        folder = own.searches_folder or builtin.searches_folder
        ambiguous = isinstance(args, dict) and any(
            sum(k in args for k in names) > 1 for names in _ALIASES.values()
        )
        value = match_value(name, args, shell_line)
        shell = analyse(value) if shell_line and value.strip() else None
        return cls(name, args, value, shell, ambiguous, shell_line, folder)

    @property
    def blank_command(self) -> bool:
        """A shell call without a command (empty, whitespace, missing or ambiguous)."""
        return self.shell_line and (self.shell is None or self.ambiguous)


@dataclass(frozen=True)
class Rule:
    """One parsed rule."""

    source: str
    tool: str
    pattern: str | None
    prefix: bool

    @classmethod
    def parse(cls, text: str) -> Rule:
        """Parse ``text``; ValueError naming the expected form when it is malformed."""
        found = _RULE.match(text) if isinstance(text, str) else None
        if not found:
            raise ValueError(
                f"invalid permission rule {text!r}: expected 'tool' or 'tool(prefix:TEXT*)'"
            )
        tool, spec = found.group(1).lower(), found.group(2)
        if spec is None:
            return cls(text, tool, None, False)
        spec = spec.strip()
        if spec.startswith("prefix:"):
            spec = spec[len("prefix:") :].lstrip()
        prefix = spec.endswith("*")
        return cls(text, tool, spec[:-1] if prefix else spec, prefix)

    def covers(self, value: str) -> bool:
        """True when the rule's pattern accepts ``value`` (any value when there is none)."""
        if self.pattern is None:
            return True
        return value.startswith(self.pattern) if self.prefix else value == self.pattern

    @property
    def program(self) -> str:
        """The program a shell rule names (its first word, basename), or ""."""
        words = (self.pattern or "").split()
        return posixpath.basename(words[0]) if words else ""

    def matches(self, tool: str, args: Any) -> bool:
        """True when the rule covers this call's match value."""
        return tool.lower() == self.tool and self.covers(match_value(tool, args))


def parse_rules(texts: list[str]) -> list[Rule]:
    """Parse a list of rules."""
    return [Rule.parse(t) for t in texts]


def _for_tool(rules: list[Rule], tool: str) -> list[Rule]:
    return [r for r in rules if r.tool == tool.lower()]


def _subject(tool: str | Subject, args: Any) -> Subject:
    return tool if isinstance(tool, Subject) else Subject.of(tool, args)


def deny_rule(rules: list[Rule], tool: str | Subject, args: Any = None) -> Rule | None:
    """The first deny rule that covers the call (any command of a shell line counts).

    A shell line is judged by the rules of every builtin shell (a ``bash(...)`` rule holds
    for ``background_run`` too). Path rules of other tools: see ``reaching_rule``.
    """
    subject = _subject(tool, args)
    candidates = _for_tool(rules, subject.tool)
    if subject.shell_line:
        shells = _shell_tools()
        candidates += [r for r in rules if r.tool in shells and r not in candidates]
    if not candidates:
        return None
    if subject.shell_line:
        if subject.shell is None:
            return candidates[0]  # no command to check: fail closed
        return next((r for r in candidates if _shell_denies(r, subject.shell)), None)
    if subject.folder:
        return next((r for r in candidates if _folder_denies(r, subject.value)), None)
    return next((r for r in candidates if r.covers(subject.value)), None)


def _folder_denies(rule: Rule, folder: str) -> bool:
    """A search of ``folder`` is denied when the rule covers it or a path below it."""
    if rule.covers(folder) or rule.pattern is None:
        return True
    below = normalise_path(rule.pattern) if rule.pattern else ""
    return folder == "." or below.startswith(folder.rstrip("/") + "/")


def _shell_values(analysis: Analysis, depth: int = 0) -> list[str]:
    """Each command as rules see it, and the commands held in arguments of unknown programs."""
    text = analysis.text.strip()
    values = [text, " ".join(text.split())]
    for r in analysis.commands:
        values.append(" ".join(r.command.text.split()))
        values += [layer.normalised() for layer in r.layers]
        for layer in r.layers:
            if layer.program in PROGRAMS or depth > 2:
                continue  # a known program's arguments are data (grep "git push" ...)
            for arg in layer.args:
                held = (arg or "").split("=", 1)[-1] if (arg or "").startswith("-") else arg
                if held and any(c.isspace() for c in held.strip()):
                    values += _shell_values(analyse(held), depth + 1)  # ssh host 'git push'
    return values


def _shell_denies(rule: Rule, analysis: Analysis) -> bool:
    if any(rule.covers(v) for v in _shell_values(analysis)):
        return True
    if analysis.dynamic:
        return True  # a program that cannot be named may be any program
    program = rule.program
    if analysis.unresolved and re.search(
        rf"(?<![\w.-]){re.escape(program)}(?![\w-])", analysis.text
    ):
        return True
    return any(
        layer.program == program and (layer.stdin_args or None in layer.args)
        for r in analysis.commands
        for layer in r.layers
    )


def allow_rule(rules: list[Rule], tool: str | Subject, args: Any = None) -> Rule | None:
    """The allow rule that covers the call (for shell lines: every command must be covered)."""
    subject = _subject(tool, args)
    candidates = _for_tool(rules, subject.tool)
    if not candidates or subject.ambiguous:
        return None
    if not subject.shell_line:
        return next((r for r in candidates if r.covers(subject.value)), None)
    analysis = subject.shell
    if analysis is None or analysis.unresolved or not analysis.commands:
        return None
    if any(r.writes and not _to_null(r.target) for r in analysis.script.redirects):
        return None  # a redirection that writes is part of what runs; no rule names it
    first: Rule | None = None
    for resolved in analysis.commands:
        rule = _covering(candidates, resolved)
        if rule is None:
            return None
        first = first or rule
    return first


def _to_null(target: Word | None) -> bool:
    return target is not None and target.value == "/dev/null"


def _covering(candidates: list[Rule], resolved: Resolved) -> Rule | None:
    """The rule that covers every program of one simple command, or None."""
    command = resolved.command
    if any(changes_behaviour(name) for name, _ in command.assignments):
        return None
    if command.kind == "assignment":
        return candidates[0] if candidates else None
    layers = resolved.layers
    if not layers:
        return None
    raw = " ".join(command.text.split())
    direct = [
        next(
            (r for r in candidates if r.covers(layer.normalised()) or (i == 0 and r.covers(raw))),
            None,
        )
        for i, layer in enumerate(layers)
    ]
    covered: list[Rule | None] = []
    for i, layer in enumerate(layers):
        rule = direct[i]
        parent = layer.parent
        if rule is None and parent is not None and layers[parent].program in _PLAIN_WRAPPERS:
            rule = covered[parent]
        if rule is None and layer.program in _PLAIN_WRAPPERS - _PRIVILEGE:
            children = [direct[j] for j, c in enumerate(layers) if c.parent == i]
            rule = children[0] if children and all(children) else None
        if rule is None:
            return None
        covered.append(rule)
    return covered[0]


def session_allows(rules: list[Rule], subject: Subject) -> Rule | None:
    """An "Always allow" answer that covers this call: the exact command line, or the tool."""
    for rule in _for_tool(rules, subject.tool):
        if subject.shell_line:
            if subject.shell is not None and rule.pattern == subject.shell.text.strip():
                return rule
        elif rule.covers(subject.value):
            return rule
    return None


# How a deny or forbid rule on a path reaches calls of other tools.


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


@cache
def _builtin_fields() -> dict[str, tuple[frozenset[str], ToolAnnotations]]:
    from toold.tools.registry import BuiltinToolProvider

    return {
        name: (frozenset(getattr(c, "Arguments", None).model_fields), c.annotations)  # type: ignore[union-attr]
        for name, c in BuiltinToolProvider.tool_classes().items()
        if getattr(c, "Arguments", None) is not None
    }


def _shell_tools() -> frozenset[str]:
    return frozenset(n for n, (_, a) in _builtin_fields().items() if a.shell)


def path_rule(rule: Rule) -> bool:
    """Whether ``rule`` names files: a pattern for a builtin that takes a path (read_file,
    write_file, grep, list_dir...). Such a rule holds for every tool that can reach them;
    a rule without a pattern names its tool only."""
    if rule.pattern is None:
        return False
    found = _builtin_fields().get(rule.tool)
    return found is not None and not found[1].shell and bool(found[0] & set(PATH_FIELDS))


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
