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

Deny and forbid rules reach further than the tool they name: a shell rule holds for
every shell tool (``bash(...)`` stops ``background_run`` too), and a rule on a path
(``path_rule``: ``read_file(prefix:.env*)``) holds for every call that can reach that
path: file tools naming it, searches of a folder holding it, code naming it and shell
lines (reach.py: ``reaching_rule``, ``shell_reaches``). Allow rules never widen.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from toold.permissions.commands import Analysis, analyse, changes_behaviour
from toold.permissions.layers import Resolved
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
