"""PermissionGuard: one pipeline per call — parse → classify → rules → decision — then asking.

1. Parse and classify (``Subject.of``): a shell command becomes its parse tree, resolved
   simple commands, a read-only verdict and a danger verdict (commands.py); a path is
   normalised the way the file tools resolve it.
2. Rules and decision (REFERENCE.md §3, hardened):
   A forbid rule → refused, from every origin, in every mode (bypass too): it is never
   asked about, and no allow rule, hook or "Always allow" lets it run. With forbid
   rules, bypass mode still asks before a call that could change toold's configuration.
   bypass → allow. A deny rule → ask. An empty or ambiguous command → ask. A call that
   could loosen the guard (a write to toold.toml or .toold/) → ask, in every mode but
   bypass. Always-confirm tools → ask. Plan mode → ask unless the tool is safe.
   Shell tools: dangerous or unresolvable → ask; allow rule → allow; read-only → allow;
   otherwise default asks and auto allows. Other tools: allow rule → allow; safe → allow;
   else ask.
   Asks for a deny rule, an empty command, a self-escalation or a dangerous command are
   not approvable: "Always allow" never answers them.

Deny and forbid rules on a path hold for every tool that can reach it (a shell line
naming it, a search of a folder holding it: reach.reaching_rule). A shell line is judged
in a worker thread, so a long line's parse never stalls other calls on the event loop;
one that takes longer than ``judge_seconds`` is refused.

What a tool is (safe, always-confirm, writing a path, running code, a shell) comes from
its own annotations (toold.tools.annotations); a tool the guard does not know is none of
these. Only a tool that says it is a shell gets a shell's allowances (a read-only command,
auto mode); a call read as a shell line because a builtin shell has its name (rules.py)
gets only a shell's checks.

Then, for an "ask": plan mode refuses; an "Always deny" of this call refuses without
asking; a session approval ("Always allow") lets it run when approvable; fail-closed
guards and guards without an asker refuse; otherwise the user is asked. Both answers are
remembered one way for every front end (``remembered``: the exact command line shown for
a shell's call, else the tool). The verdict is data (toold.permissions.verdict): its
kind, the rule's text, and for an ask that nobody could answer, how to allow it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from toold.hooks import PreHookVerdict
from toold.permissions.audit import AuditLog
from toold.permissions.escalation import GIT_CODE as GIT_CODE
from toold.permissions.escalation import SELF_ESCALATION as SELF_ESCALATION
from toold.permissions.escalation import loosens_guard, writes_git
from toold.permissions.escalation import protected as protected
from toold.permissions.paths import judging_in
from toold.permissions.reach import Reach, reaching_rule
from toold.permissions.rules import (
    Rule,
    Subject,
    allow_rule,
    annotations_of,
    parse_rules,
    session_allows,
)
from toold.permissions.verdict import DENIED, Decision, Verdict, remedy
from toold.tools.annotations import ToolAnnotations

log = logging.getLogger(__name__)

Mode = Literal["default", "auto", "plan", "bypass"]
MODES: tuple[str, ...] = ("default", "auto", "plan", "bypass")
Answer = Literal["allow", "always", "deny", "never"]
"""A user's answer: Allow, Always allow, Deny, Always deny."""

Asker = Callable[[str, Any, str], Awaitable[Answer | None]]
"""Ask the user about (tool, arguments, reason); None when nobody answered."""


class CannotAsk(Exception):
    """Raised by an Asker whose client has no way to ask about this call (an MCP client
    without elicitation): the call is refused as if there were no asker, with the remedy."""


