"""Diagnostics as toold shows them: normalised from LSP, compared before and after a call,
and worded for the model.

A diagnostic is the same one after an edit when its severity, message, source and code
are, and it is on the same line (or on the line the edit moved it to: the comparison
first pairs identical diagnostics whatever their line, so lines added above a problem do
not make it "new"). What is left unpaired after the call is new, or changed; what is
left unpaired from before is fixed.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from toold_protocol.models import Diagnostic, DiagnosticsDelta

SEVERITIES = {1: "error", 2: "warning", 3: "information", 4: "hint"}
SHOWN = 20
"""New diagnostics listed in a result's text at most (the structured field has them all)."""


def normalise(path: str, item: dict[str, Any]) -> Diagnostic | None:
    """One LSP diagnostic as toold's, or None when it is malformed."""
    start = (item.get("range") or {}).get("start") or {}
    line, character = start.get("line"), start.get("character")
    message = item.get("message")
    if not isinstance(line, int) or not isinstance(character, int) or not isinstance(message, str):
        return None
    code = item.get("code")
    source = item.get("source")
    severity = SEVERITIES.get(item.get("severity") or 1, "error")
    return Diagnostic(
        path=path,
        line=line + 1,
        column=character + 1,
        severity=severity,
        message=message,
        source=source if isinstance(source, str) else None,
        code=None if code is None or isinstance(code, bool) else str(code),
    )


def ordered(items: Iterable[Diagnostic]) -> list[Diagnostic]:
    """By file, position, then message."""
    return sorted(items, key=lambda d: (d.path, d.line, d.column, d.message))


def _identity(item: Diagnostic) -> tuple[str, str, str, str | None, str | None]:
    return (item.path, item.severity, item.message, item.source, item.code)


def compare(before: list[Diagnostic], after: list[Diagnostic]) -> DiagnosticsDelta:
    """What changed from ``before`` to ``after``: new (or changed), fixed, and the count
    of those still there."""
    left = collections.Counter(_identity(item) for item in before)
    new: list[Diagnostic] = []
    unchanged = 0
    for item in after:
        key = _identity(item)
        if left[key] > 0:
            left[key] -= 1
            unchanged += 1
        else:
            new.append(item)
    fixed = []
    for item in before:
        key = _identity(item)
        if left[key] > 0:
            left[key] -= 1
            fixed.append(item)
    return DiagnosticsDelta(new=ordered(new), fixed=ordered(fixed), unchanged=unchanged)


def noteworthy(delta: DiagnosticsDelta | None) -> DiagnosticsDelta | None:
    """The delta when there is anything in it, else None (a clean file keeps a wire
    result plain, as it keeps its text)."""
    if delta is None or not (
        delta.new or delta.fixed or delta.unchanged or delta.pending or delta.missing
    ):
        return None
    return delta


def line_of(item: Diagnostic) -> str:
    """``error path:line:col message [source code]``."""
    origin = " ".join(part for part in (item.source, item.code) if part)
    tail = f" [{origin}]" if origin else ""
    message = "; ".join(line.strip() for line in item.message.splitlines() if line.strip())
    return f"{item.severity} {item.path}:{item.line}:{item.column} {message}{tail}"


def render(delta: DiagnosticsDelta) -> str:
    """The text appended to a call's result for the model ("" when there is nothing to say)."""
    lines: list[str] = []
    if delta.new:
        lines.append(f"Diagnostics introduced by this change ({len(delta.new)}):")
        lines += [f"  {line_of(item)}" for item in delta.new[:SHOWN]]
        if len(delta.new) > SHOWN:
            lines.append(
                f"  ... and {len(delta.new) - SHOWN} more (the diagnostics tool lists them)"
            )
    if delta.fixed:
        lines.append(f"Diagnostics fixed by this change ({len(delta.fixed)}):")
        lines += [f"  {line_of(item)}" for item in delta.fixed[:SHOWN]]
    if delta.unchanged and (delta.new or delta.fixed):
        lines.append(f"({delta.unchanged} diagnostics already there before this change.)")
    elif delta.unchanged:
        lines.append(f"No new diagnostics ({delta.unchanged} already there before this change).")
    if delta.pending:
        lines.append(
            "Diagnostics pending for "
            + ", ".join(delta.pending)
            + ": the language server has not answered yet (the diagnostics tool has them later)."
        )
    if delta.missing:
        lines.append(
            "No diagnostics: "
            + "; ".join(delta.missing)
            + " (install it, or configure [diagnostics.servers] in toold.toml)."
        )
    return "\n".join(lines)
