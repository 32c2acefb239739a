"""PermissionGuard: BareAgent's decision order, asking the user, and the audit trail.

Decision for one call (REFERENCE.md §3):
1. bypass → allow.
2. always-confirm tools (writes) → ask; allow rules cannot skip it.
3. plan mode → ask (which plan mode turns into a refusal) unless the tool is safe.
4. shell tools: deny rule → ask; dangerous command → ask; allow rule → allow;
   auto-safe command → allow; otherwise default asks, auto allows.
5. other tools: deny rule → ask; allow rule → allow; safe tool → allow; else ask.
(Deny rules are checked first of steps 2-5: every step asks on them anyway, and the
reason decides whether a session approval may answer.)

Then, for an "ask": plan mode refuses; a session approval ("Always allow") lets it
run unless a deny rule or a dangerous command caused the ask; fail-closed guards
and guards without an asker refuse; otherwise the user is asked.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from toold.permissions.audit import AuditLog
from toold.permissions.commands import dangerous_reason, is_auto_safe
from toold.permissions.rules import (
    SHELL_TOOLS,
    Rule,
    allow_rule,
    deny_rule,
    match_value,
    parse_rules,
)

log = logging.getLogger(__name__)

Mode = Literal["default", "auto", "plan", "bypass"]
MODES: tuple[str, ...] = ("default", "auto", "plan", "bypass")
Answer = Literal["allow", "always", "deny"]

ALWAYS_CONFIRM = frozenset({"edit_file", "write_file", "task_create", "task_update", "str_replace"})
SAFE_TOOLS = frozenset(
    {"read_file", "glob", "grep", "todo_read", "todo_write", "load_skill", "task_list"}
    | {"task_get", "team_list", "list_dir", "glob_search", "grep_search", "file_info"}
    | {"calculator"}
)
DENIED = "User denied."

Asker = Callable[[str, Any, str], Awaitable[Answer | None]]
"""Ask the user about (tool, arguments, reason); None when nobody answered."""


@dataclass
class Decision:
    """What the rules say before anyone is asked."""

    action: Literal["allow", "ask"]
    reason: str
    approvable: bool = True
    """Whether a session approval ("Always allow") may answer this ask."""


@dataclass
class Verdict:
    """Whether the call may run; ``message`` is the tool result when it may not."""

    allowed: bool
    decision: str
    reason: str
    message: str | None = None


@dataclass
class PermissionGuard:
    """Decides, asks, and records."""

    mode: Mode = "default"
    allow: list[Rule] = field(default_factory=list)
    deny: list[Rule] = field(default_factory=list)
    ask: Asker | None = None
    fail_closed: bool = False
    audit: AuditLog | None = None
    session_rules: list[Rule] = field(default_factory=list)
    """Allow rules added by "Always allow" answers, for this daemon's life."""

    @classmethod
    def from_config(
        cls, mode: str, allow: list[str], deny: list[str], **kw: Any
    ) -> PermissionGuard:
        """Build from configuration lists (rules are parsed, errors name the rule)."""
        if mode not in MODES:
            raise ValueError(
                f"unknown permission mode {mode!r}: expected one of {', '.join(MODES)}"
            )
        return cls(mode=mode, allow=parse_rules(allow), deny=parse_rules(deny), **kw)  # type: ignore[arg-type]

    def child(
        self, *, mode: Mode | None = None, fail_closed: bool | None = None
    ) -> PermissionGuard:
        """A guard for a subagent: same rules and audit, possibly a stricter mode."""
        return PermissionGuard(
            mode=mode or self.mode,
            allow=self.allow,
            deny=self.deny,
            ask=self.ask,
            fail_closed=self.fail_closed if fail_closed is None else fail_closed,
            audit=self.audit,
            session_rules=self.session_rules,
        )

    def decide(self, tool: str, args: Any) -> Decision:
        """The rules' answer for an agent's call."""
        if self.mode == "bypass":
            return Decision("allow", "bypass mode")
        denied = deny_rule(self.deny, tool, args)
        if denied:
            # Asks whatever comes next (steps 2-5), and "Always allow" never answers it.
            return Decision("ask", f"deny rule {denied.source}", approvable=False)
        if tool in ALWAYS_CONFIRM:
            return Decision("ask", f"{tool} always asks")
        if self.mode == "plan" and tool not in SAFE_TOOLS:
            return Decision("ask", "plan mode is read-only")
        if tool in SHELL_TOOLS:
            command = match_value(tool, args)
            danger = dangerous_reason(command)
            if danger:
                return Decision("ask", f"dangerous command ({danger})", approvable=False)
            allowed = allow_rule(self.allow, tool, args)
            if allowed:
                return Decision("allow", f"allow rule {allowed.source}")
            if is_auto_safe(command):
                return Decision("allow", "read-only command")
            if self.mode == "auto":
                return Decision("allow", "auto mode")
            return Decision("ask", "shell command")
        allowed = allow_rule(self.allow, tool, args)
        if allowed:
            return Decision("allow", f"allow rule {allowed.source}")
        if tool in SAFE_TOOLS:
            return Decision("allow", "safe tool")
        return Decision("ask", "tool needs confirmation")

    def approve_always(self, tool: str, args: Any) -> Rule:
        """Remember an "Always allow": the exact command for shell tools, else the whole tool."""
        if tool in SHELL_TOOLS:
            rule = Rule(f"{tool}({match_value(tool, args)})", tool, match_value(tool, args), False)
        else:
            rule = Rule(tool, tool, None, False)
        if rule not in self.session_rules:
            self.session_rules.append(rule)
        return rule

    async def check(self, tool: str, args: Any, origin: str = "agent") -> Verdict:
        """Decide, ask when needed, and record the decision."""
        verdict = await self._check(tool, args, origin)
        if self.audit is not None:
            self.audit.record(
                event="decision",
                tool=tool,
                origin=origin,
                arguments=args,
                decision=verdict.decision,
                reason=verdict.reason,
            )
        return verdict

    async def _check(self, tool: str, args: Any, origin: str) -> Verdict:
        if origin == "user":
            denied = deny_rule(self.deny, tool, args)
            if denied:
                return Verdict(False, "denied", f"deny rule {denied.source}", DENIED)
            return Verdict(True, "allowed", "the user asked for it")
        decision = self.decide(tool, args)
        if decision.action == "allow":
            return Verdict(True, "allowed", decision.reason)
        if self.mode == "plan":
            return Verdict(
                False, "denied", decision.reason, f"Plan mode: {tool} blocked (read-only)"
            )
        if decision.approvable and any(r.matches(tool, args) for r in self.session_rules):
            return Verdict(True, "allowed", f"always allowed this session ({decision.reason})")
        if self.fail_closed or self.ask is None:
            log.info("Non-interactive environment: %s denied", tool)
            return Verdict(False, "denied", f"non-interactive ({decision.reason})", DENIED)
        answer = await self.ask(tool, args, decision.reason)
        if answer == "always":
            self.approve_always(tool, args)
            return Verdict(True, "always-allowed", decision.reason)
        if answer == "allow":
            return Verdict(True, "user-allowed", decision.reason)
        why = "no answer" if answer is None else "user denied"
        return Verdict(False, "denied", f"{why} ({decision.reason})", DENIED)