@dataclass
class PermissionGuard:
    """Decides and asks; ``audit`` is where the gateway records each call (toold.gateway)."""

    mode: Mode = "default"
    allow: list[Rule] = field(default_factory=list)
    deny: list[Rule] = field(default_factory=list)
    ask: Asker | None = None
    fail_closed: bool = False
    audit: AuditLog | None = None
    session_rules: list[Rule] = field(default_factory=list)
    """Allow rules added by "Always allow" answers, for this daemon's life."""
    session_denials: list[Rule] = field(default_factory=list)
    """Calls answered "Always deny", keyed as "Always allow" is (``remembered``): denied
    from then on without asking, wherever the guard would ask, for this daemon's life."""
    forbid: list[Rule] = field(default_factory=list)
    """Calls these cover never run, from any origin, in every mode (bypass too)."""
    root: str | None = None
    """The workspace's absolute path: how absolute words of a shell line are judged."""
    judge_seconds: float = 10.0
    """How long a shell line may take to judge before the call is refused."""

    @classmethod
    def from_config(
        cls,
        mode: str,
        allow: list[str],
        deny: list[str],
        forbid: list[str] | None = None,
        **kw: Any,
    ) -> PermissionGuard:
        """Build from configuration lists (rules are parsed, errors name the rule)."""
        if mode not in MODES:
            raise ValueError(
                f"unknown permission mode {mode!r}: expected one of {', '.join(MODES)}"
            )
        return cls(
            mode=mode,  # type: ignore[arg-type]
            allow=parse_rules(allow),
            deny=parse_rules(deny),
            forbid=parse_rules(forbid or []),
            **kw,
        )

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
            session_denials=self.session_denials,
            forbid=self.forbid,
            root=self.root,
            judge_seconds=self.judge_seconds,
        )

    def decide(
        self,
        tool: str,
        args: Any,
        annotations: ToolAnnotations | None = None,
        paths: list[str] | None = None,
    ) -> Decision:
        """The rules' answer for an agent's call.

        ``annotations`` are the called tool's own (the gateway passes them); without
        them a builtin's of that name count, and a tool the guard does not know gets the
        defaults: it is not safe, so it asks. ``paths`` are the files the call names
        (``Tool.named_paths``: every file of a patch); deny rules and the self-escalation
        check judge each of them.
        """
        if self.mode == "bypass" and not self.forbid:
            return Decision("allow", "bypass mode")
        with judging_in(self.root):  # words are judged by where they lead, now
            subject = Subject.of(tool, args, annotations)  # parse and classify, once
        return self._agent_decision(subject, annotations or annotations_of(subject.tool), paths)

    def _agent_decision(
        self, subject: Subject, annotations: ToolAnnotations, paths: list[str] | None
    ) -> Decision:
        if self.mode != "bypass":
            return self._decide(subject, annotations, paths)
        if self.forbid and loosens_guard(subject, annotations, paths):
            # Bypass lets an agent edit toold.toml; with forbid rules there, the edit
            # could remove them, so the user is asked.
            return Decision("ask", f"{SELF_ESCALATION}, which holds forbid rules", False)
        return Decision("allow", "bypass mode")

    def _decide(
        self, subject: Subject, annotations: ToolAnnotations, paths: list[str] | None = None
    ) -> Decision:
        tool = subject.tool
        denied = self.reach(self.deny, subject, annotations, paths)
        if denied:
            # Asks whatever comes next, and "Always allow" never answers it.
            reason = f"deny rule {denied.describe()}"
            return Decision("ask", reason, approvable=False, rule=denied.rule.source)
        if subject.ambiguous or subject.blank_command:
            return Decision("ask", "empty or ambiguous arguments", approvable=False)
        if loosens_guard(subject, annotations, paths):
            return Decision("ask", SELF_ESCALATION, approvable=False)
        if writes_git(subject, annotations, paths):
            return Decision("ask", GIT_CODE, approvable=False)
        if annotations.confirm == "always":
            return Decision("ask", f"{tool} always asks")
        if self.mode == "plan" and not annotations.safe:
            return Decision("ask", "plan mode is read-only")
        allowed = allow_rule(self.allow, subject)
        if subject.shell is not None:
            if subject.shell.danger:
                reason = f"dangerous command ({subject.shell.danger})"
                return Decision("ask", reason, approvable=False)
            if allowed:
                return Decision("allow", f"allow rule {allowed.source}", rule=allowed.source)
            if annotations.shell and subject.shell.read_only:
                return Decision("allow", "read-only command")
            if annotations.shell and self.mode == "auto":
                return Decision("allow", "auto mode")
            return Decision("ask", "shell command")
        if allowed:
            return Decision("allow", f"allow rule {allowed.source}", rule=allowed.source)
        if annotations.safe:
            return Decision("allow", "safe tool")
        return Decision("ask", "tool needs confirmation")

    def approve_always(
        self, tool: str, args: Any, annotations: ToolAnnotations | None = None
    ) -> Rule | None:
        """Remember an "Always allow": the exact command line shown for shells, else the tool."""
        subject = Subject.of(tool, args, annotations)
        if subject.shell_line and (subject.shell is None or subject.ambiguous):
            return None  # nothing was shown that a rule could name
        rule = remembered(subject)
        if rule not in self.session_rules:
            self.session_rules.append(rule)
        return rule

    def deny_always(self, tool: str, args: Any, annotations: ToolAnnotations | None = None) -> Rule:
        """Remember an "Always deny", keyed as "Always allow" is (an unparsed line too)."""
        rule = remembered(Subject.of(tool, args, annotations))
        if rule not in self.session_denials:
            self.session_denials.append(rule)
        return rule

    async def check(
        self,
        tool: str,
        args: Any,
        origin: str = "agent",
        annotations: ToolAnnotations | None = None,
        steer: PreHookVerdict | None = None,
        paths: list[str] | None = None,
    ) -> Verdict:
        """Decide, and ask when needed (``annotations``: see decide); the gateway records it.

        ``steer`` is what the user's pre hooks said (toold.hooks): deny refuses the call
        from any origin; ask makes an agent's call ask (every time: "Always allow" does not
        answer it) even where the rules allow it; allow lets an agent's call run where the
        rules would ask, but never past a deny rule, a danger, a self-escalation or plan mode.
        ``paths``: the files the call names (see decide).
        """
        steer = steer or PreHookVerdict()
        if steer.steer == "deny":
            reason = steer.reason
            return Verdict(
                False,
                "denied",
                f"pre_tool_use hook: {reason}",
                f"Denied by hook: {reason}",
                kind="denied_by_rule",
            )
        refused = self.refusal(tool, args, origin, annotations, paths)
        if refused is not None:
            return refused
        judged = await self._judged(tool, args, origin, annotations, paths)
        if isinstance(judged, Verdict):
            return judged
        decision, subject = judged
        # A hook's allow answers only what a user could approve, and never in plan mode.
        hook_allows = steer.steer == "allow" and decision.approvable and self.mode != "plan"
        if steer.steer == "ask":
            reason = f"a pre_tool_use hook asks: {steer.reason}"
            decision = Decision("ask", reason, False, hook=True)
        elif hook_allows and decision.action == "ask":
            decision = Decision("allow", f"pre_tool_use hook: {steer.reason}")
        if decision.action == "allow":
            return Verdict(True, "allowed", decision.reason, kind="ran", rule=decision.rule)
        return await self._asked(tool, args, annotations, decision, subject)

    async def _asked(
        self,
        tool: str,
        args: Any,
        annotations: ToolAnnotations | None,
        decision: Decision,
        subject: Subject,
    ) -> Verdict:
        """The verdict on a call the rules would ask about: plan mode, the session's
        memory, no one to ask, or the user's answer."""
        facts: dict[str, Any] = {
            "rule": decision.rule,
            "approvable": decision.approvable,
            "ask_reason": decision.reason,
        }
        if self.mode == "plan":
            message = f"Plan mode: {tool} blocked (read-only)"
            return Verdict(False, "denied", decision.reason, message, "denied_by_rule", **facts)
        if remembered(subject) in self.session_denials:
            reason = f"always denied this session ({decision.reason})"
            return Verdict(False, "denied", reason, DENIED, "denied_by_user", **facts)
        if decision.approvable:
            kept = session_allows(self.session_rules, subject)
            if kept is not None:
                reason = f"always allowed this session ({decision.reason})"
                facts["rule"] = kept.source
                return Verdict(True, "allowed", reason, None, "allowed", **facts)
        answer: Answer | None = None
        unasked = self.fail_closed or self.ask is None
        if not unasked and self.ask is not None:
            try:
                answer = await self.ask(tool, args, decision.reason)
            except CannotAsk:
                unasked = True
        if unasked:
            log.info("Non-interactive environment: %s denied", tool)
            how = remedy(tool, decision, annotations or annotations_of(subject.tool))
            reason = f"non-interactive ({decision.reason})"
            return Verdict(False, "denied", reason, DENIED, "denied_by_rule", **facts, remedy=how)
        if answer == "always":
            kept = self.approve_always(tool, args, annotations)
            if kept is not None:  # the rule that lets it run from now on, as a repeat shows
                facts["rule"] = kept.source
            return Verdict(True, "always-allowed", decision.reason, None, "allowed", **facts)
        if answer == "allow":
            return Verdict(True, "user-allowed", decision.reason, None, "allowed", **facts)
        if answer == "never":
            self.deny_always(tool, args, annotations)
        why = "no answer" if answer is None else "user denied"
        reason = f"{why} ({decision.reason})"
        return Verdict(False, "denied", reason, DENIED, "denied_by_user", **facts)

    def refusal(
        self,
        tool: str,
        args: Any,
        origin: str,
        annotations: ToolAnnotations | None,
        paths: list[str] | None,
    ) -> Verdict | None:
        """A refusal that comes before any rule (a subclass's: see config_gate.GatedGuard)."""
        return None

    async def _judged(
        self,
        tool: str,
        args: Any,
        origin: str,
        annotations: ToolAnnotations | None,
        paths: list[str] | None,
    ) -> Verdict | tuple[Decision, Subject]:
        """``_judge``; for a shell line in a worker thread, so a long line's parse never
        holds up other calls on the event loop, and refused past ``judge_seconds``."""
        name = tool.lower()
        if not (annotations or annotations_of(name)).shell and not annotations_of(name).shell:
            return self._judge(tool, args, origin, annotations, paths)
        work = asyncio.to_thread(self._judge, tool, args, origin, annotations, paths)
        try:
            return await asyncio.wait_for(work, self.judge_seconds)
        except TimeoutError:
            reason = f"the command could not be checked within {self.judge_seconds:g} s"
            message = f"Refused: {reason}; split it into shorter commands."
            return Verdict(False, "denied", reason, message, "refused")

    def _judge(
        self,
        tool: str,
        args: Any,
        origin: str,
        annotations: ToolAnnotations | None,
        paths: list[str] | None,
    ) -> Verdict | tuple[Decision, Subject]:
        """Forbid rules (every origin and mode), then the user's deny rules or the
        rules' decision for an agent's call, with the parse it was made on."""
        with judging_in(self.root):  # words are judged by where they lead, now
            subject = Subject.of(tool, args, annotations)  # parse and classify, once
        own = annotations or annotations_of(subject.tool)
        forbidden = self.reach(self.forbid, subject, own, paths)
        if forbidden:
            reason = f"forbidden by rule {forbidden.describe()}"
            message = f"Forbidden by rule {forbidden.rule.source}: toold never runs this call."
            source = forbidden.rule.source
            return Verdict(False, "denied", reason, message, "denied_by_rule", source)
        if origin == "user":
            denied = self.reach(self.deny, subject, own, paths)
            if denied:
                reason = f"deny rule {denied.describe()}"
                source = denied.rule.source
                return Verdict(False, "denied", reason, DENIED, "denied_by_rule", source)
            return Verdict(True, "allowed", "the user asked for it", kind="ran")
        return self._agent_decision(subject, own, paths), subject

    def reach(
        self,
        rules: list[Rule],
        subject: Subject,
        annotations: ToolAnnotations,
        paths: list[str] | None = None,
    ) -> Reach | None:
        """The first of ``rules`` that holds for the call (toold.permissions.reach)."""
        return reaching_rule(rules, subject, annotations, paths, self.root) if rules else None


def remembered(subject: Subject) -> Rule:
    """What an "Always allow" or "Always deny" answer covers: the exact command line shown
    for a shell's call, else the tool (whatever its arguments)."""
    if subject.shell_line:
        text = subject.value.strip()
        return Rule(f"{subject.tool}({text})", subject.tool, text, False)
    return Rule(subject.tool, subject.tool, None, False)
