"""What the guard decided, as data: the rules' answer, the verdict, and how to allow a call.

A verdict names its kind (``CallDecision``), the rule that decided it and, for a call that
needed a user's answer, why and how the user could let such a call run. The gateway copies
these into the call's outcome (toold.outcome), and every front end renders from them:
nothing re-judges a call to explain a refusal, and nothing parses a refusal's text back.

The kinds:

- ``ran``: the rules let it run without asking (an allow rule, a safe tool, a read-only
  command, auto or bypass mode, a hook's allow, a call the user made).
- ``allowed``: it needed a user's answer and had one: "Allow", "Always allow", or an
  earlier "Always allow" of this call in this daemon's life.
- ``denied_by_rule``: configuration said no: a forbid rule, a deny rule on a call the user
  made, plan mode, a pre hook's deny or block, or an ask where nobody can answer (a
  non-interactive session: the MCP bridge, a client that cannot show requests, a
  fail-closed subagent).
- ``denied_by_user``: the user said no ("Deny", "Always deny" now or earlier in the
  session), or did not answer (the request timed out, the client went away).
- ``refused``: the call could not be judged or run as given: invalid arguments, files
  that cannot be named, a shell line not judged in time, an invalid configuration (the
  gate of toold.config_gate), an agent's write of a file that changed since it read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    # Only named: importing toold.tools here would run its package, which re-exports
    # toold.outcome, which imports this module.
    from toold.tools.annotations import ToolAnnotations

CallDecision = Literal["ran", "allowed", "denied_by_rule", "denied_by_user", "refused"]
"""How a call was decided (see the module docstring)."""

DENIED = "User denied."
"""The result text of a call denied at the prompt, or for want of one."""


@dataclass
class Decision:
    """What the rules say before anyone is asked."""

    action: Literal["allow", "ask"]
    reason: str
    approvable: bool = True
    """Whether a session approval ("Always allow") may answer this ask."""
    rule: str | None = None
    """The text of the rule that decided: a deny rule that makes it ask, an allow rule."""
    hook: bool = False
    """A pre_tool_use hook made it ask (no toold.toml rule or mode lets it run)."""


@dataclass
class Verdict:
    """Whether the call may run; ``message`` is the tool result when it may not."""

    allowed: bool
    decision: str
    """The audit log's word: allowed, user-allowed, always-allowed, denied."""
    reason: str
    """Why, as the audit log records it."""
    message: str | None = None
    kind: CallDecision | None = None
    """How it was decided; None reads as ``ran`` when allowed, else ``refused`` (a refusal
    that names no kind, such as a subclass's gate, is a refusal)."""
    rule: str | None = None
    """The text of the rule that decided it (forbid, deny or allow), when one did."""
    approvable: bool = False
    """Whether a user's "Always allow" could answer such a call (it needed asking)."""
    ask_reason: str | None = None
    """Why the rules wanted the user asked; None when nobody needed asking."""
    remedy: str | None = None
    """How the user could let such a call run (a toold.toml change); set when the call
    needed a user's answer and nobody could be asked."""

    def __post_init__(self) -> None:
        if self.kind is None:
            self.kind = "ran" if self.allowed else "refused"


def remedy(tool: str, decision: Decision, annotations: ToolAnnotations) -> str:
    """How to let a call run that needed a user's answer nobody could give."""
    if decision.hook:
        return "change the pre_tool_use hook in toold.toml that asks about it"
    if decision.rule is not None and not decision.approvable:
        return "remove that rule from [permissions] deny in toold.toml to allow it"
    if annotations.confirm == "always" or not decision.approvable:
        return 'only [permissions] mode = "bypass" in toold.toml lets it run'
    example = f"{tool}(prefix:npm test*)" if annotations.shell else tool
    return (
        f'allow it in toold.toml: [permissions] allow = ["{example}"], '
        'or mode = "auto" (shell commands that are not dangerous) or "bypass"'
    )
