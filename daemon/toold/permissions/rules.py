"""Allow and deny rules: ``tool``, ``tool(prefix:TEXT*)`` or ``tool(TEXT)``.

A rule is matched against one value of the call (see ``match_value``). For shell
tools a deny rule matches when it covers any simple command inside the command
line, wrappers peeled (``ls && sudo rm x`` is caught by ``bash(prefix:rm*)``);
an allow rule covers the call only when every simple command matches an allow
rule (``npm test && rm x`` is not covered by ``bash(prefix:npm test*)``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from toold.permissions.commands import command_variants, is_simple, simple_commands

SHELL_TOOLS = frozenset({"bash", "background_run"})
_MATCH_FIELDS = ("command", "file_path", "path", "name", "to_agent", "task_id", "skill_name")
_RULE = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


def match_value(tool: str, args: Any) -> str:
    """What a rule is matched against: the command, a path or name, else the input as JSON."""
    if isinstance(args, dict):
        if tool in SHELL_TOOLS and args.get("command") is None:
            return str(args.get("cmd") or args.get("input") or "")
        for field in _MATCH_FIELDS:
            if args.get(field) is not None:
                return str(args[field])
    elif isinstance(args, str) and tool in SHELL_TOOLS:
        return args
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


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

    def matches(self, tool: str, args: Any) -> bool:
        """True when the rule covers this call's match value."""
        return tool.lower() == self.tool and self.covers(match_value(tool, args))


def parse_rules(texts: list[str]) -> list[Rule]:
    """Parse a list of rules."""
    return [Rule.parse(t) for t in texts]


def _for_tool(rules: list[Rule], tool: str) -> list[Rule]:
    return [r for r in rules if r.tool == tool.lower()]


def deny_rule(rules: list[Rule], tool: str, args: Any) -> Rule | None:
    """The first deny rule that covers the call (any command of a shell line counts)."""
    candidates = _for_tool(rules, tool)
    if not candidates:
        return None
    value = match_value(tool, args)
    values = [value, " ".join(value.split())]
    if tool.lower() in SHELL_TOOLS:
        values += command_variants(value)
    return next((r for r in candidates for v in values if r.covers(v)), None)


def allow_rule(rules: list[Rule], tool: str, args: Any) -> Rule | None:
    """The allow rule that covers the call (for shell lines: every command must be covered)."""
    candidates = _for_tool(rules, tool)
    if not candidates:
        return None
    value = match_value(tool, args)
    if tool.lower() not in SHELL_TOOLS:
        return next((r for r in candidates if r.covers(value)), None)
    if is_simple(value):
        # One command: its raw text (quotes and all) may be what the rule spells out.
        whole = next((r for r in candidates if r.covers(value.strip())), None)
        if whole is not None:
            return whole
    first: Rule | None = None
    for command in simple_commands(value) or [value]:
        rule = next((r for r in candidates if r.covers(command)), None)
        if rule is None:
            return None
        first = first or rule
    return first
