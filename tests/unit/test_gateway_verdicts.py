"""A verdict is data: each way a call is decided, as the outcome's fields and its one audit
line, through the gateway of a bound workspace (real tools, real guard, a scripted user)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bound import call, run_bound
from toold.outcome import ToolOutcome
from toold.permissions.guard import DENIED
from toold.workspace import WorkspaceState

PERMISSIONS = {"mode": "default", "deny": ["bash(prefix:rm *)"], "forbid": ["bash(prefix:dd *)"]}


class User:
    """Answers the guard's questions in order; None once out of answers (no answer)."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, tool: str, args: Any, reason: str) -> Any:
        self.asked.append((tool, reason))
        return self.answers.pop(0) if self.answers else None


def audit(workspace: Path) -> list[dict[str, Any]]:
    """The audit log's entries, in order."""
    text = (workspace / ".toold" / "audit.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def decided(outcome: ToolOutcome) -> tuple[str, str | None, bool]:
    return outcome.decision, outcome.rule, outcome.is_error


def test_every_kind_of_decision_is_a_field_of_the_outcome(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    user = User("allow", "deny")

    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        state.guard.ask = user
        return [
            await call(state, "read_file", file_path="a.txt"),
            await call(state, "write_file", file_path="w.txt", content="x"),
            await call(state, "write_file", file_path="v.txt", content="x"),
            await call(state, "bash", command="rm a.txt"),  # asked: nobody answers
            await call(state, "bash", origin="user", command="rm a.txt"),
            await call(state, "bash", command="dd if=a.txt of=b.txt"),
            await call(state, "read_file", file_path="a.txt", path="a.txt"),
            await call(state, "read_file"),
        ]

    read, allowed, denied, unanswered, ruled, forbidden, ambiguous, invalid = run_bound(
        workspace, scenario, permissions=PERMISSIONS
    )
    assert decided(read) == ("ran", None, False) and read.written == []
    assert decided(allowed) == ("allowed", None, False)
    assert (allowed.written, allowed.ask_reason) == (["w.txt"], "write_file always asks")
    assert decided(denied) == ("denied_by_user", None, True)
    assert (denied.content, denied.reason) == (DENIED, "user denied (write_file always asks)")
    assert decided(unanswered) == ("denied_by_user", "bash(prefix:rm *)", True)
    assert not unanswered.approvable and unanswered.remedy is None
    assert decided(ruled) == ("denied_by_rule", "bash(prefix:rm *)", True)
    assert ruled.content == DENIED and ruled.ask_reason is None
    assert decided(forbidden) == ("denied_by_rule", "bash(prefix:dd *)", True)
    assert str(forbidden.content).startswith("Forbidden by rule bash(prefix:dd *)")
    assert decided(ambiguous)[0] == decided(invalid)[0] == "refused"
    assert str(invalid.content).startswith("Error: invalid arguments for read_file")
    assert (workspace / "a.txt").exists() and not (workspace / "v.txt").exists()
    assert [tool for tool, _ in user.asked] == ["write_file", "write_file", "bash"]


def test_a_front_end_that_cannot_ask_gets_how_to_allow_the_call(workspace: Path) -> None:
    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        state.guard.ask = None
        return [
            await call(state, "write_file", file_path="w.txt", content="x"),
            await call(state, "bash", command="make build"),
            await call(state, "bash", command="rm a.txt"),
        ]

    always, shell, ruled = run_bound(workspace, scenario, permissions=PERMISSIONS)
    assert decided(always) == ("denied_by_rule", None, True) and always.content == DENIED
    assert always.ask_reason == "write_file always asks" and always.approvable
    assert always.remedy == 'only [permissions] mode = "bypass" in toold.toml lets it run'
    assert shell.remedy is not None and 'allow = ["bash(prefix:npm test*)"]' in shell.remedy
    assert ruled.rule == "bash(prefix:rm *)" and not ruled.approvable
    assert ruled.remedy == "remove that rule from [permissions] deny in toold.toml to allow it"


def test_plan_mode_and_a_background_job(workspace: Path) -> None:
    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        started = await call(state, "background_run", command="echo hi")
        state.guard.mode = "plan"
        return [started, await call(state, "write_file", file_path="w.txt", content="x")]

    started, planned = run_bound(workspace, scenario, permissions=PERMISSIONS)
    assert decided(started) == ("ran", None, False) and started.job_id is not None
    assert started.content == f"Submitted background task {started.job_id}"
    assert decided(planned) == ("denied_by_rule", None, True)
    assert planned.content == "Plan mode: write_file blocked (read-only)"


def test_always_deny_keeps_denying_without_asking(workspace: Path) -> None:
    user = User("never", "deny")

    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        state.guard.ask = user
        return [
            await call(state, "bash", command="make build"),
            await call(state, "bash", command="  make build "),
            await call(state, "bash", command="make clean"),
            await call(state, "write_file", file_path="w.txt", content="x"),
        ]

    never, again, other, write = run_bound(workspace, scenario, permissions=PERMISSIONS)
    assert decided(never) == decided(again) == ("denied_by_user", None, True)
    assert again.reason == "always denied this session (shell command)"
    assert decided(other)[0] == "denied_by_user"  # another command is asked again
    assert decided(write)[0] == "denied_by_user"  # out of answers: nobody answered
    assert user.asked == [
        ("bash", "shell command"),
        ("bash", "shell command"),
        ("write_file", "write_file always asks"),
    ]


def test_one_audit_line_per_call_with_the_decision_and_the_result(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")

    async def scenario(state: WorkspaceState) -> None:
        state.guard.ask = User("allow")
        await call(state, "read_file", file_path="a.txt")
        await call(state, "write_file", file_path="w.txt", content="token=abc123")
        await call(state, "bash", command="rm a.txt")
        await call(state, "read_file")
        await call(state, "background_run", command="echo hi")

    run_bound(workspace, scenario, permissions=PERMISSIONS)
    entries = audit(workspace)
    assert [(e["event"], e["tool"], e["decision"], e["verdict"]) for e in entries] == [
        ("call", "read_file", "allowed", "ran"),
        ("call", "write_file", "user-allowed", "allowed"),
        ("call", "bash", "denied", "denied_by_user"),
        ("call", "read_file", "refused", "refused"),
        ("call", "background_run", "allowed", "ran"),
    ]
    read, write, rm, invalid, job = entries
    assert (read["outcome"], read["reason"]) == ("ok", "safe tool")
    assert read["arguments"]["file_path"] == "a.txt" and "limit" in read["arguments"]  # judged
    assert "durationMs" in read and "exitCode" in read
    assert write["reason"] == "write_file always asks" and write["outcome"] == "ok"
    assert "abc123" not in json.dumps(write)
    assert rm["rule"] == "bash(prefix:rm *)" and "outcome" not in rm
    assert rm["reason"] == "no answer (deny rule bash(prefix:rm *))"
    assert invalid["reason"].startswith("Error: invalid arguments") and "outcome" not in invalid
    assert job["jobId"] and job["outcome"] == "ok"


def test_a_write_of_a_file_the_agent_has_not_read_is_refused(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState) -> ToolOutcome:
        return await call(state, "edit_file", file_path="a.txt", old_text="one", new_text="1")

    stale = run_bound(workspace, scenario)  # bypass mode: the guard lets it run
    assert decided(stale) == ("refused", None, True) and stale.written == []
    assert stale.reason is not None and "has not been read" in stale.reason
    assert (workspace / "a.txt").read_text() == "one\n"
    [line] = audit(workspace)
    assert (line["decision"], line["verdict"]) == ("allowed", "refused")
    assert "outcome" not in line
