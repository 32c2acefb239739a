"""ToolOutcome: what a call came to, as every front end sees it — the result and the verdict.

``ToolGateway.call`` (toold.gateway) answers every call with one. Besides the tool's result
(``content``, ``is_error``, the exit status) it carries how the call was decided
(``decision``: see toold.permissions.verdict for each kind), the rule's text and the
guard's reason, how a refused call could be allowed, the background job it started and
the files it wrote. Front ends render from these fields: LSP's tools/call result, the MCP
bridge's refusal and job link, ACP's updates, the agent loop's tool_result. None of them
judges a call again or reads a fact back out of ``content``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toold.permissions.verdict import CallDecision

if TYPE_CHECKING:
    from toold_protocol.models import DiagnosticsDelta

__all__ = ["CallDecision", "ToolOutcome", "error_text"]


@dataclass
class ToolOutcome:
    """A finished (or refused) call as the wire and the agent loop see it."""

    content: Any
    """The tool's result as JSON, or the text of a refusal or failure."""
    is_error: bool = False
    exit_code: int | None = None
    timed_out: bool = False
    decision: CallDecision = "ran"
    """How the call was decided: ran, allowed, denied_by_rule, denied_by_user, refused."""
    reason: str | None = None
    """The guard's reason (as the audit log records it), or why the call was refused."""
    rule: str | None = None
    """The text of the rule that decided the call (forbid, deny or allow), when one did."""
    approvable: bool = False
    """Whether a user's "Always allow" could answer such a call."""
    ask_reason: str | None = None
    """Why the rules wanted the user asked; None when nobody needed asking."""
    remedy: str | None = None
    """How the user could let such a call run (a toold.toml change), for a call that
    needed an answer nobody could give (a non-interactive front end)."""
    job_id: str | None = None
    """The background job the call started (background_run)."""
    written: list[str] = field(default_factory=list)
    """The files the call wrote (``Tool.written_paths``), once it ran without an error."""
    diagnostics: DiagnosticsDelta | None = None
    """What the call did to its files' diagnostics (toold.diagnostics); None when no
    language server checks them."""

    @property
    def ran(self) -> bool:
        """Whether the tool ran (by the rules, or with the user's answer)."""
        return self.decision in ("ran", "allowed")


def error_text(exc: BaseException) -> str:
    """``Error: <ExceptionClass>: <message>``, the spec's text for a failed handler."""
    return f"Error: {type(exc).__name__}: {exc}"
