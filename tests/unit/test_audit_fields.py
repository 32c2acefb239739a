"""The audit line: toold's own words are written as they are, everything else redacted."""

from __future__ import annotations

import json
from pathlib import Path

from toold.permissions.audit import REDACTED, AuditLog

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_every_field_a_caller_shapes_is_redacted_and_the_order_kept(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.record(
        event="call",
        tool="bash",
        origin="agent",
        arguments={"command": f"curl -H 'Authorization: token {TOKEN}' x"},
        decision="allowed",
        verdict="ran",
        reason=f"the user asked for curl with {TOKEN}",
        rule=f"bash(curl *{TOKEN}*)",
        outcome="ok",
        jobId=TOKEN,
    )
    log.flush()
    text = log.path.read_text()
    assert TOKEN not in text
    line = json.loads(text)
    assert list(line) == [
        *("time", "event", "tool", "origin", "arguments", "decision", "verdict"),
        *("reason", "rule", "outcome", "jobId"),
    ]
    own = {k: line[k] for k in ("event", "tool", "origin", "decision", "verdict", "outcome")}
    assert own == {
        **{"event": "call", "tool": "bash", "origin": "agent"},
        **{"decision": "allowed", "verdict": "ran", "outcome": "ok"},
    }
    assert REDACTED in line["arguments"]["command"] and REDACTED in line["reason"]
    assert REDACTED in line["rule"] and line["jobId"] == REDACTED
