"""Hooks run for real: bash commands that read the call on stdin and answer as Claude
Code's hook scripts do."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from toold.config import HookConfig
from toold.config_loading import ConfigError, load_config
from toold.hooks import PreHookVerdict, matches, run_post_hooks, run_pre_hooks


def hook(command: str, matcher: str = "", timeout: float = 10) -> HookConfig:
    return HookConfig(matcher=matcher, command=command, timeout=timeout)


def pre(hooks: list[HookConfig], workspace: Path, tool: str = "bash") -> PreHookVerdict:
    args = {"command": "ls"}
    return asyncio.run(run_pre_hooks(hooks, tool, args, "agent", workspace))


@pytest.mark.parametrize(
    ("matcher", "tool", "expected"),
    [
        ("", "bash", True),
        ("*", "write_file", True),
        ("bash", "bash", True),
        ("bash", "background_run", False),
        ("ba", "bash", False),
        ("write_file|edit_file", "edit_file", True),
        ("write_file|edit_file", "read_file", False),
        ("team_.*", "team_send", True),
    ],
)
def test_matchers_match_whole_names(matcher: str, tool: str, expected: bool) -> None:
    assert matches(hook("true", matcher), tool) is expected


def test_the_hook_reads_the_call_on_stdin(workspace: Path) -> None:
    seen = workspace / "seen.json"
    pre([hook(f"cat > {seen}")], workspace)
    data = json.loads(seen.read_text())
    assert data == {
        "hook_event_name": "PreToolUse",
        "tool_name": "bash",
        "tool_input": {"command": "ls"},
        "cwd": str(workspace),
        "workspace": str(workspace),
        "origin": "agent",
    }


def test_exit_2_blocks_with_stderr(workspace: Path) -> None:
    verdict = pre([hook("echo 'no shell today' >&2; exit 2")], workspace)
    assert verdict.blocked == "Blocked by hook: no shell today"


@pytest.mark.parametrize(
    ("stdout", "steer", "reason"),
    [
        ('{"decision": "allow", "reason": "ok by policy"}', "allow", "ok by policy"),
        ('{"decision": "deny", "reason": "no"}', "deny", "no"),
        ('{"decision": "ask"}', "ask", "the hook"),
        ('{"decision": "approve"}', "allow", "the hook"),
        ('{"decision": "block", "reason": "old style"}', "deny", "old style"),
        (
            '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": '
            '"deny", "permissionDecisionReason": "claude code style"}}',
            "deny",
            "claude code style",
        ),
        ('{"decision": "maybe"}', "ask", "does not know"),
        ("{not json", "ask", "does not know"),
    ],
)
def test_json_on_stdout_steers(workspace: Path, stdout: str, steer: str, reason: str) -> None:
    (workspace / "out.json").write_text(stdout)
    verdict = pre([hook("cat out.json")], workspace)
    assert verdict.blocked is None
    assert verdict.steer == steer
    assert reason in verdict.reason


def test_plain_output_and_exit_0_say_nothing(workspace: Path) -> None:
    assert pre([hook("echo checked")], workspace) == PreHookVerdict()


@pytest.mark.parametrize(("command", "what"), [("exit 1", "exited 1"), ("sleep 30", "timed out")])
def test_a_failing_hook_makes_the_call_ask(workspace: Path, command: str, what: str) -> None:
    verdict = pre([hook(command, timeout=0.5)], workspace)
    assert (verdict.blocked, verdict.steer) == (None, "ask")
    assert what in verdict.reason


def test_a_decision_lost_in_too_much_output_makes_the_call_ask(workspace: Path) -> None:
    """Past OUTPUT_LIMIT the middle of stdout is dropped: what the hook decided cannot be
    known, so the call asks rather than taking it as "no decision" (fail closed)."""
    noisy = "head -c 50000 /dev/zero | tr '\\0' ' '; echo '{\"decision\": \"deny\"}'"
    verdict = pre([hook(noisy)], workspace)
    assert (verdict.blocked, verdict.steer) == (None, "ask")
    assert "more than" in verdict.reason


def test_deny_wins_over_allow_and_stops_the_run(workspace: Path) -> None:
    after = workspace / "after"
    verdict = pre(
        [
            hook('echo \'{"decision": "allow"}\''),
            hook('echo \'{"decision": "deny", "reason": "policy"}\''),
            hook(f"touch {after}"),
        ],
        workspace,
    )
    assert (verdict.steer, verdict.reason) == ("deny", "policy")
    assert not after.exists()


def test_ask_wins_over_allow(workspace: Path) -> None:
    verdict = pre(
        [hook('echo \'{"decision": "allow"}\''), hook('echo \'{"decision": "ask"}\'')],
        workspace,
    )
    assert verdict.steer == "ask"


def test_only_matching_hooks_run(workspace: Path) -> None:
    verdict = pre([hook("exit 2", matcher="write_file")], workspace, tool="bash")
    assert verdict == PreHookVerdict()


def test_post_hooks_say_what_they_print(workspace: Path) -> None:
    seen = workspace / "seen.json"
    said = asyncio.run(
        run_post_hooks(
            [
                hook(f"cat > {seen}; echo 'lint: 2 warnings'"),
                hook("echo 'from stderr' >&2; exit 2"),
                hook("echo ignored; exit 1"),
                hook("echo other", matcher="read_file"),
            ],
            "bash",
            {"command": "ls"},
            "a\nb",
            "user",
            workspace,
        )
    )
    assert said == ["lint: 2 warnings", "from stderr"]
    data: dict[str, Any] = json.loads(seen.read_text())
    assert (data["hook_event_name"], data["tool_response"], data["origin"]) == (
        "PostToolUse",
        "a\nb",
        "user",
    )


def test_config_names_a_bad_matcher(workspace: Path) -> None:
    (workspace / "toold.toml").write_text(
        '[[hooks.pre_tool_use]]\nmatcher = "bash("\ncommand = "true"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"hooks\.pre_tool_use\.0\.matcher.*not a regular"):
        load_config(workspace)


def test_config_reads_hook_tables(workspace: Path) -> None:
    (workspace / "toold.toml").write_text(
        '[[hooks.pre_tool_use]]\nmatcher = "bash"\ncommand = "./check.sh"\ntimeout = 5\n'
        '[[hooks.post_tool_use]]\ncommand = "./after.sh"\n',
        encoding="utf-8",
    )
    hooks = load_config(workspace).hooks
    assert hooks.pre_tool_use == [hook("./check.sh", "bash", 5)]
    assert hooks.post_tool_use == [HookConfig(command="./after.sh")]
