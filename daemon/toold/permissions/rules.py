"""Allow and deny rules: ``tool``, ``tool(prefix:TEXT*)`` or ``tool(TEXT)``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

SHELL_TOOLS = frozenset({"bash", "background_run"})
_MATCH_FIELDS = ("file_path", "path", "name", "to_agent", "task_id", "skill_name")
_RULE = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


def match_value(tool: str, args: Any) -> str:
    """What a rule is matched against: the command, a path or name, else the input as JSON."""
    if isinstance(args, dict):
        if tool in SHELL_TOOLS:
            return str(args.get("command") or args.get("cmd") or args.get("input") or "")
        for field in _MATCH_FIELDS:
            if args.get(field) is not None:
                return str(args[field])
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
        found = _RULE.match(text)
        if not found:
            raise ValueError(
                f"invalid permission rule {text!r}: expected 'tool' or 'tool(prefix:TEXT*)'"
            )
        tool, spec = found.group(1).lower(), found.group(2)
        if spec is None:
            return cls(text, tool, None, False)
        spec = spec.strip()
        if spec.startswith("prefix:"):
            spec = spec[len("prefix:") :]
        prefix = spec.endswith("*")
        return cls(text, tool, spec[:-1] if prefix else spec, prefix)

    def matches(self, tool: str, args: Any) -> bool:
        """True when the rule covers this call."""
        if tool.lower() != self.tool:
            return False
        if self.pattern is None:
            return True
        value = match_value(tool, args)
        return value.startswith(self.pattern) if self.prefix else value == self.pattern


def parse_rules(texts: list[str]) -> list[Rule]:
    """Parse a list of rules."""
    return [Rule.parse(t) for t in texts]
