"""PermissionGuard: REFERENCE.md §3's decision order as tables, then asking and origins."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from toold.hooks import PreHookVerdict
from toold.permissions.audit import AuditLog
from toold.permissions.guard import DENIED, MODES, SELF_ESCALATION, PermissionGuard, Verdict
from toold.tools.registry import BuiltinToolProvider

SAFE_TOOLS = [n for n, c in BuiltinToolProvider.tool_classes().items() if c.annotations.safe]

CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "always-confirm": ("write_file", {"file_path": "a.txt", "content": "x"}),
    "safe": ("read_file", {"file_path": "a.txt"}),
    "shell auto-safe": ("bash", {"command": "ls -la"}),
    "shell dangerous": ("bash", {"command": "rm -rf build"}),
    "shell other": ("bash", {"command": "make build"}),
    "other tool": ("http_request", {"url": "https://example.com"}),
}

# What the rules decide, per mode in the order default, auto, plan, bypass:
# "A" = allowed without asking, "?" = needs confirmation (plan mode turns it into a refusal).
# Rules name the whole tool: "allow" = allow rule, "deny" = deny rule, "both" = both.
TABLE: dict[tuple[str, str], str] = {
    ("always-confirm", "none"): "???A",
    ("always-confirm", "allow"): "???A",  # allow rules cannot skip an always-confirm tool
    ("always-confirm", "deny"): "???A",
    ("always-confirm", "both"): "???A",
    ("safe", "none"): "AAAA",
    ("safe", "allow"): "AAAA",
    ("safe", "deny"): "???A",
    ("safe", "both"): "???A",  # deny beats allow
    ("shell auto-safe", "none"): "AA?A",
    ("shell auto-safe", "allow"): "AA?A",
    ("shell auto-safe", "deny"): "???A",
    ("shell auto-safe", "both"): "???A",
    ("shell dangerous", "none"): "???A",
    ("shell dangerous", "allow"): "???A",  # dangerous beats allow rules
    ("shell dangerous", "deny"): "???A",
    ("shell dangerous", "both"): "???A",
    ("shell other", "none"): "?A?A",  # default asks, auto allows
    ("shell other", "allow"): "AA?A",
    ("shell other", "deny"): "???A",
    ("shell other", "both"): "???A",
    ("other tool", "none"): "???A",  # asks in auto mode too
    ("other tool", "allow"): "AA?A",
    ("other tool", "deny"): "???A",
    ("other tool", "both"): "???A",
}
ROWS = [
    pytest.param(kind, rules, mode, expected[i], id=f"{kind}-{rules}-{mode}")
    for (kind, rules), expected in TABLE.items()
    for i, mode in enumerate(MODES)
]


def make_guard(mode: str, rules: str, tool: str, **kw: Any) -> PermissionGuard:
    allow = [tool] if rules in ("allow", "both") else []
    deny = [tool] if rules in ("deny", "both") else []
    return PermissionGuard.from_config(mode, allow, deny, **kw)


def check(guard: PermissionGuard, tool: str, args: Any, origin: str = "agent") -> Verdict:
    return asyncio.run(guard.check(tool, args, origin))


@dataclass
class Asker:
    answers: list[str | None] = field(default_factory=list)
    asked: list[tuple[str, Any, str]] = field(default_factory=list)

    async def __call__(self, tool: str, args: Any, reason: str) -> Any:
        self.asked.append((tool, args, reason))
        return self.answers.pop(0) if self.answers else None


def test_the_table_covers_every_mode_class_and_rule_set() -> None:
    assert len(ROWS) == 4 * 6 * 4


@pytest.mark.parametrize(("kind", "rules", "mode", "expected"), ROWS)
def test_decision_table(kind: str, rules: str, mode: str, expected: str) -> None:
    tool, args = CALLS[kind]
    decision = make_guard(mode, rules, tool).decide(tool, args)
    assert decision.action == {"A": "allow", "?": "ask"}[expected], decision.reason


@pytest.mark.parametrize(("kind", "rules", "mode", "expected"), ROWS)
def test_without_anyone_to_ask_an_ask_is_refused(
    kind: str, rules: str, mode: str, expected: str
) -> None:
    tool, args = CALLS[kind]
    verdict = check(make_guard(mode, rules, tool), tool, args)
    if expected == "A":
        assert verdict.allowed and verdict.message is None and verdict.kind == "ran"
    elif mode == "plan":
        message = f"Plan mode: {tool} blocked (read-only)"
        assert (verdict.allowed, verdict.decision, verdict.message) == (False, "denied", message)
        assert (verdict.kind, verdict.ask_reason) == ("denied_by_rule", verdict.reason)
        assert verdict.remedy is None
    else:
        assert verdict.message == DENIED
        assert (verdict.decision, verdict.kind) == ("denied", "denied_by_rule")
        assert verdict.reason == f"non-interactive ({verdict.ask_reason})"
        assert verdict.remedy is not None
        if rules in ("deny", "both"):
            assert verdict.rule == tool and "remove that rule" in verdict.remedy


@pytest.mark.parametrize("tool", sorted(SAFE_TOOLS))
def test_every_safe_tool_runs_in_plan_mode(tool: str) -> None:
    assert PermissionGuard(mode="plan").decide(tool, {}).action == "allow"


@pytest.mark.parametrize("tool", ["edit_file", "write_file", "task_create", "task_update"])
def test_always_confirm_tools(tool: str) -> None:
    guard = PermissionGuard.from_config("auto", [tool], [])
    assert guard.decide(tool, {"file_path": "a"}).action == "ask"


@pytest.mark.parametrize(
    ("reason", "tool", "args"),
    [
        ("dangerous command (recursive rm)", "bash", {"command": "rm -rf x"}),
        ("dangerous command (git reset --hard)", "background_run", {"command": "git reset --hard"}),
        ("deny rule bash(make clean*)", "bash", {"command": "make clean"}),
        ("read-only command", "bash", {"command": "git status"}),
        ("allow rule bash(prefix:make*)", "bash", {"command": "make test"}),
        ("shell command", "bash", {"command": "cargo build"}),
        ("safe tool", "grep", {"pattern": "x"}),
        ("write_file always asks", "write_file", {"file_path": "a"}),
        ("tool needs confirmation", "python_repl", {"code": "1"}),
    ],
)
def test_decisions_say_why(reason: str, tool: str, args: dict[str, Any]) -> None:
    guard = PermissionGuard.from_config("default", ["bash(prefix:make*)"], ["bash(make clean*)"])
    assert guard.decide(tool, args).reason == reason


def test_answers_allow_and_deny() -> None:
    asker = Asker(["allow", "deny", None])
    guard = PermissionGuard(mode="default", ask=asker)
    call = ("write_file", {"file_path": "a.txt", "content": "x"})
    allowed = check(guard, *call)
    assert allowed == Verdict(
        True,
        "user-allowed",
        "write_file always asks",
        kind="allowed",
        approvable=True,
        ask_reason="write_file always asks",
    )
    denied = check(guard, *call)
    assert (denied.allowed, denied.message, denied.reason, denied.kind) == (
        False,
        DENIED,
        "user denied (write_file always asks)",
        "denied_by_user",
    )
    unanswered = check(guard, *call)
    assert (unanswered.allowed, unanswered.message) == (False, DENIED)
    assert (unanswered.kind, unanswered.remedy) == ("denied_by_user", None)
    assert unanswered.reason.startswith("no answer")
    assert [a[0] for a in asker.asked] == ["write_file"] * 3
    assert asker.asked[0][2] == "write_file always asks"


def test_always_allow_lasts_the_session_for_that_tool() -> None:
    asker = Asker(["always"])
    guard = PermissionGuard(mode="default", ask=asker)
    first = check(guard, "write_file", {"file_path": "a.txt", "content": "1"})
    second = check(guard, "write_file", {"file_path": "b.txt", "content": "2"})
    assert first.decision == "always-allowed"
    assert second.allowed and second.reason.startswith("always allowed this session")
    assert (first.kind, second.kind) == ("allowed", "allowed")
    assert first.rule == second.rule == "write_file"  # the rule the answer added
    assert len(asker.asked) == 1
    # Other tools still ask.
    assert not check(guard, "edit_file", {"file_path": "a.txt"}).allowed
    assert len(asker.asked) == 2


def test_always_allow_for_a_command_covers_that_command_only() -> None:
    asker = Asker(["always"])
    guard = PermissionGuard(mode="default", ask=asker)
    assert check(guard, "bash", {"command": "make build"}).allowed
    assert check(guard, "bash", {"command": "make build"}).allowed
    assert len(asker.asked) == 1
    assert not check(guard, "bash", {"command": "make clean"}).allowed
    assert len(asker.asked) == 2


def test_always_allow_never_skips_deny_rules_dangerous_commands_or_plan_mode() -> None:
    # "always" for each first call; nobody answers the repeats, so a repeat that is asked fails.
    asker = Asker(["always", None, "always", "always", None])
    guard = PermissionGuard.from_config("default", [], ["write_file(prefix:secret*)"], ask=asker)
    assert check(guard, "bash", {"command": "rm -rf build"}).allowed
    assert not check(guard, "bash", {"command": "rm -rf build"}).allowed
    assert asker.asked[1][2] == "dangerous command (recursive rm)"
    assert check(guard, "write_file", {"file_path": "a.txt", "content": ""}).allowed
    assert check(guard, "write_file", {"file_path": "secret.txt", "content": ""}).allowed
    denied = check(guard, "write_file", {"file_path": "secret.txt", "content": ""})
    assert (denied.allowed, denied.reason) == (
        False,
        "no answer (deny rule write_file(prefix:secret*))",
    )
    assert len(asker.asked) == 5
    guard.mode = "plan"
    plan = check(guard, "write_file", {"file_path": "a.txt", "content": ""})
    assert plan.message == "Plan mode: write_file blocked (read-only)"


def test_fail_closed_guards_never_ask() -> None:
    asker = Asker(["allow"])
    guard = PermissionGuard(mode="default", ask=asker, fail_closed=True)
    verdict = check(guard, "bash", {"command": "make"})
    assert (verdict.allowed, verdict.message) == (False, DENIED)
    assert verdict.reason == "non-interactive (shell command)"
    assert asker.asked == []
    assert check(guard, "bash", {"command": "ls"}).allowed


def test_plan_mode_refuses_without_asking() -> None:
    asker = Asker(["allow"])
    guard = PermissionGuard(mode="plan", ask=asker)
    for tool, args in [("bash", {"command": "ls"}), ("subagent", {"task": "x"})]:
        assert check(guard, tool, args).message == f"Plan mode: {tool} blocked (read-only)"
    assert check(guard, "glob", {"pattern": "*"}).allowed
    assert asker.asked == []


@pytest.mark.parametrize("mode", MODES)
def test_origin_user_skips_the_prompt_but_obeys_deny_rules(mode: str) -> None:
    asker = Asker(["deny"])
    guard = PermissionGuard.from_config(mode, [], ["bash(prefix:rm*)"], ask=asker)
    for tool, args in CALLS.values():
        if tool == "bash" and args["command"].startswith("rm"):
            continue
        assert check(guard, tool, args, origin="user").allowed
    denied = check(guard, "bash", {"command": "rm -rf build"}, origin="user")
    reason, rule = "deny rule bash(prefix:rm*)", "bash(prefix:rm*)"
    assert denied == Verdict(False, "denied", reason, DENIED, "denied_by_rule", rule)
    assert not check(guard, "bash", {"command": "ls && rm x"}, origin="user").allowed
    assert asker.asked == []


def test_a_child_shares_rules_asker_audit_and_approvals(tmp_path: Path) -> None:
    parent = PermissionGuard.from_config(
        "auto", ["bash(prefix:make*)"], ["read_file"], ask=Asker(), audit=AuditLog(tmp_path / "a")
    )
    child = parent.child(mode="plan", fail_closed=True)
    assert (child.mode, child.fail_closed) == ("plan", True)
    assert (child.allow, child.deny, child.ask, child.audit) == (
        parent.allow,
        parent.deny,
        parent.ask,
        parent.audit,
    )
    assert child.session_rules is parent.session_rules
    assert child.session_denials is parent.session_denials
    same = parent.child()
    assert (same.mode, same.fail_closed) == ("auto", False)


def test_configuration_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="unknown permission mode 'yolo'"):
        PermissionGuard.from_config("yolo", [], [])
    with pytest.raises(ValueError, match="invalid permission rule 'bash\\('"):
        PermissionGuard.from_config("default", ["bash("], [])


def test_the_guard_leaves_the_one_audit_line_to_the_gateway(tmp_path: Path) -> None:
    """A call's line holds its decision and its result (tests/unit/test_gateway_verdicts.py):
    the guard writes none of its own."""
    audit = AuditLog(tmp_path / ".toold" / "audit.jsonl")
    guard = PermissionGuard(mode="default", ask=Asker(["allow"]), audit=audit)
    assert check(guard, "read_file", {"file_path": "a"}).allowed
    assert check(guard, "write_file", {"file_path": "a", "content": "x"}).allowed
    audit.flush()
    assert not audit.path.exists()


def test_always_deny_is_remembered_as_always_allow_is() -> None:
    asker = Asker(["never", "never", "always"])
    guard = PermissionGuard(mode="default", ask=asker)
    child = guard.child(fail_closed=True)
    assert check(guard, "bash", {"command": "make build"}).kind == "denied_by_user"
    again = check(child, "bash", {"command": " make build"})  # a subagent's, unasked
    assert (again.kind, again.message) == ("denied_by_user", DENIED)
    assert again.reason == "always denied this session (shell command)"
    assert [r.source for r in guard.session_denials] == ["bash(make build)"]
    assert check(guard, "write_file", {"file_path": "a", "content": "x"}).kind == "denied_by_user"
    assert not check(guard, "write_file", {"file_path": "b", "content": "y"}).allowed
    assert check(guard, "edit_file", {"file_path": "a"}).kind == "allowed"
    assert len(asker.asked) == 3


SELF_WRITES: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"file_path": "toold.toml", "content": "x"}),
    ("write_file", {"file_path": "./toold.toml", "content": "x"}),
    ("edit_file", {"file_path": "a/../TOOLD.toml", "old_text": "a", "new_text": "b"}),
    ("write_file", {"file_path": ".toold/audit.jsonl", "content": "x"}),
    ("str_replace", {"path": "./.toold/x", "old": "a", "new": "b"}),
    ("python_repl", {"code": "open('toold.toml', 'w').write('')"}),
    ("bash", {"command": "echo x > toold.toml"}),
    ("bash", {"command": "cp a tool?.toml"}),
    ("bash", {"command": "rm -f .toold/audit.jsonl"}),
    ("bash", {"command": "echo x > $F"}),
    ("background_run", {"command": "sed -i s/a/b/ toold.toml"}),
]


@pytest.mark.parametrize(("tool", "args"), SELF_WRITES)
@pytest.mark.parametrize("mode", ["default", "auto", "plan"])
def test_writes_to_the_guards_configuration_always_ask(
    mode: str, tool: str, args: dict[str, Any]
) -> None:
    allow = [tool, f"{tool}(prefix:*)"]
    decision = PermissionGuard.from_config(mode, allow, []).decide(tool, args)
    assert decision.action == "ask"
    assert not decision.approvable
    assert "toold.toml" in decision.reason or decision.reason == "plan mode is read-only"


GIT_WRITES: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"file_path": ".git/hooks/pre-commit", "content": "#!/bin/sh\nid\n"}),
    ("edit_file", {"file_path": "./.GIT/config", "old_text": "a", "new_text": "b"}),
    ("str_replace", {"path": "src/../.git/config", "old": "a", "new": "b"}),
    ("multi_edit", {"file_path": ".git/config", "edits": [{"old_text": "a", "new_text": "b"}]}),
]


@pytest.mark.parametrize(("tool", "args"), GIT_WRITES)
@pytest.mark.parametrize("mode", ["default", "auto"])
def test_file_writes_into_git_always_ask(mode: str, tool: str, args: dict[str, Any]) -> None:
    """Not even an allow rule or "Always allow" lets a hook be planted unasked."""
    guard = PermissionGuard.from_config(mode, [tool, f"{tool}(prefix:*)"], [])
    decision = guard.decide(tool, args)
    assert (decision.action, decision.approvable) == ("ask", False)
    assert decision.reason.startswith("it writes into .git/")


def test_writes_near_git_and_reads_of_it_are_judged_as_usual() -> None:
    guard = PermissionGuard.from_config("default", ["write_file"], [])
    near = guard.decide("write_file", {"file_path": ".github/workflows/ci.yml", "content": "x"})
    assert (near.reason, near.approvable) == ("write_file always asks", True)
    read = guard.decide("read_file", {"file_path": ".git/config"})
    assert read.action == "allow"
    patch = guard.decide(
        "apply_patch", {"patch": "..."}, paths=["src/a.py", ".git/hooks/post-checkout"]
    )
    assert (patch.action, patch.approvable) == ("ask", False)


def test_bypass_stays_bypass_and_reads_are_not_writes() -> None:
    assert PermissionGuard(mode="bypass").decide("bash", {"command": "cp a toold.toml"}).action == (
        "allow"
    )
    read = PermissionGuard(mode="default").decide("bash", {"command": "cat toold.toml"})
    assert (read.action, read.reason) == ("allow", "read-only command")


@pytest.mark.parametrize(
    "args",
    [
        {"command": ""},
        {"command": "  \n"},
        {"command": "", "cmd": "ls"},
        {"cmd": "ls", "input": "ls"},
    ],
)
def test_empty_or_ambiguous_commands_ask_and_are_never_remembered(args: dict[str, Any]) -> None:
    guard = PermissionGuard(mode="auto")
    decision = guard.decide("bash", args)
    assert (decision.action, decision.approvable) == ("ask", False)
    assert guard.approve_always("bash", args) is None
    assert guard.session_rules == []


def test_always_allow_remembers_the_exact_line_only() -> None:
    asker = Asker(["always"])
    guard = PermissionGuard(mode="default", ask=asker)
    assert check(guard, "bash", {"command": "  make build \n"}).allowed
    assert [r.pattern for r in guard.session_rules] == ["make build"]
    assert check(guard, "bash", {"command": "make build"}).allowed
    for other in ["make build; rm x", "make build\nrm x", "make  build", "make buil"]:
        assert not check(guard, "bash", {"command": other}).allowed
    assert len(asker.asked) == 5


@pytest.mark.parametrize(
    "command", ["pytest -q", "python -m pytest", "mypy src", "npm test", "ruff format ."]
)
def test_programs_that_run_project_code_or_write_are_no_longer_auto_safe(command: str) -> None:
    decision = PermissionGuard(mode="default").decide("bash", {"command": command})
    assert (decision.action, decision.reason) == ("ask", "shell command")


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("R=rm; $R -rf d", "dangerous command (the program name $R cannot be resolved)"),
        ("python3 -c 'x'", "dangerous command (python3 -c runs inline code)"),
        ("ls | head -2", "read-only command"),
        ("make", "auto mode"),
    ],
)
def test_auto_mode_runs_on_the_same_parse(command: str, reason: str) -> None:
    assert PermissionGuard(mode="auto").decide("bash", {"command": command}).reason == reason


# Forbid rules: refused from every origin, in every mode, past every way of allowing.

FORBID = ["read_file(prefix:.env*)", "bash(prefix:git push*)"]
FORBIDDEN_CALLS = [
    ("read_file", {"file_path": ".env"}),
    ("bash", {"command": "cat .env"}),
    ("background_run", {"command": "git push origin main"}),
    ("grep", {"pattern": "TOKEN", "path": "."}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("origin", ["agent", "user"])
@pytest.mark.parametrize(("tool", "args"), FORBIDDEN_CALLS)
def test_a_forbidden_call_is_refused_and_nobody_is_asked(
    mode: str, origin: str, tool: str, args: dict[str, Any]
) -> None:
    asker = Asker(answers=["always"] * 3)
    guard = PermissionGuard.from_config(mode, ["bash", "read_file", "grep"], [], FORBID, ask=asker)
    guard.approve_always(tool, args)  # an earlier "Always allow" of this very call
    allow = PreHookVerdict(steer="allow", reason="hook says yes")
    verdict = asyncio.run(guard.check(tool, args, origin, steer=allow))
    assert not verdict.allowed and asker.asked == []
    assert verdict.reason.startswith("forbidden by rule ")
    assert verdict.message is not None and verdict.message.startswith("Forbidden by rule ")


def test_the_verdict_names_the_forbid_rule() -> None:
    guard = PermissionGuard.from_config("bypass", [], [], ["read_file(prefix:secret*)"])
    verdict = asyncio.run(guard.check("bash", {"command": "cat secret.txt"}))
    assert verdict.reason == "forbidden by rule read_file(prefix:secret*) (it names secret)"
    assert verdict.message == (
        "Forbidden by rule read_file(prefix:secret*): toold never runs this call."
    )


def test_forbid_rules_are_parsed_and_named_when_malformed() -> None:
    with pytest.raises(ValueError, match=r"invalid permission rule 'bash\('"):
        PermissionGuard.from_config("default", [], [], ["bash("])


def test_a_subagent_guard_keeps_the_forbid_rules() -> None:
    guard = PermissionGuard.from_config("bypass", [], [], FORBID, root="/w")
    child = guard.child(mode="plan")
    assert (child.forbid, child.root) == (guard.forbid, "/w")
    assert not asyncio.run(child.check("read_file", {"file_path": ".env"})).allowed


def test_a_deny_rule_on_a_path_asks_for_every_tool_that_reaches_it() -> None:
    asker = Asker(answers=["always"] * 10)
    guard = PermissionGuard.from_config("auto", ["bash"], ["read_file(prefix:.env*)"], ask=asker)
    for tool, args in FORBIDDEN_CALLS[:2] + FORBIDDEN_CALLS[3:]:
        assert asyncio.run(guard.check(tool, args)).allowed  # the user said "Always allow"
    assert [(t, r.split(" (")[0]) for t, _, r in asker.asked] == [
        ("read_file", "deny rule read_file(prefix:.env*)"),
        ("bash", "deny rule read_file(prefix:.env*)"),
        ("grep", "deny rule read_file(prefix:.env*)"),
    ]
    asyncio.run(guard.check("bash", {"command": "cat .env"}))
    assert len(asker.asked) == 4  # "Always allow" never answers a deny rule's ask


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("bash", {"command": "echo 'forbid = []' > toold.toml"}),
        ("write_file", {"file_path": "toold.toml", "content": "[permissions]\n"}),
    ],
)
def test_with_forbid_rules_bypass_asks_before_an_edit_of_the_configuration(
    tool: str, args: dict[str, Any]
) -> None:
    asker = Asker(answers=["always", "deny"])
    guard = PermissionGuard.from_config("bypass", [], [], ["read_file(.env)"], ask=asker)
    assert asyncio.run(guard.check(tool, args)).allowed  # the user said "Always allow"
    assert not asyncio.run(guard.check(tool, args)).allowed  # ...which is not remembered
    why = f"{SELF_ESCALATION}, which holds forbid rules"
    assert [reason for _, _, reason in asker.asked] == [why, why]
    assert asyncio.run(PermissionGuard(mode="bypass").check(tool, args)).allowed
